"""The n-slope gate: whether a line of fitted slopes in n decays like n^{−½}, tested against a
tolerance, not a point.

A finite-n slope is not −½ even when the rate is: a deviation C·n^{−½}(1 + c/√n) has a least-squares
slope over sizes n0 … n1 between −½ and −½ ± (the correction's own slope), and the known case
(:data:`KNOWN_SLOPE` over :data:`KNOWN_NS`, a deviation computed exactly) has −0.494 over n = 512 …
32768. So the gate

1. derives the correction's coefficient c from the known case (:func:`coefficient`: the c for which
   C·n^{−½}(1 + c/√n) has the known slope over the known sizes, |c| ≈ 0.65);
2. allows every slope a correction of either sign and that size produces over the line's own sizes
   (:func:`band`: [−0.535, −0.457] over n = 10 … 1000, [−0.506, −0.494] over 512 … 32768), the band
   printed in the line;
3. pools the line's slopes, every row of every draw, into one (:func:`pooled`: inverse-variance
   weights from each 95 % interval; rows independent, or, for statistics of the same samples,
   ``correlated``: the pooled standard error is then the weighted mean of the rows' own, a bound
   whatever their correlation);
4. reads (:func:`slope_verdict`) the pooled interval against the band: wholly outside it *refuted
   at these sizes* (beyond any finite-n correction of the known size); meeting it and excluding both
   no decay (0) and twice the rate (−1) *holds*; meeting it and reaching either *undecided*; and
   with multiplicity accounted for, each row too: a row whose Bonferroni interval (family-wise 95 %
   over the K rows) lies wholly outside the band refutes the line (a claim "at every β" is refuted
   by one β). No slope, or one without a finite interval: *not measured*.

A line at exactly n^{−½} with the committed rows' widths holds ≥ 95 % of the time, n^{−0.3} is
refuted ≥ 95 % of the time, and the known case's −0.494 holds (the tests simulate all three).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np
from scipy import optimize, stats

from cfm_jax.stats import Interval, RateFit

from .vocabulary import HOLDS, NOT_MEASURED, REFUTED, UNDECIDED, Verdict, edges, measured, real

#: the claimed slope in n.
RATE = -0.5
#: the known case: E dev's least-squares slope over :data:`KNOWN_NS` for the aligned model (d = 2,
#: L = 4) on the skewed two-atom law ±e₁, computed exactly over the binomial counts
#: (``claims.uniform.ball_lower``: −0.4944; a test recomputes it).
KNOWN_SLOPE = -0.494
#: the known case's sizes (n = 512 … 32768, ×4).
KNOWN_NS = (512, 2048, 8192, 32768)
#: the slopes a decay like n^{−½} must be told from: no decay, and twice the rate.
ALTERNATIVES = (0.0, 2 * RATE)
#: the level of each row's interval and of the pooled one (family-wise for the rows).
LEVEL = 0.95
#: how near an alternative a pooled edge (rebuilt from the rows' errors) counts as reaching it.
ROUND_OFF = 1e-9


def _ls_slope(ns, log_y) -> float:
    return float(np.polyfit(np.log(np.asarray(ns, np.float64)), np.asarray(log_y, np.float64), 1)[0])


def _correction_slope(ns, c: float) -> float:
    """The least-squares slope in n of log(1 + c/√n) over ``ns``."""
    n = np.asarray(ns, np.float64)
    return _ls_slope(n, np.log1p(c / np.sqrt(n)))


def coefficient(known_slope: float = KNOWN_SLOPE, known_ns: Sequence[float] = KNOWN_NS) -> float:
    """|c| of the relative correction 1 + c/√n that gives C·n^{−½}(1 + c/√n) the slope ``known_slope``
    over ``known_ns`` (≈ 0.65 for the known case)."""
    target = known_slope - RATE
    if target == 0:
        return 0.0
    limit = 0.999 * math.sqrt(min(known_ns))  # 1 + c/√n > 0 at every size
    c = optimize.brentq(lambda c: _correction_slope(known_ns, c) - target, -limit, limit, xtol=1e-14)
    return abs(float(c))  # pyright: ignore[reportArgumentType]


def band(ns: Sequence[float], c: float | None = None) -> tuple[float, float]:
    """The slopes over ``ns`` that a decay C·n^{−½}(1 ± c/√n) can have (c: :func:`coefficient`):
    (−½ + the slope of log(1 + c/√n), −½ + that of log(1 − c/√n)); the upper edge +∞ where
    1 − c/√n is not positive at the smallest n (no bound)."""
    c = coefficient() if c is None else c
    n = np.asarray(ns, np.float64)
    if n.size < 2 or np.ptp(n) == 0 or not (n > 0).all():
        raise ValueError(f"`ns` must hold two or more distinct sizes > 0, got {list(ns)}.")
    low = RATE + _correction_slope(n, c)
    high = RATE + _correction_slope(n, -c) if c < math.sqrt(n.min()) else float("inf")
    return float(low), float(high)


def _center(x) -> float:
    """A slope's estimate as it is stored: a RateFit's slope, an Interval's value, a mapping's
    ``slope`` or ``value``; the interval's midpoint where none is stored."""
    if isinstance(x, RateFit):
        v = real(x.slope)
    elif isinstance(x, Interval):
        v = real(x.value)
    elif isinstance(x, Mapping):
        v = real(x.get("slope", x.get("value")))
    else:
        v = float("nan")
    if math.isfinite(v):
        return v
    lo, hi = edges(x)
    return 0.5 * (lo + hi)


