"""The verdicts of every claim line, and the two rules every other rule is written with.

A claim line concludes with one :class:`Verdict`. Three are statements about the claim
(*holds*, *holds with a different constant*, *refuted at these sizes*), one a finite-size
statement (*not observed at these sizes*: a finite run cannot refute an asymptotic claim), two
check the implementation (*code check passed* / *failed*), and five **withhold** the verdict,
each named for its reason:

- *inconclusive at these sizes*: the run is below the sizes at which the rule's verdict is stable
  (:func:`cfm_experiments.verdicts.claims.judge`), and only that;
- *undecided: interval straddles the boundary*: an interval reaches both sides of the claim's
  boundary (or the sizes' intervals disagree), so a larger run could go either way;
- *undecided: the draws disagree*: independent draws of the line read different verdicts
  (:func:`agree`), so a new draw could overturn either;
- *not tested: the claimed regime is not reached*: the run never puts the claim to the test
  (e.g. a ridge so far above its threshold that the student collapses);
- *not measured: no usable rows*: nothing the rule can use was measured (no row, no interval,
  every fit floor-limited).

Every rule reads what a row stores: an interval is an :class:`~cfm_jax.stats.Interval` or
:class:`~cfm_jax.stats.RateFit`, or the mapping a JSON row holds, where a NaN or infinite number is
``null`` and a key may be missing (:func:`edges`: NaN for either). Such an interval, like a NaN one,
reads *not measured*; an empty measurement never *holds*. :func:`against_band` and
:func:`against_claim` read an interval against a claimed band or value (a NaN claim or band is
refused: it is a rule's constant, or derived from rows by a rule that reads *not measured* first);
:mod:`cfm_experiments.rendering` writes the claim lines.
"""

from __future__ import annotations

import enum
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence


class Verdict(enum.StrEnum):
    """The verdict of a claim line; its value is the text printed."""

    HOLDS = "holds"
    DIFFERENT = "holds with a different constant"
    NOT_OBSERVED = "not observed at these sizes"
    REFUTED = "refuted at these sizes"
    BELOW_STABLE_SIZES = "inconclusive at these sizes"
    UNDECIDED = "undecided: interval straddles the boundary"
    DRAWS_DISAGREE = "undecided: the draws disagree"
    NOT_TESTED = "not tested: the claimed regime is not reached"
    NOT_MEASURED = "not measured: no usable rows"
    CODE_PASSED = "code check passed"
    CODE_FAILED = "code check failed"

    @property
    def withheld(self) -> bool:
        """Whether the verdict is withheld (one of the five named reasons)."""
        return self in WITHHELD


HOLDS = Verdict.HOLDS
DIFFERENT = Verdict.DIFFERENT
NOT_OBSERVED = Verdict.NOT_OBSERVED
REFUTED = Verdict.REFUTED
BELOW_STABLE_SIZES = Verdict.BELOW_STABLE_SIZES
UNDECIDED = Verdict.UNDECIDED
DRAWS_DISAGREE = Verdict.DRAWS_DISAGREE
NOT_TESTED = Verdict.NOT_TESTED
NOT_MEASURED = Verdict.NOT_MEASURED
CODE_PASSED = Verdict.CODE_PASSED
CODE_FAILED = Verdict.CODE_FAILED

