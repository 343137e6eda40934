"""Verdict rules: what each claim line concludes from its intervals, and at which sizes it may.

A rule maps intervals to a :class:`cfm_experiments.verdicts.Verdict`. Every rule of a claim
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

from collections.abc import Mapping, Sequence

from cfm_jax.stats import Interval, RateFit

from ..verdicts import BELOW_STABLE_SIZES, DIFFERENT, HOLDS, NOT_OBSERVED, REFUTED, Verdict, code_check


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


def independence(gamma: Interval) -> Verdict:
    """C ∝ x^γ and the claim "C does not grow with x": the interval contains 0 or lies below it
    (C decreases: a bound independent of x holds) → *holds*; it lies above 0 → *refuted*."""
    return REFUTED if gamma.ci_low > 0 else HOLDS


def bounded_growth(kappa: Interval, bound: float) -> Verdict:
    """log C ≈ a + κβ against a bound's exponent ``bound``: the interval lies below it → *holds with
    a different constant* (slower than the bound says); contains it → *holds*; above it → *refuted*."""
    if kappa.ci_high < bound:
        return DIFFERENT
    if kappa.ci_low > bound:
        return REFUTED
    return HOLDS


def rate(fits: Sequence[Interval | RateFit], target: float, share: float = 0.8) -> Verdict:
    """Slopes of several models: *holds* when at least ``share`` of their intervals contain
    ``target``, else *not observed*."""
    inside = sum(f.contains(target) for f in fits)
    return HOLDS if fits and inside >= share * len(fits) else NOT_OBSERVED


def all_contain(fits: Sequence[Interval | RateFit], target: float) -> Verdict:
    """*holds* when every interval contains ``target``, else *not observed at these sizes*."""
    return HOLDS if fits and all(f.contains(target) for f in fits) else NOT_OBSERVED


def at_most(gamma: Interval, limit: float) -> Verdict:
    """The claim "γ ≤ limit": the interval reaches down to ``limit`` or below → *holds*; lies above
    it → *refuted*."""
    return REFUTED if gamma.ci_low > limit else HOLDS


__all__ = ["all_contain", "at_most", "bounded_growth", "code_check", "independence", "judge", "rate"]
