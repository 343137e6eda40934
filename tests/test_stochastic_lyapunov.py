"""Lyapunov exponents vs the closed form, and discrete model → SDE in law (docs/theory.md)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cfm_jax.stochastic import (
    NoiseKernel,
    SphereAttention,
    SphereSDE,
    StochasticTransformer,
    estimate_lyapunov,
    random_tokens,
    simulate_many,
)


@pytest.mark.parametrize("act", ["relu", "linear"])
@pytest.mark.parametrize("d", [3, 5])
def test_benettin_matches_closed_form(act, d):
    """Tangent method on the discrete model (m = 16, Δt = 0.01, T = 6, 128 runs) agrees with
    λ₁ = ½[(d−3)κ'(1) − (d−1)κ(1)] within its 99% confidence interval."""
    k = NoiseKernel(act, 1.0, 1.0, 0.0)
    model = StochasticTransformer(k, width=16, layers=600, horizon=6.0)
    x0 = random_tokens(jax.random.key(d), 1, d)
    est = estimate_lyapunov(model, jax.random.key(10 + d), x0, realisations=128, level=0.99)
    assert abs(est.estimate - k.lyapunov(d)) < est.ci_half_width, (est.estimate, est.ci_half_width, k.lyapunov(d))
    assert est.ci_half_width < 0.25 * abs(k.lyapunov(d))  # the CI is informative


def test_twin_sde_matches_closed_form_with_bias():
    """Twin trajectories on the exact-noise SDE, ReLU with bias (κ(1) ≠ κ'(1)), d = 5."""
    k = NoiseKernel("relu", 1.0, 1.0, 0.6)
    d = 5
    sde = SphereSDE(k, steps=600, horizon=6.0)
    x0 = random_tokens(jax.random.key(0), 1, d)
    est = estimate_lyapunov(sde, jax.random.key(1), x0, method="twin", realisations=128, level=0.99)
    assert abs(est.estimate - k.lyapunov(d)) < est.ci_half_width, (est.estimate, est.ci_half_width, k.lyapunov(d))


def test_estimators_detect_a_wrong_formula():
    """The CI is narrow enough to reject the formula with (d−3) and (d−1) swapped."""
    k = NoiseKernel("relu", 1.0, 1.0, 0.6)
    d = 5
    wrong = 0.5 * ((d - 1) * k.dkappa1 - (d - 3) * k.kappa1)
    model = StochasticTransformer(k, width=16, layers=600, horizon=6.0)
    est = estimate_lyapunov(model, jax.random.key(2), random_tokens(jax.random.key(0), 1, d), realisations=128)
    assert abs(est.estimate - wrong) > 3 * est.ci_half_width


def test_discrete_statistics_approach_sde_as_depth_grows():
    """Weak convergence in L (width m = 64, two tokens, d = 3, T = 1, R = 4000 runs each).

    Statistic E<x_1, x_2>_T vs a 32-step exact-noise SDE reference. Stated tolerance: the error
    at L = 1 is significant (> 6 SE), at L = 2 it has at least halved up to 3 SE (weak order 1),
    and at L = 32 it is below 4 combined standard errors.
    """
    k = NoiseKernel("relu", 1.5, 1.0, 0.0)
    R = 4000
    x0 = jnp.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])

    def stat(model, seed):
        _, x = jax.jit(lambda ks: simulate_many(model, x0, ks))(jax.random.split(jax.random.key(seed), R))
        rho = np.asarray(jnp.sum(x[:, 0] * x[:, 1], -1))
        return rho.mean(), rho.std() / math.sqrt(R)

    ref, ref_se = stat(SphereSDE(k, steps=32, horizon=1.0), 0)
    errs, ses = [], []
    for L in (1, 2, 32):
        m, se = stat(StochasticTransformer(k, width=64, layers=L, horizon=1.0), L)
        errs.append(m - ref)
        ses.append(math.hypot(se, ref_se))
    assert abs(errs[0]) > 6 * ses[0]
    assert abs(errs[1]) < 0.5 * abs(errs[0]) + 3 * ses[1]
    assert abs(errs[2]) < 4 * ses[2], (errs, ses)


@pytest.mark.slow
def test_attention_top_exponent_is_the_noise_exponent():
    """With equivariant SA attention (Q = K = V = I) the tokens synchronise and the top exponent
    of the whole N-token system is the collective mode's, i.e. λ₁ of the noise flow."""
    k = NoiseKernel("relu", 1.0, 1.0, 0.0)
    d = 3
    model = StochasticTransformer(k, width=16, layers=600, horizon=6.0, attention=SphereAttention("SA", 1.0))
    x0 = random_tokens(jax.random.key(4), 4, d)
    est = estimate_lyapunov(model, jax.random.key(5), x0, realisations=64, burn_in=0.5, level=0.99)
    assert abs(est.estimate - k.lyapunov(d)) < est.ci_half_width, (est.estimate, est.ci_half_width)
