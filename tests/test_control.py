"""cfm_jax._control: the W1-Lipschitz control field V(x, μ) = c · W1(μ, ν) · e."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax import EmpiricalMeasure
from cfm_jax._control import W1ControlField
from cfm_jax._wasserstein import wasserstein1


def test_control_field_population_fixed_point_and_lipschitz():
    """With ν = the reference, the reference system does not move; |V(μ) − V(μ')| ≤ W1(μ, μ')."""
    nu = EmpiricalMeasure(jax.random.normal(jax.random.key(4), (64, 1), jnp.float64))
    field = W1ControlField.create(nu)
    model = cfm_jax.CFM(field, {"c": jnp.ones(3)}, 1)
    sol = jax.jit(cfm_jax.forward)(model, jnp.zeros((1, 1)), nu)
    assert float(jnp.abs(sol.x1).max()) < 1e-12
    mu1 = EmpiricalMeasure(jax.random.normal(jax.random.key(5), (20, 1), jnp.float64))
    mu2 = EmpiricalMeasure(mu1.points * 1.3 + 0.2)
    q = jnp.zeros((1, 1))
    dv = float(jnp.abs(field(q, mu1, {}) - field(q, mu2, {})).max())
    assert 0 < dv <= float(wasserstein1(mu1, mu2)) + 1e-12
    with pytest.raises(ValueError, match="direction"):
        W1ControlField.create(nu, direction=jnp.zeros(2))


def test_translated_context_moves_by_the_translation():
    """In d = 1, W1(ν + t, ν) = |t| exactly: the field is c·|t|·e for a translated copy of ν."""
    nu = EmpiricalMeasure(jax.random.normal(jax.random.key(6), (30, 1), jnp.float64))
    field = W1ControlField.create(nu)
    v = field(jnp.zeros((2, 1)), EmpiricalMeasure(nu.points + 0.3, nu.weights), {"c": jnp.asarray(2.0)})
    np.testing.assert_allclose(v, 0.6, rtol=1e-10)
