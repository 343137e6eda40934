"""verdicts.claims: each rule on intervals with a known answer, and sizes below the rule's needs."""

import pytest

from cfm_experiments.protocol import VERDICTS
from cfm_experiments.verdicts import Verdict, claims as V
from cfm_jax.stats import Interval


def test_judge_withholds_a_verdict_below_its_sizes_and_states_both():
    verdict, sizes = V.judge(Verdict.REFUTED, {"seeds": 32, "largest n": 1000}, {"seeds": 16, "largest n": 1000})
    assert verdict == "inconclusive at these sizes" in VERDICTS
    assert "refuted at these sizes" in sizes and "seeds ≥ 32" in sizes and "seeds 16" in sizes
    verdict, sizes = V.judge(Verdict.HOLDS, {"seeds": 32}, {"seeds": 32})
    assert verdict == "holds" and sizes.startswith("stable from seeds ≥ 32")
    assert V.judge(Verdict.HOLDS, {"seeds": 32}, {})[0] == "inconclusive at these sizes"  # a size not reported


@pytest.mark.parametrize(
    "kappa, verdict",
    [
        ((2.0, 1.5, 2.5), "holds"),  # an interval containing the bound's 2, excluding 0 and 4
        ((1.0, 0.3, 1.99), "holds with a different constant"),
        ((3.0, 2.01, 4.0), "refuted at these sizes"),
        ((2.2, 2.0, 2.4), "holds"),  # the bound exactly at the interval's edge
        ((2.0, -0.5, 3.0), "undecided: interval straddles the boundary"),  # cannot tell the bound from no growth
        ((3.0, 1.5, 4.5), "undecided: interval straddles the boundary"),  # nor from twice its exponent
        ((float("nan"),) * 3, "not measured: no usable rows"),
        ((2.0, -float("inf"), float("inf")), "not measured: no usable rows"),
    ],
)
def test_bounded_growth(kappa, verdict):
    assert V.bounded_growth(Interval(*kappa), 2.0) == verdict


@pytest.mark.parametrize(
    "gamma, verdict",
    [
        ((0.0, -0.1, 0.1), "holds"),
        ((-0.5, -0.6, -0.4), "holds"),
        ((0.2, 0.05, 0.3), "refuted at these sizes"),
        ((0.2, -0.1, 0.6), "undecided: interval straddles the boundary"),  # 0 and √x growth both inside
        ((0.0, -0.49, 0.49), "holds"),  # just inside the resolution
        ((0.0, -float("inf"), float("inf")), "not measured: no usable rows"),
        ((float("nan"),) * 3, "not measured: no usable rows"),
    ],
)
def test_independence(gamma, verdict):
    assert V.independence(Interval(*gamma)) == verdict


def test_at_most_rate_all_contain_and_code_checks():
    assert V.at_most(Interval(0.4, 0.3, 0.45), 0.5) == "holds"
    assert V.at_most(Interval(0.6, 0.45, 0.7), 0.5) == "undecided: interval straddles the boundary"
    assert V.at_most(Interval(0.6, 0.45, 0.7), 0.5, alternative=1.0) == "holds"  # the claimed value, 1 excluded
    assert V.at_most(Interval(0.6, 0.45, 1.1), 0.5, alternative=1.0) == "undecided: interval straddles the boundary"
    assert V.at_most(Interval(0.8, 0.55, 0.9), 0.5) == "refuted at these sizes"
    assert V.at_most(Interval(0.8, 0.55, 0.9), 0.5, alternative=1.0) == "refuted at these sizes"
    assert V.at_most(Interval(0.0, -float("inf"), float("inf")), 0.5) == "not measured: no usable rows"
    inside, outside = Interval(-0.5, -0.6, -0.4), Interval(-0.2, -0.3, -0.1)
    assert V.rate([inside] * 4 + [outside], -0.5) == "holds"
    assert V.rate([inside] * 3 + [outside] * 2, -0.5) == "not observed at these sizes"
    assert V.all_contain([inside] * 4, -0.5) == "holds"
    assert V.all_contain([inside] * 4 + [outside], -0.5) == "not observed at these sizes"
    wide = Interval(-0.5, -1.5, 0.5)  # contains −½ and no decay at all: does not count
    assert V.rate([inside] * 3 + [wide] * 2, -0.5) == V.all_contain([wide], -0.5) == "not observed at these sizes"
    assert V.rate([], -0.5) == V.all_contain([], -0.5) == "not measured: no usable rows"
    nan = Interval(float("nan"), float("nan"), float("nan"))
    assert V.rate([inside] * 4 + [nan], -0.5) == V.all_contain([nan], -0.5) == "not measured: no usable rows"
    assert V.code_check(True) == "code check passed" and V.code_check(False) == "code check failed"
