"""claims.prefactors: its lines on synthetic rows (independence, rate, the collapsed-MLP code check), its
option rules, and one tiny run of the part through the driver (slow: its own compiled programs)."""

import numpy as np
import pytest

import cfm_experiments
from cfm_experiments.claims import prefactors as P
from cfm_experiments.claims.common import base_config, dim_of

NS = [10, 100, 1000]


def _row(values, **kw):
    return {
        "config": {"part": "prefactors", **base_config(0, ns=NS, seeds=len(values), **kw)},
        "values": np.asarray(values).tolist(),
    }


def _dev(C, rng, seeds=32):
    return C * np.asarray(NS, float) ** -0.5 * np.exp(0.1 * rng.standard_normal((seeds, len(NS))))


def test_independence_line_on_known_growth():
    rng = np.random.default_rng(0)
    flat = [_row(_dev(0.3, rng), dim=d) for d in (2, 4, 8, 16)]
    need, have = {"seeds": 16, "largest d": 16}, {"seeds": 32, "largest d": 16}
    claim, numbers = P.independence_line(flat, "d", "the dimension d", dim_of, need, have)
    assert claim.verdict == "holds" and numbers["gamma"]["ci_low"] <= 0 <= numbers["gamma"]["ci_high"]
    grows = [_row(_dev(0.3 * d**0.25, rng), dim=d) for d in (2, 4, 8, 16)]
    assert P.independence_line(grows, "d", "the dimension d", dim_of, need, have)[0].verdict == "refuted at these sizes"
    small = {"seeds": 8, "largest d": 16}
    assert (
        P.independence_line(grows, "d", "the dimension d", dim_of, need, small)[0].verdict
        == "inconclusive at these sizes"
    )


def test_rate_line_pools_the_models_of_every_draw_against_the_band():
    """Ten models ∝ n^{-1/2} in each of two draws: the pooled slope meets the band of finite-n
    corrections (*holds*); three of them replaced by n^{-0.3} models: their own slopes lie beyond the band
    (*refuted at these sizes*); below the sizes: *inconclusive*."""
    rng = np.random.default_rng(1)
    half = [[_row(_dev(0.3, rng), dim=d) for d in range(1, 11)] for _ in range(2)]
    line = P.rate_line(half, 32, 1000)
    assert line.verdict == "holds" and "over 20 rows" in line.measured, line.measured
    slow = [
        _row(0.3 * np.asarray(NS, float) ** -0.3 * np.exp(0.05 * rng.standard_normal((32, 3))), dim=d)
        for d in (2, 4, 6)
    ]
    assert P.rate_line([half[0][:7] + slow], 32, 1000).verdict == "refuted at these sizes"
    assert P.rate_line(half, 16, 500).verdict == "inconclusive at these sizes"


def test_width_line_is_a_code_check_that_can_fail():
    rng = np.random.default_rng(2)
    base = _row(_dev(0.3, rng), dim=4)
    wide = _row(_dev(0.3, rng), dim=4, width=8)
    same = _row(wide["values"], dim=4, width=8, collapse=True)
    assert P.width_line([base, wide], [same]).verdict == "code check passed"
    off = _row((np.asarray(wide["values"]) * (1 + 1e-3)).tolist(), dim=4, width=8, collapse=True)
    assert P.width_line([base, wide], [off]).verdict == "code check failed"


def test_option_rules_state_their_bounds():
    parts = cfm_experiments.COMMANDS["claims"].select(["prefactors"])
    with pytest.raises(ValueError, match=r"--seeds must be an integer >= 2 \(an interval needs two\)"):
        cfm_experiments.resolve(parts, seeds=1)
    with pytest.raises(ValueError, match=r"--at-dim must be one of --dims"):
        cfm_experiments.resolve(parts, dims=[2, 4], at_dim=8, widths=[8])
    with pytest.raises(ValueError, match=r"--widths must each be >= --at-dim \(8\)"):
        cfm_experiments.resolve(parts, widths=[4])
    with pytest.raises(ValueError, match=r"--heads must be a list of values, each an integer >= 2"):
        cfm_experiments.resolve(parts, heads=3)


@pytest.mark.slow  # its own programs (d = 2 and 3 with heads and a width): ~1 min on two loaded cores
def test_the_part_runs_through_the_driver(tmp_path):
    report = cfm_experiments.run(
        "claims", out=tmp_path / "o", parts=["prefactors"], dims=[2, 3], heads=[2], widths=[3], at_dim=3,
        ns=[4, 16, 64], seeds=4, layers=2,
    )  # fmt: skip
    claims = {c.claim.split(" (")[0][:40]: c for c in report.claims}
    assert len(report.claims) == 5 and all(c.figure == "prefactors.png" and c.sizes for c in report.claims)
    width = next(c for c in report.claims if c.claim.startswith("a linear MLP"))
    assert width.verdict == "code check passed", width.measured
    assert all(c.verdict == "inconclusive at these sizes" for c in report.claims if c is not width), claims
    assert (tmp_path / "o" / "prefactors.png").exists()
