"""The empirical Lipschitz constant on analytic gradient maps (its ratios are then known exactly)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _ogd_problem import L

import cfm_jax
from cfm_jax import ogd


def _linear_grad(a):
    """g(θ) = a θ: every ratio ‖g(θ) − g(θ')‖/‖θ − θ'‖ is |a| exactly."""

    def grad_fn(model, x0, context, y):
        return jnp.zeros(()), jax.tree.map(lambda p: a * p, eqx.filter(model, eqx.is_inexact_array))

    return grad_fn


@pytest.mark.parametrize("functional,expect", [(False, 3.0), (True, 3.0 * L)])
def test_linear_gradient_map_has_its_slope_as_constant(setup, functional, expect):
    _, student, stream = setup
    params = eqx.filter(student, eqx.is_inexact_array)
    visited = jax.tree.map(lambda p: jnp.stack([p, 0.5 * p, -p]), params)
    est = ogd.estimate_lipschitz(
        student, visited, stream, jax.random.key(0), num_pairs=3, grad_fn=_linear_grad(3.0), functional=functional
    )
    np.testing.assert_allclose(est.ratios_pairs, expect, rtol=1e-12)
    np.testing.assert_allclose(est.ratios_local, expect, rtol=1e-12)
    assert float(est.lambda_c) == pytest.approx(2 * expect, rel=1e-12)


def test_population_gradient_is_the_gradient_at_the_population(setup):
    """``population=μ`` (context_size None) estimates C of θ ↦ δℓ/δθ(θ; x0, μ, y): the same ratios
    as a gradient source that substitutes μ for the sample context."""
    _, _, stream = setup
    student = cfm_jax.Transformer.init(jax.random.key(2), 2, mlp_width=0, layers=L, dtype=jnp.float64)
    mu = cfm_jax.GaussianMeasure(jnp.zeros(2), 0.3 * jnp.eye(2))
    params = eqx.filter(student, eqx.is_inexact_array)
    visited = jax.tree.map(lambda p: jnp.stack([p, 0.5 * p, -p]), params)
    at_mu = lambda m, x0, context, y: cfm_jax.loss_and_grad(m, x0, mu, y)  # noqa: E731
    key = jax.random.key(0)
    est = ogd.estimate_lipschitz(student, visited, stream, key, num_pairs=3, population=mu)
    ref = ogd.estimate_lipschitz(student, visited, stream, key, num_pairs=3, grad_fn=at_mu)
    np.testing.assert_allclose(est.ratios_pairs, ref.ratios_pairs, rtol=1e-12)
    np.testing.assert_allclose(est.ratios_local, ref.ratios_local, rtol=1e-12)
    with pytest.raises(ValueError, match="population"):
        ogd.estimate_lipschitz(student, visited, stream, key, population=jnp.eye(2))  # pyright: ignore[reportArgumentType]


def test_bad_arguments(setup):
    _, student, stream = setup
    visited = jax.tree.map(lambda p: p[None], eqx.filter(student, eqx.is_inexact_array))
    with pytest.raises(ValueError, match="num_pairs"):
        ogd.estimate_lipschitz(student, visited, stream, jax.random.key(0), num_pairs=0)
    with pytest.raises(ValueError, match="rel_perturbation"):
        ogd.estimate_lipschitz(student, visited, stream, jax.random.key(0), rel_perturbation=-1.0)
