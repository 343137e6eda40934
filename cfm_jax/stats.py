"""Statistics of sweeps over seeds: one bootstrap for every interval, power-law and polynomial fits.

Every confidence interval an experiment reports is a percentile bootstrap over independent
seeds (or realisations), :func:`bootstrap`: a statistic of one or more samples, each resampled
along its first axis, independently (unpaired) or with one shared index (paired: the samples
are rows of the same seeds). The fits are statistics of it:

- :func:`fit_loglog`, deviations y(n) ≈ C n^slope over sizes n:
  mean over seeds of log y(n_k) = intercept + slope · log n_k (ordinary least squares), the
  seeds resampled independently at every size;
- :func:`fit_polynomial`, a polynomial in x of the mean per configuration (e.g. log C against β).

:func:`mean_ci` is the Student-t interval of a mean (``scipy.stats.t.interval``). All plain
NumPy/SciPy, outside any jit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats


@dataclass(frozen=True)
class RateFit:
    """Fit of ``log y = intercept + slope · log x``; ``[ci_low, ci_high]`` is the bootstrap CI of the slope."""

    slope: float
    intercept: float
    ci_low: float
    ci_high: float

    @property
    def prefactor(self) -> float:
        """C in $y ≈ C x^s$, s = ``slope``."""
        return float(np.exp(self.intercept))

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in the slope's confidence interval."""
        return bool(self.ci_low <= value <= self.ci_high)

    def as_dict(self) -> dict:
        return {**asdict(self), "prefactor": self.prefactor}

    @classmethod
    def from_dict(cls, d: dict) -> RateFit:
        """The fit stored by ``as_dict`` in a JSON row, where a missing number (NaN: no CI
        from one mean per size) is ``null``."""
        return cls(
            *(float("nan") if d[k] is None else float(d[k]) for k in ("slope", "intercept", "ci_low", "ci_high"))
        )


def _check_level(level) -> None:
    if not (np.isfinite(float(level)) and 0 < float(level) < 1):
        raise ValueError(f"`level` (the confidence level) must be in (0, 1), got {level!r}.")


def _ols_slope(lx: np.ndarray, means: np.ndarray) -> np.ndarray:
    """Least-squares slope of ``means[..., k]`` against ``lx[k]`` (batched over leading axes)."""
    cx = lx - lx.mean()
    return (means * cx).sum(-1) / (cx**2).sum()


