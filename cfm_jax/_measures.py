"""The two kinds of context: the point measure $μ = Σ_j w_j δ_{z_j}$ and the Gaussian $N(m, Σ)$.

:class:`EmpiricalMeasure` is a finite context (n atoms) and :class:`GaussianMeasure` the
infinite-context population law for which the flow has an exact closed form (docs/theory.md,
the Gaussian limit). Both check the values they are given when constructed and, through ``checked``,
inside compiled code (the one value check, ``cfm_jax._validation``: ``equinox.EquinoxRuntimeError``
naming the argument either way), so a measure built by ``jax.tree.map`` (bypassing the
constructor) is still checked when it reaches ``forward``.

One rule for the weights, everywhere (the constructor, ``checked`` inside compiled code, the
docs): finite, **non-negative**, summing to one within a tolerance of the dtype
(:func:`weight_sum_tolerance`). Atoms of weight exactly zero are allowed and carry no mass: the
attention fields mask them out, and :meth:`EmpiricalMeasure.pad_to` uses them to pad contexts to a
common size. Their weight gradient is the one-sided derivative ∂L/∂w_j = φ_0(z_j) (the first
variation at the atom), finite, by the hand adjoints and autodiff alike (docs/theory.md).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ._arguments import as_array, check_finite
from ._qmc import sobol_normal
from ._random import as_key
from ._validation import check, is_concrete


def weight_sum_tolerance(dtype) -> float:
    """$|Σ_j w_j − 1|$ allowed: 1e-5 in float64, 1e-4 in lower precision (summation round-off at large n)."""
    return 1e-5 if jnp.dtype(dtype).itemsize >= 8 else 1e-4


class EmpiricalMeasure(eqx.Module):
    """A weighted point cloud $μ = Σ_j w_j δ_{z_j}$ in $R^d$; a pytree.

    Args:
        points: `(n, d)` support points $z_j$.
        weights: `(n,)` non-negative weights summing to one; uniform `1/n` when omitted.
            Zero-weight atoms carry no mass (module docstring).

    Validation (rank, n > 0, finiteness, non-negativity, normalisation) runs at construction
    whenever the arrays are concrete; inside `jit`/`vmap` the shape checks run at trace time and
    the public entry points check the values with ``checked``.
    """

    points: Float[Array, "n d"]
    weights: Float[Array, " n"]

    def __init__(self, points: ArrayLike, weights: ArrayLike | None = None):
        points = as_array("points", points)
        if points.ndim != 2:
            raise ValueError(f"EmpiricalMeasure: `points` must have shape (n, d), got shape {points.shape}.")
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
        if is_concrete(points):  # given values: checked now (traced ones by the entry point, `checked`)
            points = check(points, ~np.isfinite(np.asarray(points)).all(), _NONFINITE_POINTS)
        if is_concrete(weights):  # the rule `checked` applies inside compiled code, in NumPy, same messages
            weights = _checked_weights(weights, "EmpiricalMeasure: `weights`", np.asarray(weights, np.float64), np)
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

    @property
    def mean(self) -> Float[Array, " d"]:
        """Barycentre $Σ_j w_j z_j$, shape `(d,)`: an attribute, as [`GaussianMeasure`][cfm_jax.GaussianMeasure]'s."""
        return self.weights @ self.points

    def with_points(self, points) -> EmpiricalMeasure:
        """Same weights, new support (e.g. the pushed-forward points); no re-validation."""
        return eqx.tree_at(lambda m: m.points, self, points)

    def with_weights(self, weights) -> EmpiricalMeasure:
        """Same support, new weights; no re-validation (used inside transformations)."""
        return eqx.tree_at(lambda m: m.weights, self, weights)

    @classmethod
    def unchecked(cls, points, weights) -> EmpiricalMeasure:
        """A measure from arrays without validation (traced arrays, zero-weight padding atoms)."""
        with jax.ensure_compile_time_eval():  # a concrete template: a traced one would be checked
            template = cls(np.zeros((1, points.shape[-1]), points.dtype))
        return eqx.tree_at(lambda m: (m.points, m.weights), template, (points, weights))

    def checked(self, name: str = "context") -> EmpiricalMeasure:
        """This measure with its values checked inside compiled code (the one value check): finite points,
        and weights that are finite, non-negative and sum to one. The error names ``name``."""
        z, w = self.points, self.weights
        z = check(z, ~jnp.all(jnp.isfinite(z)), f"`{name}` points contain non-finite values (nan/inf).")
        return EmpiricalMeasure.unchecked(z, _checked_weights(w, f"`{name}` weights", w, jnp))

    def pad_to(self, size: int) -> EmpiricalMeasure:
        """The same measure on ``size >= n`` atoms: the extra atoms sit at the origin with weight 0.

        Atoms of weight exactly 0 carry no mass: the flow, the attention fields, the hand
        adjoints and autodiff all give the unpadded results (to round-off) on the first n
        atoms, and the padded atoms move passively. A gradient in the padded measure is finite:
        0 in the padded points, and in their weights the one-sided derivative (the mass an atom
        there would add, module docstring). Padding a family of contexts to one size
        lets a sweep compile once instead of once per n.
        """
        n = self.size
        if not isinstance(size, int) or isinstance(size, bool) or size < n:
            raise ValueError(f"`size` must be an int >= n = {n}, got {size!r}.")
        pad = size - n
        points = jnp.pad(self.points, ((0, pad), (0, 0)))
        weights = jnp.pad(self.weights, (0, pad))
        return eqx.tree_at(lambda m: (m.points, m.weights), self, (points, weights))