@dataclasses.dataclass(frozen=True)
class Pooled:
    """The pooled slope of a line: ``interval`` (95 %), the rows' estimates and standard errors."""

    interval: Interval
    estimates: tuple[float, ...]
    errors: tuple[float, ...]


def pooled(slopes: Sequence, correlated: bool = False, level: float = LEVEL) -> Pooled | None:
    """One slope from several (each a fit with its ``level`` interval, every row of every draw): the
    inverse-variance weighted mean of their estimates, standard errors from their intervals'
    half-widths; independent rows: 1/√Σw, ``correlated`` (statistics of the same samples): the
    weighted mean of the rows' errors (a bound whatever the correlation). None without a slope or
    with one lacking a finite interval (a zero-width interval is an exact slope: weight ∞)."""
    if not slopes or not all(measured(*edges(s)) for s in slopes):
        return None
    z = float(stats.norm.ppf(0.5 + level / 2))
    est = np.asarray([_center(s) for s in slopes])
    se = np.asarray([(edges(s)[1] - edges(s)[0]) / (2 * z) for s in slopes])
    if not np.isfinite(est).all():
        return None
    exact = se**2 == 0  # a zero (or underflowing) width: an exact slope
    if exact.any():  # exact slopes alone fix the estimate
        value, error = float(est[exact].mean()), 0.0
    else:
        # 1/se² overflows once a width is below ~1e-154: the weights relative to the narrowest row,
        # scaled by a power of two so that every weight, hence the result, is the same to the bit
        scale = float(np.ldexp(1.0, -int(np.frexp(se.min())[1])))
        w = 1.0 / (se * scale) ** 2
        value = float((w * est).sum() / w.sum())
        error = float((w * se).sum() / w.sum()) if correlated else float(1.0 / (scale * math.sqrt(w.sum())))
    if len(slopes) == 1:  # one row: its own interval, not one rebuilt from it (round-off at its edges)
        interval = Interval(value, *edges(slopes[0]), level)
    else:
        interval = Interval(value, value - z * error, value + z * error, level)
    return Pooled(interval, tuple(map(float, est)), tuple(map(float, se)))


def slope_verdict(slopes: Sequence, ns: Sequence[float], correlated: bool = False) -> Verdict:
    """The n-slope gate's verdict on a line's ``slopes`` over sizes ``ns`` (module docstring)."""
    p = pooled(slopes, correlated)
    if p is None:
        return NOT_MEASURED
    low, high = band(ns)
    k = len(p.estimates)
    z_rows = float(stats.norm.ppf(1 - (1 - LEVEL) / (2 * k)))  # Bonferroni over the rows
    for e, s in zip(p.estimates, p.errors):
        if e + z_rows * s < low or e - z_rows * s > high:
            return REFUTED
    lo, hi = p.interval.ci_low, p.interval.ci_high
    if hi < low or lo > high:
        return REFUTED
    if any(lo - ROUND_OFF <= a <= hi + ROUND_OFF for a in ALTERNATIVES):  # a rebuilt edge may miss it by round-off
        return UNDECIDED
    return HOLDS


def describe(slopes: Sequence, ns: Sequence[float], correlated: bool = False) -> str:
    """The gate's numbers for a line's measured text: the pooled slope, its rows and the band."""
    low, high = band(ns)
    p = pooled(slopes, correlated)
    what = "no pooled slope (an interval is missing)" if p is None else f"pooled slope {p.interval:+.3f}"
    return (
        f"{what} over {len(slopes)} rows{' (correlated)' if correlated else ''}, against the band "
        f"[{low:+.3f}, {high:+.3f}] of slopes a decay $n^{{-1/2}}(1 ± {coefficient():.2f}/\\sqrt n)$ has over "
        f"n = {min(ns):g} … {max(ns):g} (the known case: {KNOWN_SLOPE:+.3f} over n = {KNOWN_NS[0]} … {KNOWN_NS[-1]})"
    )


__all__ = [
    "ALTERNATIVES",
    "KNOWN_NS",
    "KNOWN_SLOPE",
    "LEVEL",
    "ROUND_OFF",
    "RATE",
    "Pooled",
    "band",
    "coefficient",
    "describe",
    "pooled",
    "slope_verdict",
]
