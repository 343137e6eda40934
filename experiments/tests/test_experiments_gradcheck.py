"""`cfm-jax gradcheck` end to end on a tiny problem: the science, not the strings."""

import json

import pytest

from cfm_experiments.cli import main
from cfm_experiments.gradcheck import FD_LEVEL, ROUND_OFF, GradCheck
from cfm_experiments.protocol import resolve
from cfm_experiments.results import read_rows


@pytest.mark.slow  # every gradient method's programs, run, interrupted and resumed
def test_gradcheck_methods_match_their_references_and_resume(tmp_path):
    out = tmp_path / "gc"
    argv = [
        "gradcheck",
        "--quick",
        "--out",
        str(out),
        "--context",
        "6",
        "--layers",
        "2",
        "--repeats",
        "1",
        "--fd-directions",
        "2",
        "--dim",
        "3",
        "--batch",
        "2",
    ]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["passed"] is True
    on_disk = read_rows(out / "rows.jsonl")
    rows = {r["config"]["method"]: r for r in on_disk}
    exact = [r for r in rows.values() if r["reference"] == "euler"]
    assert len(exact) == 6 and all(r["rel_err_vs_autodiff_euler"] <= 1e-10 for r in exact)
    assert all(r["rel_err_vs_finite_differences"] <= 1e-6 for r in exact)
    # the continuous adjoint approaches the continuous gradient: Bosh3 at 8 steps/layer is far closer
    # than Euler at one step per layer, and both are far from the Euler scheme's exact gradient
    bosh, euler = rows["ContinuousAdjoint() [Bosh3, 8/layer]"], rows["ContinuousAdjoint() [Euler]"]
    assert bosh["rel_err_vs_exact_continuous"] < 0.01 * euler["rel_err_vs_exact_continuous"]
    assert bosh["rel_err_vs_autodiff_euler"] > 1e3 * rows["DiscreteAdjoint()"]["rel_err_vs_autodiff_euler"]
    assert (out / "gradcheck.png").exists()
    # resuming keeps the finished rows and recomputes nothing
    assert main(argv + ["--resume"]) == 0
    assert len((out / "rows.jsonl").read_text().splitlines()) == len(on_disk)


def _rows(autodiff: float, fd: float) -> list[dict]:
    """One exact method with the given errors (against autodiff, against finite differences) and one
    continuous method, far from both (its distance is discretisation, never a failure)."""
    common = {"time_s": 2e-3, "forward_s": 1e-3, "time_over_forward": 2.0, "loss": 1.0}
    return [
        {
            "config": {"method": "DiscreteAdjoint()"},
            "reference": "euler",
            "rel_err_vs_autodiff_euler": autodiff,
            "rel_err_vs_finite_differences": fd,
            "rel_err_vs_exact_continuous": 1e-2,
            **common,
        },
        {
            "config": {"method": "ContinuousAdjoint() [Euler]"},
            "reference": "continuous",
            "rel_err_vs_autodiff_euler": 1e-2,
            "rel_err_vs_finite_differences": 1e-2,
            "rel_err_vs_exact_continuous": 1e-3,
            **common,
        },
    ]


def test_the_code_check_needs_both_references():
    """The check passes only when the exact methods match autodiff to round-off *and* finite differences:
    either failing alone fails it (and the command exits with 1)."""
    part = GradCheck()
    settings = resolve((part,), quick=True)
    ok, bad = 0.1, 10.0  # factors of the bounds: inside, outside
    for autodiff, fd, passed in (
        (ok * ROUND_OFF, ok * FD_LEVEL, True),
        (bad * ROUND_OFF, ok * FD_LEVEL, False),  # finite differences agree, round-off does not
        (ok * ROUND_OFF, bad * FD_LEVEL, False),  # round-off agrees, finite differences do not
        (bad * ROUND_OFF, bad * FD_LEVEL, False),
    ):
        summary = part.summarize(_rows(autodiff, fd), settings)
        assert summary.passed is passed, (autodiff, fd)
        (claim,) = summary.claims
        assert claim.verdict == ("code check passed" if passed else "code check failed")
