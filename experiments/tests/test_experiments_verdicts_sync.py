"""verdicts.sync: the verdict rules of `cfm-jax sync`'s claim lines on numbers with a known answer."""

import math

import pytest

from cfm_experiments.verdicts import sync as S


@pytest.mark.parametrize(
    "lo,hi,order,verdict",
    [
        (-0.66, -0.54, 0.5, "holds"),  # faster than the bound: consistent with O(L^{-1/2})
        (-0.56, -0.30, 0.5, "holds"),  # contains -1/2
        (-0.50, -0.30, 0.5, "holds"),  # touches it
        (-0.45, -0.30, 0.5, "refuted at these sizes"),  # wholly slower than the bound allows
        (-1.20, -0.90, 1.0, "holds"),
        (-0.95, -0.70, 1.0, "refuted at these sizes"),
        (math.nan, math.nan, 1.0, "not measured: no usable rows"),  # no interval: fewer than two sizes
        (-1.2, math.nan, 1.0, "not measured: no usable rows"),
    ],
)
def test_order_verdict(lo, hi, order, verdict):
    assert S.order_verdict(lo, hi, order) == verdict


def test_miss_probability_is_the_binomial_tail():
    """P(Bin(n, 0.05) >= k), written out: 1 at k = 0, 1 − 0.95^n at k = 1, and the sum of the terms."""
    tail = lambda k, n: sum(math.comb(n, j) * 0.05**j * 0.95 ** (n - j) for j in range(k, n + 1))  # noqa: E731
    assert S.miss_probability(0, 12) == pytest.approx(1.0)
    assert S.miss_probability(1, 12) == pytest.approx(1 - 0.95**12)
    for k in range(13):
        assert S.miss_probability(k, 12) == pytest.approx(tail(k, 12), rel=1e-12, abs=1e-300)
    assert S.miss_probability(2, 28, level=0.9) == pytest.approx(
        sum(math.comb(28, j) * 0.1**j * 0.9 ** (28 - j) for j in range(2, 29))
    )
    with pytest.raises(ValueError, match="`misses` must be in"):
        S.miss_probability(13, 12)


def test_coverage_verdict_allows_the_misses_a_true_claim_makes():
    """Twelve 95% intervals, misses split between the sides: up to three are what a true claim produces
    with probability >= 1% (P(>= 3) = 0.020), four are not (0.0022); 28 intervals allow five (0.012) but
    not six (0.0029)."""
    split = lambda k, n: S.coverage_verdict(k // 2, k - k // 2, n)  # noqa: E731
    assert [split(k, 12) for k in range(6)] == ["holds"] * 4 + ["refuted at these sizes"] * 2
    assert split(5, 28) == "holds" and split(6, 28) == "refuted at these sizes"
    assert S.coverage_verdict(1, 0, 1) == S.coverage_verdict(0, 1, 1) == "holds"  # 2.5%, not evidence


def test_coverage_verdict_is_two_sided():
    """Three misses of twelve are what a true claim produces when they fall on both sides, but not all on
    one side (P(Bin(12, 0.025) >= 3) = 0.0027): an estimate biased low, or high, is refuted though the
    total is fine. Two on one side (P = 0.035) are allowed."""
    tail = lambda k, n, p: sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1))  # noqa: E731
    assert tail(3, 12, 0.05) >= S.ALPHA > tail(3, 12, 0.025) and tail(2, 12, 0.025) >= S.ALPHA
    assert S.coverage_verdict(2, 1, 12) == S.coverage_verdict(1, 2, 12) == "holds"
    assert S.coverage_verdict(3, 0, 12) == "refuted at these sizes"  # all below
    assert S.coverage_verdict(0, 3, 12) == "refuted at these sizes"  # all above
    assert S.coverage_verdict(2, 0, 12) == S.coverage_verdict(0, 2, 12) == "holds"
    with pytest.raises(ValueError, match="must be >= 0"):
        S.coverage_verdict(-1, 1, 12)
