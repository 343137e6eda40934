"""The statistics and verdict rules of the OGD parts (plain NumPy, outside any jit).

Every interval is a percentile bootstrap over seeds (:mod:`cfm_jax.stats`). A verdict is decided
only when its interval excludes the alternative; an interval that straddles the boundary reads
*inconclusive at these sizes*, so a smaller run (``--quick``: fewer seeds, wider intervals) does
not flip a verdict, it withholds it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cfm_jax.stats import Interval, RateFit, bootstrap, fit_loglog

from ..protocol import Verdict

HOLDS: Verdict = "holds"
DIFFERENT: Verdict = "holds with a different constant"
INCONCLUSIVE: Verdict = "inconclusive at these sizes"
NOT_OBSERVED: Verdict = "not observed at these sizes"
REFUTED: Verdict = "refuted at these sizes"

#: from the weakest to the strongest statement: the worst of several verdicts is the first.
ORDER: tuple[Verdict, ...] = (REFUTED, NOT_OBSERVED, INCONCLUSIVE, DIFFERENT, HOLDS)


def worst(verdicts: Sequence[Verdict]) -> Verdict:
    """The weakest of several verdicts (:data:`ORDER`)."""
    return min(verdicts, key=ORDER.index)


def fmt(fit: RateFit | Interval, digits: int = 2) -> str:
    """``+0.50 [+0.41, +0.58]``."""
    value = fit.slope if isinstance(fit, RateFit) else fit.value
    return f"{value:+.{digits}f} [{fit.ci_low:+.{digits}f}, {fit.ci_high:+.{digits}f}]"


def slope_verdict(fit: RateFit, claim: float) -> Verdict:
    """A decay exponent against the bound's ``claim`` (e.g. −1/2): at least as steep (the CI reaches
    the claim or lies below it) holds; a decay whose CI lies between the claim and 0 is not observed
    at these sizes (slower, maybe pre-asymptotic); a CI reaching 0 that excludes even half the
    claimed decay is refuted; a CI reaching 0 that allows more is inconclusive."""
    if fit.ci_low <= claim:
        return HOLDS
    if fit.ci_high < 0:
        return NOT_OBSERVED
    return REFUTED if fit.ci_low > claim / 2 else INCONCLUSIVE


def growth_fits(window_k, window_max) -> list[RateFit]:
    """Growth exponent β of window maxima ``(S, W, len(ns))`` against the windows' last steps
    ``(W,)`` (log-log, per n, CI over seeds): 0 for a bounded deviation, 1/2 for a random walk,
    1 for linear growth."""
    k = np.asarray(window_k, float)
    w = np.asarray(window_max, float)
    return [fit_loglog(k, w[:, :, i].T) for i in range(w.shape[2])]


def bounded(fits: Sequence[RateFit]) -> bool:
    """Bounded: every n's growth-exponent CI reaches 0 or lies below it."""
    return all(f.ci_low <= 0.0 for f in fits)


def growing(fits: Sequence[RateFit]) -> bool:
    """Growing: every n's growth-exponent CI lies above 0."""
    return all(f.ci_low > 0.0 for f in fits)


def sign_verdict(fits: Sequence[RateFit], *, positive: Verdict, negative: Verdict) -> Verdict:
    """``positive`` when every n grows (:func:`growing`), ``negative`` when none can be told from
    a bounded deviation (:func:`bounded`), inconclusive when the sizes disagree."""
    if growing(fits):
        return positive
    return negative if bounded(fits) else INCONCLUSIVE


def geometric_mean_ci(ratios) -> Interval:
    """Geometric mean over seeds of positive ``ratios (S,)`` and its bootstrap CI."""
    logs = np.log(np.maximum(np.asarray(ratios, float), np.finfo(float).tiny))
    iv = bootstrap(lambda a: a.mean(), logs)
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
    """Mean over seeds (NaNs dropped) and its bootstrap CI."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"))
    return bootstrap(lambda a: a.mean(), v)


__all__ = [
    "DIFFERENT",
    "HOLDS",
    "INCONCLUSIVE",
    "NOT_OBSERVED",
    "ORDER",
    "REFUTED",
    "bounded",
    "exponential_rates",
    "fmt",
    "geometric_mean_ci",
    "growing",
    "growth_fits",
    "mean_interval",
    "sign_verdict",
    "slope_verdict",
    "worst",
]
