"""verdicts.ogd: the OGD parts' verdict rules (the bounds and the curvature part) on intervals with known answers."""

import pytest

from cfm_experiments.verdicts import DIFFERENT, HOLDS, NOT_MEASURED, NOT_OBSERVED, REFUTED, UNDECIDED, ogd as V, worst
from cfm_jax.stats import Interval, RateFit


def _fit(lo, hi):
    return RateFit((lo + hi) / 2, 0.0, lo, hi)


def test_bounded_needs_every_size_and_growing_every_size():
    """One growing n is enough to call the deviation unbounded (a planted ``any`` for ``all`` fails here)."""
    flat, up = _fit(-0.1, 0.2), _fit(0.3, 0.6)
    assert V.bounded([flat, flat]) and not V.bounded([flat, up]) and not V.bounded([up, flat])
    assert V.growing([up, up]) and not V.growing([up, flat]) and not V.growing([flat, up])
    assert V.sign_verdict([up, up], positive=HOLDS, negative=REFUTED) == HOLDS
    assert V.sign_verdict([flat, flat], positive=HOLDS, negative=REFUTED) == REFUTED
    assert V.sign_verdict([flat, up], positive=HOLDS, negative=REFUTED) == UNDECIDED


@pytest.mark.parametrize(
    "lo,hi,verdict",
    [
        (-0.8, -0.4, HOLDS),
        (-0.45, -0.2, NOT_OBSERVED),
        (0.1, 0.3, REFUTED),
        (-0.01, 0.01, REFUTED),
        (-0.3, 0.1, UNDECIDED),
    ],
)
def test_slope_verdict_against_minus_one_half(lo, hi, verdict):
    assert V.slope_verdict(_fit(lo, hi), -0.5) == verdict


def test_worst_is_the_weakest_statement():
    assert worst([HOLDS, UNDECIDED, DIFFERENT]) == UNDECIDED
    assert worst([HOLDS, NOT_OBSERVED, UNDECIDED]) == NOT_OBSERVED
    assert worst([HOLDS, REFUTED]) == REFUTED and worst([HOLDS]) == HOLDS


def test_still_growing_needs_both_intervals_wholly_past_their_boundaries():
    """Below λ_c the deviation keeps growing only when the late growth factor's interval lies wholly above 1
    and the FTLE's wholly above 0: an interval that merely reaches past its boundary withholds the verdict,
    and only both intervals wholly on the other side read *not observed*."""
    up, across, flat = Interval(1.3, 1.1, 1.5), Interval(1.2, 0.95, 1.5), Interval(0.98, 0.9, 1.05)
    expanding, straddling, contracting = (
        Interval(0.02, 0.01, 0.03),
        Interval(0.01, -0.01, 0.03),
        Interval(-0.02, -0.03, -0.01),
    )
    assert V.growth_verdict(up, expanding) == HOLDS
    assert V.growth_verdict(across, expanding) == UNDECIDED  # G's interval reaches above 1, not wholly
    assert V.growth_verdict(up, straddling) == UNDECIDED  # the FTLE's reaches above 0, not wholly
    assert V.growth_verdict(flat, contracting) == NOT_OBSERVED
    assert V.growth_verdict(flat, straddling) == UNDECIDED
    assert V.growth_verdict(Interval(1.9, 1.5, V.GROWTH + 0.1), contracting) == UNDECIDED  # may double


@pytest.mark.parametrize(
    "q, verdict",
    [
        ((0.7, 0.5, 0.9), HOLDS),  # the bound's rate
        ((0.3, 0.2, 0.45), DIFFERENT),  # slower growth
        ((1.5, 1.2, 1.8), DIFFERENT),  # faster, within the factor 2 of an estimated C
        ((3.0, 2.5, 3.5), REFUTED),  # faster than the bound allows even with C doubled
        ((-0.5, -0.7, -0.3), REFUTED),  # the deviation decays where the curvature says it grows
        ((0.1, -0.1, 0.3), NOT_OBSERVED),  # no growth told apart, ½ excluded
        ((0.3, -0.1, 0.7), UNDECIDED),  # reaches both no growth and the bound's rate
        ((2.0, 1.5, 2.5), UNDECIDED),  # across the factor 2
        ((float("nan"),) * 3, NOT_MEASURED),
        ((0.7, 0.5, float("inf")), NOT_MEASURED),
    ],
)
def test_the_growth_rate_at_lambda_zero_can_be_refuted(q, verdict):
    assert V.rate_verdict(Interval(*q)) == verdict