WITHHELD = frozenset({BELOW_STABLE_SIZES, UNDECIDED, DRAWS_DISAGREE, NOT_TESTED, NOT_MEASURED})
#: every verdict's text.
VERDICTS: tuple[str, ...] = tuple(v.value for v in Verdict)
#: from the weakest to the strongest statement: the worst of several verdicts is the first.
ORDER: tuple[Verdict, ...] = (
    CODE_FAILED,
    REFUTED,
    NOT_OBSERVED,
    NOT_MEASURED,
    NOT_TESTED,
    DRAWS_DISAGREE,
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
    *undecided: the draws disagree* (a verdict a new draw overturns is no verdict: never *holds*,
    *holds with a different constant* nor *refuted*); no draw → *not measured*."""
    verdicts = [Verdict(v) for v in verdicts]
    if not verdicts:
        return NOT_MEASURED
    if len(set(verdicts)) == 1:
        return verdicts[0]
    return CODE_FAILED if CODE_FAILED in verdicts else DRAWS_DISAGREE


def code_check(passed: bool) -> Verdict:
    """An identity of the implementation: no sizes involved."""
    return CODE_PASSED if passed else CODE_FAILED


def real(x) -> float:
    """A number as a row stores it, as a float: ``null`` (None), a missing value, a bool or anything
    that is not a real number is NaN (nothing a rule can use)."""
    if x is None or isinstance(x, bool) or not isinstance(x, numbers.Real):
        return float("nan")
    return float(x)


def edges(interval) -> tuple[float, float]:
    """``(ci_low, ci_high)`` of what a rule reads as an interval: an :class:`~cfm_jax.stats.Interval`
    or :class:`~cfm_jax.stats.RateFit`, a mapping as a JSON row stores one (``null`` or a missing key
    is NaN), a pair ``(low, high)``, or None (NaN, NaN)."""
    from cfm_jax.stats import Interval, RateFit  # here: `cfm-jax --help` imports the vocabulary, not JAX

    if isinstance(interval, (Interval, RateFit)):
        return real(interval.ci_low), real(interval.ci_high)
    if isinstance(interval, Mapping):
        return real(interval.get("ci_low")), real(interval.get("ci_high"))
    if isinstance(interval, Sequence) and not isinstance(interval, str) and len(interval) == 2:
        return real(interval[0]), real(interval[1])
    return float("nan"), float("nan")


def measured(ci_low, ci_high) -> bool:
    """Whether ``[ci_low, ci_high]`` is an interval a rule can use: both edges finite and ordered (a
    NaN, ``null``, an infinite edge or a reversed pair carries no information)."""
    lo, hi = real(ci_low), real(ci_high)
    return math.isfinite(lo) and math.isfinite(hi) and lo <= hi


def _claimed(name: str, value) -> float:
    """A claimed value or band edge, refused when NaN (it is the rule's: a NaN claim holds nothing)."""
    v = real(value)
    if math.isnan(v):
        raise ValueError(f"`{name}` must be a number (a claimed value or band edge), got {value!r}.")
    return v


def against_band(ci_low, ci_high, low: float = -float("inf"), high: float = float("inf")) -> Verdict:
    """An interval against the claimed band ``[low, high]`` (its edges belong to it): inside it
    *holds*, wholly outside it *refuted*, touching or across an edge from outside *undecided*; no
    interval (:func:`measured`) is *not measured*; a NaN edge is refused."""
    low, high = _claimed("low", low), _claimed("high", high)
    if low > high:
        raise ValueError(f"the band [`low`, `high`] is reversed: [{low}, {high}].")
    if not measured(ci_low, ci_high):
        return NOT_MEASURED
    ci_low, ci_high = real(ci_low), real(ci_high)
    if low <= ci_low and ci_high <= high:
        return HOLDS
    if ci_high < low or ci_low > high:
        return REFUTED
    return UNDECIDED


def against_claim(ci_low, ci_high, claim: float, alternative: float, beyond: Verdict = REFUTED) -> Verdict:
    """An interval against a claimed value ``claim`` and the ``alternative`` the claim denies (on one
    side of it): an interval wholly beyond ``claim`` on the alternative's side reads ``beyond``
    (*refuted*, or *not observed* for a finite-size statement); one that reaches ``claim`` (or lies
    on its far side) and excludes ``alternative`` *holds*; one that reaches both *undecided*; no
    interval (:func:`measured`) *not measured*. With ``alternative == claim`` it is the one-sided
    bound: only an interval wholly on the claim's side holds. A NaN claim or alternative is refused."""
    claim, alternative = _claimed("claim", claim), _claimed("alternative", alternative)
    if not measured(ci_low, ci_high):
        return NOT_MEASURED
    ci_low, ci_high = real(ci_low), real(ci_high)
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
    "DRAWS_DISAGREE",
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
    "edges",
    "measured",
    "real",
    "worst",
]
