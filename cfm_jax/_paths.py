"""Parameter paths θ(s), s ∈ [0, 1], bundled with the velocity field they drive.

A *model* is an Equinox module with

- ``field``: an :class:`~cfm_jax._fields.AbstractField`;
- ``num_layers``: L, the number of equal depth segments on which θ is smooth (the default
  solver takes one step per segment; segment boundaries are never stepped across);
- ``layer_params(l)``: the parameters of segment ``l`` as a mapping (for piecewise-constant
  paths), and ``params_at(s)`` for any depth;
- ``piecewise_constant``: whether θ is constant on every segment.

:class:`Transformer` is the canonical piecewise-constant path of docs/theory.md §1 with the attention +
MLP field; :class:`PiecewiseConstantCFM` takes any field and any stacked parameter mapping;
:class:`PiecewiseLinearCFM` interpolates linearly between L + 1 nodes.
"""

from __future__ import annotations

import abc
import functools
import numbers
from collections.abc import Callable, Mapping
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from . import _random
from ._arguments import check_finite, real_number, static_int
from ._fields import AbstractAttentionKernel, AbstractField, AttentionField, mlp_field
from ._measures import EmpiricalMeasure


class AbstractCFM(eqx.Module):
    """A parameter path θ(s) bundled with the field it drives (see the module docstring).

    Subclasses provide ``field``, ``num_layers``, ``dim``, ``piecewise_constant``,
    ``stacked_params()`` and ``segment_params(layer, s)``; ``params_at`` and ``velocity`` follow.
    """

    field: eqx.AbstractVar[AbstractField]

    @property
    @abc.abstractmethod
    def num_layers(self) -> int:
        """L, the number of equal depth segments on which θ is smooth."""

    @property
    @abc.abstractmethod
    def dim(self) -> int:
        """The token dimension d."""

    @property
    @abc.abstractmethod
    def piecewise_constant(self) -> bool:
        """Whether θ is constant on every segment."""

    @abc.abstractmethod
    def stacked_params(self) -> dict[str, Array]:
        """All parameters, stacked on a leading layer (or node) axis."""

    @abc.abstractmethod
    def segment_params(self, layer, s) -> dict[str, Array]:
        """θ(s) for a depth ``s`` on segment ``layer`` (both may be traced)."""

    def params_at(self, s) -> dict[str, Array]:
        """θ(s) at any depth: the segment ⌊s·L⌋ (clipped to [0, L−1])."""
        L = self.num_layers
        return self.segment_params(jnp.clip(jnp.floor(s * L).astype(jnp.int32), 0, L - 1), s)

    def velocity(self, x, measure, params):
        """V(x, μ; params) for query points ``x: (q, d)``."""
        return self.field(x, measure, params)


class AbstractPiecewiseConstantCFM(AbstractCFM):
    """A path constant on each of its L layers: θ on layer l is ``layer_params(l)``."""

    @property
    def piecewise_constant(self) -> bool:
        return True

    def layer_params(self, layer) -> dict[str, Array]:
        """Parameters of layer ``layer`` (may be a traced integer)."""
        return jax.tree.map(lambda a: a[layer], self.stacked_params())

    def segment_params(self, layer, s) -> dict[str, Array]:
        return self.layer_params(layer)


def _stacked_mapping(params: Mapping[str, Array]) -> dict[str, Array]:
    """``params`` as arrays sharing a leading (layer or node) axis, checked."""
    params = {k: jnp.asarray(v) for k, v in dict(params).items()}
    sizes = {v.shape[0] if v.ndim else None for v in params.values()}
    if not params or len(sizes) != 1 or None in sizes:
        raise ValueError(
            "`params` must be a non-empty mapping of arrays sharing a leading layer axis; got shapes "
            f"{ {k: v.shape for k, v in params.items()} }."
        )
    for k, v in params.items():
        check_finite(f"params[{k!r}]", v)
    return params


def _check_field(field) -> AbstractField:
    if not isinstance(field, AbstractField):
        raise ValueError(f"`field` must be an AbstractField module, got {type(field).__name__}.")
    return field


def _check_stack(name, a, L=None, trailing=None):
    a = jnp.asarray(a)
    if L is not None and (a.ndim < 1 or a.shape[0] != L):
        raise ValueError(f"`{name}` must be stacked on a leading layer axis of size L={L}, got {a.shape}.")
    if trailing is not None and a.shape[1:] != tuple(trailing):
        exp = "(L, " + ", ".join(map(str, trailing)) + ")"
        raise ValueError(f"`{name}` must have shape {exp}, got {a.shape}.")
    if not jnp.issubdtype(a.dtype, jnp.floating):
        raise ValueError(f"`{name}` must be a floating array, got dtype {a.dtype}.")
    check_finite(name, a)
    return a


