"""claims.scales: its lines on synthetic rows with known answers (the growth exponent κ against the
bound's 2, the rate at every β read at the largest n, the homogeneity code check), and its option rules."""

import math

import numpy as np
import pytest

import cfm_experiments
from cfm_experiments.claims import scales as S

NS = [10, 32, 100, 316, 1000, 3162]


def _row(qk, scale, values, sweep="qk", law="gaussian", ns=NS):
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


def test_rate_at_every_beta_reads_the_largest_n():
    """Deviations flat up to n = 100 and ∝ n^{-1/2} after: the large-n slopes contain −1/2 (*holds*);
    with the small-n regime at the large n instead, the line says *not observed*."""
    rng = np.random.default_rng(1)
    n = np.asarray(NS, float)
    late = np.where(n <= 100, 0.1, 0.1 * (n / 100) ** -0.5)
    early = np.where(n <= 100, 0.1 * (n / 10) ** -0.5, 0.1 * 10**-0.5)
    noise = lambda: np.exp(0.05 * rng.standard_normal((32, n.size)))  # noqa: E731
    need, have = {"seeds": 16, "largest n": 500, "betas": 2}, {"seeds": 32, "largest n": 3162, "betas": 2}
    good = S.rate_at_every_beta_line([_row(b, 1.0, late * noise()) for b in (1.0, 2.0)], "Gaussian", need, have)
    assert good.verdict == "holds", good.measured
    bad = S.rate_at_every_beta_line([_row(b, 1.0, early * noise()) for b in (1.0, 2.0)], "Gaussian", need, have)
    assert bad.verdict == "not observed at these sizes", bad.measured


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
