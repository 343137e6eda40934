"""Synchronisation observables of a token configuration x: (N, d) on the sphere (docs/stochastic.md).

Energy convention (the second paper's, no 1/β): the interaction energy ½∬ e^{β<x,y>} dμ dμ,
maximal at a Dirac, and its deficit

    E_β(μ) = ½ ∬ (e^β − e^{β<x,y>}) dμ(x) dμ(y) ≥ 0     (:func:`energy_deficit`)

which vanishes exactly at synchronisation; the paper's theorem bounds E[E_β(μ_t)].
All functions take one configuration; vmap over time and realisations. Pairwise quantities use
r_ij = ½‖x_i − x_j‖² (= 1 − <x_i, x_j> on the sphere) so that they keep full relative precision
as the tokens merge (the deficit is evaluated as e^β (−expm1(−β r)), never as a difference of
two nearly equal exponentials).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float


def _tokens(x, name: str = "x"):
    """``x`` as an array of one configuration ``(N, d)``; the rank is checked at trace time."""
    x = jnp.asarray(x)
    if x.ndim != 2 or x.shape[0] < 1:
        raise ValueError(f"`{name}` must be one configuration (N, d) with N >= 1, got shape {x.shape}.")
    return x


def _half_sqdist(x):
    diff = x[:, None, :] - x[None, :, :]
    return 0.5 * jnp.sum(diff * diff, axis=-1)


def interaction_energy(x: Float[Array, "N d"], beta: float) -> Array:
    """$½ ∬ e^{β⟨x,y⟩} dμ dμ$ for the uniform empirical measure (maximal at a Dirac)."""
    x = _tokens(x)
    r = _half_sqdist(x)
    return 0.5 * jnp.mean(jnp.exp(beta * (1.0 - r)))


def energy_deficit(x: Float[Array, "N d"], beta: float) -> Array:
    """The paper's energy $E_β(μ) = ½ ∬ (e^β − e^{β⟨x,y⟩}) dμ dμ ≥ 0$, zero exactly at synchronisation."""
    x = _tokens(x)
    r = _half_sqdist(x)
    return 0.5 * jnp.exp(beta) * jnp.mean(-jnp.expm1(-beta * r))


def distance_energy(x: Float[Array, "N d"], p: float) -> Array:
    """$∬ ‖x − y‖^{2p} dμ dμ$ (diagonal included, it contributes 0)."""
    x = _tokens(x)
    sq = 2.0 * _half_sqdist(x)
    safe = jnp.where(sq > 0, sq, 1.0)
    return jnp.mean(jnp.where(sq > 0, safe**p, 0.0))


def order_parameter(x: Float[Array, "N d"]) -> Array:
    """$‖(1/N) Σ_i x_i‖ ∈ [0, 1]$; 1 exactly at synchronisation."""
    x = _tokens(x)
    return jnp.linalg.norm(jnp.mean(x, axis=0))


def diameter(x: Float[Array, "N d"]) -> Array:
    r"""Largest pairwise distance $\max_{ij} ‖x_i − x_j‖$."""
    x = _tokens(x)
    return jnp.sqrt(2.0 * jnp.max(_half_sqdist(x)))


def observables(x: Float[Array, "N d"], beta: float = 1.0, ps=(0.25, 1.0)) -> dict[str, Array]:
    """All observables of one configuration: energy, deficit, distance energies, order, diameter."""
    out = {
        "energy": interaction_energy(x, beta),
        "deficit": energy_deficit(x, beta),
        "order": order_parameter(x),
        "diameter": diameter(x),
    }
    for p in ps:
        out[f"dist_energy_p{p:g}"] = distance_energy(x, p)
    return out


def trajectory_observables(xs: Float[Array, "... N d"], beta: float = 1.0, ps=(0.25, 1.0)):
    """:func:`observables` over any leading axes (realisations, times)."""
    f = lambda x: observables(x, beta, ps)  # noqa: E731
    for _ in range(xs.ndim - 2):
        f = jax.vmap(f)
    return f(xs)


def realisation_stats(values, *, floor: float = 1e-300) -> dict[str, np.ndarray]:
    """Mean, median and log-mean (exp of the mean log) over realisations.

    ``values``: ``(R, T)``. Returns three ``(T,)`` arrays.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.shape[0] < 1:
        raise ValueError(f"`values` must be (R, T) with R >= 1 realisations, got shape {v.shape}.")
    return {
        "mean": v.mean(0),
        "median": np.median(v, axis=0),
        "logmean": np.exp(np.log(np.maximum(v, floor)).mean(0)),
    }


def fit_exponential_rate(ts, y, *, t_min: float | None = None, floor: float = 1e-280) -> float:
    """Least-squares slope of log y(t) over t ≥ ``t_min`` (default: second half of the window).

    Points with y below ``floor`` (round-off) are dropped. Returns nan if fewer than 2 remain.
    """
    ts = np.asarray(ts, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if y.shape != ts.shape:
        raise ValueError(f"`y` must have the shape of `ts` {ts.shape}, got {y.shape}.")
    t_min = float(ts[len(ts) // 2]) if t_min is None else t_min
    keep = (ts >= t_min) & (y > floor) & np.isfinite(y)
    if keep.sum() < 2:
        return float("nan")
    return float(np.polyfit(ts[keep], np.log(y[keep]), 1)[0])


def nematic_order(x: Float[Array, "N d"]) -> Array:
    """Top eigenvalue of $(1/N) Σ_i x_i x_i^⊤ ∈ [1/d, 1]$; 1 exactly when all tokens lie on ±v."""
    x = _tokens(x)
    return jnp.linalg.eigvalsh(x.T @ x / x.shape[0])[-1]


def pairwise_cosines(x: Float[Array, "N d"]) -> Float[Array, " P"]:
    """The N(N−1)/2 cosine similarities $⟨x_i, x_j⟩$, i < j."""
    x = _tokens(x)
    i, j = np.triu_indices(x.shape[0], 1)
    return 1.0 - _half_sqdist(x)[i, j]
