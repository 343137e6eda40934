r"""The L∞-in-depth parameter norm $‖θ‖_{L^∞} = \max_l (Σ_a ‖a_l‖_F^2)^{1/2}$ and distance of two models."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from .._paths import AbstractCFM


def _layer_sq_norms(model: AbstractCFM):
    """(L,) squared Euclidean norm of all the parameters of each layer (node)."""
    leaves = jax.tree.leaves(model.stacked_params())
    return sum(jnp.sum(jnp.reshape(a, (a.shape[0], -1)) ** 2, axis=1) for a in leaves)


def sup_norm(model: AbstractCFM) -> Array:
    """$‖θ‖_{L^∞}$ = max over layers of the Euclidean norm of the layer's parameters."""
    return jnp.sqrt(jnp.max(_layer_sq_norms(model)))


def sup_distance(a: AbstractCFM, b: AbstractCFM) -> Array:
    """$‖θ_a − θ_b‖_{L^∞}$ (same structure required)."""
    pa, pb = eqx.filter(a, eqx.is_inexact_array), eqx.filter(b, eqx.is_inexact_array)
    if jax.tree.structure(pa) != jax.tree.structure(pb) or any(
        jnp.shape(u) != jnp.shape(v) for u, v in zip(jax.tree.leaves(pa), jax.tree.leaves(pb))
    ):
        raise ValueError(f"`b` must have the structure and shapes of `a` ({type(a).__name__}).")
    diff = eqx.combine(
        jax.tree.map(lambda u, v: u - v, eqx.filter(a, eqx.is_inexact_array), eqx.filter(b, eqx.is_inexact_array)),
        eqx.filter(a, eqx.is_inexact_array, inverse=True),
    )
    return sup_norm(diff)


__all__ = ["sup_distance", "sup_norm"]
