"""claims.tail_exponent: the linearised limit's draws on a known covariance, the first variation against
the n-point deviation it linearises, and the line's verdict on synthetic tails."""

import jax
import numpy as np
import pytest

from cfm_experiments.claims import tail_exponent as T
from cfm_experiments.claims.deviation import reference_tokens, sup_deviation, token_trajectory
from cfm_experiments.claims.sampling import fixed_norm_params, sample_law, transformer
from cfm_experiments.claims.statistics import upper_quantiles
from cfm_jax import EmpiricalMeasure


def test_linearised_sups_of_a_known_covariance():
    """f with covariance diag(0, 0 | 1, 1) ((L + 1) = 2 layers, d = 2): sup_s‖G_s‖ = ‖G_1‖ is Rayleigh:
    q_δ = √(2 log(1/δ))."""
    f = np.random.default_rng(0).choice([-1.0, 1.0], size=(20000, 4))
    f[:, :2] = 0
    sups = T.linearised_sups(f - f.mean(axis=0), 200_000, 2, seed=1)
    deltas = (1e-1, 1e-2, 1e-3)
    np.testing.assert_allclose(upper_quantiles(sups, deltas), np.sqrt(2 * np.log(1 / np.asarray(deltas))), rtol=0.03)


@pytest.mark.slow  # 512 contexts of 256 points and a Jacobian over 512 atoms: ~40 s on two loaded cores
def test_the_linearised_limit_predicts_the_deviation_at_large_n():
    """√n·dev at n = 256 (uniform ball, d = 2, L = 2) has the median of the linearised limit's sup_s‖G_s‖ to
    15 %; the limit is built from a QMC reference sample of 512 points (the reference of the deviation)."""
    key = jax.random.key(0)
    params = fixed_norm_params(key, 2, heads=1, width=0, layers=2, qk=1.0, v=1.0)
    x0 = sample_law("ball", jax.random.key(1), 1, 2, 1.0)
    ref_points = sample_law("ball", jax.random.key(2), 512, 2, 1.0, qmc=True)
    model = transformer(params)
    ref = reference_tokens(model, x0, EmpiricalMeasure(ref_points))
    zs = jax.vmap(lambda k: sample_law("ball", k, 256, 2, 1.0))(jax.random.split(jax.random.key(3), 512))
    dev = jax.vmap(lambda z: sup_deviation(token_trajectory(model, x0, EmpiricalMeasure(z)), ref))(zs)
    lin = T.linearised_sups(T.influence(params, x0, ref_points), 20_000, 2, seed=0)
    ratio = np.median(16 * np.asarray(dev)) / np.median(lin)
    assert 0.85 < ratio < 1.15, ratio


def _row(law, n, gamma, gamma_lin, contexts=100_000):
    lo, hi = gamma - 0.03, gamma + 0.03
    return {
        "config": {"law": law, "n": n, "tail_samples": contexts},
        "gamma": {"value": gamma, "ci_low": lo, "ci_high": hi, "level": 0.95},
        "gamma_lin": gamma_lin,
        "quantiles": [1.0] * len(T.TAIL_DELTAS),
        "quantiles_lin": [1.0] * len(T.TAIL_DELTAS),
    }


def test_exponent_line_verdicts():
    have = {"contexts": 100_000}
    assert T.exponent_line([_row("ball", 16, 0.52, 0.52)], "ball", have).verdict == "holds"
    assert T.exponent_line([_row("ball", 16, 0.45, 0.40)], "ball", have).verdict == "holds"  # lighter than ½
    assert T.exponent_line([_row("ball", 16, 0.95, 0.52)], "ball", have).verdict == "refuted at these sizes"
    assert T.exponent_line([_row("ball", 16, 0.95, 0.52)], "ball", {"contexts": 20_000}).verdict == (
        "inconclusive at these sizes"
    )


def test_numpy_contexts_have_their_laws_moments():
    rng = np.random.default_rng(5)
    g = T.contexts(rng, "gaussian", 64, 64, 3).reshape(-1, 3)
    assert abs((g**2).sum(1).mean() - 1) < 0.03 and np.abs(g.mean(0)).max() < 0.03
    b = np.linalg.norm(T.contexts(rng, "ball", 64, 64, 3).reshape(-1, 3), axis=1)
    assert b.max() <= 1.0 and abs(b.mean() - 0.75) < 0.01 and abs((b**2).mean() - 0.6) < 0.01
