"""Randomised quasi-Monte Carlo points: scrambled Sobol sequences keyed by a JAX PRNG key.

The first ``n`` points of the d-dimensional Sobol sequence (direction numbers of Joe and Kuo,
taken from ``scipy.stats.qmc.Sobol`` unscrambled, a NumPy constant per (n, d)) are randomised
in JAX by a linear matrix scramble and a digital shift (the scrambling ``scipy.stats.qmc.Sobol``
uses): writing each coordinate as 32 binary digits x_1 x_2 …, the digits become

    y_b = x_b ⊕ (⊕_{k<b} L_{bk} x_k) ⊕ e_b,     L_{bk}, e_b i.i.d. fair bits (per dimension),

so every point is uniform on [0, 1)^d, the digital-net structure (hence the low discrepancy) is
kept, and the result is a pure function of the key: jit- and vmap-able, reproducible. Points are
returned at the centre of their 2^{-32} (float64) or 2^{-24} (float32) cell, never 0 or 1, so the
Gaussian inverse CDF stays finite. ``n`` a power of two keeps the net balanced (other n are
allowed).
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._random import as_key

_BITS = 32


@functools.lru_cache(maxsize=32)
def _sobol_ints(n: int, d: int) -> np.ndarray:
    """The first ``n`` unscrambled Sobol points as 32-bit integers, ``(n, d)`` uint32."""
    from scipy.stats import qmc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # balance warning for n not a power of two
        pts = qmc.Sobol(d, scramble=False, bits=_BITS).random(n)
    return np.round(pts * 2.0**_BITS).astype(np.uint64).astype(np.uint32)


def sobol(key, n: int, d: int, dtype=None) -> Float[Array, "n d"]:
    """``(n, d)`` scrambled Sobol points in (0, 1)^d (module docstring); pure in ``key``."""
    if not isinstance(n, (int, np.integer)) or int(n) < 1:
        raise ValueError(f"`n` must be a positive int (number of points), got {n!r}.")
    if not isinstance(d, (int, np.integer)) or int(d) < 1:
        raise ValueError(f"`d` must be a positive int (dimension), got {d!r}.")
    return _scrambled(as_key(key), int(n), int(d), jnp.dtype(dtype or jnp.result_type(float)))


def sobol_normal(key, n: int, d: int, dtype=None) -> Float[Array, "n d"]:
    """``(n, d)`` randomised-QMC standard normal points: the inverse normal CDF of :func:`sobol`."""
    return _inverse_normal(sobol(key, n, d, dtype))


# Compiled, one program per (n, d, dtype): called eagerly, the scramble and the inverse CDF would
# dispatch and compile one XLA program per operation at every new (n, d).
@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _scrambled(key, n: int, d: int, dtype) -> Array:
    x = jnp.asarray(_sobol_ints(n, d))
    k_lms, k_shift = jax.random.split(key)
    shift = 31 - jnp.arange(_BITS, dtype=jnp.uint32)  # digit b (b = 0 most significant) sits at bit 31 − b
    one = jnp.uint32(1)
    # column k of L (unit diagonal, random strictly-lower part): digit k plus random less-significant digits
    below = (one << shift) - one
    cols = (jax.random.bits(k_lms, (d, _BITS), jnp.uint32) & below) | (one << shift)
    digits = (x[:, :, None] >> shift) & one  # (n, d, 32)
    y = jax.lax.reduce(jnp.where(digits == 1, cols, jnp.uint32(0)), jnp.uint32(0), jax.lax.bitwise_xor, (2,))
    y = y ^ jax.random.bits(k_shift, (d,), jnp.uint32)
    if dtype.itemsize >= 8:
        return (y.astype(dtype) + 0.5) * 2.0**-_BITS
    return ((y >> 8).astype(dtype) + 0.5) * 2.0**-24


_inverse_normal = jax.jit(jax.scipy.special.ndtri)


__all__ = ["sobol", "sobol_normal"]