def fit_loglog(x: ArrayLike, y: ArrayLike, *, n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> RateFit:
    """Fit a power law to deviations ``y`` at sizes ``x``.

    Args:
        x: ``(K,)`` sizes (e.g. context lengths n), K >= 2.
        y: ``(K, S)`` one deviation per size and seed (or ``(K,)``: no CI). The fit is on the
            mean over seeds of ``log y``; the CI resamples the seeds independently at each size.
        n_boot: bootstrap resamples.
        level: confidence level.
        seed: the bootstrap's RNG seed.
    """
    _check_level(level)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if y.ndim == 1:
        y = y[:, None]
    if y.ndim != 2 or y.shape[0] != x.shape[0] or x.shape[0] < 2:
        raise ValueError(f"need >= 2 sizes and y of shape (K, S); got x {x.shape}, y {y.shape}.")
    if not (np.isfinite(x).all() and (x > 0).all()):
        raise ValueError(f"`x` (the sizes) must be finite and > 0 for a log-log fit, got {x.tolist()}.")
    if not (np.isfinite(y).all() and (y >= 0).all()):
        raise ValueError(
            "`y` (the deviations) must be finite and >= 0 for a log-log fit (0 counts as the "
            "smallest positive float); got nan/inf or negative values."
        )
    logy = np.log(np.maximum(y, np.finfo(np.float64).tiny))
    lx = np.log(x)
    slope, intercept = np.polyfit(lx, logy.mean(axis=1), 1)
    lo = hi = float("nan")
    if y.shape[1] > 1 and np.ptp(logy, axis=1).max() > 0:

        def statistic(*samples, axis=-1):
            return _ols_slope(lx, np.stack([s.mean(axis=axis) for s in samples], axis=-1))

        res = stats.bootstrap(
            tuple(logy),
            statistic,
            n_resamples=n_boot,
            confidence_level=level,
            method="percentile",
            vectorized=True,
            paired=False,
            rng=np.random.default_rng(seed),
        )
        lo, hi = res.confidence_interval
    return RateFit(float(slope), float(intercept), float(lo), float(hi))


@dataclass(frozen=True)
class Interval:
    """A statistic's value and its bootstrap confidence interval ``[ci_low, ci_high]`` at ``level``."""

    value: float
    ci_low: float
    ci_high: float
    level: float = 0.95

    def contains(self, x: float) -> bool:
        """Whether ``x`` lies in the interval."""
        return bool(self.ci_low <= x <= self.ci_high)

    def as_dict(self) -> dict:
        return asdict(self)


def bootstrap(
    statistic: Callable[..., float],
    *samples: ArrayLike,
    paired: bool = False,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap interval of ``statistic(*samples)``.

    Args:
        statistic: maps arrays shaped like ``samples`` (first axis: seeds) to a scalar; it is
            called once on the data and once per resample.
        samples: arrays whose first axis indexes independent seeds (or realisations).
        paired: resample every sample with the same indices (they must have as many seeds); else
            each independently.
        n_boot: resamples; level: the confidence level; seed: the resampling RNG's seed.

    With fewer than two seeds in some sample the interval is ``(nan, nan)``.
    """
    _check_level(level)
    arrays = [np.asarray(a, dtype=np.float64) for a in samples]
    if not arrays or any(a.ndim == 0 for a in arrays):
        raise ValueError("`samples`: give at least one array with a leading axis of seeds.")
    if paired and len({a.shape[0] for a in arrays}) > 1:
        raise ValueError(f"paired samples need the same number of seeds, got {[a.shape[0] for a in arrays]}.")
    value = float(statistic(*arrays))
    if min(a.shape[0] for a in arrays) < 2:
        return Interval(value, float("nan"), float("nan"), float(level))
    rng = np.random.default_rng(seed)
    if paired:
        shared = rng.integers(0, arrays[0].shape[0], (int(n_boot), arrays[0].shape[0]))
        idx = [shared for _ in arrays]
    else:
        idx = [rng.integers(0, a.shape[0], (int(n_boot), a.shape[0])) for a in arrays]
    reps = np.empty(int(n_boot))
    for b in range(int(n_boot)):
        reps[b] = statistic(*(a[i[b]] for a, i in zip(arrays, idx, strict=True)))
    lo, hi = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])
    return Interval(value, float(lo), float(hi), float(level))


def fit_polynomial(
    x: ArrayLike, samples: Sequence[ArrayLike], deg: int = 1, *, n_boot: int = 1000, level: float = 0.95, seed: int = 0
):
    """Least-squares polynomial in ``x`` of the mean of each configuration's samples.

    Args:
        x: ``(K,)`` the configurations' abscissae.
        samples: K one-dimensional arrays, the per-seed values of each configuration (seeds need
            not be the same in number; they are resampled independently per configuration).
        deg: the degree.

    Returns the coefficients, highest degree first (as ``np.polyfit``), each an :class:`Interval`.
    """
    xs = np.asarray(x, dtype=np.float64)
    groups = [np.asarray(v, dtype=np.float64).ravel() for v in samples]
    if len(groups) != xs.shape[0] or xs.shape[0] < deg + 1:
        raise ValueError(
            f"need one sample per x and at least deg + 1 = {deg + 1} of them; got {len(groups)}, x {xs.shape}."
        )
    return [
        bootstrap(
            lambda *g, j=j: float(np.polyfit(xs, np.array([v.mean() for v in g]), deg)[j]),
            *groups,
            n_boot=n_boot,
            level=level,
            seed=seed,
        )
        for j in range(deg + 1)
    ]


def mean_ci(samples, level: float = 0.95) -> tuple[float, float]:
    """Mean and Student-t confidence half-width of 1-D samples (NaN half-width below 2 samples)."""
    _check_level(level)
    s = np.asarray(samples, dtype=np.float64).ravel()
    if s.size == 0:
        raise ValueError("`samples` is empty.")
    mean = float(s.mean())
    if s.size < 2:
        return mean, float("nan")
    sem = stats.sem(s)
    if sem == 0:
        return mean, 0.0
    lo, hi = stats.t.interval(level, s.size - 1, loc=mean, scale=sem)
    return mean, float((hi - lo) / 2)


__all__ = ["Interval", "RateFit", "bootstrap", "fit_loglog", "fit_polynomial", "mean_ci"]
