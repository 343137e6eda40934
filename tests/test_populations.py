"""cfm_jax._populations: supports, moments, purity in the key, and bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cfm_jax._populations import (
    embedded_sphere,
    gaussian,
    gaussian_mixture,
    make_population,
    subspace_gaussian,
    uniform_sphere,
)

KEY = jax.random.key(0)


def test_supports_and_intrinsic_dims():
    z = subspace_gaussian(6, 2)(KEY, 50)
    assert np.linalg.matrix_rank(np.asarray(z), tol=1e-5) == 2 and subspace_gaussian(6, 2).intrinsic_dim == 2
    s = embedded_sphere(5, 2, radius=2.0)(KEY, 40)
    np.testing.assert_allclose(np.linalg.norm(np.asarray(s), axis=1), 2.0, rtol=1e-5)
    assert np.linalg.matrix_rank(np.asarray(s), tol=1e-5) == 3
    np.testing.assert_allclose(np.linalg.norm(np.asarray(uniform_sphere(3)(KEY, 10)), axis=1), 1.0, rtol=1e-5)
    assert uniform_sphere(3).intrinsic_dim == 2 and gaussian(4).intrinsic_dim == 4


def test_moments_within_monte_carlo_bands():
    """Sample mean and second moment of N(m, s² I_d) within 5 standard errors (n = 4000, so a
    wrong scale or mean by 10 % is far outside): SE(mean) = s/√n, SE(‖z − m‖²/d) = s²√(2/(n d))."""
    n, d, s = 4000, 3, 0.7
    mean = jnp.array([1.0, -2.0, 0.5])
    z = np.asarray(gaussian(d, scale=s, mean=mean)(KEY, n), np.float64)
    assert np.all(np.abs(z.mean(0) - np.asarray(mean)) < 5 * s / np.sqrt(n))
    m2 = np.mean(np.sum((z - np.asarray(mean)) ** 2, 1)) / d
    assert abs(m2 - s**2) < 5 * s**2 * np.sqrt(2 / (n * d))
    # uniform on the sphere: E z = 0, E z zᵀ = I/d (SE of each entry ≤ 1/√n)
    u = np.asarray(uniform_sphere(d)(KEY, n), np.float64)
    np.testing.assert_allclose(u.T @ u / n, np.eye(d) / d, atol=5 / np.sqrt(n))


def test_mixture_weights():
    """Two far-apart components with weights (0.25, 0.75): the fraction on the first is 0.25 within
    5 binomial standard errors."""
    n = 2000
    m = gaussian_mixture(jnp.array([[5.0, 0.0], [-5.0, 0.0]]), scale=0.1, weights=jnp.array([0.25, 0.75]))(KEY, n)
    frac = float((m[:, 0] > 0).mean())
    assert abs(frac - 0.25) < 5 * np.sqrt(0.25 * 0.75 / n)


def test_pure_in_key_and_vmappable():
    z1, z2 = jax.jit(jax.vmap(lambda k: gaussian(2)(k, 3)))(jax.random.split(KEY, 2))
    assert z1.shape == (3, 2) and not np.allclose(z1, z2)
    np.testing.assert_array_equal(gaussian(2)(KEY, 3), gaussian(2)(KEY, 3))


def test_make_population_and_bad_input():
    assert make_population("subspace_gaussian", 5, 2).intrinsic_dim == 2
    with pytest.raises(ValueError, match="intrinsic_dim"):
        subspace_gaussian(3, 4)
    with pytest.raises(ValueError, match="n"):
        gaussian(2)(KEY, 0)
    with pytest.raises(ValueError):
        make_population("cauchy", 2)
