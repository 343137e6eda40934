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


def test_the_affine_mlp_is_the_mlp_with_a_linear_activation():
    """LinearMLPField (what Transformer(activation=linear) builds) equals MLPField(activation=linear):
    velocity and every local product; its closed form at a Gaussian is that affine map."""
    import cfm_jax
    from cfm_jax import LinearMLPField

    model, _, ctx, _ = problem(6)
    th = model.layer_params(1)
    kq, kc = jax.random.split(jax.random.key(7))
    q, c = jax.random.normal(kq, (5, 3)), jax.random.normal(kc, (5, 3))
    a = LinearMLPField().local_vjp(q, ctx, th, c)
    b = MLPField(activation=jax.nn.identity).local_vjp(q, ctx, th, c)
    for part in ("velocity", "dx", "dz", "dw"):
        assert rel(getattr(a, part), getattr(b, part)) <= 1e-14, part
    assert rel(a.dparams, b.dparams) <= 1e-14
    cst, M = LinearMLPField().gaussian_affine(th, jnp.zeros(3), jnp.eye(3))
    assert rel(cst + q @ M.T, a.velocity) <= 1e-14
    linear_model = cfm_jax.Transformer(**model.stacked_params(), activation=jax.nn.identity)
    assert isinstance(linear_model.field, cfm_jax.GaussianSumField)
