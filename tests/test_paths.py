"""Parameter paths: the Transformer and its validation (every error names the argument)."""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _compiles import lowered_programs

from cfm_jax import EmpiricalMeasure, MLPField, PiecewiseConstantCFM, PiecewiseLinearCFM, Transformer, forward


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(Q=np.zeros((2, 1, 3, 3)), K=np.zeros((2, 1, 3, 3)), V=np.zeros((2, 1, 3, 2))), "`V`"),
        (dict(Q=np.zeros((2, 1, 3)), K=np.zeros((2, 1, 3, 3)), V=np.zeros((2, 1, 3, 3))), "`Q`"),
        (dict(Q=np.zeros((2, 1, 3, 3)), K=np.zeros((3, 1, 3, 3)), V=np.zeros((2, 1, 3, 3))), "`K`"),
        (
            dict(Q=np.zeros((2, 1, 3, 3)), K=np.zeros((2, 1, 3, 3)), V=np.zeros((2, 1, 3, 3)), W1=np.zeros((2, 4, 3))),
            "W1",
        ),
        (
            dict(
                Q=np.zeros((2, 1, 3, 3)),
                K=np.zeros((2, 1, 3, 3)),
                V=np.zeros((2, 1, 3, 3)),
                W1=np.zeros((2, 4, 3)),
                b1=np.zeros((2, 4)),
                W2=np.zeros((2, 3, 5)),
                b2=np.zeros((2, 3)),
            ),
            "`W2`",
        ),
        (
            dict(Q=np.zeros((1, 1, 2, 2)), K=np.zeros((1, 1, 2, 2)), V=np.zeros((1, 1, 2, 2)), chunk_size=0),
            "chunk_size",
        ),
    ],
)
def test_transformer_validation(kwargs, match):
    # shapes are ValueErrors; a non-finite value is the one value check's EquinoxRuntimeError
    error = eqx.EquinoxRuntimeError if np.isinf(kwargs["Q"]).any() else ValueError
    with pytest.raises(error, match=match):
        Transformer(**kwargs)


def test_transformer_values_are_checked_as_values():
    """A non-finite weight given to the constructor is a value problem: EquinoxRuntimeError naming it
    (as every value check), also for a PiecewiseConstantCFM's params."""
    zeros = np.zeros((1, 1, 2, 2))
    with pytest.raises(eqx.EquinoxRuntimeError, match="`Q` contains non-finite"):
        Transformer(Q=np.full((1, 1, 2, 2), np.inf), K=zeros, V=zeros)
    with pytest.raises(eqx.EquinoxRuntimeError, match="`params\\['c'\\]` contains non-finite"):
        PiecewiseConstantCFM(MLPField(), {"c": jnp.array([jnp.nan])}, 2)


@pytest.mark.parametrize("arg,value", [("dim", 0), ("heads", 0), ("layers", 0), ("mlp_width", -1)])
def test_init_validation(arg, value):
    kwargs: dict[str, Any] = dict(dim=2, heads=1, mlp_width=0, layers=1)
    kwargs[arg] = value
    with pytest.raises(ValueError, match=arg):
        Transformer.init(jax.random.key(0), **kwargs)


def test_stacked_paths_refuse_a_dim_their_parameters_do_not_take():
    """PiecewiseConstantCFM and PiecewiseLinearCFM check ``dim`` against the field and its parameters at construction
    (traced on shapes only), naming ``dim``, instead of failing later at ``forward`` on ``x0``; a
    non-integer ``dim`` is refused, a NumPy integer taken, and the check runs under ``jax.jit``."""
    model = Transformer.init(jax.random.key(0), dim=3, layers=2, heads=1, mlp_width=4)
    params = model.stacked_params()
    assert PiecewiseConstantCFM(model.field, params, np.int64(3)).dim == 3  # pyright: ignore[reportArgumentType]
    for dim in (2, 4, 3.0, "3", 0):
        with pytest.raises(ValueError, match="`dim`"):
            PiecewiseConstantCFM(model.field, params, dim)  # pyright: ignore[reportArgumentType]
    mlp: dict[str, Any] = dict(W1=np.zeros((3, 5, 3)), b1=np.zeros((3, 5)), W2=np.zeros((3, 3, 5)), b2=np.zeros((3, 3)))
    assert PiecewiseLinearCFM(MLPField(), mlp, 3).num_layers == 2
    with pytest.raises(ValueError, match="`dim` = 5"):
        PiecewiseLinearCFM(MLPField(), mlp, 5)

    @jax.jit
    def x1(params):
        ctx = EmpiricalMeasure(jnp.ones((4, 3)))
        return forward(PiecewiseConstantCFM(model.field, params, 3), jnp.ones((2, 3)), ctx, throw=False).x1

    assert x1(params).shape == (2, 3)


