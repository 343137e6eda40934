"""Ctrl-C, SIGTERM and SIGKILL on real `cfm-jax` subprocesses: prompt exit codes, rows on disk, exact resume.

The runs are tiny (a two-row rates sweep); each test uses its own compilation cache, cold at
first, so that the signal lands while the second row is still compiling.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _tiny_rates import TINY_RATES

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")

ROOT = Path(__file__).resolve().parents[1]
#: "at once": a signal ends the process well within this, where finishing the work in flight would take
#: far longer (a --quick run is minutes); generous, so that a loaded machine does not fail the test.
PROMPT_S = 20.0
#: how long a tiny run may take on a loaded machine before the test gives up (a hang, not a slow run)
PATIENCE_S = 900.0


def _start(args, cache):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CFM_JAX_CACHE_DIR": str(cache)}
    return subprocess.Popen(
        [sys.executable, "-m", "cfm_experiments", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _wait_for(cond, proc, timeout=PATIENCE_S):
    t0 = time.monotonic()
    while not cond():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < timeout, "condition not reached"
        time.sleep(0.02)


def _handles_signals(pid):
    """Whether the process has installed its SIGTERM handler (Linux: the SigCgt mask in /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = int(next(ln for ln in status.splitlines() if ln.startswith("SigCgt:")).split()[1], 16)
    return bool(mask & (1 << (signal.SIGTERM - 1)))


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _interrupt(proc, sig):
    t0 = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    return proc.returncode, time.monotonic() - t0, err


@pytest.fixture(scope="module")
def uninterrupted_rows(tmp_path_factory):
    """The rows of the same sweep run to the end without a signal (shared by both signals)."""
    tmp = tmp_path_factory.mktemp("full")
    assert _start([*TINY_RATES, "--out", str(tmp / "full")], tmp / "cache").wait(timeout=PATIENCE_S) == 0
    return _rows(tmp / "full" / "rows.jsonl")


@pytest.mark.slow  # three sweeps in their own interpreters, interrupted and resumed
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_interrupted_sweep_resumes_to_the_same_rows(tmp_path, sig, uninterrupted_rows):
    """A signal mid-row: SIGINT exits with 130 at once (:data:`PROMPT_S`), no traceback or crash; SIGKILL loses only
    the row in flight. Either way the finished row is on disk and --resume completes the sweep with
    rows bit-for-bit equal to an uninterrupted run."""
    cache, part = tmp_path / "cache", tmp_path / "part"
    proc = _start([*TINY_RATES, "--out", str(part)], cache)
    _wait_for(lambda: len(_rows(part / "rows.jsonl")) >= 1, proc)
    rc, dt, err = _interrupt(proc, sig)
    if sig == signal.SIGINT:
        assert rc == 130 and dt < PROMPT_S and "Traceback" not in err and "--resume" in err, (rc, dt, err)
    else:
        assert rc == -signal.SIGKILL
    assert len(_rows(part / "rows.jsonl")) == 1  # the second row was in flight
    assert _start([*TINY_RATES, "--out", str(part), "--resume"], cache).wait(timeout=PATIENCE_S) == 0
    strip = lambda rows: [(r["key"], r["values"], r["floor"]) for r in rows]  # noqa: E731
    assert strip(_rows(part / "rows.jsonl")) == strip(uninterrupted_rows)


@pytest.mark.parametrize(
    "command,sig,code",
    [
        ("rates", signal.SIGTERM, 143),
        ("ogd", signal.SIGINT, 130),
        ("sync", signal.SIGTERM, 143),
        ("gradcheck", signal.SIGINT, 130),
    ],
)
def test_every_experiment_stops_promptly(tmp_path, command, sig, code):
    """Once the command runs (its signal handlers are installed), the signal ends it at once (:data:`PROMPT_S`) with
    128 + signal and a one-line message, whatever it is doing (importing, compiling, computing)."""
    proc = _start([command, "--quick", "--no-progress", "--out", str(tmp_path / "out")], tmp_path / "cache")
    _wait_for(lambda: _handles_signals(proc.pid), proc)
    time.sleep(1.0)
    rc, dt, err = _interrupt(proc, sig)
    assert rc == code and dt < PROMPT_S and "Traceback" not in err, (rc, dt, err)


def test_demo_stops_promptly(tmp_path):
    """The demo, signalled while it imports JAX or compiles."""
    proc = _start(["demo", "--context", "2048", "--layers", "48"], tmp_path / "cache")
    _wait_for(lambda: _handles_signals(proc.pid), proc)
    time.sleep(1.0)
    rc, dt, err = _interrupt(proc, signal.SIGINT)
    assert rc == 130 and dt < PROMPT_S and "Traceback" not in err, (rc, dt, err)
