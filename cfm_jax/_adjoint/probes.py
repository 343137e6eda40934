"""Probe points: ∇φ_s(y) and φ_s(y) of the Eulerian test field at fixed points y.

A probe for depth s at point y is a passive characteristic started at (s, y): it moves with
V(·, μ) but carries no mass, and its adjoint obeys the particle equation
da/ds = −D_xV(ζ)ᵀa − Σ_b G(x_b; ζ)ᵀ p_b − Σ_k w_k G(z_k; ζ)ᵀ a_k with a(1) = 0, so a(s) = ∇φ_s(y).
The probe adjoints are carried inside the discrete/continuous adjoints (see
:func:`cfm_jax.adjoint_trajectories`); this module builds probe sets.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np

from .._arguments import real_number, static_int
from .._random import as_key
from .._validation import is_concrete


def ball_probes(key, num: int, dim: int, radius: float = 1.0, dtype=None):
    """``num`` points uniform in the ball of radius ``radius`` in $R^{dim}$, shape ``(num, dim)``.

    ``num`` and ``dim`` are static positive ints (they are the shape); ``radius`` a real number, finite
    and > 0, checked as a value (a traced radius too).
    """
    num, dim = static_int("num", num), static_int("dim", dim)
    dtype = dtype or jnp.result_type(float)
    r = jnp.asarray(real_number("radius", radius, positive=True), dtype)
    kd, kr = jax.random.split(as_key(key))
    g = jax.random.normal(kd, (num, dim), dtype)
    u = g / jnp.linalg.norm(g, axis=-1, keepdims=True)
    return r * u * jax.random.uniform(kr, (num, 1), dtype) ** (1.0 / dim)


def grid_probes(dim: int, radius: float = 1.0, per_axis: int = 5, dtype=None):
    """The points of a regular ``per_axis``^dim grid on [−R, R]^dim that lie in the ball of radius R.

    The grid grows as per_axis^dim: meant for d ≤ 4 (use :func:`ball_probes` above).
    """
    dim, per_axis = static_int("dim", dim), static_int("per_axis", per_axis)
    if per_axis < 2:
        raise ValueError(f"`per_axis` must be >= 2, got {per_axis}.")
    if not is_concrete(radius):
        raise ValueError("`radius` must be a number, not a traced value: the grid is built in NumPy.")
    r = float(real_number("radius", radius, positive=True))
    if per_axis**dim > 1_000_000:
        raise ValueError(f"grid of {per_axis}^{dim} points is too large; use ball_probes.")
    axis = np.linspace(-r, r, per_axis)
    pts = np.array(list(itertools.product(axis, repeat=dim)))
    pts = pts[np.linalg.norm(pts, axis=-1) <= r * (1 + 1e-12)]
    return jnp.asarray(pts, dtype=dtype or jnp.result_type(float))


__all__ = ["ball_probes", "grid_probes"]
