"""The Monte-Carlo reference's floor: what a reference measured on one context of n_ref tokens does to
the fitted token sample complexity of ``token_sample`` (:mod:`.token_sample`).

What the Monte-Carlo numbers measure follows mostly from arithmetic. If the n-point error and the
reference's own are independent, of sizes err(n) = c·n^β and err(n_ref), the error against the
reference is

    err_MC(n) = √(err(n)² + err(n_ref)²)        (the floor model; at β = −1/2: c·√(1/n + 1/n_ref)),

whose fitted slope is flatter and whose fitted prefactor, an intercept at n = 1, is lower, while at
every measured n err_MC/err = √(1 + (n/n_ref)^{−2β}) ≥ 1: the Monte-Carlo referenced error is
*larger*. :func:`floor_model` predicts Δβ, the prefactor ratio and err_MC/err from the exact
reference's own fit; the line prints each prediction beside the measured number, and the measured
err_MC/err at the smallest and the largest n instead of the intercept alone. Where the measured
numbers follow the prediction, the reference adds its own error and nothing else.

:func:`paired` fits both references on the same contexts, per seed, and gives Δβ = β_MC − β_exact
and the prefactor ratio c_MC/c_exact with Student-t intervals over seeds
(:func:`cfm_jax.stats.mean_ci`). :func:`beyond_floor` is what the claim line judges: the measured Δβ
minus the floor model's, an effect of the reference that its own error's addition does not explain.
"""

from __future__ import annotations

import math

import numpy as np

from cfm_jax.stats import mean_ci


def paired(ns, exact, mc) -> dict:
    """Per-seed slopes and log-prefactors of both references (least squares of log err on log n):
    Δβ = β_MC − β_exact and the prefactor ratio c_MC/c_exact, each with its Student-t interval."""
    lx = np.log(np.asarray(ns, np.float64))
    fit = lambda y: np.polyfit(lx, np.log(np.asarray(y, np.float64)).T, 1)  # noqa: E731  (2, seeds)
    (b_ex, a_ex), (b_mc, a_mc) = fit(exact), fit(mc)
    d, half = mean_ci(b_mc - b_ex)
    r, rhalf = mean_ci(a_mc - a_ex)
    return {
        "delta": {"value": d, "ci_low": d - half, "ci_high": d + half},
        "ratio": {"value": math.exp(r), "ci_low": math.exp(r - rhalf), "ci_high": math.exp(r + rhalf)},
    }


def floor_model(ns, slope: float, n_ref: int) -> dict:
    """The floor model's prediction (module docstring) on the grid ``ns`` for an exact-reference error
    c·n^``slope``: ``delta`` (β_MC − β_exact), ``ratio`` (the fitted prefactors' ratio, at n = 1) and
    ``error_ratio`` (err_MC/err at each n); c cancels."""
    lx = np.log(np.asarray(ns, np.float64))
    exact = slope * lx
    mc = 0.5 * np.log(np.exp(2 * exact) + float(n_ref) ** (2 * slope))
    b, a = np.polyfit(lx, mc, 1)
    return {"delta": float(b - slope), "ratio": float(np.exp(a)), "error_ratio": np.exp(mc - exact).tolist()}


def beyond_floor(delta, exact_fit, ns, n_ref: int) -> dict:
    """The measured Δβ (``delta``: value and interval) minus the floor model's Δβ, with an interval
    that holds both uncertainties: the floor model's Δβ taken at the exact reference's slope, at both
    edges of its interval (``exact_fit``), and the widest difference kept. ``null`` (None) where a
    number is missing (how a row stores NaN)."""
    nan = float("nan")
    num = lambda x: nan if x is None else float(x)  # noqa: E731
    value, lo, hi = (num(delta.get(k)) for k in ("value", "ci_low", "ci_high"))
    slopes = [num(exact_fit.get(k)) for k in ("slope", "ci_low", "ci_high")]
    if not all(map(math.isfinite, slopes)):
        return {"value": None, "ci_low": None, "ci_high": None, "floor": None}
    floors = [floor_model(ns, s, n_ref)["delta"] for s in slopes]
    out = {"value": value - floors[0], "ci_low": lo - max(floors), "ci_high": hi - min(floors), "floor": floors[0]}
    return {k: v if math.isfinite(v) else None for k, v in out.items()}


__all__ = ["beyond_floor", "floor_model", "paired"]
