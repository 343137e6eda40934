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
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.random import threefry2x32_p
from jaxtyping import Array, ArrayLike


def _drawn(draw, key, shape, *, may_flatten: bool = True) -> Array:
    """``draw(shape)``, or ``draw((prod(shape),))`` reshaped where that is the same numbers and compiles faster."""
    shape = tuple(int(s) for s in shape)
    if len(shape) < 3 or not may_flatten or str(jax.random.key_impl(key)) != "threefry2x32":
        return draw(shape)
    return draw((math.prod(shape),)).reshape(shape)


def normal(key, shape: tuple[int, ...], dtype=None) -> Array:
    """``jax.random.normal(key, shape, dtype)``, the same numbers (module docstring)."""
    dtype = dtype or jnp.result_type(float)
    return _drawn(lambda s: jax.random.normal(key, s, dtype), key, shape)


def uniform(key, shape: tuple[int, ...], dtype=None, minval: ArrayLike = 0.0, maxval: ArrayLike = 1.0) -> Array:
    """``jax.random.uniform(key, shape, dtype, minval, maxval)``, the same numbers (module docstring);
    drawn flat for scalar bounds."""
    dtype = dtype or jnp.result_type(float)
    scalar = not (jnp.ndim(minval) or jnp.ndim(maxval))  # array bounds broadcast per element
    return _drawn(lambda s: jax.random.uniform(key, s, dtype, minval, maxval), key, shape, may_flatten=scalar)


def normals(keys, shapes: Sequence[tuple[int, ...]], dtype=None) -> list[Array]:
    """``[jax.random.normal(k, s, dtype) for k, s in zip(keys, shapes)]``, the same numbers through
    one threefry kernel (module docstring); each draw on its own where that is not the same numbers
    (other key implementations, the non-partitionable threefry mode). ``keys``: a key array
    ``(len(shapes),)``, e.g. from ``jax.random.split``."""
    dtype = jnp.dtype(dtype or jnp.result_type(float))
    shapes = [tuple(int(n) for n in s) for s in shapes]
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
    # every element's key word by a gather from the (K, 2) key data: cheaper to compile than a
    # concatenation of broadcasts
    owner = np.repeat(np.arange(len(sizes)), sizes)
    data = jax.random.key_data(keys)
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
    return [z[a:b].reshape(s) for a, b, s in zip(ends[:-1], ends[1:], shapes)]


__all__ = ["normal", "normals", "uniform"]
