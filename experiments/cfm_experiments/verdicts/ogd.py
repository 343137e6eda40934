"""The verdict rules of the OGD parts (plain NumPy, outside any jit).

Every interval is over seeds (:mod:`cfm_experiments.ogd.statistics`). A verdict is decided
only when its interval excludes the alternative; an interval that straddles the boundary reads
*undecided* (:data:`~cfm_experiments.verdicts.UNDECIDED`), so a smaller run (``--quick``: fewer
seeds, wider intervals) does not flip a verdict, it withholds it. The verdicts themselves are
:mod:`cfm_experiments.verdicts.vocabulary`'s.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from cfm_jax.stats import Interval

from .vocabulary import (
    DIFFERENT,
    HOLDS,
    NOT_MEASURED,
    NOT_OBSERVED,
    REFUTED,
    UNDECIDED,
    Verdict,
    against_band,
    against_claim,
    edges,
    measured,
    real,
)


def _read(x) -> Interval:
    """An interval as a rule here reads it: from an Interval, a RateFit or a stored mapping (``null``
    or missing numbers NaN, :func:`~.vocabulary.edges`); only its edges matter."""
    return Interval(float("nan"), *edges(x))


#: where the growth exponent's sign change must fall, in units of λ_c = 2C: from C, where the
#: bound's step factor 1 + η(C − λ) stops expanding, to 2λ_c, the threshold of a C that the
#: region's estimate puts low by up to a factor 2.
THRESHOLD_BAND = (0.5, 2.0)


def slope_verdict(fit, claim: float) -> Verdict:
    """A decay exponent against the bound's ``claim`` (e.g. −1/2): at least as steep (the CI reaches
    the claim or lies below it) and excluding 0 (no decay) holds; a decay whose CI lies between the
    claim and 0 is not observed at these sizes (slower, maybe pre-asymptotic); a CI reaching 0 that
    excludes even half the claimed decay is refuted; a CI reaching both the claim and 0 is
    undecided; no interval (NaN or infinite) is not measured."""
    fit = _read(fit)
    if not measured(fit.ci_low, fit.ci_high):
        return NOT_MEASURED
    if fit.ci_high < 0:
        return HOLDS if fit.ci_low <= claim else NOT_OBSERVED
    return REFUTED if fit.ci_low > claim / 2 else UNDECIDED


#: the growth exponent a bounded deviation's CI must exclude: ½, a random walk's.
RANDOM_WALK = 0.5


def bounded(fits: Sequence) -> bool:
    """Bounded: every n's growth-exponent CI reaches 0 or lies below it, and excludes a random walk's ½."""
    fits = [_read(f) for f in fits]
    return bool(fits) and all(against_claim(f.ci_low, f.ci_high, 0.0, RANDOM_WALK) == HOLDS for f in fits)


def growing(fits: Sequence) -> bool:
    """Growing: every n's growth-exponent CI is finite and lies above 0."""
    fits = [_read(f) for f in fits]
    return bool(fits) and all(measured(f.ci_low, f.ci_high) and f.ci_low > 0.0 for f in fits)


def sign_verdict(fits: Sequence, *, positive: Verdict, negative: Verdict) -> Verdict:
    """``positive`` when every n grows (:func:`growing`), ``negative`` when every n is bounded
    (:func:`bounded`), undecided when the sizes disagree or a CI reaches both 0 and ½; any CI NaN or
    infinite, or none, not measured."""
    fits = [_read(f) for f in fits]
    if not fits or not all(measured(f.ci_low, f.ci_high) for f in fits):
        return NOT_MEASURED
    if growing(fits):
        return positive
    return negative if bounded(fits) else UNDECIDED


def at_most_half(fits: Sequence) -> list[Verdict]:
    """Per n, the d-exponent against the claim "≤ ½" (the band (−∞, ½]): its CI wholly at or below
    ½ holds, wholly above refuted, across ½ undecided."""
    fits = [_read(f) for f in fits]
    return [against_band(f.ci_low, f.ci_high, high=0.5) for f in fits]


Sign = Literal[-1, 0, 1]


def sign(fits: Sequence) -> Sign:
    """The sign of a growth exponent fitted at several n: +1 when every CI lies above 0, −1 when
    every CI lies below 0, else 0 (not known: also a NaN or infinite CI, or none)."""
    fits = [_read(f) for f in fits]
    if not fits or not all(measured(f.ci_low, f.ci_high) for f in fits):
        return 0
    if all(f.ci_low > 0 for f in fits):
        return 1
    return -1 if all(f.ci_high < 0 for f in fits) else 0


