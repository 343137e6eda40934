"""Gaussian and uniform draws that XLA:CPU compiles quickly: ``jax.random``'s numbers, drawn flat.

With the threefry PRNG (JAX's default), ``jax.random.normal(key, shape)`` hashes every element's
row-major flat index with the key (counter mode, in both of JAX's threefry modes), so drawing
``prod(shape)`` numbers and reshaping gives the same array bit for bit. It matters for the
compiler: the counters of an array of rank >= 3 are built from one iota per axis, and LLVM
unrolls that arithmetic over the small axes, so one such draw compiles for 0.5–1.4 s on a CPU
(a ``(4, 16, 16)`` draw: 0.8–1.0 s), a flat one for 0.12–0.19 s. A model's weights ``(L, H, d, d)``
are drawn in every program that builds the model, so this is a large share of a sweep's compile
time. Other key implementations (``rbg``, ``unsafe_rbg``) draw as ``jax.random`` does (their bits
depend on the shape).

Each draw is also a kernel of its own, and XLA:CPU spends ~0.1 s compiling each (the threefry
rounds and the inverse error function), whatever its size: five draws compile for ~0.9 s, one
draw of their total size for ~0.25 s. :func:`normals` takes several draws through one kernel. In
JAX's partitionable threefry mode (the default) element i of a draw with key k is a hash of
(k, i) alone, so the draws' keys repeated per element and their counters side by side give every
draw's numbers bit for bit, in one threefry call and one inverse error function.

Keys come as JAX makes them: typed key arrays (``jax.random.key``) or legacy ``uint32`` key data
(``jax.random.PRNGKey``, whose last axis is the key's words). :func:`as_key` turns either into a
typed key array of the default implementation (the same numbers for the same seed: a legacy key is
that key's data) and refuses anything else with an error naming the caller's argument; every
public function that takes a key passes it through :func:`as_key` first.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.random import threefry2x32_p
from jaxtyping import Array, ArrayLike


def _key_words() -> tuple[int, ...]:
    """The shape of one key's data for the default implementation (``(2,)`` for threefry)."""
    return tuple(jax.eval_shape(lambda: jax.random.key_data(jax.random.key(0))).shape)


def as_key(key, name: str = "key", *, batch: bool = False) -> Array:
    """``key`` as a typed key array: a typed key as it is, legacy ``uint32`` key data
    (``jax.random.PRNGKey(seed)``, ``(..., 2)`` for threefry) wrapped (same numbers either way).

    ``batch``: one axis of keys expected (``(S,)`` typed, ``(S, 2)`` legacy, e.g. from
    ``jax.random.split``); else a single key (``()`` typed, ``(2,)`` legacy). Works on tracers
    (under jit/vmap the shapes are the per-call ones). Anything else: ``TypeError`` naming ``name``.
    """
    rank = 1 if batch else 0
    what = "a batch of PRNG keys, one axis" if batch else "a PRNG key"
    hint = "jax.random.split(key, S)" if batch else "jax.random.key(seed) or jax.random.PRNGKey(seed)"
    # a plain Python value (an int seed, a list) is no key; tracers are jax.Array instances
    dtype = key.dtype if isinstance(key, (jax.Array, np.ndarray)) else None
    if dtype is not None and jnp.issubdtype(dtype, jax.dtypes.prng_key):
        if jnp.ndim(key) != rank:
            raise TypeError(f"`{name}` must be {what} ({hint}), got a key array of shape {jnp.shape(key)}.")
        return jnp.asarray(key)
    words = _key_words()
    legacy = dtype is not None and np.dtype(dtype) == np.uint32 and jnp.ndim(key) == rank + len(words)
    if legacy and jnp.shape(key)[rank:] == words:
        return jax.random.wrap_key_data(jnp.asarray(key))
    got = f"an array of dtype {np.dtype(dtype).name} and shape {jnp.shape(key)}" if dtype is not None else repr(key)
    raise TypeError(f"`{name}` must be {what} ({hint}), got {got}.")


def _drawn(draw, key, shape, *, may_flatten: bool = True) -> Array:
    """``draw(shape)``, or ``draw((prod(shape),))`` reshaped where that is the same numbers and compiles faster."""
    shape = tuple(int(s) for s in shape)
    if len(shape) < 3 or not may_flatten or str(jax.random.key_impl(key)) != "threefry2x32":
        return draw(shape)
    return draw((math.prod(shape),)).reshape(shape)


