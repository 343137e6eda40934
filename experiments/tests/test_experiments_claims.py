"""cfm-jax claims: the command (registry, parts, help), bad input as one line, Ctrl-C, and the rename
from ``constants``."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cfm_experiments import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
#: "at once": a signal ends the process well within this, where finishing the row in flight would take
#: far longer; generous, so that a loaded machine does not fail the test.
PROMPT_S = 20.0
#: how long a process may take on a loaded machine before the test gives up (a hang, not a slow run)
PATIENCE_S = 900.0


def test_the_command_and_its_parts():
    cmd = COMMANDS["claims"]
    assert [p.name for p in cmd.parts()] == [
        "prefactors",
        "scales",
        "tails",
        "suprema",
        "uniform",
        "rho",
        "tail_exponent",
        "bounds",
        "curvature",
        "token_sample",
    ]
    assert [p.name for p in cmd.default_parts()][-1] == "tail_exponent"  # the OGD parts are optional
    assert "constants" not in COMMANDS


def _cli(*args, timeout=PATIENCE_S):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "cfm_experiments", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def test_help_lists_every_part_and_the_large_size_option():
    proc = _cli("claims", "--help")
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    for flag in ("--parts", "--sup-dims", "--rho-ns", "--tail-samples", "--quick"):
        assert flag in text
    assert "40960 163840" in text  # the GPU sizes, one option away


@pytest.mark.slow  # one interpreter per refused command line
def test_bad_input_is_one_line(tmp_path):
    for args, needle in (
        (["--parts", "nope"], "--parts"),
        (["--seed", "-1"], "--seed"),
        (["--seeds", "1"], "--seeds must be an integer >= 2"),
        (["--resume", "--overwrite"], "--overwrite"),
        (["--sup-at-dim", "5"], "--sup-at-dim must be one of --sup-dims"),
    ):
        proc = _cli("claims", *args, "--out", str(tmp_path / "o"))
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode != 0 and len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr, (
            args,
            proc.stderr,
        )


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_ctrl_c_exits_130_promptly(tmp_path):
    """SIGINT while the command compiles or computes: exit 130 at once (:data:`PROMPT_S`), one message
    naming --resume."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CFM_JAX_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cfm_experiments", "claims", "--quick", "--no-progress", "--out", str(tmp_path / "o")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    t0 = time.monotonic()
    while True:  # until its signal handlers are installed
        status = Path(f"/proc/{proc.pid}/status").read_text()
        mask = int(next(ln for ln in status.splitlines() if ln.startswith("SigCgt:")).split()[1], 16)
        if mask & (1 << (signal.SIGINT - 1)) and mask & (1 << (signal.SIGTERM - 1)):
            break
        assert proc.poll() is None and time.monotonic() - t0 < PATIENCE_S
        time.sleep(0.02)
    time.sleep(1.0)
    t1 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=PATIENCE_S)
    assert proc.returncode == 130 and time.monotonic() - t1 < PROMPT_S and "Traceback" not in err and "--resume" in err
