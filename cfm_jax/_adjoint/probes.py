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

from .._random import as_key


def ball_probes(key, num: int, dim: int, radius: float = 1.0, dtype=None):
    """``num`` points uniform in the ball of radius ``radius`` in $R^{dim}$, shape ``(num, dim)``."""
    if int(num) < 1 or int(dim) < 1:
        raise ValueError(f"`num` and `dim` must be >= 1, got num={num}, dim={dim}.")
    if not np.isfinite(radius) or radius <= 0:
        raise ValueError(f"`radius` must be finite and > 0, got {radius!r}.")
    dtype = dtype or jnp.result_type(float)
    kd, kr = jax.random.split(as_key(key))
    g = jax.random.normal(kd, (num, dim), dtype)
    u = g / jnp.linalg.norm(g, axis=-1, keepdims=True)
    return radius * u * jax.random.uniform(kr, (num, 1), dtype) ** (1.0 / dim)


def grid_probes(dim: int, radius: float = 1.0, per_axis: int = 5, dtype=None):
    """The points of a regular ``per_axis``^dim grid on [−R, R]^dim that lie in the ball of radius R.

    The grid grows as per_axis^dim: meant for d ≤ 4 (use :func:`ball_probes` above).
    """
    if int(per_axis) < 2 or int(dim) < 1:
        raise ValueError(f"`per_axis` must be >= 2 and `dim` >= 1, got per_axis={per_axis}, dim={dim}.")
    if per_axis**dim > 1_000_000:
        raise ValueError(f"grid of {per_axis}^{dim} points is too large; use ball_probes.")
    axis = np.linspace(-radius, radius, per_axis)
    pts = np.array(list(itertools.product(axis, repeat=dim)))
    pts = pts[np.linalg.norm(pts, axis=-1) <= radius * (1 + 1e-12)]
    return jnp.asarray(pts, dtype=dtype or jnp.result_type(float))


__all__ = ["ball_probes", "grid_probes"]
