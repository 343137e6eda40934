"""Every verdict rule of the experiments, in one table: what each reads from an interval.

A *rule* maps intervals (95 % CIs) to a :class:`~cfm_experiments.verdicts.vocabulary.Verdict`. Each is a total
function with the vocabulary of :mod:`cfm_experiments.verdicts.vocabulary`: an interval that is NaN,
infinite, reversed or missing reads *not measured*; one that reaches both the claimed value and
the alternative the claim denies (it *straddles* the boundary) reads *undecided* (or another
withheld verdict), never *holds* or *holds with a different constant*; one that lies clearly
beyond a one-sided bound can read *refuted*.

:data:`RULES` lists each rule as a :class:`Rule`: the function, how one interval ``[lo, hi]`` is
fed to it (every interval the rule reads set to it, the rule's other inputs fixed), and the claimed
value and the alternative a straddling interval reaches. A rule with several boundaries appears
once per boundary. :data:`NOT_ON_INTERVALS` names the functions that return a verdict from
something else (counts, other verdicts, a boolean), with the reason. Every function of the
package that returns a verdict is in one or the other (the tests check it), so no rule can be
left out of the property test that runs them all over random, degenerate and straddling intervals.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from cfm_jax.stats import Interval, RateFit

from ..claims import token_sample
from ..claims.tail_exponent import TAIL_DELTAS
from . import claims as claim_rules, ogd as ogd_rules, slopes as slope_rules, sync as sync_rules, tails as tail
from .rates import verdict as rates_verdict
from .vocabulary import HOLDS, REFUTED, Verdict, against_band, against_claim, agree, code_check, worst

Apply = Callable[[float, float], Verdict]


@dataclasses.dataclass(frozen=True)
class Rule:
    """One rule of the table.

    ``rule`` is the function itself (for the completeness check), ``apply(lo, hi)`` its verdict on
    the interval ``[lo, hi]``, ``claim`` a value a narrow interval around which reads *holds* (or
    *holds with a different constant*), ``alternative`` the value the claim denies: an interval
    containing both straddles the rule's boundary. ``interval``: whether ``[lo, hi]`` is an interval
    (False for a rule on two point statistics, which is checked on degenerate input only).
    ``infinite``: what an interval with an infinite edge reads (None: any verdict but *holds* and
    *holds with a different constant*, for a located sign change whose unbounded side is a result)."""

    name: str
    rule: Callable
    apply: Apply
    claim: float
    alternative: float
    interval: bool = True
    infinite: Verdict | None = Verdict.NOT_MEASURED


def _iv(lo: float, hi: float) -> Interval:
    return Interval(0.5 * (lo + hi), lo, hi)


def _fit(lo: float, hi: float) -> RateFit:
    return RateFit(0.5 * (lo + hi), 0.0, lo, hi)


_EXPANDING = Interval(0.02, 0.01, 0.03)
_UP = Interval(1.3, 1.1, 1.5)


def _tail_entry(n: int, gamma: Interval, median: Interval, ratio: tuple[float, float]) -> dict:
    D = len(TAIL_DELTAS)
    return {
        "n": n,
        "gamma": gamma.as_dict(),
        "gamma_lin": 0.5,
        "median_ci": median.as_dict(),
        "ratio": {"value": [0.5 * sum(ratio)] * D, "ci_low": [ratio[0]] * D, "ci_high": [ratio[1]] * D},
    }


def _tail_row(gamma=Interval(0.5, 0.47, 0.53), slope=(-0.5, -0.5), ratio=(0.99, 1.01)) -> dict:
    """A tail model at n = 16 and 64 with γ, the median's exponent interval ``slope`` and every quantile
    ratio's interval ``ratio`` given; everything else at the limit."""
    m1 = Interval(4.0 ** (0.5 * sum(slope) + 0.5), 4.0 ** (slope[0] + 0.5), 4.0 ** (slope[1] + 0.5))
    sizes = [_tail_entry(16, gamma, Interval(1.0, 1.0, 1.0), ratio), _tail_entry(64, gamma, m1, ratio)]
    return {"deltas": list(TAIL_DELTAS), "sizes": sizes}


def _rates_fit(lo: float, hi: float) -> dict:
    return {"meaningful": True, "ci_low": lo, "ci_high": hi, "expected_band": (-0.6, -0.4)}


