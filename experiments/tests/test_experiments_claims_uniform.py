"""claims.uniform: the uniform-in-θ lines on synthetic per-context suprema with a known growth in d
and p, the search check (a per-context ascent that gains nothing over the best fixed start
withholds the verdict and says so), and a tiny run through the driver."""

import numpy as np
import pytest

import cfm_experiments
from cfm_experiments.claims import uniform as U

HAVE = {"steps": 60, "contexts": 16, "largest d": 16, "largest H": 8}
NOT_TESTED = "not tested: the claimed regime is not reached"


def _row(d, heads, level, rng, energy="1", gain=0.5):
    """Per context: the aligned start at ``level``, the trivial one and a random one below it, the
    best ascent ``gain``·level above the aligned start."""
    config = dict(sweep="d" if heads == 1 else "heads", dim=d, heads=heads, layers=4, energy=energy)
    aligned = level * np.exp(0.05 * rng.standard_normal(16))
    initial = np.stack([aligned, 0.3 * aligned, 0.1 * aligned], axis=1)
    best = initial.copy()
    best[:, 0] = aligned * (1 + gain)
    starts = ["aligned · isotropic", "trivial · isotropic", "random · isotropic"]
    return {"config": config, "starts": starts, "best": best.tolist(), "initial": initial.tolist()}


def test_uniform_sup_reads_the_best_fixed_start_and_the_gain():
    u = U.uniform_sup(_row(4, 1, 2.0, np.random.default_rng(0)))
    assert u["start"] == "aligned · isotropic" and u["interval"].contains(3.0) and u["fixed"].contains(2.0)
    assert u["gain"].contains(1.0) and u["trivial"].contains(0.6) and not u["problems"]


@pytest.mark.parametrize("energy", ["1", "d"])
def test_uniform_line_against_root_d_and_against_p(energy):
    rng = np.random.default_rng(0)
    dims = [2, 4, 8, 16]
    d_of = lambda r: r["config"]["dim"]  # noqa: E731
    root = [_row(d, 1, d**0.5, rng, energy) for d in dims]
    line = U.uniform_line(root, "d", d_of, HAVE, energy)
    # γ = 1/2 exactly: the interval straddles the bound of "at most √d"
    assert line.verdict == "undecided: interval straddles the boundary"
    assert ("N(0, I)$" in line.claim) == (energy == "d")
    slower = [_row(d, 1, d**0.25, rng, energy) for d in dims]
    assert U.uniform_line(slower, "d", d_of, HAVE, energy).verdict == "holds"  # γ = 1/4: at most √d
    linear = [_row(d, 1, d, rng, energy) for d in dims]
    assert U.uniform_line(linear, "d", d_of, HAVE, energy).verdict == "refuted at these sizes"
    p = lambda r: 3 * 4 * r["config"]["heads"] * 16  # noqa: E731
    flat = [_row(4, h, 1.0, rng) for h in (1, 2, 4, 8)]
    assert U.uniform_line(flat, "p", p, HAVE, "1").verdict == "holds"
    grows = [_row(4, h, h**0.5, rng) for h in (1, 2, 4, 8)]
    assert U.uniform_line(grows, "p", p, HAVE, "1").verdict == "refuted at these sizes"
    assert U.uniform_line(grows, "p", p, HAVE | {"steps": 10}, "1").verdict == "inconclusive at these sizes"


def test_a_per_context_ascent_that_gains_nothing_withholds_the_verdict():
    """E sup within MIN_GAIN of the best fixed start at one d: *not tested*, the line names the d."""
    rng = np.random.default_rng(1)
    rows = [_row(d, 1, d**0.5, rng, "d", gain=0.5 if d != 8 else 0.002) for d in (2, 4, 8, 16)]
    line = U.uniform_line(rows, "d", lambda r: r["config"]["dim"], HAVE, "d")
    assert line.verdict == NOT_TESTED and "d=8: " in line.measured and "never improved on its start" in line.measured
    assert "d=8 never improved on the best fixed start" in line.measured, line.measured


def test_a_tiny_run_through_the_driver(tmp_path):
    report = cfm_experiments.run(
        "claims", out=tmp_path / "o", parts=["uniform"], uni_dims=[1, 2], uni_heads=[1, 2], sup_at_dim=2, sup_n=6,
        sup_steps=3, uni_contexts=2, layers=1,
    )  # fmt: skip
    assert len(report.rows) == 5 and len(report.claims) == 3 and (tmp_path / "o" / "uniform.png").exists()
    assert all(np.shape(r["best"]) == (2, U.STARTS) for r in report.rows)
    assert all(c.verdict == "inconclusive at these sizes" for c in report.claims)
