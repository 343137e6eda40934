"""The console entry point."""

import subprocess
import sys


def test_demo_exits_zero():
    out = subprocess.run(
        [sys.executable, "-m", "cfm_jax", "demo", "--context", "32", "--layers", "3"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "summary:" in out.stdout and "finite: True" in out.stdout


def test_unknown_command_fails():
    out = subprocess.run([sys.executable, "-m", "cfm_jax", "nope"], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
