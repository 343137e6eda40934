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
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
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


__all__ = ["normal", "uniform"]
