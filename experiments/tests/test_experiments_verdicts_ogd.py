"""verdicts.ogd: the OGD parts' verdict rules on intervals with known answers."""

import pytest

from cfm_experiments.verdicts import DIFFERENT, HOLDS, NOT_OBSERVED, REFUTED, UNDECIDED, ogd as V, worst
from cfm_jax.stats import RateFit


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