class Transformer(AbstractPiecewiseConstantCFM):
    """Piecewise-constant transformer path: L layers, H heads, MLP width m (0: no MLP).

    Fields (stacked on the leading layer axis): ``Q, K, V: (L, H, d, d)``,
    ``W1: (L, m, d)``, ``b1: (L, m)``, ``W2: (L, d, m)``, ``b2: (L, d)`` (``None`` without MLP).
    ``activation`` is the MLP's σ (``jax.nn.identity``: the affine MLP, which has a Gaussian closed form);
    ``chunk_size``/``key_chunk_size`` select the XLA attention path's
    blocks and ``kernel`` the attention kernel (see :class:`~cfm_jax.AttentionField`).
    """

    Q: Float[Array, "L H d d"]
    K: Float[Array, "L H d d"]
    V: Float[Array, "L H d d"]
    W1: Float[Array, "L m d"] | None
    b1: Float[Array, "L m"] | None
    W2: Float[Array, "L d m"] | None
    b2: Float[Array, "L d"] | None
    activation: Callable = eqx.field(static=True)
    chunk_size: int | str | None = eqx.field(static=True)
    key_chunk_size: int | None = eqx.field(static=True)
    kernel: AbstractAttentionKernel | None
    field: AbstractField

    def __init__(
        self,
        *,
        Q,
        K,
        V,
        W1=None,
        b1=None,
        W2=None,
        b2=None,
        activation: Callable = jax.nn.gelu,
        chunk_size: int | str | None = "auto",
        key_chunk_size: int | None = None,
        kernel: AbstractAttentionKernel | None = None,
    ):
        Q = jnp.asarray(Q)
        if Q.ndim != 4 or Q.shape[-1] != Q.shape[-2]:
            raise ValueError(f"`Q` must have shape (L, H, d, d), got {Q.shape}.")
        L, H, d, _ = Q.shape
        if L == 0 or H == 0 or d == 0:
            raise ValueError(f"`Q` has an empty axis: shape {Q.shape} (need L, H, d >= 1).")
        self.Q = _check_stack("Q", Q, L, (H, d, d))
        self.K = _check_stack("K", K, L, (H, d, d))
        self.V = _check_stack("V", V, L, (H, d, d))
        mlp = [W1, b1, W2, b2]
        if all(a is None for a in mlp):
            self.W1 = self.b1 = self.W2 = self.b2 = None
        elif any(a is None for a in mlp):
            raise ValueError("`W1`, `b1`, `W2`, `b2` must be given together (or all omitted for no MLP).")
        else:
            W1 = jnp.asarray(W1)
            if W1.ndim != 3:
                raise ValueError(f"`W1` must have shape (L, m, d), got {W1.shape}.")
            m = W1.shape[1]
            self.W1 = _check_stack("W1", W1, L, (m, d))
            self.b1 = _check_stack("b1", b1, L, (m,))
            self.W2 = _check_stack("W2", W2, L, (d, m))
            self.b2 = _check_stack("b2", b2, L, (d,))
        if not callable(activation):
            raise ValueError(f"`activation` must be callable, got {activation!r}.")
        if chunk_size not in (None, "auto") and not (isinstance(chunk_size, int) and chunk_size > 0):
            raise ValueError(f"`chunk_size` must be None, 'auto' or a positive int, got {chunk_size!r}.")
        self.activation = activation
        self.chunk_size = chunk_size
        self.key_chunk_size = key_chunk_size
        self.kernel = kernel
        attention = AttentionField(chunk_size=chunk_size, key_chunk_size=key_chunk_size, kernel=kernel)
        self.field = attention if self.W1 is None else attention + mlp_field(activation)

    @classmethod
    def init(
        cls,
        key,
        dim: int,
        heads: int = 1,
        mlp_width: int = 0,
        layers: int = 8,
        *,
        qk_scale: float = 1.0,
        v_scale: float = 1.0,
        mlp_scale: float = 1.0,
        activation: Callable = jax.nn.gelu,
        dtype=None,
        chunk_size: int | str | None = "auto",
        key_chunk_size: int | None = None,
        kernel: AbstractAttentionKernel | None = None,
    ) -> Transformer:
        """Random transformer with variance-scaled Gaussian weights.

        Q, K have entries N(0, qk_scale²/d) (logits ~ qk_scale²·‖x‖‖z‖/√d), V has entries
        N(0, v_scale²/(H·d)) so the summed heads move tokens by O(v_scale·‖z‖/√d) per unit
        depth, W1 ~ N(0, mlp_scale²/d), W2 ~ N(0, mlp_scale²/m), biases zero. ``chunk_size``,
        ``key_chunk_size``, ``kernel``: the attention path (:class:`~cfm_jax.AttentionField`).
        """
        # the shapes: Python ints (a float would be truncated where a shape is made and used
        # whole in a scale, a string fail in arithmetic)
        dim, heads, layers = static_int("dim", dim), static_int("heads", heads), static_int("layers", layers)
        if isinstance(mlp_width, bool) or not isinstance(mlp_width, numbers.Integral) or mlp_width < 0:
            raise ValueError(f"`mlp_width` must be an int >= 0 (0: no MLP), got {mlp_width!r:.60}.")
        mlp_width = int(mlp_width)
        qk_scale, v_scale, mlp_scale = (
            real_number(name, v) for name, v in (("qk_scale", qk_scale), ("v_scale", v_scale), ("mlp_scale", mlp_scale))
        )
        dtype = dtype or jnp.result_type(float)
        keys = jax.random.split(_random.as_key(key), 5)  # Q, K, V, W1, W2
        L, H, d, m = layers, heads, dim, mlp_width
        # drawn flat and through one kernel (the same numbers as jax.random.normal): an (L, H, d, d)
        # draw compiles 5-7x slower on a CPU, and every draw is a kernel of ~0.1 s of compiling
        shapes = ((L, H, d, d),) * 3 + (((L, m, d), (L, d, m)) if m else ())
        scales = (qk_scale / d**0.5, qk_scale / d**0.5, v_scale / (H * d) ** 0.5)
        scales += (mlp_scale / d**0.5, mlp_scale / m**0.5) if m else ()
        Q, K, V, *mlp = _scaled_normals(keys[: len(shapes)], shapes, jnp.dtype(dtype), scales)
        kwargs = dict(Q=Q, K=K, V=V)
        if m:  # zeros from NumPy: an eager jnp.zeros would compile a program per shape
            b1, b2 = jnp.asarray(np.zeros((L, m), Q.dtype)), jnp.asarray(np.zeros((L, d), Q.dtype))
            kwargs.update(W1=mlp[0], b1=b1, W2=mlp[1], b2=b2)
        return cls(**kwargs, activation=activation, chunk_size=chunk_size, key_chunk_size=key_chunk_size, kernel=kernel)

    @property
    def num_layers(self) -> int:
        return self.Q.shape[0]

    @property
    def num_heads(self) -> int:
        return self.Q.shape[1]

    @property
    def dim(self) -> int:
        return self.Q.shape[-1]

    @property
    def mlp_width(self) -> int:
        return 0 if self.W1 is None else self.W1.shape[1]

    @property
    def dtype(self):
        return self.Q.dtype

    def stacked_params(self) -> dict[str, Array]:
        named = {"Q": self.Q, "K": self.K, "V": self.V, "W1": self.W1, "b1": self.b1, "W2": self.W2, "b2": self.b2}
        return {k: v for k, v in named.items() if v is not None}

    def with_chunking(self, chunk_size, key_chunk_size=None) -> Transformer:
        """Same parameters, the XLA attention path with these blocks (dense: ``chunk_size=None``)."""
        return Transformer(
            **self.stacked_params(),
            activation=self.activation,
            chunk_size=chunk_size,
            key_chunk_size=key_chunk_size,
            kernel=None,
        )

    def with_kernel(self, kernel: AbstractAttentionKernel | None) -> Transformer:
        """Same parameters, another attention kernel (None: the automatic choice, default blocks)."""
        return Transformer(
            **self.stacked_params(), activation=self.activation, chunk_size="auto", key_chunk_size=None, kernel=kernel
        )

    def astype(self, dtype) -> Transformer:
        return jax.tree.map(lambda a: a.astype(dtype), self)


