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


@pytest.mark.slow  # deep models over many samples
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


@pytest.mark.slow  # two estimator runs per method
@pytest.mark.parametrize("method", ["benettin", "twin"])
def test_burn_in_drops_exactly_the_first_steps(method):
    """With attention on (N = 3 tokens, 10 steps), burn_in = 0.3 must average the log growth of
    steps 3…9 only, over the time they span: against a hand loop over the same layer keys that
    records every step's log growth (an independent path: Python loop, no scan, no mask)."""
    from cfm_jax.stochastic._lyapunov import _benettin as benettin, _tangent, _twin as twin

    k = NoiseKernel("tanh", 1.0, 1.0, 0.3)
    model = StochasticTransformer(k, width=8, layers=10, horizon=1.0, attention=SphereAttention("SA", 1.0))
    x0 = random_tokens(jax.random.key(0), 3, 4)
    key = jax.random.key(7)
    k0, kp = jax.random.split(key)
    keys = jax.random.split(kp, model.num_steps)
    logs = []
    if method == "benettin":
        x, v = x0, _tangent(k0, x0)
        for kk in keys:
            x, v = jax.jvp(lambda y, kk=kk: model.step(y, kk), (x,), (v,))
            logs.append(float(jnp.log(jnp.linalg.norm(v))))
            v = v / jnp.linalg.norm(v)
        est = lambda b: benettin(model, x0, key, burn_in=b)  # noqa: E731
    else:
        delta = 1e-6
        x = x0
        y = x0 + delta * _tangent(k0, x0)
        y = y / jnp.linalg.norm(y, axis=-1, keepdims=True)
        for kk in keys:
            d0 = jnp.linalg.norm(y - x)
            x, y = model.step_systems(jnp.stack([x, y]), kk)
            d1 = jnp.linalg.norm(y - x)
            logs.append(float(jnp.log(d1 / d0)))
            y = x + (y - x) * (delta / d1)
            y = y / jnp.linalg.norm(y, axis=-1, keepdims=True)
        est = lambda b: twin(model, x0, key, delta=delta, burn_in=b)  # noqa: E731
    logs = np.asarray(logs)
    for burn_in, n0 in ((0.0, 0), (0.3, 3), (0.75, 8)):  # 0.75 · 10 = 7.5 rounds to 8
        want = logs[n0:].sum() / ((10 - n0) * model.dt)
        np.testing.assert_allclose(float(est(burn_in)), want, rtol=1e-6)  # twin: differences of 1e-6
    assert abs(logs[:3].mean() - logs[3:].mean()) > 1e-3  # dropping the first steps changes the estimate
    # estimate_lyapunov hands burn_in to every realisation
    keys2 = jax.random.split(jax.random.key(9), 2)
    res = estimate_lyapunov(model, jax.random.key(9), x0, method=method, realisations=2, burn_in=0.3)
    one = benettin if method == "benettin" else twin
    np.testing.assert_allclose(res.samples, [float(one(model, x0, kk, burn_in=0.3)) for kk in keys2], rtol=1e-6)
    for bad in (1.0, -1e-9):
        with pytest.raises(ValueError, match="burn_in"):
            est(bad)


def test_twin_separation_must_be_positive():
    sde = SphereSDE(NoiseKernel("relu"), steps=2, horizon=0.1)
    x0 = random_tokens(jax.random.key(0), 1, 3)
    for delta in (0.0, -1e-6, float("nan")):
        with pytest.raises(ValueError, match="`delta`"):
            estimate_lyapunov(sde, jax.random.key(1), x0, method="twin", realisations=2, delta=delta)
    assert np.isfinite(
        estimate_lyapunov(sde, jax.random.key(1), x0, method="twin", realisations=2, delta=1e-9).estimate
    )


@pytest.mark.parametrize("method", ["benettin", "twin"])
def test_estimate_lyapunov_reuses_its_program(method):
    """A second estimate with other keys and tokens compiles nothing (counted, not timed): the vmapped
    estimator is one compiled program, not a fresh lambda per call. Bad tokens are refused by name
    from inside it; another number of realisations is another program."""
    import equinox as eqx
    from _compiles import count_compilations

    kernel = NoiseKernel("relu", 1.0, 1.0, 0.5)
    # Benettin differentiates each step: the discrete model (the exact sampler's eigh has no tangent)
    sde = StochasticTransformer(kernel, 4, 4, 0.1) if method == "benettin" else SphereSDE(kernel, 4, 0.1)
    x0s = [random_tokens(k, 2, 3) for k in jax.random.split(jax.random.key(0), 2)]
    keys = jax.random.split(jax.random.key(1), 2)
    first = estimate_lyapunov(sde, keys[0], x0s[0], method=method, realisations=2)
    with count_compilations() as count:
        second = estimate_lyapunov(sde, keys[1], x0s[1], method=method, realisations=2)
    assert count() == 0
    assert np.isfinite(second.samples).all() and not np.array_equal(first.samples, second.samples)
    with count_compilations() as count:
        estimate_lyapunov(sde, keys[1], x0s[1], method=method, realisations=3)
    assert count() >= 1
    with pytest.raises(eqx.EquinoxRuntimeError, match="`x0` rows must be unit vectors"):
        estimate_lyapunov(sde, keys[1], 2 * x0s[1], method=method, realisations=2)