@dataclasses.dataclass(frozen=True)
class Threshold:
    """Where in λ/λ_c the growth exponent changes sign: above ``low`` (the largest ridge whose exponent
    is positive; −∞ if none is) and below ``high`` (the smallest larger ridge whose exponent is
    negative; +∞ if none is)."""

    low: float
    high: float

    @classmethod
    def locate(cls, ratios: Sequence[float], signs: Sequence[Sign]) -> Threshold:
        """From each ridge's λ/λ_c and :func:`sign` (ridges of unknown sign locate nothing)."""
        up = [r for r, s in zip(ratios, signs) if s > 0]
        low = max(up, default=-np.inf)
        high = min((r for r, s in zip(ratios, signs) if s < 0 and r > low), default=np.inf)
        return cls(float(low), float(high))

    def verdict(self, band: tuple[float, float] = THRESHOLD_BAND) -> Verdict:
        """The located sign change against the predicted ``band``: inside it holds, wholly outside
        refuted, else undecided. No sign change (growth at every ridge, or at none) cannot hold: it
        leaves an unbounded side, which is refuted only when the finite side already lies outside
        the band; no sign located at all (every ridge's sign unknown: both sides unbounded) is
        undecided; NaN edges or reversed ones are not measured."""
        low, high = band
        if np.isnan(real(self.low)) or np.isnan(real(self.high)) or self.low > self.high:
            return NOT_MEASURED
        if np.isfinite(self.low) and np.isfinite(self.high):
            return against_band(self.low, self.high, low, high)
        return REFUTED if self.high < low or self.low > high else UNDECIDED

    def __str__(self) -> str:
        fmt = lambda x: f"{x:.3g}"  # noqa: E731
        return f"({fmt(self.low)}, {fmt(self.high)})·λ_c"


#: the curvature part's rules (:mod:`cfm_experiments.ogd.curvature`).
#: bounded: the deviation's last quarter is less than GROWTH times its second quarter (geometric means).
GROWTH = 2.0
#: how far an estimated constant may sit below the one the bound needs: C and δ_n are measured on
#: the visited region (lower estimates), low by up to this factor (:data:`THRESHOLD_BAND`'s 2).
ESTIMATE_FACTOR = 2.0


def rate_verdict(q) -> Verdict:
    """The growth rate over the bound's log(1 + η(C − λ)) (per seed, CI over seeds). Growth (CI above
    0) reaching [½, 1] holds — the bound's factor, up to the factor 2 of an estimated C —; growth
    wholly below ½ or wholly between 1 and :data:`ESTIMATE_FACTOR` is a different constant; growth
    wholly faster than :data:`ESTIMATE_FACTOR` × the bound's rate (beyond what an estimated C can
    explain), or a deviation that decays (CI below 0), is refuted; growth reaching both the bound's
    rate and that factor is undecided; no growth with ½ excluded is not observed; else undecided;
    no interval (NaN or infinite) is not measured."""
    q = _read(q)
    if not measured(q.ci_low, q.ci_high):
        return NOT_MEASURED
    if q.ci_low > ESTIMATE_FACTOR or q.ci_high < 0:
        return REFUTED
    if q.ci_low > 0:
        if q.ci_high >= ESTIMATE_FACTOR:  # reaches what no estimated C explains
            return UNDECIDED
        return HOLDS if q.ci_high >= 0.5 and q.ci_low <= 1 else DIFFERENT
    return NOT_OBSERVED if q.ci_high < 0.5 else UNDECIDED


def growth_verdict(g, ftle) -> Verdict:
    """Still growing: the late growth factor G (last over second quarter) above 1 and the map
    expanding along the path (FTLE above 0) holds; less than a doubling with a contracting map is
    not observed; else undecided (CIs over seeds); either interval NaN or infinite: not measured."""
    g, ftle = _read(g), _read(ftle)
    if not (measured(g.ci_low, g.ci_high) and measured(ftle.ci_low, ftle.ci_high)):
        return NOT_MEASURED
    if g.ci_low > 1 and ftle.ci_low > 0:
        return HOLDS
    return NOT_OBSERVED if g.ci_high < GROWTH and ftle.ci_high <= 0 else UNDECIDED


def bounded_verdict(late: Sequence) -> Verdict:
    """Bounded above the threshold, from each λ's late growth factor G (last over second quarter):
    every interval below :data:`GROWTH` (less than a doubling) holds; one wholly above it refutes;
    else undecided; any interval NaN or infinite, or none, not measured."""
    late = [_read(x) for x in late]
    if not late or not all(measured(x.ci_low, x.ci_high) for x in late):
        return NOT_MEASURED
    if any(x.ci_low > GROWTH for x in late):
        return REFUTED
    return HOLDS if all(x.ci_high < GROWTH for x in late) else UNDECIDED


def bound_ratio_verdict(ratio: float, loose_ratio: float) -> Verdict:
    """The bound's own trajectory: ``ratio``, the largest e_k/B_k over λ, seeds, n and k with C and δ_n
    as measured, and ``loose_ratio``, the same against B_k with both constants
    :data:`ESTIMATE_FACTOR` × larger (the most an estimate can be low). Every e_k under its B_k
    holds; under the loosened bound only, a different constant; above even the loosened bound
    (the data sit beyond what an estimated constant can explain) refuted; NaN or infinite
    ratios (no bound measured) not measured. A maximum over every seed, not an interval: the
    bound is claimed for every trajectory."""
    ratio, loose_ratio = real(ratio), real(loose_ratio)
    if not (math.isfinite(ratio) and math.isfinite(loose_ratio)) or ratio < 0 or loose_ratio < 0:
        return NOT_MEASURED
    if ratio <= 1:
        return HOLDS
    return DIFFERENT if loose_ratio <= 1 else REFUTED


__all__ = [
    "ESTIMATE_FACTOR",
    "GROWTH",
    "bound_ratio_verdict",
    "bounded_verdict",
    "growth_verdict",
    "rate_verdict",
    "RANDOM_WALK",
    "THRESHOLD_BAND",
    "Sign",
    "Threshold",
    "at_most_half",
    "bounded",
    "growing",
    "sign",
    "sign_verdict",
    "slope_verdict",
]