def _check_dim(field: AbstractField, params: dict[str, Array], dim) -> int:
    """``dim`` as an int, refused (naming ``dim``) when ``field`` cannot take tokens of that size
    with the first layer's ``params``: the field is traced once on shapes alone (``jax.eval_shape``,
    no computation), as the solve would call it, and must return one velocity of size ``dim``."""
    d = static_int("dim", dim)  # ints and NumPy integers; not 3.5, "3" or a bool
    layer = {k: v[0] for k, v in params.items()}
    dtype = jnp.result_type(*[v.dtype for v in layer.values()])

    def velocity(layer):
        x = jnp.zeros((1, d), dtype)
        return field(x, EmpiricalMeasure(x), layer)

    try:
        out = jax.eval_shape(velocity, layer)
    except (TypeError, ValueError, IndexError) as e:  # the shapes of `params` or the field's arrays do not fit `dim`
        shapes = {f"params[{k!r}]": v.shape for k, v in layer.items()}
        arrays = jax.tree_util.tree_flatten_with_path(eqx.filter(field, eqx.is_array))[0]
        shapes |= {f"field{jax.tree_util.keystr(path)}": a.shape for path, a in arrays}
        listed = ", ".join(f"{k} {v}" for k, v in shapes.items())
        raise ValueError(
            f"`dim` = {d} is not the token dimension of the model: {type(field).__name__} does not take a "
            f"token of size {d} with these arrays (first layer): {listed}. Pass the d they are built for."
        ) from e
    leaves = jax.tree.leaves(out)
    if len(leaves) != 1 or leaves[0].shape != (1, d):
        raise ValueError(f"`dim` = {d} is not the token dimension of `params`: the field returns {out!r} at (1, {d}).")
    return d


