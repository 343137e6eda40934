"""The token-wise MLP field: closed-form local products (no measure terms) against the jax.vjp default."""

import equinox as eqx
import jax
import jax.numpy as jnp
from _problems import problem, rel

from cfm_jax import MLPField, generic_local_vjp


def test_mlp_closed_forms_equal_the_vjp_default_and_have_no_measure_terms():
    model, _, ctx, _ = problem(5)
    th = model.layer_params(2)
    kq, kc = jax.random.split(jax.random.key(4))
    q, c = jax.random.normal(kq, (5, 3)), jax.random.normal(kc, (5, 3))
    act = jnp.array([1.0, 0, 1, 1, 0])
    for activation in (jax.nn.gelu, jnp.tanh, jax.nn.relu):
        field = MLPField(activation=activation)
        a = field.local_vjp(q, ctx, th, c, active=act)
        b = eqx.filter_jit(generic_local_vjp)(field, q, ctx, th, c, active=act)
        for part in ("velocity", "dx"):
            assert rel(getattr(a, part), getattr(b, part)) <= 1e-12, part
        assert rel(a.dparams, b.dparams) <= 1e-12
        assert float(jnp.abs(a.dz).max()) == 0.0 and float(jnp.abs(b.dz).max()) == 0.0
        assert float(jnp.abs(a.dparams["Q"]).max()) == 0.0  # attention parameters are not read
