"""The statistics of the OGD parts (plain NumPy, outside any jit): growth exponents, per-step rates
and means over seeds.

Every interval is over seeds, as :mod:`cfm_jax.stats` takes them: a percentile bootstrap from
:data:`~cfm_jax.stats.MIN_BOOTSTRAP_SEEDS` seeds on, the Student-t interval below (two seeds' bootstrap
interval is their [min, max], which holds the mean half the time). The rules reading them are in
:mod:`cfm_experiments.verdicts.ogd`.
"""

from __future__ import annotations

import numpy as np

from cfm_jax.stats import MIN_BOOTSTRAP_SEEDS, Interval, RateFit, bootstrap, fit_loglog, mean_ci


def growth_fits(window_k, window_max) -> list[RateFit]:
    """Growth exponent β of window maxima ``(S, W, len(ns))`` against the windows' last steps
    ``(W,)`` (log-log, per n, CI over seeds): 0 for a bounded deviation, 1/2 for a random walk,
    1 for linear growth."""
    k = np.asarray(window_k, float)
    w = np.asarray(window_max, float)
    return [fit_loglog(k, w[:, :, i].T) for i in range(w.shape[2])]


def _mean(values: np.ndarray) -> Interval:
    """Mean over seeds ``(S,)`` and its interval: bootstrap from MIN_BOOTSTRAP_SEEDS seeds, else Student-t."""
    if values.size >= MIN_BOOTSTRAP_SEEDS:
        return bootstrap(lambda a: a.mean(), values)
    mean, half = mean_ci(values)
    return Interval(mean, mean - half, mean + half)


def geometric_mean_ci(ratios) -> Interval:
    """Geometric mean over seeds of positive ``ratios (S,)`` and its interval (the mean's of the logs)."""
    logs = np.log(np.maximum(np.asarray(ratios, float).ravel(), np.finfo(float).tiny))
    iv = _mean(logs)
    return Interval(float(np.exp(iv.value)), float(np.exp(iv.ci_low)), float(np.exp(iv.ci_high)))


def exponential_rates(devs, start: int, stop) -> np.ndarray:
    """Per seed, the least-squares slope of log e_k against k over steps ``start`` … ``stop[s]``
    (1-based, inclusive; ``devs (S, K)``): the per-step exponential growth rate, log of the step
    factor. A window shorter than 3 steps gives NaN."""
    devs = np.asarray(devs, float)
    out = np.full(devs.shape[0], np.nan)
    for s, end in enumerate(np.broadcast_to(np.asarray(stop), devs.shape[:1])):
        k = np.arange(start, int(end) + 1)
        if k.size >= 3:
            out[s] = np.polyfit(k, np.log(np.maximum(devs[s, k - 1], np.finfo(float).tiny)), 1)[0]
    return out


def mean_interval(values) -> Interval:
    """Mean over seeds (NaNs dropped) and its interval (bootstrap, or Student-t below
    MIN_BOOTSTRAP_SEEDS seeds)."""
    v = np.asarray(values, float).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"))
    return _mean(v)


__all__ = ["exponential_rates", "geometric_mean_ci", "growth_fits", "mean_interval"]
