"""Population laws P for context tokens: samplers ``sampler(key, n) -> (n, d)``.

Each constructor returns a small Equinox module that is callable as ``sampler(key, n)`` and
records ``dim`` (ambient d) and ``intrinsic_dim`` (d' of the support: the exponent in the
empirical W1 rate n^{-1/d'}). All samplers are pure, jit- and vmap-able in ``key``.

``sampler(key, n, qmc=True)`` draws randomised quasi-Monte Carlo points instead of i.i.d. ones:
scrambled Sobol points (:func:`cfm_jax._qmc.sobol`) mapped through the law's inverse-CDF
transform (Gaussian coordinates by the inverse normal CDF, a mixture component by the inverse
CDF of its categorical law on one extra coordinate, spheres by normalising QMC Gaussians). Each
point still has the law P, and smooth averages over the n points converge faster than n^{-1/2}
(a low-floor reference for the infinite-context system).

- :func:`isotropic_gaussian` — N(mean, scale² I_d);
- :func:`gaussian_mixture` — equal-variance Gaussian components with given means and weights;
- :func:`uniform_sphere` — uniform on the sphere $S^{d−1}$ of radius ``radius`` in $R^d$;
- :func:`subspace_gaussian` — standard Gaussian on a random d'-dimensional subspace of $R^d$;
- :func:`embedded_sphere` — uniform on a d'-sphere $S^{d'}$ in a random (d'+1)-dim subspace of $R^d$.
"""

from __future__ import annotations

import abc
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._qmc import sobol, sobol_normal
from ._random import as_key


def _check_dim(name, v, low=1):
    if not isinstance(v, (int, np.integer)) or int(v) < low:
        raise ValueError(f"`{name}` must be an int >= {low}, got {v!r}.")
    return int(v)


def _check_n(n):
    if not isinstance(n, (int, np.integer)) or int(n) < 1:
        raise ValueError(f"`n` must be a positive int (number of samples), got {n!r}.")
    return int(n)


def _random_frame(seed: int, dim: int, k: int) -> np.ndarray:
    """Orthonormal (dim, k) frame drawn from a fixed seed (NumPy: a constant, not a traced key)."""
    g = np.random.default_rng(seed).normal(size=(dim, k))
    q, _ = np.linalg.qr(g)
    return q[:, :k]


class Population(eqx.Module):
    """A population law; ``sampler(key, n)`` draws ``(n, dim)`` i.i.d. points, ``sampler(key, n,
    qmc=True)`` scrambled-Sobol points with the same law (module docstring)."""

    dim: int = eqx.field(static=True)
    intrinsic_dim: int = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def __call__(self, key, n: int, *, qmc: bool = False) -> Float[Array, "n d"]:
        n = _check_n(n)
        if not isinstance(qmc, bool):
            raise ValueError(f"`qmc` must be True or False, got {qmc!r}.")
        return _draw(self, as_key(key), n, qmc)

    @abc.abstractmethod
    def _sample(self, key, n: int) -> Array:
        """``(n, dim)`` i.i.d. points."""

    @abc.abstractmethod
    def _sample_qmc(self, key, n: int) -> Array:
        """``(n, dim)`` scrambled-Sobol points of the same law."""


@eqx.filter_jit
def _draw(population: Population, key, n: int, qmc: bool) -> Array:
    # one program per (law, n): eagerly each operation of a draw would be its own XLA program
    return population._sample_qmc(key, n) if qmc else population._sample(key, n)


class _Gaussian(Population):
    mean: Array
    scale: float

    def _sample(self, key, n):
        return self.mean + self.scale * jax.random.normal(key, (n, self.dim), self.mean.dtype)

    def _sample_qmc(self, key, n):
        return self.mean + self.scale * sobol_normal(key, n, self.dim, self.mean.dtype)


class _Mixture(Population):
    means: Array
    log_weights: Array
    scale: float

    def _sample(self, key, n):
        kc, kn = jax.random.split(key)
        comp = jax.random.categorical(kc, self.log_weights, shape=(n,))
        return self.means[comp] + self.scale * jax.random.normal(kn, (n, self.dim), self.means.dtype)

    def _sample_qmc(self, key, n):
        # coordinate 0 picks the component by its inverse CDF, the others are the Gaussian's
        u = sobol(key, n, self.dim + 1, self.means.dtype)
        cdf = jnp.cumsum(jnp.exp(self.log_weights))
        comp = jnp.minimum(jnp.searchsorted(cdf, u[:, 0], side="right"), self.means.shape[0] - 1)
        return self.means[comp] + self.scale * jax.scipy.special.ndtri(u[:, 1:])


class _Sphere(Population):
    frame: Array  # (d, k): the sphere S^{k-1} lives in span(frame)
    radius: float

    def _sample(self, key, n):
        k = self.frame.shape[1]
        g = jax.random.normal(key, (n, k), self.frame.dtype)
        u = g / jnp.linalg.norm(g, axis=-1, keepdims=True)
        return self.radius * u @ self.frame.T

    def _sample_qmc(self, key, n):
        g = sobol_normal(key, n, self.frame.shape[1], self.frame.dtype)
        return self.radius * (g / jnp.linalg.norm(g, axis=-1, keepdims=True)) @ self.frame.T


class _Subspace(Population):
    frame: Array  # (d, d')
    scale: float

    def _sample(self, key, n):
        k = self.frame.shape[1]
        return self.scale * jax.random.normal(key, (n, k), self.frame.dtype) @ self.frame.T

    def _sample_qmc(self, key, n):
        return self.scale * sobol_normal(key, n, self.frame.shape[1], self.frame.dtype) @ self.frame.T


