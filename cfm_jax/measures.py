"""Discrete probability measures: the context μ = Σ_j w_j δ_{z_j}."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._validation import is_concrete

_WEIGHT_SUM_RTOL = 1e-5


class EmpiricalMeasure(eqx.Module):
    """A weighted point cloud μ = Σ_j w_j δ_{z_j} in R^d; a pytree.

    Args:
        points: `(n, d)` support points z_j.
        weights: `(n,)` positive weights summing to one; uniform `1/n` when omitted.

    Validation (rank, n > 0, finiteness, positivity, normalisation) runs at construction
    whenever the arrays are concrete; inside `jit`/`vmap` only the static shape checks run.
    """

    points: Float[Array, "n d"]
    weights: Float[Array, " n"]

    def __init__(self, points, weights=None):
        points = jnp.asarray(points)
        if points.ndim != 2:
            raise ValueError(
                f"EmpiricalMeasure: `points` must have shape (n, d), got shape {points.shape}."
            )
        n, d = points.shape
        if n == 0:
            raise ValueError("EmpiricalMeasure: `points` is empty (n = 0); a measure needs n >= 1.")
        if d == 0:
            raise ValueError("EmpiricalMeasure: `points` has dimension d = 0.")
        if not jnp.issubdtype(points.dtype, jnp.floating):
            points = points.astype(jnp.result_type(float))
        if weights is None:
            weights = jnp.full((n,), 1.0 / n, dtype=points.dtype)
        else:
            weights = jnp.asarray(weights, dtype=points.dtype)
            if weights.shape != (n,):
                raise ValueError(
                    f"EmpiricalMeasure: `weights` must have shape (n,) = ({n},) to match "
                    f"`points` {points.shape}, got {weights.shape}."
                )
        if is_concrete(points):
            if not bool(np.isfinite(np.asarray(points)).all()):
                raise ValueError("EmpiricalMeasure: `points` contains non-finite values (nan/inf).")
        if is_concrete(weights):
            w = np.asarray(weights, dtype=np.float64)
            if not np.isfinite(w).all():
                raise ValueError("EmpiricalMeasure: `weights` contains non-finite values.")
            if (w <= 0).any():
                raise ValueError(
                    "EmpiricalMeasure: `weights` must be strictly positive "
                    f"(min weight {w.min():.3g}); drop zero-weight points instead."
                )
            total = w.sum()
            if abs(total - 1.0) > _WEIGHT_SUM_RTOL:
                raise ValueError(
                    f"EmpiricalMeasure: `weights` must sum to 1 (a probability vector), "
                    f"they sum to {total:.8g}. Normalise them, e.g. weights / weights.sum()."
                )
        self.points = points
        self.weights = weights

    @property
    def size(self) -> int:
        """Number of atoms n."""
        return self.points.shape[-2]

    @property
    def dim(self) -> int:
        """Ambient dimension d."""
        return self.points.shape[-1]

    @property
    def log_weights(self) -> Float[Array, " n"]:
        return jnp.log(self.weights)

    def mean(self) -> Float[Array, " d"]:
        """Barycentre Σ_j w_j z_j, shape `(d,)`."""
        return self.weights @ self.points

    def with_points(self, points) -> "EmpiricalMeasure":
        """Same weights, new support (e.g. the pushed-forward points); no re-validation."""
        return eqx.tree_at(lambda m: m.points, self, points)

    def with_weights(self, weights) -> "EmpiricalMeasure":
        """Same support, new weights; no re-validation (used inside transformations)."""
        return eqx.tree_at(lambda m: m.weights, self, weights)

    @classmethod
    def unchecked(cls, points, weights) -> "EmpiricalMeasure":
        """A measure from arrays without validation (traced arrays, zero-weight padding atoms)."""
        template = cls(jnp.zeros((1, points.shape[-1]), points.dtype))
        return eqx.tree_at(lambda m: (m.points, m.weights), template, (points, weights))

    def pad_to(self, size: int) -> "EmpiricalMeasure":
        """The same measure on ``size >= n`` atoms: the extra atoms sit at the origin with weight 0.

        Atoms of weight exactly 0 carry no mass: the flow, the attention fields, the hand
        adjoints and autodiff all give the unpadded results (to round-off) on the first n
        atoms, and the padded atoms move passively. Padding a family of contexts to one size
        lets a sweep compile once instead of once per n.
        """
        n = self.size
        if not isinstance(size, int) or isinstance(size, bool) or size < n:
            raise ValueError(f"`size` must be an int >= n = {n}, got {size!r}.")
        pad = size - n
        points = jnp.pad(self.points, ((0, pad), (0, 0)))
        weights = jnp.pad(self.weights, (0, pad))
        return eqx.tree_at(lambda m: (m.points, m.weights), self, (points, weights))

    @classmethod
    def sample(cls, key, sampler, n: int) -> "EmpiricalMeasure":
        """Uniform empirical measure of `n` i.i.d. draws `sampler(key, n) -> (n, d)`."""
        return cls(sampler(key, n))


def as_measure(context) -> EmpiricalMeasure:
    """Accept an `EmpiricalMeasure` or an `(n, d)` array (uniform weights)."""
    if isinstance(context, EmpiricalMeasure):
        return context
    return EmpiricalMeasure(context)


def split_atom(measure: EmpiricalMeasure, index: int, fraction: float = 0.5) -> EmpiricalMeasure:
    """Split atom `index` into two co-located copies with weights `fraction·w`, `(1−fraction)·w`.

    The measure is unchanged, so every measure-dependent quantity must be too (an invariance).
    """
    z, w = measure.points, measure.weights
    points = jnp.concatenate([z, z[index : index + 1]], axis=0)
    weights = jnp.concatenate([w.at[index].multiply(fraction), w[index : index + 1] * (1 - fraction)])
    return EmpiricalMeasure(points, weights)


__all__ = ["EmpiricalMeasure", "as_measure", "split_atom"]
