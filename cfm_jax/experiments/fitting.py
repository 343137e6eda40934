"""Log-log rate fits with bootstrap confidence intervals."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class RateFit:
    """Fit of ``log y = intercept + slope · log x``; CI from a bootstrap over seeds."""

    slope: float
    intercept: float
    ci_low: float
    ci_high: float

    @property
    def prefactor(self) -> float:
        return float(np.exp(self.intercept))

    def as_dict(self) -> dict:
        return {**asdict(self), "prefactor": self.prefactor}


def fit_loglog(x, y, *, n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> RateFit:
    """Fit a power law to deviations ``y`` at sizes ``x``.

    Args:
        x: ``(K,)`` sizes (e.g. context lengths n).
        y: ``(K, S)`` one deviation per size and seed (or ``(K,)``). The fit is on the mean over
            seeds of ``log y``; the CI resamples seeds independently at each size.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if y.ndim == 1:
        y = y[:, None]
    if y.shape[0] != x.shape[0] or x.shape[0] < 2:
        raise ValueError(f"need >= 2 sizes and y of shape (K, S); got x {x.shape}, y {y.shape}.")
    logy = np.log(np.maximum(y, np.finfo(np.float64).tiny))
    lx = np.log(x)
    slope, intercept = np.polyfit(lx, logy.mean(axis=1), 1)
    rng = np.random.default_rng(seed)
    S = y.shape[1]
    if S > 1:
        idx = rng.integers(0, S, size=(n_boot, x.shape[0], S))
        boot_means = np.take_along_axis(logy[None].repeat(n_boot, 0), idx, axis=2).mean(axis=2)
        A = np.vstack([lx, np.ones_like(lx)]).T
        coefs, *_ = np.linalg.lstsq(A, boot_means.T, rcond=None)
        slopes = coefs[0]
        alpha = (1 - level) / 2
        lo, hi = np.quantile(slopes, [alpha, 1 - alpha])
    else:
        lo = hi = float("nan")
    return RateFit(float(slope), float(intercept), float(lo), float(hi))


def mean_ci(samples, level: float = 0.95) -> tuple[float, float]:
    """Mean and normal-approximation CI half-width of 1-D samples."""
    from scipy import stats

    s = np.asarray(samples, dtype=np.float64)
    if s.size < 2:
        return float(s.mean()), float("nan")
    half = stats.t.ppf(0.5 + level / 2, s.size - 1) * s.std(ddof=1) / np.sqrt(s.size)
    return float(s.mean()), float(half)
