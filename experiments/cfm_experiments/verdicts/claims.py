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

from cfm_jax.stats import Interval, RateFit

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
    measured,
)


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, (int, float)) else str(v)


def judge(verdict: Verdict, need: Mapping[str, float], have: Mapping[str, float]) -> tuple[Verdict, str]:
    """``(verdict, sizes)``: the rule's verdict when every size in ``have`` reaches ``need``
    (name → least value), else *inconclusive at these sizes*; ``sizes`` states both."""
    verdict = Verdict(verdict)
    missing = {k: v for k, v in need.items() if have.get(k, 0) < v}
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


def _usable(fits: Sequence[Interval | RateFit]) -> bool:
    return bool(fits) and all(measured(f.ci_low, f.ci_high) for f in fits)


def independence(gamma: Interval, resolution: float = GROWTH_RESOLUTION) -> Verdict:
    """C ∝ x^γ and the claim "C does not grow with x": the interval reaches 0 or lies below it and
    excludes the growth ``resolution`` (C ∝ √x by default) → *holds*; lies above 0 → *refuted*;
    reaches both 0 and ``resolution`` → *undecided*; no interval → *not measured*."""
    return against_claim(gamma.ci_low, gamma.ci_high, 0.0, resolution)


def bounded_growth(kappa: Interval, bound: float) -> Verdict:
    """log C ≈ a + κβ against a bound's exponent ``bound`` > 0: the interval lies below it → *holds
    with a different constant* (slower than the bound says); contains it and excludes both no growth
    (0) and twice the bound's exponent → *holds*; contains it and reaches either → *undecided*;
    above it → *refuted*; no interval → *not measured*."""
    if not measured(kappa.ci_low, kappa.ci_high):
        return NOT_MEASURED
    if kappa.ci_high < bound:
        return DIFFERENT
    if kappa.ci_low > bound:
        return REFUTED
    return HOLDS if kappa.ci_low > 0 and kappa.ci_high < 2 * bound else UNDECIDED


def rate(
    fits: Sequence[Interval | RateFit], target: float, share: float = 0.8, alternative: float = NO_DECAY
) -> Verdict:
    """Slopes of several models: *holds* when at least ``share`` of their intervals contain
    ``target`` and exclude ``alternative`` (no decay), else *not observed*; any interval NaN or
    infinite, or none → *not measured*."""
    if not _usable(fits):
        return NOT_MEASURED
    inside = sum(f.contains(target) and not f.contains(alternative) for f in fits)
    return HOLDS if inside >= share * len(fits) else NOT_OBSERVED


def all_contain(fits: Sequence[Interval | RateFit], target: float, alternative: float = NO_DECAY) -> Verdict:
    """*holds* when every interval contains ``target`` and excludes ``alternative`` (no decay), else
    *not observed at these sizes*; any interval NaN or infinite, or none → *not measured*."""
    return rate(fits, target, share=1.0, alternative=alternative)


def at_most(gamma: Interval, limit: float, alternative: float | None = None) -> Verdict:
    """The claim "γ ≤ limit": the interval lies at or below ``limit`` → *holds*; above it →
    *refuted*; across it → *undecided*, unless an ``alternative`` above ``limit`` is named (the value
    the claim denies): then an interval that reaches ``limit`` and excludes ``alternative`` also
    *holds* (it is the claimed value, measured). No interval → *not measured*."""
    return against_claim(gamma.ci_low, gamma.ci_high, limit, limit if alternative is None else alternative)


def law_rule(a: Interval, b: Interval) -> Verdict:
    """The ρ line's regression measured ≈ a + b·law against the law (b = 1, a = 0): an interval of b that
    misses 1 → *refuted*; one that contains 1 and reaches 0 (no dependence on the law: it cannot
    tell the law from no transition) → *undecided*; b containing 1 only, with a containing 0 →
    *holds*, with a missing 0 → *not observed*; a NaN, infinite or reversed interval → *not measured*."""
    edges = (a.ci_low, a.ci_high, b.ci_low, b.ci_high)
    if not all(math.isfinite(e) for e in edges) or a.ci_low > a.ci_high or b.ci_low > b.ci_high:
        return NOT_MEASURED
    if not b.ci_low <= 1.0 <= b.ci_high:
        return REFUTED
    if b.ci_low <= 0.0:
        return UNDECIDED
    return HOLDS if a.ci_low <= 0.0 <= a.ci_high else NOT_OBSERVED


def bias_verdict(deltas: Sequence[Mapping], tol: float) -> Verdict:
    """token_sample's claim "the reference biases the slope by more than ``tol`` at every horizon": every Δβ
    interval outside ±tol → *holds*; one inside → *refuted*; else *undecided*; none → *not measured*."""
    each = [against_band(d["ci_low"], d["ci_high"], -tol, tol) for d in deltas]
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