def normal(key, shape: tuple[int, ...], dtype=None) -> Array:
    """``jax.random.normal(key, shape, dtype)``, the same numbers (module docstring)."""
    key = as_key(key)
    dtype = dtype or jnp.result_type(float)
    return _drawn(lambda s: jax.random.normal(key, s, dtype), key, shape)


def uniform(key, shape: tuple[int, ...], dtype=None, minval: ArrayLike = 0.0, maxval: ArrayLike = 1.0) -> Array:
    """``jax.random.uniform(key, shape, dtype, minval, maxval)``, the same numbers (module docstring);
    drawn flat for scalar bounds."""
    key = as_key(key)
    dtype = dtype or jnp.result_type(float)
    scalar = not (jnp.ndim(minval) or jnp.ndim(maxval))  # array bounds broadcast per element
    return _drawn(lambda s: jax.random.uniform(key, s, dtype, minval, maxval), key, shape, may_flatten=scalar)


def normals(keys, shapes: Sequence[tuple[int, ...]], dtype=None) -> list[Array]:
    """``[jax.random.normal(k, s, dtype) for k, s in zip(keys, shapes)]``, the same numbers through
    one threefry kernel (module docstring); each draw on its own where that is not the same numbers
    (other key implementations, the non-partitionable threefry mode). ``keys``: a key array
    ``(len(shapes),)``, e.g. from ``jax.random.split``."""
    # float64 without x64 is float32, as jax.random.normal gives it (and nothing else would fit the bits)
    dtype = jnp.dtype(jax.dtypes.canonicalize_dtype(dtype or float))
    shapes = [tuple(int(n) for n in s) for s in shapes]
    keys = as_key(keys, "keys", batch=True)
    if jnp.shape(keys) != (len(shapes),):
        raise ValueError(f"`keys` must be a key array of shape ({len(shapes)},), one per shape, got {jnp.shape(keys)}.")
    sizes = [math.prod(s) for s in shapes]
    batchable = (
        bool(jax.config.jax_threefry_partitionable)  # pyright: ignore[reportAttributeAccessIssue]  (a config state JAX reads by attribute)
        and str(jax.random.key_impl(keys)) == "threefry2x32"
        and dtype in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64))
        and len(shapes) > 1
        and 0 < sum(sizes) < 2**32
    )
    if not batchable:
        return [normal(k, s, dtype) for k, s in zip(keys, shapes)]
    return list(_flat_normals(jax.random.key_data(keys), tuple(shapes), dtype))


@functools.partial(jax.jit, static_argnames=("shapes", "dtype"))
def _flat_normals(data: Array, shapes: tuple[tuple[int, ...], ...], dtype) -> tuple[Array, ...]:
    """The draws of :func:`normals` from their keys' data ``(K, 2)``, as one compiled program (called
    eagerly, each operation would be a program of its own, one per shape: ~25 of them)."""
    sizes = [math.prod(s) for s in shapes]
    # every element's key word by a gather from the (K, 2) key data: cheaper to compile than a
    # concatenation of broadcasts
    owner = np.repeat(np.arange(len(sizes)), sizes)
    lo = jnp.asarray(np.concatenate([np.arange(n, dtype=np.uint32) for n in sizes]))  # each draw's flat index
    b1, b2 = threefry2x32_p.bind(data[owner, 0], data[owner, 1], jnp.zeros_like(lo), lo)  # high word 0 below 2**32
    # jax.random.uniform's bits -> [lo, 1) map, then normal's sqrt(2)·erfinv, operation for operation
    finfo = jnp.finfo(dtype)
    if finfo.bits == 64:
        u64 = jnp.uint64
        bits = (b1.astype(u64) << jnp.asarray(32, u64)) | b2.astype(u64)
    else:
        bits = b1 ^ b2
    one = np.array(1.0, dtype).view(bits.dtype)
    floats = jax.lax.bitcast_convert_type((bits >> jnp.asarray(finfo.bits - finfo.nmant, bits.dtype)) | one, dtype)
    floats = floats - jnp.array(1.0, dtype)
    low, high = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype), dtype=dtype), np.array(1.0, dtype)
    u = jax.lax.max(jnp.asarray(low), floats * (jnp.asarray(high) - jnp.asarray(low)) + jnp.asarray(low))
    z = jnp.asarray(np.sqrt(2), dtype) * jax.lax.erf_inv(u)
    ends = np.cumsum([0, *sizes])
    return tuple(z[a:b].reshape(s) for a, b, s in zip(ends[:-1], ends[1:], shapes))


__all__ = ["as_key", "normal", "normals", "uniform"]