def isotropic_gaussian(dim: int, *, scale: float = 1.0, mean=None) -> Population:
    """N(mean, scale² I_dim); ``mean`` defaults to 0. Its population name is ``"gaussian"``."""
    dim = _check_dim("dim", dim)
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"`scale` must be finite and > 0, got {scale!r}.")
    mean = jnp.zeros((dim,)) if mean is None else jnp.asarray(mean, dtype=jnp.result_type(float))
    if mean.shape != (dim,):
        raise ValueError(f"`mean` must have shape ({dim},), got {mean.shape}.")
    return _Gaussian(dim=dim, intrinsic_dim=dim, name="gaussian", mean=mean, scale=float(scale))


def gaussian_mixture(means, *, scale: float = 0.5, weights=None) -> Population:
    """Mixture of N(means[k], scale² I) with probabilities ``weights`` (uniform by default).

    ``means``: ``(K, d)`` component centres.
    """
    means = jnp.asarray(means, dtype=jnp.result_type(float))
    if means.ndim != 2 or means.shape[0] < 1:
        raise ValueError(f"`means` must have shape (K, d) with K >= 1, got {means.shape}.")
    K, dim = means.shape
    if weights is None:
        weights = np.full((K,), 1.0 / K)
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (K,) or (weights <= 0).any() or not np.isfinite(weights).all():
        raise ValueError(f"`weights` must be {K} positive finite numbers, got {weights!r}.")
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"`scale` must be finite and > 0, got {scale!r}.")
    return _Mixture(
        dim=dim,
        intrinsic_dim=dim,
        name="gaussian_mixture",
        means=means,
        log_weights=jnp.log(jnp.asarray(weights / weights.sum(), means.dtype)),
        scale=float(scale),
    )


def uniform_sphere(dim: int, *, radius: float = 1.0) -> Population:
    """Uniform on the sphere $S^{dim−1}$ of radius ``radius`` in $R^{dim}$ (intrinsic dimension dim − 1)."""
    dim = _check_dim("dim", dim, low=2)
    return _Sphere(dim=dim, intrinsic_dim=dim - 1, name="uniform_sphere", frame=jnp.eye(dim), radius=float(radius))


def subspace_gaussian(dim: int, intrinsic_dim: int, *, scale: float = 1.0, seed: int = 0) -> Population:
    """Standard Gaussian (std ``scale``) on a random ``intrinsic_dim``-dimensional subspace of $R^{dim}$.

    The subspace is drawn once from ``seed`` (a fixed law, not a per-sample key).
    """
    dim = _check_dim("dim", dim)
    k = _check_dim("intrinsic_dim", intrinsic_dim)
    if k > dim:
        raise ValueError(f"`intrinsic_dim` ({k}) must be <= `dim` ({dim}).")
    frame = jnp.asarray(_random_frame(seed, dim, k), dtype=jnp.result_type(float))
    return _Subspace(dim=dim, intrinsic_dim=k, name="subspace_gaussian", frame=frame, scale=float(scale))


def embedded_sphere(dim: int, intrinsic_dim: int, *, radius: float = 1.0, seed: int = 0) -> Population:
    """Uniform on a sphere $S^{d'}$ ($d'$ = ``intrinsic_dim``) in a random $(d'+1)$-dim subspace of $R^{dim}$."""
    dim = _check_dim("dim", dim, low=2)
    k = _check_dim("intrinsic_dim", intrinsic_dim)
    if k + 1 > dim:
        raise ValueError(f"S^{k} needs an ambient dimension >= {k + 1}, got `dim` = {dim}.")
    frame = jnp.asarray(_random_frame(seed, dim, k + 1), dtype=jnp.result_type(float))
    return _Sphere(dim=dim, intrinsic_dim=k, name="embedded_sphere", frame=frame, radius=float(radius))


#: the population names :func:`make_population` knows.
PopulationName = Literal["gaussian", "gaussian_mixture", "uniform_sphere", "subspace_gaussian", "embedded_sphere"]


def make_population(name: PopulationName, dim: int, intrinsic_dim: int | None = None, **kwargs) -> Population:
    """Population by name: ``gaussian`` (:func:`isotropic_gaussian`), ``uniform_sphere``, ``subspace_gaussian``,
    ``embedded_sphere``, ``gaussian_mixture`` (two components at $±2 e_1$)."""
    if name == "gaussian":
        return isotropic_gaussian(dim, **kwargs)
    if name == "uniform_sphere":
        return uniform_sphere(dim, **kwargs)
    if name == "subspace_gaussian":
        return subspace_gaussian(dim, intrinsic_dim if intrinsic_dim is not None else 2, **kwargs)
    if name == "embedded_sphere":
        return embedded_sphere(dim, intrinsic_dim if intrinsic_dim is not None else 1, **kwargs)
    if name == "gaussian_mixture":
        e = np.zeros((2, dim))
        e[0, 0], e[1, 0] = 2.0, -2.0
        return gaussian_mixture(e, **kwargs)
    raise ValueError(
        f"`name` must be a population name: one of gaussian, gaussian_mixture, uniform_sphere, subspace_gaussian, "
        f"embedded_sphere; got {name!r}."
    )


__all__ = [
    "Population",
    "PopulationName",
    "embedded_sphere",
    "gaussian_mixture",
    "isotropic_gaussian",
    "make_population",
    "subspace_gaussian",
    "uniform_sphere",
]
