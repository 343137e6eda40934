"""The empirical Lipschitz constant on analytic gradient maps (its ratios are then known exactly)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _ogd_problem import L

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


def test_bad_arguments(setup):
    _, student, stream = setup
    visited = jax.tree.map(lambda p: p[None], eqx.filter(student, eqx.is_inexact_array))
    with pytest.raises(ValueError, match="num_pairs"):
        ogd.estimate_lipschitz(student, visited, stream, jax.random.key(0), num_pairs=0)
    with pytest.raises(ValueError, match="rel_perturbation"):
        ogd.estimate_lipschitz(student, visited, stream, jax.random.key(0), rel_perturbation=-1.0)