def test_transformer_init_refuses_what_is_not_a_shape_naming_it():
    """dim, heads and layers are positive Python ints, mlp_width an int >= 0 (NumPy integers taken): a
    string, a float (truncated to 2 heads while the V scale used 2.5) or a bool is refused naming the
    argument; the scales are real numbers, checked finite as values (eagerly and under a caller's jit)."""
    key = jax.random.key(0)
    for kwargs, name in (
        (dict(dim="8"), "dim"),
        (dict(dim=3, heads=2.5), "heads"),
        (dict(dim=3, heads=0), "heads"),
        (dict(dim=3, layers=2.0), "layers"),
        (dict(dim=3, layers=True), "layers"),
        (dict(dim=3, mlp_width=1.5), "mlp_width"),
        (dict(dim=3, mlp_width=-1), "mlp_width"),
        (dict(dim=3, qk_scale="a"), "qk_scale"),
        (dict(dim=3, v_scale=np.ones(2)), "v_scale"),
        (dict(dim=3, mlp_scale=True), "mlp_scale"),
    ):
        with pytest.raises(ValueError, match=f"^`{name}` must be"):
            Transformer.init(key, **kwargs)  # pyright: ignore[reportArgumentType]  # bad on purpose
    model = Transformer.init(key, np.int64(3), heads=np.int32(2), mlp_width=np.int64(4), layers=np.int64(2))  # pyright: ignore[reportArgumentType]
    assert (model.dim, model.num_heads, model.mlp_width, model.num_layers) == (3, 2, 4, 2)
    assert all(type(n) is int for n in (model.dim, model.num_heads, model.mlp_width, model.num_layers))
    for name in ("qk_scale", "v_scale", "mlp_scale"):
        with pytest.raises(eqx.EquinoxRuntimeError, match=f"`{name}` must be finite"):
            Transformer.init(key, 3, mlp_width=2, **{name: float("nan")})  # pyright: ignore[reportArgumentType]
        with pytest.raises(eqx.EquinoxRuntimeError, match=f"`{name}` must be finite"):
            # the check travels with the weights drawn at that scale (a caller keeping them)
            weights = lambda s: jax.tree.leaves(Transformer.init(key, 3, mlp_width=2, **{name: s}))  # noqa: E731  # pyright: ignore[reportArgumentType]
            eqx.filter_jit(weights)(jnp.asarray(jnp.inf))
    traced = jax.jit(lambda s: Transformer.init(key, 3, qk_scale=s).Q)(0.5)
    np.testing.assert_allclose(traced, Transformer.init(key, 3, qk_scale=0.5).Q, rtol=1e-6)


def test_a_model_built_eagerly_compiles_one_program_for_its_weights():
    """Transformer.init outside jit at a new shape compiles its draws and their scaling as one
    program (with an MLP: five draws), not an eager program per operation (~40 before)."""
    with lowered_programs() as names:
        Transformer.init(jax.random.key(3), dim=5, heads=3, mlp_width=7, layers=2)
    assert names.count("jit(_scaled_normals)") == 1, names
    eager = {"jit(multiply)", "jit(erf_inv)", "jit(threefry2x32)", "jit(broadcast_in_dim)", "jit(gather)"}
    assert not eager & set(names), names


def test_with_kernel_and_with_chunking_choose_the_attention_path():
    """``with_kernel`` keeps the parameters and sets the kernel; ``with_chunking`` returns to the XLA
    path with its blocks (dropping an explicit kernel); a kernel beside XLA blocks is refused."""
    from cfm_jax import AttentionField, PallasAttention, XLAAttention

    model = Transformer.init(jax.random.key(0), 3, heads=2, mlp_width=4, layers=2)
    pallas = model.with_kernel(PallasAttention(block_q=16))
    assert pallas.kernel == PallasAttention(block_q=16)
    for a, b in zip(jax.tree.leaves(pallas.stacked_params()), jax.tree.leaves(model.stacked_params())):
        assert a is b
    attention = pallas.field.fields[0]  # pyright: ignore[reportAttributeAccessIssue]
    assert isinstance(attention, AttentionField) and attention.attention_kernel() == PallasAttention(block_q=16)
    back = pallas.with_chunking(8, 4)
    assert back.kernel is None and back.field.fields[0].attention_kernel() == XLAAttention(8, 4)  # pyright: ignore[reportAttributeAccessIssue]
    with pytest.raises(ValueError, match="XLAAttention"):
        Transformer(**model.stacked_params(), chunk_size=8, kernel=PallasAttention())  # pyright: ignore[reportArgumentType]