def _threshold(lo: float, hi: float) -> Verdict:
    return ogd_rules.Threshold(lo, hi).verdict()


RULES: tuple[Rule, ...] = (
    Rule("against_band [0, 1]", against_band, lambda lo, hi: against_band(lo, hi, 0.0, 1.0), 0.5, 1.5),
    Rule("against_band (−∞, ½]", against_band, lambda lo, hi: against_band(lo, hi, high=0.5), 0.0, 1.0),
    Rule("against_claim 0 vs ½", against_claim, lambda lo, hi: against_claim(lo, hi, 0.0, 0.5), 0.0, 0.5),
    Rule("against_claim 0 vs −½", against_claim, lambda lo, hi: against_claim(lo, hi, 0.0, -0.5), 0.0, -0.5),
    Rule("claims.independence", claim_rules.independence, lambda lo, hi: claim_rules.independence(_iv(lo, hi)), 0, 0.5),
    Rule(
        "claims.bounded_growth vs no growth",
        claim_rules.bounded_growth,
        lambda lo, hi: claim_rules.bounded_growth(_iv(lo, hi), 2.0),
        2.0,
        0.0,
    ),
    Rule(
        "claims.bounded_growth vs twice",
        claim_rules.bounded_growth,
        lambda lo, hi: claim_rules.bounded_growth(_iv(lo, hi), 2.0),
        2.0,
        4.0,
    ),
    Rule("claims.rate", claim_rules.rate, lambda lo, hi: claim_rules.rate([_iv(lo, hi)] * 5, -0.5), -0.5, 0.0),
    Rule(
        "claims.all_contain",
        claim_rules.all_contain,
        lambda lo, hi: claim_rules.all_contain([_fit(lo, hi)] * 3, -0.5),
        -0.5,
        0.0,
    ),
    Rule("claims.at_most", claim_rules.at_most, lambda lo, hi: claim_rules.at_most(_iv(lo, hi), 0.5), 0.0, 0.6),
    Rule(
        "claims.at_most vs an alternative",
        claim_rules.at_most,
        lambda lo, hi: claim_rules.at_most(_iv(lo, hi), 0.5, alternative=1.0),
        0.5,
        1.0,
    ),
    Rule(
        "claims.law_rule (b against 1, 0 the alternative)",
        claim_rules.law_rule,
        lambda lo, hi: claim_rules.law_rule(_iv(-0.05, 0.05), _iv(lo, hi), [(_iv(-0.52, -0.48), -0.5)]),
        1.0,
        0.0,
    ),
    Rule(
        "ogd.slope_verdict",
        ogd_rules.slope_verdict,
        lambda lo, hi: ogd_rules.slope_verdict(_fit(lo, hi), -0.5),
        -0.6,
        0.0,
    ),
    Rule(
        "ogd.sign_verdict growth holds",
        ogd_rules.sign_verdict,
        lambda lo, hi: ogd_rules.sign_verdict([_fit(lo, hi)] * 3, positive=HOLDS, negative=REFUTED),
        1.0,
        0.0,
    ),
    Rule(
        "ogd.sign_verdict bounded holds",
        ogd_rules.sign_verdict,
        lambda lo, hi: ogd_rules.sign_verdict([_fit(lo, hi)] * 3, positive=REFUTED, negative=HOLDS),
        0.0,
        ogd_rules.RANDOM_WALK,
    ),
    Rule(
        "ogd.at_most_half",
        ogd_rules.at_most_half,
        lambda lo, hi: worst(ogd_rules.at_most_half([_fit(lo, hi)] * 2)),
        0.0,
        1.0,
    ),
    Rule("ogd.Threshold.verdict", ogd_rules.Threshold.verdict, _threshold, 1.0, 3.0, infinite=None),
    Rule(
        "ogd.rate_verdict vs no growth",
        ogd_rules.rate_verdict,
        lambda lo, hi: ogd_rules.rate_verdict(_iv(lo, hi)),
        0.75,
        0.0,
    ),
    Rule(
        "ogd.rate_verdict vs beyond the bound",
        ogd_rules.rate_verdict,
        lambda lo, hi: ogd_rules.rate_verdict(_iv(lo, hi)),
        0.75,
        2.5,
    ),
    Rule(
        "ogd.growth_verdict (G)",
        ogd_rules.growth_verdict,
        lambda lo, hi: ogd_rules.growth_verdict(_iv(lo, hi), _EXPANDING),
        1.5,
        1.0,
    ),
    Rule(
        "ogd.growth_verdict (FTLE)",
        ogd_rules.growth_verdict,
        lambda lo, hi: ogd_rules.growth_verdict(_UP, _iv(lo, hi)),
        0.02,
        0.0,
    ),
    Rule(
        "ogd.bounded_verdict",
        ogd_rules.bounded_verdict,
        lambda lo, hi: ogd_rules.bounded_verdict([_iv(lo, hi)] * 2),
        1.0,
        3.0,
    ),
    Rule(
        "ogd.bound_ratio_verdict",
        ogd_rules.bound_ratio_verdict,
        lambda lo, hi: ogd_rules.bound_ratio_verdict(hi, lo),
        0.5,
        3.0,
        interval=False,
    ),
    Rule(
        "tail.gamma_verdict",
        tail.gamma_verdict,
        lambda lo, hi: tail.gamma_verdict(_tail_row(gamma=_iv(lo, hi))["sizes"][-1], TAIL_DELTAS),
        0.5,
        tail.SUB_EXPONENTIAL,
    ),
    Rule(
        "tail.decay_verdict",
        tail.decay_verdict,
        lambda lo, hi: tail.decay_verdict(_tail_row(slope=(lo, hi))["sizes"]),
        -0.5,
        0.0,
    ),
    Rule(
        "tail.model_checks (decay)",
        tail.model_checks,
        lambda lo, hi: worst(tail.model_checks(_tail_row(slope=(lo, hi))).values()),
        -0.5,
        0.0,
    ),
    Rule(
        "tail.near_limit",
        tail.near_limit,
        lambda lo, hi: worst(tail.near_limit(_tail_row(ratio=(lo, hi))["sizes"][-1])),
        1.0,
        2.0,
    ),
    Rule(
        "tail.model_verdict (γ)",
        tail.model_verdict,
        lambda lo, hi: tail.model_verdict(_tail_row(gamma=_iv(lo, hi))),
        0.5,
        tail.SUB_EXPONENTIAL,
    ),
    Rule(
        "tail.model_verdict (decay)",
        tail.model_verdict,
        lambda lo, hi: tail.model_verdict(_tail_row(slope=(lo, hi))),
        -0.5,
        0.0,
    ),
    Rule(
        "tail.model_verdict (limit)",
        tail.model_verdict,
        lambda lo, hi: tail.model_verdict(_tail_row(ratio=(lo, hi))),
        1.0,
        0.5,
    ),
    Rule(
        "claims.bias_verdict",
        claim_rules.bias_verdict,
        lambda lo, hi: claim_rules.bias_verdict([{"ci_low": lo, "ci_high": hi}] * 3, token_sample.NEGLIGIBLE),
        0.5,
        0.0,
    ),
    Rule(
        "rates.verdict",
        rates_verdict,
        lambda lo, hi: rates_verdict([_rates_fit(lo, hi)] * 3),
        -0.5,
        0.0,
    ),
    Rule(
        "slopes.slope_verdict",
        slope_rules.slope_verdict,
        lambda lo, hi: slope_rules.slope_verdict([_fit(lo, hi)], (10, 100, 1000)),  # one row: its interval pooled
        -0.5,
        0.0,
    ),
    Rule(
        "slopes.slope_verdict (correlated) vs twice the rate",
        slope_rules.slope_verdict,
        lambda lo, hi: slope_rules.slope_verdict([_fit(lo, hi)] * 3, (10, 100, 1000), correlated=True),
        -0.5,
        -1.0,
    ),
    Rule(
        "sync.order_verdict",
        sync_rules.order_verdict,
        lambda lo, hi: sync_rules.order_verdict(lo, hi, 0.5),
        -0.6,
        0.0,
    ),
)

#: the functions that return a verdict from something other than an interval, and why they are not rules.
NOT_ON_INTERVALS: dict[Callable, str] = {
    worst: "the weakest of verdicts already reached",
    code_check: "an identity of the implementation: a boolean",
    claim_rules.judge: "withholds a verdict below the rule's stable sizes",
    agree: "the verdicts of independent draws of one line (a property test of its own)",
    sync_rules.coverage_verdict: "counts of intervals missing a value (Binomial tails)",
}

__all__ = ["NOT_ON_INTERVALS", "RULES", "Rule"]
