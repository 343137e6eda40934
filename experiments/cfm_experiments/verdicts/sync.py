"""The verdict rules of ``cfm-jax sync``'s claim lines.

Two kinds of claims are measured.

* A convergence order, an upper bound ``error = O(x^{-p})`` (strong and weak orders of the
  scheme, the width term, propagation of chaos): from the 95 % bootstrap interval
  ``[lo, hi]`` of the fitted log-log slope, the claim *holds* when ``lo <= -p`` (the data allow a
  decay at least as fast as claimed; a faster decay is consistent with a bound), is *refuted at
  these sizes* when the whole interval lies above ``-p`` (slower than the bound allows), and is
  *not measured* when there is no interval (fewer than two resolved sizes).
* An equality checked in n cells, each by an estimate with a 95 % interval (a closed form
  against Monte Carlo estimates): if the claim is true each interval misses with probability
  about 5 %, about 2.5 % on each side, so the number of misses k is Binomial(n, 0.05) and the
  misses on one side Binomial(n, 0.025). The claim *holds* when P(Binomial(n, 0.05) >= k) >= 0.01
  and, on each side, P(Binomial(n, 0.025) >= k_side) >= 0.01; it is *refuted at these sizes*
  otherwise. One miss in twelve intervals is what a true claim produces, six are not; and three
  misses of twelve, all on one side (an estimate biased one way), are not either, though three
  split between the sides are.
"""

from __future__ import annotations

from scipy import stats

from .vocabulary import HOLDS, NOT_MEASURED, REFUTED, Verdict, against_claim

#: the significance at which a set of intervals missing a claimed value refutes it.
ALPHA = 0.01


def order_verdict(ci_low, ci_high, order: float) -> Verdict:
    """The verdict on ``error = O(x^{-order})`` from the 95 % interval of the fitted slope: reaching
    −order or below it and excluding 0 (no convergence) holds; wholly above −order refuted; reaching
    both −order and 0 undecided; no interval (NaN, ``null`` or infinite) not measured."""
    return against_claim(ci_low, ci_high, -order, 0.0)


def miss_probability(misses: int, n: int, level: float = 0.95) -> float:
    """P(Binomial(n, 1 − level) >= misses): how often a true claim misses that many intervals."""
    if not 0 <= misses <= n:
        raise ValueError(f"`misses` must be in [0, n = {n}], got {misses}.")
    return float(stats.binom.sf(misses - 1, n, 1.0 - level))


def coverage_verdict(below: int, above: int, n: int, level: float = 0.95) -> Verdict:
    """The verdict on a value claimed in ``n`` cells whose ``level`` intervals miss it ``below``
    times lying wholly below it and ``above`` times wholly above (module docstring): the total and
    each side's count must both be what a true claim produces with probability at least
    :data:`ALPHA`; a side's misses are Binomial(n, (1 − level)/2), as for a two-sided interval. No
    cell (``n`` = 0) is *not measured*: an empty measurement never holds."""
    if min(below, above) < 0:
        raise ValueError(f"`below` and `above` must be >= 0, got {below} and {above}.")
    if n < 0 or below + above > n:
        raise ValueError(f"`n` must be >= below + above >= 0, got n = {n} ({below} + {above} misses).")
    if n == 0:
        return NOT_MEASURED
    total = miss_probability(below + above, n, level)
    side = (1 + level) / 2  # one side of a two-sided `level` interval misses with (1 − level)/2
    one_sided = min(miss_probability(below, n, side), miss_probability(above, n, side))
    return HOLDS if min(total, one_sided) >= ALPHA else REFUTED


__all__ = ["ALPHA", "coverage_verdict", "miss_probability", "order_verdict"]
