"""The rows of ``tests/test_contract.py``: one function per public name, registered with :func:`row`.

Shapes are tiny and shared (d = 2, B = 2, n = 5, L = 2, H = 1, m = 3, float64): every compiled
entry point compiles once per structure, so rows reuse :func:`tiny` rather than build their own.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import given, settings, strategies as st

import cfm_jax
from cfm_jax import chaos, distributed, ogd, stats, stochastic

PUBLIC_MODULES = (
    "cfm_jax",
    "cfm_jax.chaos",
    "cfm_jax.distributed",
    "cfm_jax.ogd",
    "cfm_jax.stats",
    "cfm_jax.stochastic",
)

D, B, N, L = 2, 2, 5, 2
F64 = jnp.float64
#: few examples: each property row stays well under a second
PROP = settings(max_examples=8, deadline=None)
#: a property whose every new n compiles a new program
PROP_COMPILED = settings(max_examples=3, deadline=None)
#: rows of tens of seconds on a 2-core CPU (several OGD programs): `pytest -m slow`
SLOW = (pytest.mark.slow,)


@dataclasses.dataclass(frozen=True)
class Row:
    fn: Callable[[], None]
    marks: tuple = ()


ROWS: dict[str, Row] = {}


def row(*names: str, marks: tuple = ()):
    """Register the decorated function as the row of every name in ``names`` (qualified names;
    ``name::what`` is a further row of ``name``, e.g. one that is expected to fail)."""

    def register(fn):
        for name in names:
            assert name not in ROWS, f"two rows for {name}"
            ROWS[name] = Row(fn, marks)
        return fn

    return register


def same(a, b, **tol) -> None:
    """Two pytrees of arrays equal leaf by leaf (exactly unless a tolerance is given)."""
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(la) == len(lb)
    for u, v in zip(la, lb):
        if tol:
            np.testing.assert_allclose(np.asarray(u), np.asarray(v), **tol)
        else:
            np.testing.assert_array_equal(np.asarray(u), np.asarray(v))


def keys_agree(draw: Callable, bad_name: str = "key") -> None:
    """``draw(key)`` gives the same numbers for a typed and a legacy key of one seed; an int seed
    is refused naming ``bad_name``."""
    same(draw(jax.random.key(7)), draw(jax.random.PRNGKey(7)))
    with pytest.raises(TypeError, match=f"`{bad_name}`"):
        draw(7)


@functools.cache
def tiny():
    """(model, x0 (B, d), context (n, d) non-uniform, y (B, d)), float64."""
    km, kx, kz, kw, ky = jax.random.split(jax.random.key(0), 5)
    model = cfm_jax.Transformer.init(km, D, heads=1, mlp_width=3, layers=L, dtype=F64)
    w = jax.random.uniform(kw, (N,), F64, 0.5, 1.5)
    ctx = cfm_jax.EmpiricalMeasure(jax.random.normal(kz, (N, D), F64), w / w.sum())
    return model, jax.random.normal(kx, (B, D), F64), ctx, jax.random.normal(ky, (B, D), F64)


@functools.cache
def tiny_gaussian():
    """(attention-only model (a Gaussian closed form), the standard Gaussian context)."""
    model = cfm_jax.Transformer.init(jax.random.key(1), D, heads=1, mlp_width=0, layers=L, dtype=F64)
    return model, cfm_jax.GaussianMeasure(jnp.zeros(D), jnp.eye(D))


@functools.cache
def tiny_stream():
    """A teacher-student stream of the tiny shapes (n = N)."""
    teacher = cfm_jax.Transformer.init(jax.random.key(2), D, heads=1, mlp_width=3, layers=L, dtype=F64)
    return cfm_jax.TeacherStudentStream(
        teacher, cfm_jax.isotropic_gaussian(D), jax.random.key(3), batch=B, context_size=N
    )


def i64(n: int) -> typing.Any:
    """``np.int64(n)``: a NumPy integer where the docs say int (typed Any for the checker)."""
    return np.int64(n)


def nan_at(x, index=(0, 0)):
    return jnp.asarray(x).at[index].set(jnp.nan)


# --------------------------------------------------------------------------------------------
# Types, abstract classes, constants: what each is (a subclass relation, a value, a field list).
# --------------------------------------------------------------------------------------------


@row("cfm_jax.AbstractCFM", "cfm_jax.AbstractPiecewiseConstantCFM")
def _abstract_paths():
    model = tiny()[0]
    assert isinstance(model, cfm_jax.AbstractPiecewiseConstantCFM) and isinstance(model, cfm_jax.AbstractCFM)
    assert issubclass(cfm_jax.PiecewiseConstantCFM, cfm_jax.AbstractPiecewiseConstantCFM)
    assert issubclass(cfm_jax.PiecewiseLinearCFM, cfm_jax.AbstractCFM)
    assert not issubclass(cfm_jax.PiecewiseLinearCFM, cfm_jax.AbstractPiecewiseConstantCFM)
    with pytest.raises(TypeError):
        cfm_jax.AbstractCFM()  # pyright: ignore[reportAbstractUsage, reportCallIssue]


@row("cfm_jax.AbstractField", "cfm_jax.AbstractGaussianField")
def _abstract_fields():
    for f in (cfm_jax.AttentionField, cfm_jax.LinearMLPField, cfm_jax.GaussianSumField):
        assert issubclass(f, cfm_jax.AbstractGaussianField) and issubclass(f, cfm_jax.AbstractField)
    for f in (cfm_jax.MLPField, cfm_jax.SumField, cfm_jax.W1ControlField):
        assert issubclass(f, cfm_jax.AbstractField) and not issubclass(f, cfm_jax.AbstractGaussianField)
    with pytest.raises(TypeError):
        cfm_jax.AbstractField()  # pyright: ignore[reportAbstractUsage]


@row("cfm_jax.AbstractHandAdjoint", "cfm_jax.AbstractMemory")
def _abstract_adjoints():
    assert issubclass(cfm_jax.DiscreteAdjoint, cfm_jax.AbstractHandAdjoint)
    assert issubclass(cfm_jax.ContinuousAdjoint, cfm_jax.AbstractHandAdjoint)
    for m in (cfm_jax.StoreAll, cfm_jax.StoreEvery, cfm_jax.Recompute, cfm_jax.Backsolve):
        assert issubclass(m, cfm_jax.AbstractMemory)


@row("cfm_jax.AbstractStream")
def _abstract_stream():
    for s in (cfm_jax.ArrayStream, cfm_jax.FunctionStream, cfm_jax.TeacherStudentStream):
        assert issubclass(s, cfm_jax.AbstractStream)
    assert tiny_stream().length is None


@row("cfm_jax.HeavyTailWarning")
def _heavy_tail_warning():
    assert issubclass(cfm_jax.HeavyTailWarning, UserWarning)


@row("cfm_jax.chaos", "cfm_jax.distributed", "cfm_jax.ogd", "cfm_jax.stats", "cfm_jax.stochastic")
def _subpackages():
    # a subpackage listed in cfm_jax.__all__ is a module whose own names have rows of their own
    for m in (chaos, distributed, ogd, stats, stochastic):
        assert inspect.ismodule(m) and m.__name__ in PUBLIC_MODULES and m.__all__


# --------------------------------------------------------------------------------------------
# Measures
# --------------------------------------------------------------------------------------------


@row("cfm_jax.EmpiricalMeasure")
def _empirical_measure():
    pts = np.arange(6.0).reshape(3, 2)
    a, b = cfm_jax.EmpiricalMeasure(pts), cfm_jax.EmpiricalMeasure(jnp.asarray(pts, jnp.float32))
    assert a.size == 3 and a.dim == 2 and b.points.dtype == jnp.float32
    np.testing.assert_allclose(a.weights, np.full(3, 1 / 3))
    # a pytree: jit and vmap map over it
    assert jax.jit(lambda m: m.mean)(a).shape == (2,)
    with pytest.raises(ValueError, match="`points`"):
        cfm_jax.EmpiricalMeasure(np.zeros(3))
    with pytest.raises(eqx.EquinoxRuntimeError, match="`weights`"):  # a value: the one value check
        cfm_jax.EmpiricalMeasure(pts, np.array([0.5, 0.6, -0.1]))


@row("cfm_jax.GaussianMeasure")
def _gaussian_measure():
    mu = cfm_jax.GaussianMeasure(np.zeros(2), np.eye(2))
    assert mu.dim == 2
    keys_agree(lambda k: mu.sample(k, 4))
    assert mu.sample(jax.random.key(0), i64(4)).shape == (4, 2)
    with pytest.raises(eqx.EquinoxRuntimeError, match="`cov`"):  # a value: the one value check
        cfm_jax.GaussianMeasure(np.zeros(2), -np.eye(2))
    with pytest.raises(ValueError, match="`mean`"):
        cfm_jax.GaussianMeasure(np.zeros((2, 2)), np.eye(2))
    with pytest.raises(ValueError, match="`n`"):
        mu.sample(jax.random.key(0), 0)


@row("cfm_jax.as_measure")
def _as_measure():
    m = cfm_jax.as_measure(np.ones((3, 2)))
    assert isinstance(m, cfm_jax.EmpiricalMeasure) and cfm_jax.as_measure(m) is m
    with pytest.raises(ValueError, match="`points`"):
        cfm_jax.as_measure(np.ones(3))


@row("cfm_jax.split_atom")
def _split_atom():
    ctx = tiny()[2]
    s = cfm_jax.split_atom(ctx, i64(1), 0.25)
    assert s.size == N + 1
    np.testing.assert_allclose(float(s.weights.sum()), 1.0)
    with pytest.raises(ValueError, match="`index`"):
        cfm_jax.split_atom(ctx, N)
    with pytest.raises(ValueError, match="`fraction`"):
        cfm_jax.split_atom(ctx, 0, 1.0)
    with pytest.raises(ValueError, match="`measure`"):
        cfm_jax.split_atom(np.ones((3, 2)), 0)  # pyright: ignore[reportArgumentType]


# --------------------------------------------------------------------------------------------
# Populations and samplers: any n >= 1 gives (n, d), n < 1 is refused naming `n`
# --------------------------------------------------------------------------------------------


POPULATIONS = {
    "gaussian": lambda: cfm_jax.isotropic_gaussian(D),
    "uniform_sphere": lambda: cfm_jax.uniform_sphere(D),
    "subspace_gaussian": lambda: cfm_jax.subspace_gaussian(3, 1),
    "embedded_sphere": lambda: cfm_jax.embedded_sphere(3, 1),
    "gaussian_mixture": lambda: cfm_jax.gaussian_mixture(np.array([[-2.0, 0.0], [2.0, 0.0]])),
}


def _population_row(name: str, bad: Callable[[], object], bad_name: str):
    @PROP_COMPILED
    @given(n=st.integers(1, 8), qmc=st.booleans())
    def shapes(n, qmc):
        pop = POPULATIONS[name]()
        x = pop(jax.random.key(0), i64(n), qmc=qmc)
        assert x.shape == (n, pop(jax.random.key(0), 1).shape[1])
        assert bool(jnp.all(jnp.isfinite(x)))

    @PROP
    @given(n=st.integers(-3, 0))
    def refused(n):
        with pytest.raises(ValueError, match="`n`"):
            POPULATIONS[name]()(jax.random.key(0), n)

    def check():
        shapes()
        refused()
        keys_agree(lambda k: POPULATIONS[name]()(k, 4))
        with pytest.raises(ValueError, match=f"`{bad_name}`"):
            bad()

    return check


row("cfm_jax.isotropic_gaussian")(
    _population_row("gaussian", lambda: cfm_jax.isotropic_gaussian(D, scale=0.0), "scale")
)
row("cfm_jax.uniform_sphere")(_population_row("uniform_sphere", lambda: cfm_jax.uniform_sphere(0), "dim"))
row("cfm_jax.subspace_gaussian")(
    _population_row("subspace_gaussian", lambda: cfm_jax.subspace_gaussian(2, 3), "intrinsic_dim")
)
row("cfm_jax.embedded_sphere")(_population_row("embedded_sphere", lambda: cfm_jax.embedded_sphere(2, 2), "dim"))
row("cfm_jax.gaussian_mixture")(
    _population_row("gaussian_mixture", lambda: cfm_jax.gaussian_mixture(np.zeros(2)), "means")
)


@row("cfm_jax.make_population")
def _make_population():
    for name in POPULATIONS:
        k = i64(1) if name in ("subspace_gaussian", "embedded_sphere") else None
        pop = cfm_jax.make_population(name, 3, k)  # pyright: ignore[reportArgumentType]  (a PopulationName)
        assert pop(jax.random.key(0), 4).shape == (4, 3)
    with pytest.raises(ValueError, match="`name`"):
        cfm_jax.make_population("cauchy", 2)  # pyright: ignore[reportArgumentType]


def _sampler_row(fn):
    @PROP_COMPILED
    @given(n=st.integers(1, 8), d=st.integers(1, 3))
    def shapes(n, d):
        assert fn(jax.random.key(0), i64(n), d).shape == (n, d)

    @PROP
    @given(n=st.integers(-3, 0))
    def refused(n):
        with pytest.raises(ValueError, match="`n`"):
            fn(jax.random.key(0), n, 2)

    def check():
        shapes()
        refused()
        keys_agree(lambda k: fn(k, 4, 2))
        assert fn(jax.random.key(0), 4, 2, jnp.float32).dtype == jnp.float32
        assert fn(jax.random.key(0), 4, 2, jnp.float64).dtype == jnp.float64
        with pytest.raises(ValueError, match="`d`"):
            fn(jax.random.key(0), 4, 0)

    return check


row("cfm_jax.sobol")(_sampler_row(cfm_jax.sobol))
row("cfm_jax.sobol_normal")(_sampler_row(cfm_jax.sobol_normal))


@row("cfm_jax.ball_probes")
def _ball_probes():
    p = cfm_jax.ball_probes(jax.random.key(0), i64(6), 2, 0.5, jnp.float32)
    assert p.shape == (6, 2) and p.dtype == jnp.float32 and bool(jnp.all(jnp.linalg.norm(p, axis=1) <= 0.5))
    keys_agree(lambda k: cfm_jax.ball_probes(k, 4, 2))
    with pytest.raises(ValueError, match="`num`"):
        cfm_jax.ball_probes(jax.random.key(0), 0, 2)
    with pytest.raises(ValueError, match="`num`"):
        cfm_jax.ball_probes(jax.random.key(0), 2.5, 2)  # pyright: ignore[reportArgumentType]  # bad on purpose
    with pytest.raises(eqx.EquinoxRuntimeError, match="`radius`"):
        cfm_jax.ball_probes(jax.random.key(0), 3, 2, -1.0)


@row("cfm_jax.grid_probes")
def _grid_probes():
    p = cfm_jax.grid_probes(2, 1.0, i64(3))
    assert p.ndim == 2 and p.shape[1] == 2 and bool(jnp.all(jnp.linalg.norm(p, axis=1) <= 1.0 + 1e-12))
    with pytest.raises(ValueError, match="`per_axis`"):
        cfm_jax.grid_probes(2, 1.0, 1)


# --------------------------------------------------------------------------------------------
# Models and fields
# --------------------------------------------------------------------------------------------


@row("cfm_jax.Transformer")
def _transformer():
    model = tiny()[0]
    assert (model.num_layers, model.dim) == (L, D)
    # typed and legacy keys: the same weights
    keys_agree(lambda k: cfm_jax.Transformer.init(k, D, heads=1, mlp_width=3, layers=i64(L), dtype=F64))
    m32 = cfm_jax.Transformer.init(jax.random.key(0), D, layers=L, dtype=jnp.float32)
    assert m32.Q.dtype == jnp.float32
    with pytest.raises(ValueError, match="`dim`"):
        cfm_jax.Transformer.init(jax.random.key(0), 0)
    with pytest.raises(ValueError, match="`layers`"):
        cfm_jax.Transformer.init(jax.random.key(0), D, layers=0)
    with pytest.raises(ValueError, match="`V`"):
        cfm_jax.Transformer(Q=model.Q, K=model.K, V=jnp.ones((L, 1, 3, 3)))


def _mlp_params(layers):
    p = tiny()[0].stacked_params()
    return {k: jnp.concatenate([p[k]] * 2)[:layers] for k in ("W1", "b1", "W2", "b2")}


@row("cfm_jax.PiecewiseConstantCFM")
def _cfm():
    model = tiny()[0]
    cfm = cfm_jax.PiecewiseConstantCFM(model.field, model.stacked_params(), i64(D))
    same(cfm_jax.forward(cfm, tiny()[1], tiny()[2]).x1, cfm_jax.forward(model, tiny()[1], tiny()[2]).x1, rtol=1e-12)
    with pytest.raises(ValueError, match="`field`"):
        cfm_jax.PiecewiseConstantCFM(3, model.stacked_params(), D)  # pyright: ignore[reportArgumentType]


@row("cfm_jax.PiecewiseConstantCFM::dim")
def _cfm_dim():
    model = tiny()[0]
    with pytest.raises(ValueError, match="`dim`"):
        cfm_jax.PiecewiseConstantCFM(model.field, model.stacked_params(), 3)


@row("cfm_jax.PiecewiseLinearCFM")
def _piecewise_linear():
    m = cfm_jax.PiecewiseLinearCFM(cfm_jax.MLPField(), _mlp_params(L + 1), D)
    assert m.num_layers == L and not m.piecewise_constant
    assert cfm_jax.forward(m, tiny()[1], tiny()[2]).x1.shape == (B, D)
    with pytest.raises(ValueError, match="`params`"):
        cfm_jax.PiecewiseLinearCFM(cfm_jax.MLPField(), _mlp_params(1), D)


@row("cfm_jax.AttentionField")
def _attention_field():
    model, x0, ctx, _ = tiny()
    p = model.layer_params(0)
    dense = cfm_jax.AttentionField(chunk_size=None)(x0, ctx, p)
    same(cfm_jax.AttentionField(chunk_size=i64(1), key_chunk_size=2)(x0, ctx, p), dense, rtol=1e-12)
    with pytest.raises(ValueError, match="`chunk_size`"):
        cfm_jax.AttentionField(chunk_size=0)
    with pytest.raises(ValueError, match="`key_chunk_size`"):
        cfm_jax.AttentionField(key_chunk_size=-1)


@row("cfm_jax.XLAAttention", "cfm_jax.PallasAttention", "cfm_jax.AbstractAttentionKernel")
def _attention_kernels():
    model, x0, ctx, _ = tiny()
    p = model.layer_params(0)
    dense = cfm_jax.AttentionField(chunk_size=None)(x0, ctx, p)
    for kernel in (
        cfm_jax.XLAAttention(),
        cfm_jax.XLAAttention(i64(1), 2),
        cfm_jax.PallasAttention(block_q=16, block_k=16),
    ):
        assert isinstance(kernel, cfm_jax.AbstractAttentionKernel)
        same(cfm_jax.AttentionField(kernel=kernel)(x0, ctx, p), dense, rtol=1e-10)
    assert cfm_jax.AttentionField().attention_kernel() == cfm_jax.XLAAttention()  # the default
    with pytest.raises(ValueError, match="`precision`"):
        cfm_jax.PallasAttention(precision="bf16")
    with pytest.raises(ValueError, match="`kernel`"):
        cfm_jax.AttentionField(kernel="pallas")  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError):
        cfm_jax.AbstractAttentionKernel()  # pyright: ignore[reportAbstractUsage]


@row("cfm_jax.MLPField", "cfm_jax.LinearMLPField")
def _mlp_fields():
    model, x0, ctx, _ = tiny()
    p = model.layer_params(0)
    same(cfm_jax.MLPField(activation=jax.nn.identity)(x0, ctx, p), cfm_jax.LinearMLPField()(x0, ctx, p))
    affine = cfm_jax.Transformer.init(jax.random.key(0), D, heads=1, mlp_width=3, layers=L, activation=jax.nn.identity)
    assert isinstance(affine.field, cfm_jax.AbstractGaussianField)  # jax.nn.identity declares the affine MLP
    with pytest.raises(ValueError, match="`activation`"):
        cfm_jax.MLPField(activation=3)  # pyright: ignore[reportArgumentType]


@row("cfm_jax.SumField", "cfm_jax.GaussianSumField")
def _sum_fields():
    model, x0, ctx, _ = tiny()
    p = model.layer_params(0)
    a, m = cfm_jax.AttentionField(), cfm_jax.MLPField()
    assert isinstance(a + m, cfm_jax.SumField) and isinstance(a + cfm_jax.LinearMLPField(), cfm_jax.GaussianSumField)
    same(cfm_jax.SumField([a, m])(x0, ctx, p), a(x0, ctx, p) + m(x0, ctx, p), rtol=1e-12)
    with pytest.raises(ValueError, match="`fields`"):
        cfm_jax.SumField([])
    with pytest.raises(TypeError, match="`fields`"):
        cfm_jax.SumField([3])
    with pytest.raises(TypeError, match="MLPField"):
        cfm_jax.GaussianSumField([a, m])


@row("cfm_jax.W1ControlField")
def _w1_control_field():
    nu = np.linspace(-1.0, 1.0, 6).reshape(3, 2)
    f = cfm_jax.W1ControlField.create(nu)
    v = f(jnp.zeros((1, 2)), cfm_jax.EmpiricalMeasure(nu + 1.0), {})
    assert v.shape == (1, 2) and bool(jnp.all(jnp.isfinite(v)))
    with pytest.raises(eqx.EquinoxRuntimeError, match="`relative_epsilon`"):
        cfm_jax.W1ControlField.create(nu, relative_epsilon=-1.0)


@row("cfm_jax.LocalVJP", "cfm_jax.generic_local_vjp")
def _local_vjp():
    model, x0, ctx, _ = tiny()
    p, cot = model.layer_params(0), jnp.ones((B, D))
    mine = cfm_jax.MLPField().local_vjp(x0, ctx, p, cot)
    generic = cfm_jax.generic_local_vjp(cfm_jax.MLPField(), x0, ctx, p, cot)
    assert isinstance(generic, cfm_jax.LocalVJP)
    same(generic.dx, mine.dx, rtol=1e-10)
    with pytest.raises(ValueError, match="`cot`"):
        cfm_jax.generic_local_vjp(cfm_jax.MLPField(), x0, ctx, p, jnp.ones((3, D)))


# --------------------------------------------------------------------------------------------
# The flow and its gradients (compiled; jit/vmap/grad-able as documented)
# --------------------------------------------------------------------------------------------


@row("cfm_jax.forward", "cfm_jax.FlowSolution", "cfm_jax.SaveAt")
def _forward():
    model, x0, ctx, _ = tiny()
    sol = cfm_jax.forward(model, x0, ctx, saveat=cfm_jax.SaveAt(layers=True))
    assert isinstance(sol, cfm_jax.FlowSolution) and sol.x1.shape == (B, D)
    assert sol.xs is not None and sol.xs.shape == (L + 1, B, D)
    # NumPy inputs, an (n, d) array context, a NumPy integer `steps`
    same(cfm_jax.forward(model, typing.cast(typing.Any, np.asarray(x0)), ctx, steps=i64(L)).x1, sol.x1)
    # jit, filter_jit, vmap over tokens, grad in the tokens: the same numbers
    same(jax.jit(lambda x: cfm_jax.forward(model, x, ctx).x1)(x0), sol.x1, rtol=1e-12)
    same(eqx.filter_jit(lambda m, x: cfm_jax.forward(m, x, ctx).x1)(model, x0), sol.x1, rtol=1e-12)
    same(jax.vmap(lambda x: cfm_jax.forward(model, x, ctx).x1)(x0), sol.x1, rtol=1e-12)
    g = jax.grad(lambda x: cfm_jax.forward(model, x, ctx).x1.sum())(x0)
    assert g.shape == (B, D) and bool(jnp.all(jnp.isfinite(g)))
    # float32 in, float32 out
    m32 = cfm_jax.Transformer.init(jax.random.key(0), D, heads=1, mlp_width=3, layers=L, dtype=jnp.float32)
    assert cfm_jax.forward(m32, x0.astype(jnp.float32), ctx.points.astype(jnp.float32)).x1.dtype == jnp.float32
    with pytest.raises(Exception, match="`x0`"):
        cfm_jax.forward(model, nan_at(x0), ctx)
    with pytest.raises(ValueError, match="`x0`"):
        cfm_jax.forward(model, x0[:, :1], ctx)
    for junk in ("x0", None, {"x0": x0}):  # not arrays of numbers: the argument named, not JAX's conversion
        with pytest.raises(TypeError, match="`x0` must be an array of numbers"):
            cfm_jax.forward(model, junk, ctx)  # pyright: ignore[reportArgumentType]
        with pytest.raises(TypeError, match="`context` must be an array of numbers"):
            cfm_jax.forward(model, x0, junk)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="`steps`"):
        cfm_jax.forward(model, x0, ctx, steps=3)
    with pytest.raises(ValueError, match="`adjoint`"):
        cfm_jax.forward(model, x0, ctx, adjoint=3)  # pyright: ignore[reportArgumentType]


@row("cfm_jax.loss_and_grad", "cfm_jax.mean_squared_loss")
def _loss_and_grad():
    model, x0, ctx, y = tiny()
    loss, grads = cfm_jax.loss_and_grad(model, x0, ctx, y)
    assert type(grads) is type(model)
    np.testing.assert_allclose(loss, cfm_jax.mean_squared_loss(cfm_jax.forward(model, x0, ctx).x1, y), rtol=1e-12)
    # the hand adjoint's gradient is autodiff's through the same Euler scheme
    auto = cfm_jax.loss_and_grad(model, x0, ctx, y, adjoint=diffrax.RecursiveCheckpointAdjoint())[1]
    same(eqx.filter(grads, eqx.is_array), eqx.filter(auto, eqx.is_array), rtol=1e-9, atol=1e-12)
    with pytest.raises(Exception, match="`y`"):
        cfm_jax.loss_and_grad(model, x0, ctx, nan_at(y))
    with pytest.raises(ValueError, match="`y`"):
        cfm_jax.loss_and_grad(model, x0, ctx, y[:, :1])
    with pytest.raises(TypeError, match="`y` must be an array of numbers"):
        cfm_jax.loss_and_grad(model, x0, ctx, "y")  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="`y`"):
        cfm_jax.mean_squared_loss(x0, y[:, :1])
    with pytest.raises(ValueError, match="`loss`"):
        cfm_jax.loss_and_grad(model, x0, ctx, y, loss=3)  # pyright: ignore[reportArgumentType]


@row("cfm_jax.functional_gradient")
def _functional_gradient():
    model, x0, ctx, y = tiny()
    grads = cfm_jax.loss_and_grad(model, x0, ctx, y)[1]
    fg = cfm_jax.functional_gradient(model, grads)
    same(typing.cast(typing.Any, fg).Q, L * grads.Q)
    with pytest.raises(ValueError, match="`grads`"):
        cfm_jax.functional_gradient(model, 3)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="`model`"):
        cfm_jax.functional_gradient(3, grads)  # pyright: ignore[reportArgumentType]


@row("cfm_jax.DiscreteAdjoint", "cfm_jax.StoreAll", "cfm_jax.StoreEvery", "cfm_jax.Recompute", marks=SLOW)
def _discrete_adjoint():
    model, x0, ctx, y = tiny()
    ref = cfm_jax.loss_and_grad(model, x0, ctx, y)[1].Q
    for memory in (cfm_jax.StoreAll(), cfm_jax.StoreEvery(2), cfm_jax.Recompute()):
        g = cfm_jax.loss_and_grad(model, x0, ctx, y, adjoint=cfm_jax.DiscreteAdjoint(memory=memory))[1]
        same(g.Q, ref, rtol=1e-10, atol=1e-14)
    with pytest.raises(ValueError, match="`memory`"):
        cfm_jax.loss_and_grad(model, x0, ctx, y, adjoint=cfm_jax.DiscreteAdjoint(memory=cfm_jax.StoreEvery(0)))
    with pytest.raises(ValueError, match="`memory`"):
        cfm_jax.loss_and_grad(model, x0, ctx, y, adjoint=cfm_jax.DiscreteAdjoint(memory=cfm_jax.Backsolve()))


@row("cfm_jax.StoreEvery::numpy-int")
def _store_every_numpy_int():
    model, x0, ctx, y = tiny()
    # a batch of one: a structure no other row compiles, so the check runs at this trace (a program
    # cached for StoreEvery(2) would be reused for the equal, equally hashed StoreEvery(i64(2)))
    adjoint = cfm_jax.DiscreteAdjoint(memory=cfm_jax.StoreEvery(i64(2)))
    cfm_jax.loss_and_grad(model, x0[:1], ctx, y[:1], adjoint=adjoint)


@row("cfm_jax.ContinuousAdjoint", "cfm_jax.Backsolve")
def _continuous_adjoint():
    model, x0, ctx, y = tiny()
    for memory in (cfm_jax.StoreEvery(1), cfm_jax.Backsolve()):
        g = cfm_jax.loss_and_grad(model, x0, ctx, y, adjoint=cfm_jax.ContinuousAdjoint(memory=memory))[1]
        assert bool(jnp.all(jnp.isfinite(g.Q)))
    with pytest.raises(ValueError, match="`memory`"):
        cfm_jax.loss_and_grad(model, x0, ctx, y, adjoint=cfm_jax.ContinuousAdjoint(memory=cfm_jax.StoreAll()))


@row("cfm_jax.default_adjoint")
def _default_adjoint():
    assert isinstance(cfm_jax.default_adjoint(), cfm_jax.DiscreteAdjoint)
    adaptive = cfm_jax.default_adjoint(diffrax.Tsit5(), diffrax.PIDController(rtol=1e-6, atol=1e-6))
    assert isinstance(adaptive, diffrax.RecursiveCheckpointAdjoint)


@row("cfm_jax.default_adjoint::bad-solver")
def _default_adjoint_bad_solver():
    with pytest.raises(ValueError, match="`solver`"):
        cfm_jax.default_adjoint(3)  # pyright: ignore[reportArgumentType]


@row("cfm_jax.token_adjoint")
def _token_adjoint():
    model, x0, ctx, y = tiny()
    sol, ps = cfm_jax.token_adjoint(model, x0, ctx, y)
    assert ps.shape == (L + 1, B, D) and sol.ts is not None
    same(ps, cfm_jax.adjoint_trajectories(model, x0, ctx, y).ps, rtol=1e-10, atol=1e-14)
    with pytest.raises(ValueError, match="`y`"):
        cfm_jax.token_adjoint(model, x0, ctx, y[:, :1])
    with pytest.raises(Exception, match="`x0`"):
        cfm_jax.token_adjoint(model, nan_at(x0), ctx, y)


@row("cfm_jax.adjoint_trajectories", "cfm_jax.AdjointSolution", "cfm_jax.probe_gradients")
def _adjoint_trajectories():
    model, x0, ctx, y = tiny()
    probes = np.zeros((3, D))
    sol = cfm_jax.adjoint_trajectories(model, x0, ctx, y, probes=probes)
    assert isinstance(sol, cfm_jax.AdjointSolution) and sol.a.shape == (L + 1, N, D)
    assert sol.probe_grads is not None and sol.probe_grads.shape == (L + 1, 3, D)
    ss, pg, pv = cfm_jax.probe_gradients(model, x0, ctx, y, probes)
    same(pg, sol.probe_grads)
    with pytest.raises(ValueError, match="`probes`"):
        cfm_jax.adjoint_trajectories(model, x0, ctx, y, probes=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="`probes`"):
        cfm_jax.probe_gradients(model, x0, ctx, y, np.zeros((2, 3)))


@row("cfm_jax.forward::gaussian")
def _forward_gaussian():
    """forward on a GaussianMeasure: the exact infinite-context flow, differentiable in the law."""
    model, mu = tiny_gaussian()
    x0, y = tiny()[1], tiny()[3]
    sol = cfm_jax.forward(model, x0, mu)
    assert isinstance(sol.context, cfm_jax.GaussianMeasure) and sol.x1.shape == (B, D)
    g = jax.grad(lambda m: cfm_jax.forward(model, x0, cfm_jax.GaussianMeasure(m, mu.cov)).x1.sum())(mu.mean)
    assert g.shape == (D,)
    assert cfm_jax.token_adjoint(model, x0, mu, y)[1].shape == (L + 1, B, D)
    with pytest.raises(TypeError, match="Gaussian closed form"):
        cfm_jax.forward(tiny()[0], x0, mu)


@row("cfm_jax.attention_output", "cfm_jax.attention_output_moments")
def _attention_output():
    model, mu = tiny_gaussian()
    params, x0, ctx = model.layer_params(0), tiny()[1], tiny()[2]
    np_params = {k: np.asarray(v) for k, v in params.items()}
    same(
        cfm_jax.attention_output(np_params, np.asarray(x0), np.asarray(ctx.points)),
        cfm_jax.attention_output(params, x0, ctx.points),
    )
    # the default scale 1/√d is folded into Q; scale=1 is the library's field
    folded = dict(params, Q=params["Q"] / np.sqrt(D))
    same(cfm_jax.attention_output(params, x0, mu), cfm_jax.attention_output(folded, x0, mu, scale=1.0), rtol=1e-13)
    f32 = jax.tree.map(lambda a: a.astype(jnp.float32), params)
    assert cfm_jax.attention_output(f32, x0.astype(jnp.float32), ctx.points.astype(jnp.float32)).dtype == jnp.float32
    same(jax.jit(cfm_jax.attention_output)(params, x0, ctx), cfm_jax.attention_output(params, x0, ctx), rtol=1e-13)
    rows = jax.vmap(lambda x: cfm_jax.attention_output(params, x, mu))(x0)
    same(rows, cfm_jax.attention_output(params, x0, mu), rtol=1e-13)
    mean, cov = cfm_jax.attention_output_moments(params, mu)
    assert mean.shape == (D,) and cov.shape == (D, D)
    g = jax.grad(lambda m: cfm_jax.attention_output_moments(params, cfm_jax.GaussianMeasure(m, mu.cov))[0].sum())(
        mu.mean
    )
    assert g.shape == (D,)
    with pytest.raises(eqx.EquinoxRuntimeError, match="`scale`"):
        cfm_jax.attention_output(params, x0, mu, scale=0.0)
    with pytest.raises(ValueError, match='`params`: "Q" must have shape'):
        cfm_jax.attention_output({k: a[..., :1] for k, a in params.items()}, x0, mu)
    with pytest.raises(ValueError, match="`params`"):
        cfm_jax.attention_output_moments({"Q": params["Q"]}, ctx)
    with pytest.raises(ValueError, match="`x`"):
        cfm_jax.attention_output(params, np.ones(3), mu)


@row("cfm_jax.attention_regime", "cfm_jax.AttentionRegime", "cfm_jax.warn_if_heavy_tailed")
def _attention_regime():
    model, x0, ctx, _ = tiny()
    reg = cfm_jax.attention_regime(model, ctx, x0)
    assert isinstance(reg, cfm_jax.AttentionRegime) and reg.rho.shape == (L, 1)
    gm, mu = tiny_gaussian()
    vm = jax.vmap(lambda x: cfm_jax.attention_regime(gm, mu, x))(jnp.stack([x0, x0]))
    assert vm.rho.shape == (2, L, 1)
    assert isinstance(cfm_jax.warn_if_heavy_tailed(reg, i64(10**9)), bool)
    with pytest.raises(ValueError, match="`queries`"):
        cfm_jax.attention_regime(model, ctx, jnp.ones(3))
    with pytest.raises(ValueError, match="`n`"):
        cfm_jax.warn_if_heavy_tailed(reg, n=0)
    with pytest.raises(ValueError, match="`regime`"):
        cfm_jax.warn_if_heavy_tailed(3)  # pyright: ignore[reportArgumentType]


@row("cfm_jax.wasserstein1")
def _wasserstein1():
    a, b = np.array([[0.0], [1.0]]), np.array([[0.5], [2.0]])
    np.testing.assert_allclose(cfm_jax.wasserstein1(a, b), 0.75, rtol=1e-12)
    np.testing.assert_allclose(jax.jit(cfm_jax.wasserstein1)(jnp.asarray(a), jnp.asarray(b)), 0.75, rtol=1e-12)
    two = cfm_jax.wasserstein1(tiny()[2], tiny()[2].points + 1.0, method="exact")
    assert float(two) > 0
    with pytest.raises(ValueError, match="`method`"):
        cfm_jax.wasserstein1(a, b, method="foo")  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="`mu`"):
        cfm_jax.wasserstein1(a, np.ones((2, 2)))


@row("cfm_jax.compiled")
def _compiled():
    model, x0, ctx = tiny()[:3]

    @cfm_jax.compiled
    def step(m, x):
        return eqx.filter_value_and_grad(lambda m: jnp.sum(cfm_jax.forward(m, x, ctx).x1))(m)

    value, grads = step(model, x0)
    same(value, jnp.sum(cfm_jax.forward(model, x0, ctx).x1), rtol=1e-12)
    assert jax.tree.structure(eqx.filter(grads, eqx.is_inexact_array)) == jax.tree.structure(
        eqx.filter(model, eqx.is_inexact_array)
    )
    with pytest.raises(eqx.EquinoxRuntimeError, match="`x0`"):
        step(model, x0.at[0, 0].set(jnp.nan))
    assert step(model, x=np.asarray(x0))[0].shape == ()  # numpy arrays, keywords


@row("cfm_jax.enable_compilation_cache")
def _enable_compilation_cache():
    import tempfile
    from pathlib import Path

    before = jax.config.jax_compilation_cache_dir  # pyright: ignore[reportAttributeAccessIssue]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            got = cfm_jax.enable_compilation_cache(Path(tmp) / "c")
            assert got.is_dir() and Path(tmp) in got.parents
            blocker = Path(tmp) / "file"
            blocker.write_text("")
            with pytest.raises(ValueError, match="`path`"):
                cfm_jax.enable_compilation_cache(blocker / "c")
    finally:
        # the session's cache (tests/conftest.py) again
        cfm_jax.enable_compilation_cache(before)


@row("cfm_jax.default_cache_dir", "cfm_jax.CACHE_ENV")
def _default_cache_dir():
    import os
    from pathlib import Path

    before = os.environ.get(cfm_jax.CACHE_ENV)
    try:
        os.environ[cfm_jax.CACHE_ENV] = "~/elsewhere"
        assert cfm_jax.default_cache_dir() == Path.home() / "elsewhere"  # the variable first, ~ expanded
        os.environ[cfm_jax.CACHE_ENV] = ""  # empty: as if unset
        assert cfm_jax.default_cache_dir().name == "cfm_jax"
    finally:
        if before is None:
            del os.environ[cfm_jax.CACHE_ENV]
        else:
            os.environ[cfm_jax.CACHE_ENV] = before


@row("cfm_jax.CompileRecorder")
def _compile_recorder():
    salt = float(np.random.default_rng().integers(1, 10**6))  # a program no cache holds
    f = jax.jit(lambda x: jnp.tanh(x) + salt)
    stages: list[str] = []
    with cfm_jax.CompileRecorder(on_event=lambda stage, name: stages.append(stage)) as rec:
        f(np.ones(2)).block_until_ready()
        f(np.ones(2)).block_until_ready()
    assert (rec.lowered, rec.compiled, rec.cache_loads) == (1, 1, 0) and stages == ["lowered", "compiled"]
    with pytest.raises(TypeError, match="`on_event`"):
        cfm_jax.CompileRecorder(on_event="loud")  # pyright: ignore[reportArgumentType]


# --------------------------------------------------------------------------------------------
# Streams and sharding
# --------------------------------------------------------------------------------------------


@row("cfm_jax.TeacherStudentStream", "cfm_jax.Sample")
def _teacher_student_stream():
    s = tiny_stream()(i64(1))
    assert isinstance(s, cfm_jax.Sample) and s.x0.shape == (B, D) and s.context.shape == (N, D)
    same(eqx.filter_jit(lambda st, k: st(k))(tiny_stream(), 1).y, s.y, rtol=1e-12)
    teacher = cfm_jax.Transformer.init(jax.random.key(2), D, heads=1, mlp_width=3, layers=L, dtype=F64)
    keys_agree(
        lambda k: cfm_jax.TeacherStudentStream(teacher, cfm_jax.isotropic_gaussian(D), k, batch=B, context_size=N)(0)
    )
    with pytest.raises(ValueError, match="`batch`"):
        cfm_jax.TeacherStudentStream(teacher, cfm_jax.isotropic_gaussian(D), jax.random.key(0), batch=0)
    with pytest.raises(ValueError, match="`noise`"):
        cfm_jax.TeacherStudentStream(teacher, cfm_jax.isotropic_gaussian(D), jax.random.key(0), noise=-1.0)


@row("cfm_jax.ArrayStream")
def _array_stream():
    x0s, ctxs = np.zeros((3, B, D)), np.ones((3, N, D))
    s = cfm_jax.ArrayStream(x0s, jnp.asarray(ctxs), x0s)
    assert s.length == 3 and s(i64(2)).context.shape == (N, D)
    with pytest.raises(ValueError, match="`ys`"):
        cfm_jax.ArrayStream(x0s, ctxs, np.zeros((3, B, 3)))


@row("cfm_jax.FunctionStream")
def _function_stream():
    s = cfm_jax.FunctionStream(lambda k: (jnp.zeros((B, D)) + k, jnp.ones((N, D)), jnp.zeros((B, D))), length=4)
    assert s.length == 4 and float(s(i64(2)).x0[0, 0]) == 2.0
    with pytest.raises(ValueError, match="`fn`"):
        cfm_jax.FunctionStream(3)


@row("cfm_jax.context_mesh", "cfm_jax.shard_inputs", "cfm_jax.replicate", "cfm_jax.gather")
def _sharding():
    model, x0, ctx, _ = tiny()
    mesh = cfm_jax.context_mesh()
    xs, cs = cfm_jax.shard_inputs(np.asarray(x0), ctx, mesh)
    same(cfm_jax.gather((xs, cs.points)), (x0, ctx.points))
    same(cfm_jax.gather(cfm_jax.replicate(model, mesh)).Q, model.Q)
    with pytest.raises(ValueError, match="`devices`"):
        cfm_jax.context_mesh([])
    with pytest.raises(ValueError, match="`devices`"):
        cfm_jax.context_mesh(["cpu"])


# --------------------------------------------------------------------------------------------
# Online gradient descent
# --------------------------------------------------------------------------------------------


@functools.cache
def tiny_run():
    """A 2-step coupled run (n = 3 against the whole context), parameters recorded."""
    return ogd.coupled_run(tiny()[0], tiny_stream(), (3,), ogd.ridge_sgd(0.05, 0.1), 2, record_params=True)


@row("cfm_jax.ogd.ridge_sgd", "cfm_jax.ogd.check_step_sizes")
def _ridge_sgd():
    half: typing.Any = np.float32(0.5)
    assert ogd.ridge_sgd(0.1, half) is ogd.ridge_sgd(0.1, half)
    ogd.check_step_sizes(0.1, 0.0)
    with pytest.raises(ValueError, match="`learning_rate`"):
        ogd.ridge_sgd(0.0)
    with pytest.raises(ValueError, match="`weight_decay`"):
        ogd.check_step_sizes(0.1, -1.0)


@row("cfm_jax.ogd.run_ogd", "cfm_jax.ogd.OGDResult", "cfm_jax.ogd.OGDState", "cfm_jax.ogd.init_state", marks=SLOW)
def _run_ogd():
    model, opt = tiny()[0], ogd.ridge_sgd(0.05, 0.1)
    res = ogd.run_ogd(model, tiny_stream(), opt, i64(2), context_sizes=(3, None))
    assert isinstance(res, ogd.OGDResult) and res.losses.shape == (2, 2)
    assert isinstance(res.state, ogd.OGDState) and int(res.state.step) == 2
    # resuming from the state continues the same run
    state = ogd.init_state(model, opt, (3, None))
    half = ogd.run_ogd(model, tiny_stream(), opt, 1, state=state)
    rest = ogd.run_ogd(model, tiny_stream(), opt, 1, state=half.state)
    same(rest.state.params, res.state.params, rtol=1e-12)
    with pytest.raises(ValueError, match="`num_steps`"):
        ogd.run_ogd(model, tiny_stream(), opt, 0)
    with pytest.raises(ValueError, match="`context_sizes`"):
        ogd.init_state(model, opt, (0,))


@row("cfm_jax.ogd.coupled_run", marks=SLOW)
def _coupled_run():
    res = tiny_run()
    assert res.deviations.shape == (2, 1) and res.ref_params is not None
    with pytest.raises(ValueError, match="`context_sizes`"):
        ogd.coupled_run(tiny()[0], tiny_stream(), (0,), ogd.ridge_sgd(0.05, 0.1), 2)


@row("cfm_jax.ogd.estimate_lipschitz", "cfm_jax.ogd.LipschitzEstimate", marks=SLOW)
def _estimate_lipschitz():
    visited = tiny_run().ref_params

    def est(key):
        return ogd.estimate_lipschitz(tiny()[0], visited, tiny_stream(), key, num_pairs=i64(2))

    e = est(jax.random.key(0))
    assert isinstance(e, ogd.LipschitzEstimate) and float(e.C) > 0
    keys_agree(est)
    with pytest.raises(ValueError, match="`num_pairs`"):
        ogd.estimate_lipschitz(tiny()[0], visited, tiny_stream(), jax.random.key(0), num_pairs=0)


@row("cfm_jax.ogd.save_checkpoint", "cfm_jax.ogd.load_checkpoint")
def _checkpoints():
    import tempfile
    from pathlib import Path

    state = ogd.init_state(tiny()[0], ogd.ridge_sgd(0.05, 0.1), (3, None))
    with tempfile.TemporaryDirectory() as tmp:
        path = ogd.save_checkpoint(Path(tmp) / "ck.eqx", state, tiny_stream())
        back, stream = ogd.load_checkpoint(path, state, tiny_stream())
        same(back.params, state.params)
        with pytest.raises(ValueError, match="does not exist"):
            ogd.load_checkpoint(Path(tmp) / "missing", state)
    with pytest.raises(ValueError, match="`state`"):
        ogd.save_checkpoint("unused", 3)  # pyright: ignore[reportArgumentType]


@row("cfm_jax.ogd.finite_time_lyapunov", marks=SLOW)
def _finite_time_lyapunov():
    out = ogd.finite_time_lyapunov(tiny()[0], tiny_run().ref_params, tiny_stream(), ogd.ridge_sgd(0.05, 0.1))
    assert out.shape == (2,) and bool(jnp.all(jnp.isfinite(out)))
    with pytest.raises(ValueError, match="`optimizer`"):
        ogd.finite_time_lyapunov(tiny()[0], tiny_run().ref_params, tiny_stream(), optax.adam(0.1))


@row("cfm_jax.ogd.sup_norm", "cfm_jax.ogd.sup_distance", "cfm_jax.ogd.functional_scale")
def _norms():
    model = tiny()[0]
    assert float(ogd.sup_distance(model, model)) == 0.0 and float(ogd.sup_norm(model)) > 0
    same(typing.cast(typing.Any, ogd.functional_scale(model, model)).Q, L * model.Q)
    with pytest.raises(ValueError, match="`b`"):
        ogd.sup_distance(model, tiny_gaussian()[0])


@row("cfm_jax.ogd.default_grad_fn", "cfm_jax.ogd.autodiff_value_and_grad", "cfm_jax.ogd.GradFn")
def _grad_fns():
    model, x0, ctx, y = tiny()
    assert ogd.default_grad_fn() is cfm_jax.loss_and_grad
    v1, g1 = ogd.default_grad_fn()(model, x0, ctx, y)
    v2, g2 = ogd.autodiff_value_and_grad(model, x0, ctx, y)
    np.testing.assert_allclose(v1, v2, rtol=1e-12)
    same(g1.Q, g2.Q, rtol=1e-9, atol=1e-12)
    assert typing.get_origin(ogd.GradFn) is not None  # a Callable[...] alias


def refused(name: str, call: Callable[[], object], arg: str, exc: type = ValueError):
    """A sub-row for a bad input that is refused with an error naming ``arg``."""

    def check():
        with pytest.raises(exc, match=f"`{arg}`"):
            call()

    row(f"{name}::bad-{arg}")(check)


# --------------------------------------------------------------------------------------------
# The stochastic transformer on the sphere
# --------------------------------------------------------------------------------------------

KERNEL = stochastic.NoiseKernel("relu")


@functools.cache
def sphere_tokens():
    return stochastic.random_tokens(jax.random.key(0), 4, 3, F64)


@row("cfm_jax.stochastic.ACTIVATIONS", "cfm_jax.stochastic.PAPER_ACTIVATIONS", "cfm_jax.stochastic.Activation")
def _activations():
    assert set(stochastic.PAPER_ACTIVATIONS) <= set(stochastic.ACTIVATIONS)
    assert set(typing.get_args(stochastic.Activation)) == set(stochastic.ACTIVATIONS)


@row(
    "cfm_jax.stochastic.AttentionKind",
    "cfm_jax.stochastic.KernelMethod",
    "cfm_jax.stochastic.NoiseSampler",
    "cfm_jax.stochastic.LyapunovMethod",
    "cfm_jax.distributed.CpuCollectives",
)
def _literal_aliases():
    # Literal aliases: the values the functions taking them accept
    assert set(typing.get_args(stochastic.AttentionKind)) == {"SA", "USA", "none"}
    assert "auto" in typing.get_args(stochastic.KernelMethod)
    assert set(typing.get_args(stochastic.NoiseSampler)) == {"exact", "features"}
    assert set(typing.get_args(stochastic.LyapunovMethod)) == {"benettin", "twin"}
    assert "gloo" in typing.get_args(distributed.CpuCollectives)


@row("cfm_jax.stochastic.NoiseKernel", "cfm_jax.stochastic.kappa_monte_carlo")
def _noise_kernel():
    rho = np.array([0.0, 0.5], np.float64)
    k = stochastic.NoiseKernel("relu", np.float64(1.0), 1.0)
    assert k(jnp.asarray(rho)).shape == (2,) and jax.jit(k)(rho).shape == (2,)
    assert isinstance(stochastic.NoiseKernel.paper("silu", i64(3)), stochastic.NoiseKernel)
    mean, se = stochastic.kappa_monte_carlo(jax.random.key(0), k, rho, 2000)
    np.testing.assert_allclose(mean, k(jnp.asarray(rho)), atol=6 * float(se.max()) + 1e-3)
    keys_agree(lambda key: stochastic.kappa_monte_carlo(key, k, rho, 64))
    with pytest.raises(ValueError, match="`activation`"):
        stochastic.NoiseKernel("foo")  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="`s_a`"):
        stochastic.NoiseKernel("relu", s_a=-1.0)


refused(
    "cfm_jax.stochastic.kappa_monte_carlo",
    lambda: stochastic.kappa_monte_carlo(jax.random.key(0), KERNEL, jnp.array([0.5]), 0),
    "samples",
)


@row("cfm_jax.stochastic.SphereAttention", "cfm_jax.stochastic.attention_velocity")
def _sphere_attention():
    x = sphere_tokens()
    v = stochastic.attention_velocity(stochastic.SphereAttention("SA", beta=np.float64(1.0)), x)
    assert v.shape == x.shape
    np.testing.assert_allclose(jnp.sum(v * x, axis=1), 0.0, atol=1e-12)  # tangent to the sphere
    with pytest.raises(ValueError, match="`attention`"):
        stochastic.SphereAttention("XX")  # pyright: ignore[reportArgumentType]


@row(
    "cfm_jax.stochastic.AbstractSphereModel",
    "cfm_jax.stochastic.SphereSDE",
    "cfm_jax.stochastic.StochasticTransformer",
    "cfm_jax.stochastic.simulate",
    "cfm_jax.stochastic.simulate_many",
)
def _simulate():
    x = sphere_tokens()
    for model in (stochastic.SphereSDE(KERNEL, steps=i64(4)), stochastic.StochasticTransformer(KERNEL, 8, 4)):
        assert isinstance(model, stochastic.AbstractSphereModel)
        ts, xs = stochastic.simulate(model, x, jax.random.key(0), save_every=2)
        assert xs.shape == (3, 4, 3) and ts.shape == (3,)
        keys_agree(lambda k, m=model: stochastic.simulate(m, x, k))
        many = stochastic.simulate_many(model, x, jax.random.split(jax.random.key(0), 2))[1]
        same(many[1], stochastic.simulate(model, x, jax.random.split(jax.random.key(0), 2)[1])[1], rtol=1e-12)
    with pytest.raises(ValueError, match="`save_every`"):
        stochastic.simulate(stochastic.SphereSDE(KERNEL, steps=4), x, jax.random.key(0), save_every=3)
    with pytest.raises(TypeError, match="`keys`"):
        stochastic.simulate_many(stochastic.SphereSDE(KERNEL, steps=4), x, jax.random.key(0))
    with pytest.raises(TypeError, match="`x0` must be an array of numbers"):
        stochastic.simulate(stochastic.SphereSDE(KERNEL, steps=4), "x0", jax.random.key(0))  # pyright: ignore
    with pytest.raises(TypeError, match="`x0` must be an array of numbers"):
        stochastic.simulate_many(stochastic.SphereSDE(KERNEL, steps=4), None, jax.random.split(jax.random.key(0), 2))
    with pytest.raises(ValueError, match="`steps`"):
        stochastic.SphereSDE(KERNEL, steps=0)
    with pytest.raises(ValueError, match="`width`"):
        stochastic.StochasticTransformer(KERNEL, width=0)


@row("cfm_jax.stochastic.brownian_increments", "cfm_jax.stochastic.integrate_increments")
def _increments():
    x, sde = sphere_tokens(), stochastic.SphereSDE(KERNEL, steps=2)
    dB = stochastic.brownian_increments(jax.random.key(0), i64(4), (4, 3), 1.0, F64)
    assert dB.shape == (4, 4, 3)
    keys_agree(lambda k: stochastic.brownian_increments(k, 4, (4, 3), 1.0))
    assert stochastic.integrate_increments(sde, x, dB).shape == (4, 3)
    with pytest.raises(ValueError, match="`dB`"):
        stochastic.integrate_increments(sde, x, dB[:3])
    with pytest.raises(ValueError, match="`steps`"):
        stochastic.brownian_increments(jax.random.key(0), 0, (4, 3), 1.0)


@row("cfm_jax.stochastic.brownian_path", "cfm_jax.stochastic.solve_diffrax")
def _brownian_path():
    x, sde = sphere_tokens(), stochastic.SphereSDE(KERNEL, steps=2)
    path = stochastic.brownian_path(jax.random.key(0), sde, (4, 3), dtype=F64)
    assert stochastic.solve_diffrax(sde, x, path).shape == (4, 3)
    with pytest.raises(ValueError, match="`path_type`"):
        stochastic.brownian_path(jax.random.key(0), sde, (4, 3), path_type=int)  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="`key`"):
        stochastic.brownian_path(3, sde, (4, 3))  # pyright: ignore[reportArgumentType]


refused(
    "cfm_jax.stochastic.solve_diffrax",
    lambda: stochastic.solve_diffrax(stochastic.SphereSDE(KERNEL, steps=2), sphere_tokens(), 3),
    "path",
)


@row(
    "cfm_jax.stochastic.kernel_matrix",
    "cfm_jax.stochastic.field_factor",
    "cfm_jax.stochastic.exact_increment",
    "cfm_jax.stochastic.feature_increment",
)
def _noise():
    x = sphere_tokens()
    C, F = stochastic.kernel_matrix(x, KERNEL), stochastic.field_factor(x, KERNEL)
    same(F @ F.T, C, rtol=1e-9, atol=1e-12)
    for draw in (
        lambda k: stochastic.exact_increment(k, x, KERNEL, 0.1),
        lambda k: stochastic.feature_increment(k, x, KERNEL, 0.1, i64(8)),
    ):
        assert draw(jax.random.key(0)).shape == (4, 3)
        keys_agree(draw)


for _n, _fn in (("kernel_matrix", stochastic.kernel_matrix), ("field_factor", stochastic.field_factor)):
    refused(
        f"cfm_jax.stochastic.{_n}",
        lambda f=_fn: f(jnp.ones(3), KERNEL),
        "x",
    )
refused(
    "cfm_jax.stochastic.exact_increment",
    lambda: stochastic.exact_increment(jax.random.key(0), sphere_tokens(), KERNEL, -1.0),
    "dt",
    eqx.EquinoxRuntimeError,
)
refused(
    "cfm_jax.stochastic.feature_increment",
    lambda: stochastic.feature_increment(jax.random.key(0), sphere_tokens(), KERNEL, 0.1, 0),
    "width",
)


@row("cfm_jax.stochastic.random_tokens", "cfm_jax.stochastic.normalise")
def _random_tokens():
    @PROP
    @given(n=st.integers(1, 6))
    def shapes(n):
        x = stochastic.random_tokens(jax.random.key(0), i64(n), 3)
        assert x.shape == (n, 3)
        np.testing.assert_allclose(jnp.linalg.norm(x, axis=1), 1.0, rtol=1e-6)

    shapes()
    keys_agree(lambda k: stochastic.random_tokens(k, 4, 3))
    same(stochastic.normalise(2.0 * sphere_tokens()), sphere_tokens(), rtol=1e-12)
    with pytest.raises(ValueError, match="`n`"):
        stochastic.random_tokens(jax.random.key(0), 0, 3)


@row(
    "cfm_jax.stochastic.diameter",
    "cfm_jax.stochastic.distance_energy",
    "cfm_jax.stochastic.energy_deficit",
    "cfm_jax.stochastic.interaction_energy",
    "cfm_jax.stochastic.nematic_order",
    "cfm_jax.stochastic.observables",
    "cfm_jax.stochastic.order_parameter",
    "cfm_jax.stochastic.pairwise_cosines",
    "cfm_jax.stochastic.trajectory_observables",
)
def _observables():
    x = sphere_tokens()
    obs = stochastic.observables(x)
    same(jax.jit(stochastic.observables)(x), obs, rtol=1e-12)
    traj = stochastic.trajectory_observables(jnp.stack([x, x]))
    same(traj["energy"], jnp.stack([obs["energy"]] * 2), rtol=1e-12)
    dirac = jnp.tile(x[:1], (4, 1))
    assert float(stochastic.energy_deficit(dirac, 1.0)) == 0.0 and float(stochastic.diameter(dirac)) == 0.0
    np.testing.assert_allclose(stochastic.order_parameter(dirac), 1.0)
    np.testing.assert_allclose(stochastic.nematic_order(dirac), 1.0)
    assert stochastic.pairwise_cosines(x).shape == (6,)
    assert float(stochastic.interaction_energy(x, 1.0)) > 0 and float(stochastic.distance_energy(x, 1.0)) > 0
    g = jax.grad(lambda y: stochastic.energy_deficit(y, 1.0))(x)
    assert g.shape == x.shape
    for f in (stochastic.diameter, stochastic.nematic_order, stochastic.order_parameter, stochastic.pairwise_cosines):
        with pytest.raises(ValueError, match="`x`"):
            f(jnp.ones(3))
    with pytest.raises(ValueError, match="`x`"):
        stochastic.observables(jnp.ones(3))


@row("cfm_jax.stochastic.fit_exponential_rate", "cfm_jax.stochastic.realisation_stats")
def _rates():
    ts = np.linspace(0.0, 2.0, 9)
    np.testing.assert_allclose(stochastic.fit_exponential_rate(ts, np.exp(-3.0 * ts)), -3.0, rtol=1e-9)
    out = stochastic.realisation_stats(np.ones((3, 4)))
    assert set(out) >= {"mean", "median"} and out["mean"].shape == (4,)


refused(
    "cfm_jax.stochastic.fit_exponential_rate",
    lambda: stochastic.fit_exponential_rate(np.arange(3.0), np.ones(4)),
    "y",
)
refused(
    "cfm_jax.stochastic.realisation_stats",
    lambda: stochastic.realisation_stats(np.ones(3)),
    "values",
)


@row("cfm_jax.stochastic.estimate_lyapunov", "cfm_jax.stochastic.LyapunovEstimate")
def _lyapunov():
    model, x = stochastic.SphereSDE(KERNEL, steps=4), sphere_tokens()[:1]
    est = stochastic.estimate_lyapunov(model, jax.random.key(0), x, realisations=i64(4))
    assert isinstance(est, stochastic.LyapunovEstimate) and est.samples.shape == (4,)
    keys_agree(lambda k: stochastic.estimate_lyapunov(model, k, x, realisations=4).samples)
    with pytest.raises(ValueError, match="`realisations`"):
        stochastic.estimate_lyapunov(model, jax.random.key(0), x, realisations=0)


@row(
    "cfm_jax.stochastic.attention_epsilon",
    "cfm_jax.stochastic.EpsilonEstimate",
    "cfm_jax.stochastic.energy_growth_ratio",
)
def _epsilon():
    att = stochastic.SphereAttention("SA")
    dE, E = stochastic.energy_growth_ratio(att, sphere_tokens(), 1.0)
    assert float(E) > 0 and bool(jnp.isfinite(dE))

    def est(k):
        return stochastic.attention_epsilon(k, att, i64(3), 3, starts=4, steps=3)

    assert isinstance(est(jax.random.key(0)), stochastic.EpsilonEstimate)
    keys_agree(est)
    with pytest.raises(ValueError, match="`n`"):
        stochastic.attention_epsilon(jax.random.key(0), att, 0, 3)


# --------------------------------------------------------------------------------------------
# Propagation of chaos
# --------------------------------------------------------------------------------------------

SPEC = chaos.ChaosSpec(dim=1, ns=(2, 4), n_ref=8, layers=L, heads=1, mlp_width=2, batch=B, num_probes=2, w1_size=8)


@row("cfm_jax.chaos.QUANTITIES", "cfm_jax.chaos.expected_slope", "cfm_jax.chaos.wasserstein_slope")
def _chaos_constants():
    assert {"token", "context", "w1"} <= set(chaos.QUANTITIES)
    assert chaos.expected_slope("attention", "token", i64(1)) == -0.5
    assert chaos.wasserstein_slope(i64(3)) == pytest.approx(-1 / 3)


refused(
    "cfm_jax.chaos.expected_slope",
    lambda: chaos.expected_slope("attention", "foo", 1),
    "quantity",
)
refused(
    "cfm_jax.chaos.wasserstein_slope",
    lambda: chaos.wasserstein_slope(0),
    "intrinsic_dim",
)


@row(
    "cfm_jax.chaos.ChaosSpec",
    "cfm_jax.chaos.validate_spec",
    "cfm_jax.chaos.Bucket",
    "cfm_jax.chaos.buckets",
    "cfm_jax.chaos.size_buckets",
    "cfm_jax.chaos.quantity_reference",
)
def _chaos_spec():
    assert chaos.validate_spec(SPEC) is SPEC and hash(SPEC) == hash(dataclasses.replace(SPEC))
    (bucket,) = chaos.buckets(SPEC)
    assert isinstance(bucket, chaos.Bucket) and bucket.ns == (2, 4)
    assert chaos.size_buckets([i64(2), 4, 64]) == [[2, 4], [64]]
    assert chaos.quantity_reference(SPEC, "token") == "sample"
    with pytest.raises(ValueError, match="`dim`"):
        chaos.validate_spec(dataclasses.replace(SPEC, dim=0))


refused(
    "cfm_jax.chaos.size_buckets",
    lambda: chaos.size_buckets([0]),
    "ns",
)
refused(
    "cfm_jax.chaos.quantity_reference",
    lambda: chaos.quantity_reference(SPEC, "foo"),
    "quantity",
)
refused(
    "cfm_jax.chaos.buckets",
    lambda: chaos.buckets(3),  # pyright: ignore[reportArgumentType]
    "spec",
)


@row("cfm_jax.chaos.prefix_weights")
def _prefix_weights():
    @PROP
    @given(n=st.integers(1, 6))
    def sums_to_one(n):
        w = chaos.prefix_weights(i64(n), 6, jnp.float32)
        assert w.dtype == jnp.float32 and int((w > 0).sum()) == n
        np.testing.assert_allclose(float(w.sum()), 1.0, rtol=1e-6)

    sums_to_one()
    assert jax.jit(lambda n: chaos.prefix_weights(n, 6))(3).shape == (6,)
    with pytest.raises(eqx.EquinoxRuntimeError, match="`n`"):
        chaos.prefix_weights(0, 4)
    with pytest.raises(Exception, match="`n`"):
        chaos.prefix_weights(2.5, 4)


@row("cfm_jax.chaos.seed_batch_size", "cfm_jax.chaos.seed_devices", "cfm_jax.chaos.map_seeds")
def _seed_mapping():
    assert chaos.seed_batch_size("CPU") == 1 and chaos.seed_batch_size("gpu") == 0
    assert chaos.seed_devices(i64(2)) == (jax.devices()[0],)
    xs = jnp.arange(4.0)
    for b in (0, 1, i64(2)):
        same(chaos.map_seeds(lambda a: 2 * a, xs, batch_size=b), 2 * xs)
    with pytest.raises(ValueError, match="`backend`"):
        chaos.seed_batch_size("foo")
    with pytest.raises(ValueError, match="`seeds`"):
        chaos.seed_devices(0)
    with pytest.raises(ValueError, match="`batch_size`"):
        chaos.map_seeds(lambda a: a, xs, batch_size=-1)


@row("cfm_jax.chaos.wasserstein1_to_normal_1d")
def _w1_normal():
    pts = np.linspace(-1.0, 1.0, 5)
    w = np.full(5, 0.2)
    v = chaos.wasserstein1_to_normal_1d(pts, w, 0.0, 1.0)
    same(jax.jit(chaos.wasserstein1_to_normal_1d)(pts[:, None], w, 0.0, 1.0), v, rtol=1e-12)
    assert float(v) > 0
    with pytest.raises(Exception, match="`std`"):
        chaos.wasserstein1_to_normal_1d(pts, w, 0.0, -1.0)


@row("cfm_jax.chaos.adjoint_states", "cfm_jax.chaos.token_adjoint_states")
def _chaos_adjoints():
    model, x0, ctx, y = tiny()
    ps, pg = chaos.adjoint_states(model, x0, ctx, y, np.zeros((2, D)))
    assert ps.shape == (L + 1, B, D) and pg is not None and pg.shape == (L + 1, 2, D)
    sol = cfm_jax.forward(model, x0, ctx, saveat=cfm_jax.SaveAt(layers=True))
    assert sol.xs is not None and sol.contexts is not None
    p2 = chaos.token_adjoint_states(model, sol.xs, sol.contexts.points, ctx.weights, y)
    same(p2, ps, rtol=1e-9, atol=1e-13)
    with pytest.raises(Exception, match="`y`"):
        chaos.token_adjoint_states(model, sol.xs, sol.contexts.points, ctx.weights, nan_at(y))


@row("cfm_jax.chaos.uniform_attention_deviation")
def _uniform_attention_deviation():
    model = cfm_jax.Transformer.init(jax.random.key(0), D, heads=1, layers=L, qk_scale=0.0, dtype=F64)
    dev = chaos.uniform_attention_deviation(model, np.array([0.1, -0.2]))
    assert dev.shape == (L + 1, D) and float(jnp.abs(dev[0]).max()) == 0.0


refused(
    "cfm_jax.chaos.uniform_attention_deviation",
    lambda: chaos.uniform_attention_deviation(
        cfm_jax.Transformer.init(jax.random.key(0), D, heads=1, layers=L, qk_scale=0.0, dtype=F64), np.zeros(3)
    ),
    "mean_difference",
)


@row("cfm_jax.chaos.coupled_deviations")
def _coupled_deviations():
    model, x0, ctx, _ = tiny()
    out = chaos.coupled_deviations(model, x0, ctx.points[:3], ctx.points)
    assert out["token"].shape[0] == L + 1
    with pytest.raises(ValueError, match="`reference`"):
        chaos.coupled_deviations(model, x0, ctx.points[:3], np.zeros((5, 3)))


@row(
    "cfm_jax.chaos.build_model",
    "cfm_jax.chaos.seed_inputs",
    "cfm_jax.chaos.seed_deviations",
    "cfm_jax.chaos.run_seeds",
    "cfm_jax.chaos.exact_reference_deviations",
    "cfm_jax.chaos.attention_regimes",
    marks=SLOW,
)
def _chaos_sweeps():
    assert isinstance(chaos.build_model(SPEC, jax.random.key(0)), cfm_jax.Transformer)
    keys_agree(lambda k: chaos.seed_inputs(SPEC, k)[1])
    one = chaos.seed_deviations(SPEC, jax.random.key(0))
    assert one["token"].shape == (2,)
    many = chaos.run_seeds(SPEC, i64(2))
    loop = [chaos.seed_deviations(SPEC, k)["token"] for k in jax.random.split(jax.random.key(0), 2)]
    same(jnp.stack(loop), many["token"], rtol=1e-9)
    gauss = dataclasses.replace(SPEC, reference="gaussian", mlp_width=0)
    assert chaos.exact_reference_deviations(gauss, jax.random.key(0))["token"].shape == (2,)
    assert chaos.attention_regimes(gauss, 2).rho.shape == (2, L, 1)
    with pytest.raises(ValueError, match="`seeds`"):
        chaos.run_seeds(SPEC, 0)


# --------------------------------------------------------------------------------------------
# Multi-process runs
# --------------------------------------------------------------------------------------------


@row(
    "cfm_jax.distributed.ENV_COORDINATOR",
    "cfm_jax.distributed.ENV_LOCAL_DEVICE_IDS",
    "cfm_jax.distributed.ENV_NUM_PROCESSES",
    "cfm_jax.distributed.ENV_PROCESS_ID",
)
def _distributed_env():
    names = (
        distributed.ENV_COORDINATOR,
        distributed.ENV_LOCAL_DEVICE_IDS,
        distributed.ENV_NUM_PROCESSES,
        distributed.ENV_PROCESS_ID,
    )
    assert len(set(names)) == 4 and all(n.startswith("CFM_JAX_") for n in names)


@row("cfm_jax.distributed.free_port")
def _free_port():
    assert 0 < distributed.free_port() < 2**16


@row("cfm_jax.distributed.launch", "cfm_jax.distributed.ProcessResult")
def _launch():
    import sys

    (res,) = distributed.launch([sys.executable, "-c", "print('hi')"], i64(1), capture=True, timeout_s=60)
    assert isinstance(res, distributed.ProcessResult) and res.returncode == 0 and "hi" in res.stdout
    with pytest.raises(ValueError, match="`num_processes`"):
        distributed.launch([sys.executable, "-c", "pass"], 0)


@row("cfm_jax.distributed.initialize")
def _initialize():
    # the session's backend has started: joining a run now is refused before anything is contacted
    with pytest.raises(ValueError, match="`num_processes`"):
        distributed.initialize("127.0.0.1:1", 0, 0)


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------


@row("cfm_jax.stats.MIN_BOOTSTRAP_SEEDS", "cfm_jax.stats.Interval", "cfm_jax.stats.bootstrap")
def _bootstrap():
    assert isinstance(stats.MIN_BOOTSTRAP_SEEDS, int) and stats.MIN_BOOTSTRAP_SEEDS >= 2
    x = np.arange(10.0)
    iv = stats.bootstrap(np.mean, x, n_boot=i64(200), seed=i64(1))
    assert isinstance(iv, stats.Interval) and iv.ci_low <= iv.value <= iv.ci_high
    assert stats.bootstrap(np.mean, jnp.asarray(x), n_boot=200, seed=1) == iv
    with pytest.raises(ValueError, match="`n_boot`"):
        stats.bootstrap(np.mean, x, n_boot=1)
    with pytest.raises(TypeError, match="`statistic`"):
        stats.bootstrap(3, x)  # pyright: ignore[reportArgumentType]


@row("cfm_jax.stats.fit_loglog", "cfm_jax.stats.RateFit")
def _fit_loglog():
    x = np.array([4.0, 16.0, 64.0])
    fit = stats.fit_loglog(x, x[:, None] ** -0.5 * np.array([1.0, 1.1]))
    assert isinstance(fit, stats.RateFit) and fit.slope == pytest.approx(-0.5)
    with pytest.raises(ValueError, match="`y`"):
        stats.fit_loglog([1, 2], [1, -1])


@row("cfm_jax.stats.fit_polynomial")
def _fit_polynomial():
    (a, b) = stats.fit_polynomial([0.0, 1.0, 2.0], [[1.0, 1.0], [3.0, 3.0], [5.0, 5.0]], i64(1), n_boot=100)
    assert a.value == pytest.approx(2.0) and b.value == pytest.approx(1.0)
    with pytest.raises(ValueError, match="`deg`"):
        stats.fit_polynomial([1, 2], [[1.0], [2.0]], deg=-1)


@row("cfm_jax.stats.mean_ci")
def _mean_ci():
    @PROP
    @given(st.lists(st.floats(-10, 10), min_size=2, max_size=8))
    def contains_mean(xs):
        m, h = stats.mean_ci(np.asarray(xs, np.float32))
        assert m == pytest.approx(np.mean(xs), abs=1e-5) and h >= 0

    contains_mean()
    with pytest.raises(ValueError, match="`level`"):
        stats.mean_ci([1.0, 2.0], level=2)
    with pytest.raises(ValueError, match="`samples`"):
        stats.mean_ci([])
