"""`cfm-jax gradcheck` end to end (slow: it compiles every gradient method)."""

import json

import pytest

from cfm_jax.cli import main


@pytest.mark.slow
def test_gradcheck_cli_writes_summary_and_passes(tmp_path):
    out = tmp_path / "gc"
    argv = ["gradcheck", "--quick", "--out", str(out), "--context", "8", "--layers", "2", "--repeats", "1",
            "--fd-directions", "2"]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["discrete_adjoint_rel_err_vs_autodiff"] < 1e-10
    assert summary["discrete_adjoint_rel_err_vs_fd"] < 1e-6
    assert (out / "gradcheck.png").exists() and len(summary["rows"]) >= 7
    # resuming keeps the finished rows and recomputes nothing
    assert main(argv + ["--resume"]) == 0
    assert len((out / "rows.jsonl").read_text().splitlines()) == len(summary["rows"])
