"""The statistics of the claims experiments, every interval through :mod:`cfm_jax.stats`.

- prefactors: C in deviation ≈ C n^{-1/2}, fitted with the slope fixed at −1/2 as
  exp(mean over seeds and n of log(√n · dev)) (:func:`prefactor`), ratios of two of them
  (:func:`ratio`), growth laws of per-configuration means (:func:`growth`, a polynomial fit);
- rates: the log-log slope in n over all n and over the :data:`LARGE_N` largest (:func:`slope_fit`,
  :func:`large_n_slope`), and local slopes between consecutive sizes (:func:`local_slopes`);
- tails: the upper quantile q_δ (an order statistic, :func:`upper_quantile`), the affine form
  q_δ√n ≈ a + b√log(1/δ) (:func:`tail_fits`) and the tail exponent γ of
  log q_δ ≈ c + γ log log(1/δ) (:func:`tail_exponent`: ½ for a sub-Gaussian tail, 1 for a
  sub-exponential one).

Plain NumPy on the rows, outside any jit. Intervals are 95 % percentile bootstraps over seeds (a
slope's, below :data:`cfm_jax.stats.MIN_BOOTSTRAP_SEEDS` seeds, the Student-t interval of the per-seed
slopes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from cfm_jax.stats import Interval, RateFit, bootstrap, fit_loglog, fit_polynomial

#: bootstrap resamples of every confidence interval.
N_BOOT = 1000
#: the number of largest context sizes of a "large-n" slope.
LARGE_N = 3
#: the tail levels δ of the n-sweep (quantile at 1 − δ).
DELTAS = (0.5, 0.2, 0.1, 0.05, 0.01)


def ci(v: float | Interval, lo: float | None = None, hi: float | None = None, fmt: str = ".3g") -> str:
    """``value [low, high]`` of an :class:`~cfm_jax.stats.Interval` (or of three numbers), as the
    interval writes itself with the format ``fmt``."""
    return format(v if isinstance(v, Interval) else Interval(v, lo, hi), fmt)  # pyright: ignore[reportArgumentType]


def log_prefactors(ns, values) -> np.ndarray:
    """Per-seed log prefactor: mean over n of log(√n · dev) (the slope fixed at −1/2); ``(seeds,)``."""
    y = np.asarray(values, np.float64)
    n = np.asarray(ns, np.float64)
    return np.mean(np.log(np.maximum(y, np.finfo(np.float64).tiny)) + 0.5 * np.log(n), axis=1)


def prefactor(ns, values, n_boot: int = N_BOOT) -> Interval:
    """C = exp(mean over seeds and n of log(√n·dev)), with its bootstrap interval over seeds."""
    return bootstrap(lambda lp: np.exp(lp.mean()), log_prefactors(ns, values), n_boot=n_boot)


def ratio(ns, values, ref_values, n_boot: int = N_BOOT) -> Interval:
    """C / C_ref, the two sets of seeds resampled independently (different models)."""
    a, b = log_prefactors(ns, values), log_prefactors(ns, ref_values)
    return bootstrap(lambda x, y: np.exp(x.mean() - y.mean()), a, b, n_boot=n_boot)


def growth(xs, per_config: Sequence, deg: int = 1, n_boot: int = N_BOOT) -> list[Interval]:
    """Polynomial in x of the mean per configuration (e.g. log C against log d or β), coefficients
    highest degree first, each with its interval (seeds resampled per configuration)."""
    return fit_polynomial(np.asarray(xs, np.float64), [np.asarray(v) for v in per_config], deg, n_boot=n_boot)


def slope_fit(ns, values, n_boot: int = N_BOOT) -> RateFit:
    """Log-log slope of the deviation in n (mean over seeds of log dev), with its interval."""
    return fit_loglog(np.asarray(ns, np.float64), np.asarray(values, np.float64).T, n_boot=n_boot)


def large_n_slope(ns, values, n_boot: int = N_BOOT) -> RateFit:
    """:func:`slope_fit` over the :data:`LARGE_N` largest n (past a small-n regime)."""
    order = np.argsort(np.asarray(ns))[-LARGE_N:]
    return slope_fit(np.asarray(ns)[order], np.asarray(values)[:, order], n_boot=n_boot)


def local_slopes(ns, values) -> np.ndarray:
    """Slopes of log(mean over seeds of dev) between consecutive n: ``(len(ns) − 1,)``.

    The mean (not the mean of logs): with a heavy-tailed deviation the expectation is the quantity
    whose rate the bound speaks of."""
    n = np.log(np.asarray(ns, np.float64))
    m = np.log(np.asarray(values, np.float64).mean(axis=0))
    return np.diff(m) / np.diff(n)


def upper_quantile(sample, delta: float) -> float:
    """The (1 − δ)-quantile as an order statistic: the smallest sample value q such that at most
    a fraction δ of the sample lies strictly above it, i.e. the ⌈(1 − δ)N⌉-th smallest value."""
    y = np.sort(np.asarray(sample, np.float64).ravel())
    if not 0 < delta < 1 or y.size == 0:
        raise ValueError(f"need 0 < delta < 1 and a non-empty sample, got delta={delta!r}, {y.size} values.")
    k = math.ceil((1.0 - delta) * y.size - 1e-9)  # the -1e-9 absorbs (1 − δ)N = integer + round-off
    return float(y[max(k, 1) - 1])


def upper_quantiles(sample, deltas: Sequence[float]) -> np.ndarray:
    """:func:`upper_quantile` at every δ (one sort): ``(len(deltas),)``."""
    y = np.sort(np.asarray(sample, np.float64).ravel())
    ks = [max(math.ceil((1.0 - d) * y.size - 1e-9), 1) - 1 for d in deltas]
    return y[ks]


def tail_quantiles(values, deltas: Sequence[float] = DELTAS) -> np.ndarray:
    """Quantiles of the sup deviation at levels 1 − δ over seeds, at each n: ``(len(deltas), len(ns))``
    (linear interpolation between order statistics, as ``np.quantile``)."""
    return np.quantile(np.asarray(values, np.float64), 1.0 - np.asarray(deltas), axis=0)


def _tail_stats(sample, n, t, deltas):
    q = tail_quantiles(sample, deltas) * np.sqrt(n)  # (D, K)
    lin = np.polyfit(t, q, 1)  # (2, K): b, a
    quad = np.polyfit(t, q, 2)[0]  # (K,)
    sl = np.polyfit(np.log(n), np.log(q / np.sqrt(n)).T, 1)[0]  # (D,)
    return np.concatenate([lin[1], lin[0], quad, sl])


def tail_fits(ns, values, deltas: Sequence[float] = DELTAS, n_boot: int = N_BOOT) -> dict:
    """The high-probability form over an n-sweep (seeds resampled jointly across n):

    - ``intercept``, ``coefficient``: per n, q_δ√n = a + b·t with t = √log(1/δ) (least squares over δ);
    - ``curvature``: per n, the t² coefficient of a quadratic fit (0 if affine);
    - ``slopes``: per δ, the log-log slope of q_δ in n (−1/2 if q_δ√n is the same at every n);
    - ``ordered``: whether q_δ increases strictly as δ decreases, at every n.

    Each entry is a dict of lists ``value``, ``ci_low``, ``ci_high``.
    """
    y = np.asarray(values, np.float64)
    n = np.asarray(ns, np.float64)
    t = np.sqrt(np.log(1.0 / np.asarray(deltas, np.float64)))
    K, D = n.size, len(deltas)
    cut = np.cumsum([0, K, K, K, D])
    # every statistic is one entry of the same vector: the bootstraps (one seed, hence the same
    # resamples) share one computation per resample
    cache: dict[int, np.ndarray] = {}

    def entry(s, j):
        key = hash(s.tobytes())
        if key not in cache:
            cache[key] = _tail_stats(s, n, t, deltas)
        return float(cache[key][j])

    intervals = [bootstrap(lambda s, j=j: entry(s, j), y, n_boot=n_boot) for j in range(int(cut[-1]))]

    def part(j):
        sel = intervals[cut[j] : cut[j + 1]]
        return dict(value=[i.value for i in sel], ci_low=[i.ci_low for i in sel], ci_high=[i.ci_high for i in sel])

    q = tail_quantiles(y, deltas)
    return dict(
        ns=n.tolist(),
        deltas=list(deltas),
        quantiles=q.tolist(),
        intercept=part(0),
        coefficient=part(1),
        curvature=part(2),
        slopes=part(3),
        ordered=bool(np.all(np.diff(q, axis=0) > 0)),
    )


def exponent_of(quantiles, deltas) -> float:
    """Least-squares slope γ of log q_δ against log log(1/δ)."""
    x = np.log(np.log(1.0 / np.asarray(deltas, np.float64)))
    return float(np.polyfit(x, np.log(np.asarray(quantiles, np.float64)), 1)[0])


def tail_exponent(sample, deltas: Sequence[float], n_boot: int = N_BOOT) -> Interval:
    """The tail exponent γ of ``sample``: q_δ ≈ c·log(1/δ)^γ over ``deltas`` (½: sub-Gaussian,
    1: sub-exponential), with its bootstrap interval over the sample."""
    return bootstrap(lambda s: exponent_of(upper_quantiles(s, deltas), deltas), np.asarray(sample), n_boot=n_boot)


__all__ = [
    "DELTAS",
    "LARGE_N",
    "N_BOOT",
    "ci",
    "exponent_of",
    "growth",
    "large_n_slope",
    "local_slopes",
    "log_prefactors",
    "prefactor",
    "ratio",
    "slope_fit",
    "tail_exponent",
    "tail_fits",
    "tail_quantiles",
    "upper_quantile",
    "upper_quantiles",
]
