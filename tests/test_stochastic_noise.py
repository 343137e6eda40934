"""Noise samplers: the random MLP has covariance κ for every width; the exact increment is exact, also for
nearly equal tokens."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cfm_jax.stochastic import (
    NoiseKernel,
    exact_increment,
    feature_increment,
    kernel_matrix,
    random_tokens,
)
from cfm_jax.stochastic._noise import _mlp_noise, _sample_mlp


def test_mlp_covariance_is_kappa_for_every_width():
    """E[ξ(x)·ξ(y)]/d = κ(<x,y>) for the actual random MLP, even at width m = 3."""
    k = NoiseKernel("tanh", 1.2, 0.8, 0.3)
    d, m, R = 4, 3, 20_000
    x = random_tokens(jax.random.key(1), 3, d)
    xi = jax.vmap(lambda kk: _mlp_noise(_sample_mlp(kk, k, d, m), x, k.activation))(
        jax.random.split(jax.random.key(2), R)
    )
    prods = jnp.einsum("rid,rjd->rij", xi, xi) / d  # (R, 3, 3)
    mean, se = prods.mean(0), prods.std(0) / math.sqrt(R)
    z = np.abs(np.asarray((mean - kernel_matrix(x, k)) / se))
    assert z.max() < 5.0, z


@pytest.mark.parametrize("eps", [1e-6, 1e-12])
def test_exact_increment_covariance_including_nearly_equal_tokens(eps):
    """Cov(ΔW_i^a, ΔW_j^b) = Δt κ(<x_i,x_j>) δ_ab, and Var(ΔW_1 − ΔW_4) = 2Δt(κ(1) − κ(ρ₁₄)) for
    two tokens at distance ``eps`` (C is numerically singular; at 1e-12 an eigendecomposition of
    C itself would return a difference of spurious size √(eps_machine) ≈ 1e-8 instead of ~1e-12)."""
    k = NoiseKernel("relu", 1.0, 1.0, 0.0)
    d, dt, R = 3, 0.1, 20_000
    x = random_tokens(jax.random.key(3), 3, d)
    x = jnp.concatenate([x, (x[:1] + eps * jnp.array([[0.0, 1.0, -1.0]]))], axis=0)
    x = x / jnp.linalg.norm(x, axis=-1, keepdims=True)
    C = kernel_matrix(x, k)
    assert np.linalg.eigvalsh(np.asarray(C)).min() < 1e-11  # numerically rank-deficient
    dW = jax.vmap(lambda kk: exact_increment(kk, x, k, dt))(jax.random.split(jax.random.key(4), R))
    emp = jnp.einsum("ria,rja->ij", dW, dW) / (R * d)
    se = dt * jnp.sqrt((jnp.outer(jnp.diag(C), jnp.diag(C)) + C**2) / (R * d))
    z = np.abs(np.asarray((emp - dt * C) / se))
    assert z.max() < 5.0, z
    # cross-coordinate covariances vanish
    cross = jnp.einsum("ria,rib->ab", dW, dW) / (R * x.shape[0])
    off = cross - jnp.diag(jnp.diag(cross))
    assert float(jnp.abs(off).max()) < 5 * dt * k.kappa1 * math.sqrt(2 / R)
    # the tiny difference of the two nearly equal tokens has the right variance (χ² test)
    diff = dW[:, 0] - dW[:, 3]
    r = 0.5 * float(jnp.sum((x[0] - x[3]) ** 2))
    expected = 2 * dt * float(k.deficit(jnp.asarray(r)))
    ratio = float(jnp.mean(diff**2)) / expected
    assert abs(ratio - 1) < 5 * math.sqrt(2 / (R * d)), ratio


@pytest.mark.parametrize("noise", ["exact", "features"])
def test_a_single_token_moves_with_variance_kappa_one(noise):
    """One token (the factor's N = 1 branch): Var ΔW^a = Δt κ(1) per coordinate, for a kernel with
    κ(1) = 8 (a unit κ(1) would hide a variance used in place of its root). Both samplers, R = 8000
    draws, within 5 standard errors of the variance (SE = Δt κ(1) √(2/(R d)))."""
    from cfm_jax.stochastic import feature_increment

    k = NoiseKernel("relu", 2.0, 2.0, 0.0)
    assert k.kappa1 == pytest.approx(8.0)
    d, dt, R = 3, 0.01, 8000
    x = random_tokens(jax.random.key(0), 1, d)
    if noise == "exact":
        draw = lambda kk: exact_increment(kk, x, k, dt)  # noqa: E731
    else:
        draw = lambda kk: feature_increment(kk, x, k, dt, 64)  # noqa: E731
    dW = np.asarray(jax.vmap(draw)(jax.random.split(jax.random.key(1), R)))
    var = float(np.mean(dW**2))
    assert abs(var - dt * k.kappa1) < 5 * dt * k.kappa1 * math.sqrt(2 / (R * d)), var


@pytest.mark.parametrize("dt", [-0.1, float("nan"), float("inf")])
def test_a_bad_dt_is_refused_as_a_value(dt):
    """dt is a value: EquinoxRuntimeError naming it, eagerly and traced (a caller's jit, where it used
    to pass unchecked into √dt), for both increments; dt = 0 is allowed."""
    key, x, kernel = jax.random.key(0), jnp.eye(3)[:2], NoiseKernel("relu")
    draws = (
        lambda t: exact_increment(key, x, kernel, t),
        lambda t: feature_increment(key, x, kernel, t, 8),
    )
    for draw in draws:
        with pytest.raises(eqx.EquinoxRuntimeError, match="`dt` must be finite and >= 0"):
            draw(dt)
        with pytest.raises(eqx.EquinoxRuntimeError, match="`dt` must be finite and >= 0"):
            eqx.filter_jit(draw)(jnp.asarray(dt))
        np.testing.assert_array_equal(draw(0.0), 0.0)
        np.testing.assert_allclose(jax.jit(draw)(0.25), draw(0.25), rtol=1e-6)
