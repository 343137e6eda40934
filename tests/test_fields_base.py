"""The field interface: the jax.vjp default of the local products against autodiff, SumField's sum,
and a user field without closed forms; the closed forms of every built-in field against the default."""

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest
from _problems import problem, rel

import cfm_jax
from cfm_jax import AbstractField, AttentionField, MLPField, generic_local_vjp


def _rows(seed, Q=6, T=4, d=3):
    kq, kc, kt = jax.random.split(jax.random.key(seed), 3)
    return jax.random.normal(kq, (Q, d)), jax.random.normal(kc, (Q, d)), jax.random.normal(kt, (T, d))


FIELDS = {
    "attention": AttentionField(),
    "attention[blocked]": AttentionField(chunk_size=4),
    "mlp": MLPField(),
    "sum": AttentionField() + MLPField(),
    "sum of two measure-dependent fields": AttentionField() + AttentionField(chunk_size=4),
}


@pytest.mark.parametrize("name", list(FIELDS))
def test_closed_forms_equal_the_vjp_default(name):
    """Every product (velocity, D_xVᵀc, ∂_z, ∂_log w, D_θVᵀc, probe terms), with passive rows."""
    field = FIELDS[name]
    model, _, ctx, _ = problem(5)
    th = model.layer_params(1)
    q, c, t = _rows(9)
    act = jnp.array([1.0, 1, 0, 1, 0, 1])
    a = eqx.filter_jit(lambda f, *args, **kw: f.local_vjp(*args, **kw))(field, q, ctx, th, c, active=act, targets=t)
    b = eqx.filter_jit(generic_local_vjp)(field, q, ctx, th, c, active=act, targets=t)
    for part in ("velocity", "dx", "dz", "dw", "dtargets", "phi"):
        ref = getattr(b, part)
        assert rel(getattr(a, part), ref) <= 1e-10, part
    assert rel(a.dparams, b.dparams) <= 1e-10
    assert set(a.dparams) == set(th)  # parameters a field does not read get zero cotangents


def test_local_products_against_autodiff_of_the_field():
    """The generic default itself: dz, dw and D_θVᵀc are the partials of Σ_r c_r·V(q_r, μ)."""
    model, _, ctx, _ = problem(6)
    field, th = model.field, model.layer_params(0)
    q, c, _ = _rows(3)
    f = lambda z, w, p: jnp.sum(c * field(q, cfm_jax.EmpiricalMeasure.unchecked(z, w), p))  # noqa: E731
    gz, gw, gp = jax.grad(f, argnums=(0, 1, 2))(ctx.points, ctx.weights, th)
    res = field.local_vjp(q, ctx, th, c)
    assert rel(res.dz, gz) <= 1e-12 and rel(res.dw, gw) <= 1e-12 and rel(res.dparams, gp) <= 1e-12
    assert rel(field.measure_term(q, ctx, th, c), gz) <= 1e-12
    assert rel(field.dtheta_transpose(q, ctx, th, c), gp) <= 1e-12
    # D_xVᵀc row by row
    jac = jax.vmap(jax.jacrev(lambda x: field(x[None], ctx, th)[0]))(q)
    assert rel(field.dx_transpose(q, ctx, th, c), jnp.einsum("qij,qi->qj", jac, c)) <= 1e-12


class _PlainAttention(AttentionField):
    """Attention without its closed forms: the hand adjoint falls back to the jax.vjp default."""

    def local_vjp(self, queries, measure, params, cot, *, active=None, targets=None):
        return AbstractField.local_vjp(self, queries, measure, params, cot, active=active, targets=targets)


def test_a_field_without_closed_forms_gets_identical_gradients():
    model, x0, ctx, y = problem(7)
    field = _PlainAttention(kernel=cfm_jax.XLAAttention()) + MLPField(activation=model.activation)
    user = cfm_jax.PiecewiseConstantCFM(field, model.stacked_params(), model.dim)
    _, g_closed = cfm_jax.loss_and_grad(
        cfm_jax.PiecewiseConstantCFM(model.field, model.stacked_params(), model.dim), x0, ctx, y
    )
    _, g_vjp = cfm_jax.loss_and_grad(user, x0, ctx, y)
    assert rel(g_vjp.params, g_closed.params) <= 1e-10


def test_zero_weight_atoms_contribute_nothing():
    model, _, ctx, _ = problem(8)
    th = model.layer_params(2)
    q, c, t = _rows(4)
    padded = ctx.pad_to(10)
    for field in FIELDS.values():
        a, b = field.local_vjp(q, ctx, th, c, targets=t), field.local_vjp(q, padded, th, c, targets=t)
        assert rel(b.velocity, a.velocity) <= 1e-13 and rel(b.dx, a.dx) <= 1e-13
        assert rel(b.dparams, a.dparams) <= 1e-13 and rel(b.phi, a.phi) <= 1e-13
        assert bool(jnp.isfinite(b.dw).all()) and float(jnp.abs(b.dz[7:]).max()) == 0.0


def test_a_gaussian_closed_form_is_a_type():
    """Sums of fields with a Gaussian closed form are typed as having one (GaussianSumField, from `+`);
    a sum with any other summand is a plain SumField; GaussianSumField refuses such a summand."""
    from cfm_jax import AbstractGaussianField, GaussianSumField, LinearMLPField, SumField

    closed = AttentionField() + LinearMLPField()
    assert isinstance(closed, GaussianSumField) and isinstance(closed, AbstractGaussianField)
    nested = closed + AttentionField(chunk_size=4)
    assert isinstance(nested, GaussianSumField) and len(nested.fields) == 3  # flattened
    open_ = AttentionField() + MLPField()
    assert isinstance(open_, SumField) and not isinstance(open_, AbstractGaussianField)
    assert not isinstance(MLPField(activation=jax.nn.identity), AbstractGaussianField)  # by type, not by value
    with pytest.raises(TypeError, match="MLPField has no Gaussian closed form"):
        GaussianSumField((AttentionField(), MLPField()))
    model, _, ctx, _ = problem(5)
    th = model.layer_params(1)
    q, c, _ = _rows(2)
    a = closed.local_vjp(q, ctx, th, c)
    b = SumField((AttentionField(), LinearMLPField())).local_vjp(q, ctx, th, c)
    assert rel(a.dx, b.dx) == 0.0 and rel(a.dparams, b.dparams) == 0.0
