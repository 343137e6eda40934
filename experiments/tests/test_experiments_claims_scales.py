"""claims.scales: its lines on synthetic rows with known answers (the growth exponent κ against the
bound's 2, the rate at every β read at the largest n, the homogeneity code check), and its option rules."""

import math

import numpy as np
import pytest

import cfm_experiments
from cfm_experiments.claims import scales as S
from cfm_experiments.verdicts import slopes as SL

NS = [10, 32, 100, 316, 1000, 3162]


def _row(qk, scale, values, sweep="qk", law="gaussian", ns=NS) -> dict:
    config = dict(part="scales", law=law, dim=4, heads=1, width=0, layers=4, scale=scale, qk=qk, v=1.0, seed=0,
                  ns=list(ns), seeds=len(values), sweep=sweep)  # fmt: skip
    return {"config": config, "values": np.asarray(values).tolist(), "floor": [0.0] * len(values)}


def _law(beta, kappa, rng, slope=-0.5, seeds=32):
    """C/σ = 0.3 e^{κβ}, dev = C n^{slope} × lognormal noise."""
    n = np.asarray(NS, float)
    return 0.3 * math.exp(kappa * beta) * n**slope * np.exp(0.1 * rng.standard_normal((seeds, n.size)))


@pytest.mark.parametrize(
    "kappa, verdict", [(2.0, "holds"), (0.1, "holds with a different constant"), (3.0, "refuted at these sizes")]
)
def test_growth_line_reads_kappa_against_the_bound(kappa, verdict):
    """κ = 2 exactly (the bound's form): the interval contains 2 and the line reads *holds*."""
    rng = np.random.default_rng(0)
    group = [_row(b, 1.0, _law(b, kappa, rng)) for b in (0.25, 0.5, 1.0, 2.0)]
    line = S.growth_line(group, "Gaussian", {"seeds": 16, "betas": 4}, {"seeds": 32, "betas": 4})
    assert line.verdict == verdict, line.measured
    assert "κ = " in line.measured and "the bound's form: κ ≥ 2" in line.measured


def test_rate_at_every_beta_pools_every_beta_of_every_draw_against_the_band():
    """Deviations ∝ n^{-1/2} at every β of two draws: the pooled slope meets the band of finite-n
    corrections (*holds*); ∝ n^{-0.3}: *refuted at these sizes*; one β of five at n^{-0.2} among
    n^{-1/2}: that β's own slope lies beyond the band (Bonferroni over the rows) and refutes the line
    "at every β" though the pooled slope alone would not. The line prints the band and the pooled slope."""
    rng = np.random.default_rng(1)
    need, have = {"seeds": 16, "largest n": 500, "betas": 2}, {"seeds": 32, "largest n": 3162, "betas": 5}
    betas = (0.25, 0.5, 1.0, 2.0, 4.0)

    def draws(slope_of):
        return [[_row(b, 1.0, _law(b, 0.0, rng, slope=slope_of(b))) for b in betas] for _ in range(2)]

    good = S.rate_at_every_beta_line(draws(lambda b: -0.5), "Gaussian", need, have)
    assert good.verdict == "holds", good.measured
    assert "pooled slope -0.4" in good.measured or "pooled slope -0.5" in good.measured, good.measured
    low, high = SL.band(NS)
    assert f"against the band [{low:+.3f}, {high:+.3f}]" in good.measured
    slow = S.rate_at_every_beta_line(draws(lambda b: -0.3), "Gaussian", need, have)
    assert slow.verdict == "refuted at these sizes", slow.measured
    one = S.rate_at_every_beta_line(draws(lambda b: -0.2 if b == 4.0 else -0.5), "Gaussian", need, have)
    assert one.verdict == "refuted at these sizes" and "outside the band at β = 4" in one.measured, one.measured


def test_the_rate_line_of_a_redrawn_run_is_the_pooled_one():
    """Scales run at two draws: the rate line is written from both draws' rows (its sizes say it is
    pooled, with each draw's own verdict), not the agreement of two one-draw verdicts."""
    from cfm_experiments.protocol import Settings

    rng = np.random.default_rng(3)
    betas = (0.25, 1.0, 2.0, 4.0)
    values = dict(seeds=32, ns=NS, betas=betas, ball_ns=NS, ball_betas=(), n_ref=64)
    settings = Settings(False, {"seed": 0, **values})
    rows = [
        {**_row(b, 1.0, _law(b, 0.0, rng)), "config": {**_row(b, 1.0, [[1.0]])["config"], "seed": k}}
        for k in (0, 1)
        for b in betas
    ]
    for r in rows:
        r["values"] = _law(r["config"]["qk"], 0.0, rng).tolist()
    part = S.Scales()
    lines = {c.claim: c for c in part.summarize(rows, settings).claims}
    line = lines["$n^{-1/2}$ rate at every inverse temperature (Gaussian context)"]
    assert "pooled over 2 independent draws (seeds 0, 1); each draw alone: seed 0: " in line.sizes, line.sizes
    assert line.verdict == "holds" and "over 8 rows" in line.measured, line.measured


def test_identity_line_is_a_code_check_that_can_fail():
    rng = np.random.default_rng(2)
    base = _law(0.0, 0.0, rng)
    gq = [_row(b, 1.0, base * (1 + b)) for b in (0.25, 1.0, 4.0)]
    gs = [gq[1]] + [_row(1.0, math.sqrt(b), math.sqrt(b) * base * (1 + b), sweep="scale") for b in (0.25, 4.0)]
    assert S.identity_line(gq, gs).verdict == "code check passed"
    gs[-1]["values"] = (np.asarray(gs[-1]["values"]) * 1.01).tolist()  # a 1 % break of homogeneity
    assert S.identity_line(gq, gs).verdict == "code check failed"


def test_option_rules_state_their_bounds():
    with pytest.raises(ValueError, match=r"--betas must include 1"):
        cfm_experiments.resolve(cfm_experiments.COMMANDS["claims"].select(["scales"]), betas=[0.5, 2.0, 4.0])
    with pytest.raises(ValueError, match=r"--n-ref must be an integer >= 2"):
        cfm_experiments.resolve(cfm_experiments.COMMANDS["claims"].select(["scales"]), n_ref=1)
    with pytest.raises(ValueError, match=r"--ball-ns needs at least 3 value"):
        cfm_experiments.resolve(cfm_experiments.COMMANDS["claims"].select(["scales"]), ball_ns=[4, 16])
