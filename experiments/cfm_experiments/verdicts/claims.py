"""Verdict rules: what each claim line concludes from its intervals, and at which sizes it may.

A rule maps intervals to a :class:`~cfm_experiments.verdicts.vocabulary.Verdict`. Every rule of a claim
(not of a code check) also states its **required sizes**: the smallest sizes (seeds, largest n,
contexts, …) at which its verdict is stable, i.e. does not change when the run is made larger.
:func:`judge` compares them with the sizes of the run: below them the line reads *inconclusive at
these sizes*, the verdict that means this and nothing else (its ``sizes`` field says what the
rule would have read and what it needs), so a reduced run (``--quick``) cannot flip a verdict, it
can only withhold it. Identities of the code
(homogeneity in β, a linear MLP acting through W₂W₁) are *code checks*, never claims.

The required sizes are written in each part, next to its rule, as the default sizes at which
that line's verdict was found stable; the docs page lists them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from .vocabulary import (
    BELOW_STABLE_SIZES,
    DIFFERENT,
    HOLDS,
    NOT_MEASURED,
    NOT_OBSERVED,
    REFUTED,
    UNDECIDED,
    Verdict,
    against_band,
    against_claim,
    code_check,
    edges,
    measured,
    real,
)


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, (int, float)) else str(v)


def judge(verdict: Verdict, need: Mapping[str, float], have: Mapping[str, object]) -> tuple[Verdict, str]:
    """``(verdict, sizes)``: the rule's verdict when every size in ``have`` reaches ``need``
    (name → least value), else *inconclusive at these sizes*; ``sizes`` states both. A size of the
    run that is missing, ``null``, NaN or not a number has not reached anything; a NaN size needed is
    refused (the rule's own constant)."""
    verdict = Verdict(verdict)
    for k, v in need.items():
        if math.isnan(real(v)):
            raise ValueError(f"judge: the size needed for {k!r} must be a number, got {v!r}.")
    missing = {k: v for k, v in need.items() if not real(have.get(k)) >= v}
    stable = ", ".join(f"{k} ≥ {_fmt(v)}" for k, v in need.items())
    run = ", ".join(f"{k} {_fmt(have[k])}" for k in need if k in have)
    if missing:
        return BELOW_STABLE_SIZES, f"this run: {run}; the verdict ({verdict}) is stable only from {stable}"
    return verdict, f"stable from {stable}; this run: {run}"


#: the growth exponent a claim "C does not grow with x" must exclude to hold: C ∝ √x, the growth the
#: bounds allow when they are not independent of x (an interval that cannot tell 0 from ½ decides nothing).
GROWTH_RESOLUTION = 0.5
#: the decay exponent a rate interval must exclude to count: 0, no decay at all.
NO_DECAY = 0.0


def _usable(fits: Sequence) -> bool:
    return bool(fits) and all(measured(*edges(f)) for f in fits)


def independence(gamma, resolution: float = GROWTH_RESOLUTION) -> Verdict:
    """C ∝ x^γ and the claim "C does not grow with x": the interval reaches 0 or lies below it and
    excludes the growth ``resolution`` (C ∝ √x by default) → *holds*; lies above 0 → *refuted*;
    reaches both 0 and ``resolution`` → *undecided*; no interval → *not measured*."""
    return against_claim(*edges(gamma), 0.0, resolution)


def bounded_growth(kappa, bound: float) -> Verdict:
    """log C ≈ a + κβ against a bound's exponent ``bound`` > 0: the interval lies below it → *holds
    with a different constant* (slower than the bound says); contains it and excludes both no growth
    (0) and twice the bound's exponent → *holds*; contains it and reaches either → *undecided*;
    above it → *refuted*; no interval → *not measured*."""
    if math.isnan(real(bound)):
        raise ValueError(f"`bound` must be a number, got {bound!r}.")
    lo, hi = edges(kappa)
    if not measured(lo, hi):
        return NOT_MEASURED
    if hi < bound:
        return DIFFERENT
    if lo > bound:
        return REFUTED
    return HOLDS if lo > 0 and hi < 2 * bound else UNDECIDED


def _contains(fit, x: float) -> bool:
    lo, hi = edges(fit)
    return lo <= x <= hi


def rate(fits: Sequence, target: float, share: float = 0.8, alternative: float = NO_DECAY) -> Verdict:
    """Slopes of several models: *holds* when at least ``share`` of their intervals contain
    ``target`` and exclude ``alternative`` (no decay), else *not observed*; any interval NaN or
    infinite, or none → *not measured*."""
    if not _usable(fits):
        return NOT_MEASURED
    inside = sum(_contains(f, target) and not _contains(f, alternative) for f in fits)
    return HOLDS if inside >= share * len(fits) else NOT_OBSERVED


def all_contain(fits: Sequence, target: float, alternative: float = NO_DECAY) -> Verdict:
    """*holds* when every interval contains ``target`` and excludes ``alternative`` (no decay), else
    *not observed at these sizes*; any interval NaN or infinite, or none → *not measured*."""
    return rate(fits, target, share=1.0, alternative=alternative)


def at_most(gamma, limit: float, alternative: float | None = None) -> Verdict:
    """The claim "γ ≤ limit": the interval lies at or below ``limit`` → *holds*; above it →
    *refuted*; across it → *undecided*, unless an ``alternative`` above ``limit`` is named (the value
    the claim denies): then an interval that reaches ``limit`` and excludes ``alternative`` also
    *holds* (it is the claimed value, measured). No interval → *not measured*."""
    return against_claim(*edges(gamma), limit, limit if alternative is None else alternative)


def law_rule(a, b, bins: Sequence[tuple[object, float]]) -> Verdict:
    """The ρ line's law, a local rate max(−½, −2/ρ²) at large n, from the regression measured ≈ a + b·law
    across models (the law: b = 1, a = 0) and each ρ bin's mean slope against the law's mean slope over
    the bin's models (``bins``: pairs (interval, law's slope)):

    - b containing 1 and excluding 0, with a containing 0 → *holds*;
    - b containing both 1 and 0 (it cannot tell the law from no dependence on it) → *undecided*;
    - the law missed (b excludes 1 or a excludes 0): a bin whose slope lies wholly above the law's (a
      decay slower than the law allows) → *refuted*; else a bin wholly below it (steeper: the slow rate
      the law predicts has not set in by these n, which a finite run cannot refute) → *not observed
      at these sizes*; no bin wholly off the law (the bins' intervals reach it) → *undecided*;
    - a NaN, ``null``, infinite or reversed interval of a or b, or no bin, or a bin without its
      interval or its law → *not measured*."""
    (alo, ahi), (blo, bhi) = edges(a), edges(b)
    if not (measured(alo, ahi) and measured(blo, bhi)) or not bins:
        return NOT_MEASURED
    off = [against_band(*edges(iv), law, law) for iv, law in bins if math.isfinite(real(law))]
    if len(off) < len(bins) or NOT_MEASURED in off:
        return NOT_MEASURED
    if blo <= 1.0 <= bhi:
        if blo <= 0.0:
            return UNDECIDED
        if alo <= 0.0 <= ahi:
            return HOLDS
    above = [edges(iv)[0] > law for iv, law in bins]
    below = [edges(iv)[1] < law for iv, law in bins]
    if any(above):
        return REFUTED
    return NOT_OBSERVED if any(below) else UNDECIDED


def bias_verdict(deltas: Sequence, tol: float) -> Verdict:
    """token_sample's claim "the reference biases the slope by more than ``tol`` at every horizon", read
    from each horizon's effect beyond what the floor model predicts (an interval per horizon, as
    :func:`~cfm_experiments.claims.token_sample.beyond_floor` gives it): every interval outside
    ±tol → *holds*; one inside → *refuted*; else *undecided*; none, or one NaN, ``null`` or missing →
    *not measured*."""
    if math.isnan(real(tol)) or real(tol) < 0:
        raise ValueError(f"`tol` must be a number >= 0, got {tol!r}.")
    each = [against_band(*edges(d), -tol, tol) for d in deltas]
    if not each or NOT_MEASURED in each:
        return NOT_MEASURED
    if HOLDS in each:  # a negligible change at some horizon
        return REFUTED
    return HOLDS if all(v == REFUTED for v in each) else UNDECIDED


__all__ = [
    "bias_verdict",
    "law_rule",
    "GROWTH_RESOLUTION",
    "NO_DECAY",
    "all_contain",
    "at_most",
    "bounded_growth",
    "code_check",
    "independence",
    "judge",
    "rate",
]