def _symmetry_tolerance(dtype) -> float:
    """$|Σ − Σ^⊤|$ allowed, relative to the largest entry: 10³ ulp."""
    return 1e3 * float(jnp.finfo(dtype).eps)


def _definiteness_tolerance(dtype, d: int) -> float:
    """The smallest eigenvalue must exceed this times the largest |eigenvalue|: d ulp, so that a
    covariance singular up to round-off (rank-deficient) is refused in every dtype."""
    return d * float(jnp.finfo(dtype).eps)


class GaussianMeasure(eqx.Module):
    """The Gaussian context $N(m, Σ)$ in $R^d$ (m = ``mean``, Σ = ``cov``); a pytree.

    Args:
        mean: the mean, ``(d,)``.
        cov: the covariance, ``(d, d)``, symmetric positive definite.

    One rule, eagerly and inside compiled code: finite entries, symmetric up to 10³ ulp of its largest
    entry, and positive definite, its smallest eigenvalue above d ulp of its largest (a covariance
    that is singular up to round-off is refused). A bad shape raises a ``ValueError``, a bad value an
    ``equinox.EquinoxRuntimeError`` naming the argument, when the arrays are concrete and under ``jit``
    alike (the one value check), and
    [`forward`][cfm_jax.forward] checks them again (``checked``), so a measure built by
    ``jax.tree.map`` is checked too.

    Sampled contexts approach this limit slowly when the logits spread: for a query x the softmax
    weights of n points drawn from N(m, Σ) are log-normal with log-variance $σ^2 = u^⊤Σu$ ($u = Q^⊤K x$
    per head), so the softmax's effective sample size is about $n e^{−σ^2}$ ($σ^2 ≈ 9$ for unit tokens at
    d = 6 with the default initialisation: n must far exceed $e^9$ before the sampled flow is close).
    """

    mean: Float[Array, " d"]
    cov: Float[Array, "d d"]

    def __init__(self, mean: ArrayLike, cov: ArrayLike):
        mean = jnp.asarray(mean)
        cov = jnp.asarray(cov)
        if mean.ndim != 1 or mean.shape[0] == 0:
            raise ValueError(f"GaussianMeasure: `mean` must have shape (d,) with d >= 1, got {mean.shape}.")
        d = mean.shape[0]
        if cov.shape != (d, d):
            raise ValueError(
                f"GaussianMeasure: `cov` must have shape (d, d) = ({d}, {d}) to match `mean`, got {cov.shape}."
            )
        dtype = jnp.result_type(mean, cov, float)
        mean, cov = mean.astype(dtype), cov.astype(dtype)
        if is_concrete(mean):  # given values: checked now (traced ones by the entry point, `checked`)
            check_finite("mean", mean)
        if is_concrete(cov):
            check_finite("cov", cov)
            c = np.asarray(cov, dtype=np.float64)
            asym = np.abs(c - c.T).max() > _symmetry_tolerance(dtype) * max(np.abs(c).max(), np.finfo(np.float64).tiny)
            cov = check(cov, asym, "GaussianMeasure: `cov` must be symmetric.")
            eig = np.linalg.eigvalsh(0.5 * (c + c.T))
            cov = check(
                cov,
                eig.min() <= _definiteness_tolerance(dtype, d) * np.abs(eig).max(),
                f"GaussianMeasure: `cov` must be positive definite (its smallest eigenvalue is {eig.min():.3g}, "
                f"its largest {eig.max():.3g}).",
            )
        self.mean, self.cov = _checked_values(mean, cov, "GaussianMeasure: ", traced_only=True)

    @classmethod
    def unchecked(cls, mean, cov) -> GaussianMeasure:
        """A measure from arrays without validation (the flow's own moments)."""
        with jax.ensure_compile_time_eval():  # a concrete template: a traced one would be checked
            template = cls(np.zeros((mean.shape[-1],), mean.dtype), np.eye(mean.shape[-1], dtype=mean.dtype))
        return eqx.tree_at(lambda g: (g.mean, g.cov), template, (mean, cov))

    @property
    def dim(self) -> int:
        """Ambient dimension d."""
        return self.mean.shape[-1]

    def checked(self, name: str = "context") -> GaussianMeasure:
        """This measure with its values checked inside compiled code (the one value check): the rule of the
        class docstring. The error names ``name``."""
        mean, cov = _checked_values(self.mean, self.cov, f"`{name}`: ", traced_only=False)
        return GaussianMeasure.unchecked(mean, cov)

    def sample(self, key, n: int, *, qmc: bool = False) -> Float[Array, "n d"]:
        """``(n, d)`` points: i.i.d. draws, or (``qmc=True``) scrambled-Sobol points through the
        inverse normal CDF (:func:`cfm_jax.sobol_normal`); both pure in ``key``."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or int(n) < 1:
            raise ValueError(f"`n` must be a positive int (number of samples), got {n!r}.")
        n = int(n)
        key = as_key(key)
        dtype = self.mean.dtype
        g = sobol_normal(key, n, self.dim, dtype) if qmc else jax.random.normal(key, (n, self.dim), dtype)
        return self.mean + g @ jnp.linalg.cholesky(self.cov).T


_NONFINITE_POINTS = "EmpiricalMeasure: `points` contains non-finite values (nan/inf)."


def _weight_rule(subject: str, dtype) -> tuple[str, str, str]:
    """The messages of the one rule for the weights (module docstring), each starting with ``subject``:
    ``(non-finite, negative, not summing to one)``. The same text eagerly and inside compiled code,
    where the values are unknown when the message is written (so no value is quoted)."""
    tol = weight_sum_tolerance(dtype)
    return (
        f"{subject} contain non-finite values (nan/inf).",
        f"{subject} must be non-negative.",
        f"{subject} must sum to 1 within {tol:g} (a probability vector). Normalise them, e.g. weights / weights.sum().",
    )


def _checked_weights(weights, subject: str, values, xp):
    """``weights`` with the weight rule attached (the one value check): ``values`` are the weights in
    the array module ``xp`` that tests them (NumPy for given values, jax.numpy for traced ones)."""
    nonfinite, negative, total = _weight_rule(subject, weights.dtype)
    weights = check(weights, ~xp.all(xp.isfinite(values)), nonfinite)
    weights = check(weights, xp.any(values < 0), negative)
    return check(weights, xp.abs(xp.sum(values) - 1) > weight_sum_tolerance(weights.dtype), total)


def _checked_values(mean, cov, prefix: str, *, traced_only: bool):
    """``(mean, cov)`` with the class docstring's rule attached inside compiled code (the one value check);
    ``traced_only``: only for traced arrays (concrete ones were checked eagerly)."""
    d = mean.shape[-1]
    if not (traced_only and is_concrete(mean)):
        mean = check(mean, ~jnp.all(jnp.isfinite(mean)), f"{prefix}`mean` contains non-finite values.")
    if not (traced_only and is_concrete(cov)):
        cov = check(cov, ~jnp.all(jnp.isfinite(cov)), f"{prefix}`cov` contains non-finite values.")
        asym = jnp.max(jnp.abs(cov - cov.T)) > _symmetry_tolerance(cov.dtype) * jnp.max(jnp.abs(cov))
        cov = check(cov, asym, f"{prefix}`cov` must be symmetric.")
        eig = jnp.linalg.eigvalsh(0.5 * (cov + cov.T))
        definite = eig[0] > _definiteness_tolerance(cov.dtype, d) * jnp.max(jnp.abs(eig))
        # NaN entries make eigvalsh NaN: the finiteness check above names them
        cov = check(cov, ~definite & jnp.all(jnp.isfinite(cov)), f"{prefix}`cov` must be positive definite.")
    return mean, cov


def as_measure(context) -> EmpiricalMeasure:
    """Accept an `EmpiricalMeasure` or an `(n, d)` array (uniform weights)."""
    if isinstance(context, EmpiricalMeasure):
        return context
    return EmpiricalMeasure(as_array("context", context))


def split_atom(measure: EmpiricalMeasure, index: int, fraction: float = 0.5) -> EmpiricalMeasure:
    """Split atom `index` into two co-located copies with weights `fraction·w`, `(1−fraction)·w`.

    The measure is unchanged, so every measure-dependent quantity must be too (an invariance).
    ``index`` is an int in ``[-n, n)``; ``fraction`` in (0, 1).
    """
    if not isinstance(measure, EmpiricalMeasure):
        raise ValueError(f"`measure` must be an EmpiricalMeasure, got {type(measure).__name__}.")
    n = measure.size
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not -n <= index < n:
        raise ValueError(f"`index` must be an int in [-{n}, {n}) for a measure of n = {n} atoms, got {index!r}.")
    if not 0 < float(fraction) < 1:
        raise ValueError(f"`fraction` must lie in (0, 1), got {fraction!r}.")
    index = int(index) % n
    z, w = measure.points, measure.weights
    points = jnp.concatenate([z, z[index : index + 1]], axis=0)
    weights = jnp.concatenate([w.at[index].multiply(fraction), w[index : index + 1] * (1 - fraction)])
    return EmpiricalMeasure(points, weights)


__all__ = ["EmpiricalMeasure", "GaussianMeasure", "as_measure", "split_atom", "weight_sum_tolerance"]
