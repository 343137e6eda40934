"""The verdicts of every claim line, and the two rules every other rule is written with.

A claim line concludes with one :class:`Verdict`. Three are statements about the claim
(*holds*, *holds with a different constant*, *refuted at these sizes*), one a finite-size
statement (*not observed at these sizes*: a finite run cannot refute an asymptotic claim), two
check the implementation (*code check passed* / *failed*), and four **withhold** the verdict,
each named for its reason:

- *inconclusive at these sizes*: the run is below the sizes at which the rule's verdict is stable
  (:func:`cfm_experiments.verdicts.claims.judge`), and only that;
- *undecided: interval straddles the boundary*: an interval reaches both sides of the claim's
  boundary (or the sizes' intervals disagree, or two independent draws read different verdicts:
  :func:`agree`), so a larger run could go either way;
- *not tested: the claimed regime is not reached*: the run never puts the claim to the test
  (e.g. a ridge so far above its threshold that the student collapses);
- *not measured: no usable rows*: nothing the rule can use was measured (no row, no interval,
  every fit floor-limited).

:func:`against_band` and :func:`against_claim` read an interval against a claimed band or value;
:mod:`cfm_experiments.rendering` writes the claim lines.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence


class Verdict(enum.StrEnum):
    """The verdict of a claim line; its value is the text printed."""

    HOLDS = "holds"
    DIFFERENT = "holds with a different constant"
    NOT_OBSERVED = "not observed at these sizes"
    REFUTED = "refuted at these sizes"
    BELOW_STABLE_SIZES = "inconclusive at these sizes"
    UNDECIDED = "undecided: interval straddles the boundary"
    NOT_TESTED = "not tested: the claimed regime is not reached"
    NOT_MEASURED = "not measured: no usable rows"
    CODE_PASSED = "code check passed"
    CODE_FAILED = "code check failed"

    @property
    def withheld(self) -> bool:
        """Whether the verdict is withheld (one of the four named reasons)."""
        return self in WITHHELD


HOLDS = Verdict.HOLDS
DIFFERENT = Verdict.DIFFERENT
NOT_OBSERVED = Verdict.NOT_OBSERVED
REFUTED = Verdict.REFUTED
BELOW_STABLE_SIZES = Verdict.BELOW_STABLE_SIZES
UNDECIDED = Verdict.UNDECIDED
NOT_TESTED = Verdict.NOT_TESTED
NOT_MEASURED = Verdict.NOT_MEASURED
CODE_PASSED = Verdict.CODE_PASSED
CODE_FAILED = Verdict.CODE_FAILED

WITHHELD = frozenset({BELOW_STABLE_SIZES, UNDECIDED, NOT_TESTED, NOT_MEASURED})
#: every verdict's text.
VERDICTS: tuple[str, ...] = tuple(v.value for v in Verdict)
#: from the weakest to the strongest statement: the worst of several verdicts is the first.
ORDER: tuple[Verdict, ...] = (
    CODE_FAILED,
    REFUTED,
    NOT_OBSERVED,
    NOT_MEASURED,
    NOT_TESTED,
    UNDECIDED,
    BELOW_STABLE_SIZES,
    DIFFERENT,
    HOLDS,
    CODE_PASSED,
)


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    """The weakest of several verdicts (:data:`ORDER`); none: *not measured*."""
    return min(verdicts, key=ORDER.index, default=NOT_MEASURED)


def agree(verdicts: Sequence[Verdict]) -> Verdict:
    """The verdict of independent draws of one line (:mod:`cfm_experiments.draws`): their common
    verdict when every draw reads the same, a failed code check when any draw's failed, else
    *undecided* (a verdict a new draw overturns is no verdict: never *holds*, *holds with a different
    constant* nor *refuted*); no draw → *not measured*."""
    verdicts = [Verdict(v) for v in verdicts]
    if not verdicts:
        return NOT_MEASURED
    if len(set(verdicts)) == 1:
        return verdicts[0]
    return CODE_FAILED if CODE_FAILED in verdicts else UNDECIDED


def code_check(passed: bool) -> Verdict:
    """An identity of the implementation: no sizes involved."""
    return CODE_PASSED if passed else CODE_FAILED


def measured(ci_low: float, ci_high: float) -> bool:
    """Whether ``[ci_low, ci_high]`` is an interval a rule can use: both edges finite and ordered (a
    NaN, an infinite edge or a reversed pair carries no information)."""
    return math.isfinite(ci_low) and math.isfinite(ci_high) and ci_low <= ci_high


def against_band(ci_low: float, ci_high: float, low: float = -float("inf"), high: float = float("inf")) -> Verdict:
    """An interval against the claimed band ``[low, high]``: inside it *holds*, wholly outside it
    *refuted*, across an edge *undecided*; no interval (:func:`measured`) is *not measured*."""
    if not measured(ci_low, ci_high):
        return NOT_MEASURED
    if low <= ci_low and ci_high <= high:
        return HOLDS
    if ci_high < low or ci_low > high:
        return REFUTED
    return UNDECIDED


def against_claim(
    ci_low: float, ci_high: float, claim: float, alternative: float, beyond: Verdict = REFUTED
) -> Verdict:
    """An interval against a claimed value ``claim`` and the ``alternative`` the claim denies (on one
    side of it): an interval wholly beyond ``claim`` on the alternative's side reads ``beyond``
    (*refuted*, or *not observed* for a finite-size statement); one that reaches ``claim`` (or lies
    on its far side) and excludes ``alternative`` *holds*; one that reaches both *undecided*; no
    interval (:func:`measured`) *not measured*. With ``alternative == claim`` it is the one-sided
    bound: only an interval wholly on the claim's side holds."""
    if not measured(ci_low, ci_high):
        return NOT_MEASURED
    if alternative < claim:  # mirror: the alternative above the claim
        ci_low, ci_high, claim, alternative = -ci_high, -ci_low, -claim, -alternative
    if ci_low > claim:
        return beyond
    if ci_high < alternative or ci_high <= claim:
        return HOLDS
    return UNDECIDED


__all__ = [
    "BELOW_STABLE_SIZES",
    "CODE_FAILED",
    "CODE_PASSED",
    "DIFFERENT",
    "HOLDS",
    "NOT_MEASURED",
    "NOT_OBSERVED",
    "NOT_TESTED",
    "ORDER",
    "REFUTED",
    "UNDECIDED",
    "VERDICTS",
    "WITHHELD",
    "Verdict",
    "against_band",
    "against_claim",
    "agree",
    "code_check",
    "measured",
    "worst",
]
