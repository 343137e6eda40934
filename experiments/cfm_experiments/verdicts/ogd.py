"""The verdict rules of the OGD parts (plain NumPy, outside any jit).

Every interval is over seeds (:mod:`cfm_experiments.ogd.statistics`). A verdict is decided
only when its interval excludes the alternative; an interval that straddles the boundary reads
*undecided* (:data:`~cfm_experiments.verdicts.UNDECIDED`), so a smaller run (``--quick``: fewer
seeds, wider intervals) does not flip a verdict, it withholds it. The verdicts themselves are
:mod:`cfm_experiments.verdicts.vocabulary`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

import numpy as np

from cfm_jax.stats import RateFit

from .vocabulary import (
    HOLDS,
    NOT_MEASURED,
    NOT_OBSERVED,
    REFUTED,
    UNDECIDED,
    Verdict,
    against_band,
    against_claim,
    measured,
)

#: where the growth exponent's sign change must fall, in units of λ_c = 2C: from C, where the
#: bound's step factor 1 + η(C − λ) stops expanding, to 2λ_c, the threshold of a C that the
#: region's estimate puts low by up to a factor 2.
THRESHOLD_BAND = (0.5, 2.0)


def slope_verdict(fit: RateFit, claim: float) -> Verdict:
    """A decay exponent against the bound's ``claim`` (e.g. −1/2): at least as steep (the CI reaches
    the claim or lies below it) and excluding 0 (no decay) holds; a decay whose CI lies between the
    claim and 0 is not observed at these sizes (slower, maybe pre-asymptotic); a CI reaching 0 that
    excludes even half the claimed decay is refuted; a CI reaching both the claim and 0 is
    undecided; no interval (NaN or infinite) is not measured."""
    if not measured(fit.ci_low, fit.ci_high):
        return NOT_MEASURED
    if fit.ci_high < 0:
        return HOLDS if fit.ci_low <= claim else NOT_OBSERVED
    return REFUTED if fit.ci_low > claim / 2 else UNDECIDED


#: the growth exponent a bounded deviation's CI must exclude: ½, a random walk's.
RANDOM_WALK = 0.5


def bounded(fits: Sequence[RateFit]) -> bool:
    """Bounded: every n's growth-exponent CI reaches 0 or lies below it, and excludes a random walk's ½."""
    return bool(fits) and all(against_claim(f.ci_low, f.ci_high, 0.0, RANDOM_WALK) == HOLDS for f in fits)


def growing(fits: Sequence[RateFit]) -> bool:
    """Growing: every n's growth-exponent CI is finite and lies above 0."""
    return bool(fits) and all(measured(f.ci_low, f.ci_high) and f.ci_low > 0.0 for f in fits)


def sign_verdict(fits: Sequence[RateFit], *, positive: Verdict, negative: Verdict) -> Verdict:
    """``positive`` when every n grows (:func:`growing`), ``negative`` when every n is bounded
    (:func:`bounded`), undecided when the sizes disagree or a CI reaches both 0 and ½; any CI NaN or
    infinite, or none, not measured."""
    if not fits or not all(measured(f.ci_low, f.ci_high) for f in fits):
        return NOT_MEASURED
    if growing(fits):
        return positive
    return negative if bounded(fits) else UNDECIDED


def at_most_half(fits: Sequence[RateFit]) -> list[Verdict]:
    """Per n, the d-exponent against the claim "≤ ½" (the band (−∞, ½]): its CI wholly at or below
    ½ holds, wholly above refuted, across ½ undecided."""
    return [against_band(f.ci_low, f.ci_high, high=0.5) for f in fits]


Sign = Literal[-1, 0, 1]


def sign(fits: Sequence[RateFit]) -> Sign:
    """The sign of a growth exponent fitted at several n: +1 when every CI lies above 0, −1 when
    every CI lies below 0, else 0 (not known: also a NaN or infinite CI, or none)."""
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
        if np.isnan(self.low) or np.isnan(self.high) or self.low > self.high:
            return NOT_MEASURED
        if np.isfinite(self.low) and np.isfinite(self.high):
            return against_band(self.low, self.high, low, high)
        return REFUTED if self.high < low or self.low > high else UNDECIDED

    def __str__(self) -> str:
        fmt = lambda x: f"{x:.3g}"  # noqa: E731
        return f"({fmt(self.low)}, {fmt(self.high)})·λ_c"


__all__ = [
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