@functools.partial(jax.jit, static_argnames=("shapes", "dtype"))
def _scaled_normals(keys, shapes: tuple[tuple[int, ...], ...], dtype, scales: tuple[float, ...]) -> list[Array]:
    """``scale · N(0, 1)`` draws of ``shapes`` (:func:`cfm_jax._random.normals`' numbers), as one
    compiled program: a model built eagerly at a new shape compiles this alone, not an eager
    multiply per weight."""
    return [s * w for s, w in zip(scales, _random.normals(keys, shapes, dtype))]


class AbstractStackedCFM(AbstractCFM):
    """Any field with its parameter path stored as a stacked mapping ``name -> (L + nodes, ...)``:
    what :class:`PiecewiseConstantCFM` and :class:`PiecewiseLinearCFM` share (they differ in how a segment reads it)."""

    params: dict[str, Array]
    field: AbstractField
    _dim: int = eqx.field(static=True)
    #: the stack's length beyond L: 0 (one entry per layer) or 1 (the L + 1 nodes of a linear path)
    _extra: ClassVar[int] = 0

    def __init__(self, field: AbstractField, params: Mapping[str, Array], dim: int):
        self.field = _check_field(field)
        self.params = _stacked_mapping(params)
        if next(iter(self.params.values())).shape[0] < 1 + self._extra:
            raise ValueError(
                f"`params` need at least {1 + self._extra} entries on their leading axis (L + {self._extra})."
            )
        self._dim = _check_dim(self.field, self.params, dim)

    @property
    def num_layers(self) -> int:
        return next(iter(self.params.values())).shape[0] - self._extra

    @property
    def dim(self) -> int:
        return self._dim

    def stacked_params(self) -> dict[str, Array]:
        return self.params


class PiecewiseConstantCFM(AbstractStackedCFM, AbstractPiecewiseConstantCFM):
    """Any field with a piecewise-constant parameter path stored as a stacked mapping.

    Args:
        field: an [`AbstractField`][cfm_jax.AbstractField] (user-defined fields welcome).
        params: mapping name -> array with a leading layer axis of common size L.
        dim: the token dimension d.
    """

    _extra: ClassVar[int] = 0

    def __init__(self, field: AbstractField, params: Mapping[str, Array], dim: int):
        super().__init__(field, params, dim)


class PiecewiseLinearCFM(AbstractStackedCFM):
    """θ(s) linear between L + 1 nodes at s = l/L (``params`` stacked on a node axis of L + 1).

    The L segments between nodes are the layers of the solve: no step straddles a node (where θ
    has a kink), so higher-order solvers keep their order.

    Args:
        field: an [`AbstractField`][cfm_jax.AbstractField].
        params: mapping name -> array with a leading node axis of common size L + 1 ≥ 2.
        dim: the token dimension d.
    """

    _extra: ClassVar[int] = 1

    def __init__(self, field: AbstractField, params: Mapping[str, Array], dim: int):
        super().__init__(field, params, dim)

    @property
    def piecewise_constant(self) -> bool:
        return False

    def segment_params(self, layer, s):
        frac = s * self.num_layers - jnp.asarray(layer).astype(jnp.result_type(s))
        return jax.tree.map(lambda a: (1 - frac) * a[layer] + frac * a[layer + 1], self.params)


__all__ = [
    "AbstractCFM",
    "AbstractPiecewiseConstantCFM",
    "PiecewiseConstantCFM",
    "PiecewiseLinearCFM",
    "Transformer",
]
