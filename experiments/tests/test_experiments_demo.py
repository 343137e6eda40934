"""``cfm-jax demo``: its output, its device option reaching JAX before it starts, its option rules."""

import subprocess
import sys

import pytest

from cfm_experiments.demo import OPTIONS, main


def _run(*args):
    return subprocess.run([sys.executable, "-m", "cfm_experiments", *args], capture_output=True, text=True, timeout=900)


def test_demo_output():
    out = _run("--cpu-devices", "3", "demo", "--context", "32", "--layers", "3")
    assert out.returncode == 0, out.stderr
    assert "(3 device(s))" in out.stdout  # --cpu-devices reached JAX before it started
    assert "summary:" in out.stdout and "finite: True" in out.stdout
    line = next(ln for ln in out.stdout.splitlines() if "x1[0]" in ln)
    values = line.split("=", 1)[1].strip(" []").split(",")
    assert len(values) == 8 and all(len(v.strip().lstrip("-").split(".")[-1]) == 4 for v in values), line


def test_demo_rules_and_a_bad_option_is_one_line():
    rules = {o.name: o for o in OPTIONS}
    with pytest.raises(ValueError, match="--context must be an integer >= 1, got 0"):
        rules["context"].check(0)
    assert rules["mlp_width"].check(0) == 0  # no MLP
    out = _run("demo", "--context", "0")
    assert (
        out.returncode == 2 and out.stderr.strip() == "cfm-jax demo: error: --context must be an integer >= 1, got 0."
    )


def test_demo_runs_in_process(capsys):
    assert main(dim=2, context=5, batch=1, layers=2, heads=1, mlp_width=0, seed=1) == 0
    assert "x1[0] = [" in capsys.readouterr().out
