"""The tail-exponent part's rule (:mod:`.tail_exponent`): one model's verdict from its rows, and the
thresholds it uses, each derived from the claim and one stated tolerance.

The claim: √n·dev → sup_s ‖G_s‖, the linearised limiting Gaussian process's, with a light tail
(exponent ½ in log(1/δ), or the limit's own), not a sub-exponential one (exponent 1). The first
correction of √n·dev at finite n is of relative order n^{−½} (the next term of the expansion in the
empirical measure); the claim fixes that order, not its coefficient c. The rule does not estimate c
to set its own thresholds (that would let the data move the bar they are judged against): it
**states** a tolerance, a relative correction of at most :data:`COEFFICIENT`/√n
(:func:`correction`), which the claim line prints, and the line prints beside it the coefficient
the data show (:func:`coefficient_seen`). Then:

- near the limit at the largest n: every q_δ over the limit's in [1 − c/√n, 1 + c/√n]
  (:func:`limit_band`; [0.875, 1.125] at n = 64);
- decaying at the claimed rate, two-sided: the median's exponent in n between −½ plus the exponent
  of a correction 1 + c/√n shrinking from the smallest n to the largest and −½ plus that of
  1 − c/√n (:func:`decay_band`: [−0.576, −0.389] from 16 to 64), so a median decaying like n^{−0.3},
  or like n^{−1}, is a rate failure. The band narrows as the span grows: n^{−0.4} passes from 16 to
  64 and fails from 16 to :func:`refuting_span` (16, −0.4) ≈ 98;
- light-tailed: γ at most max(½, the limit's γ) plus the slope change that quantile ratios within
  the band allow over the fitted δ (:func:`gamma_tolerance`), against the alternative 1; a bound at
  or beyond 1 cannot tell the tails apart (*not tested*).

Each check reads *holds* only on a finite interval on the claim's side, *refuted* on one wholly
beyond it and *undecided* across it (:mod:`cfm_experiments.verdicts`); a model's verdict is the
worst of its checks (:func:`model_verdict`). Every function reads a row as ``rows.jsonl`` stores it:
a ``null`` or missing number or interval reads *not measured*, never an exception.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from scipy import optimize

from cfm_jax.stats import Interval

from . import claims as V
from .vocabulary import NOT_MEASURED, NOT_TESTED, Verdict, against_band, edges, measured, real, worst

#: the claimed decay exponent of the deviation in n (√n·dev converges to the limit).
RATE = -0.5
#: the exponent a sub-exponential tail would have: the light tail's alternative.
SUB_EXPONENTIAL = 1.0
#: the tolerance the rule states: a relative finite-n correction of √n·dev of at most COEFFICIENT/√n
#: (the claim fixes the order n^{−½}, not the coefficient; the line prints the coefficient seen).
COEFFICIENT = 1.0


def _interval(x) -> Interval:
    """An interval as a row stores it (a mapping, possibly with ``null`` or missing numbers)."""
    lo, hi = edges(x)
    return Interval(real(x.get("value")) if isinstance(x, Mapping) else float("nan"), lo, hi)


def gamma_of(entry) -> Interval:
    """The size entry's tail exponent γ with its interval (NaN where the row stores none)."""
    return _interval(entry.get("gamma") if isinstance(entry, Mapping) else None)


def _sizes(sizes) -> list[Mapping] | None:
    """The entries of ``sizes`` ordered by n, or None when one lacks a finite n > 0 (nothing to order)."""
    if not isinstance(sizes, list) or not all(isinstance(s, Mapping) for s in sizes):
        return None
    ns = [real(s.get("n")) for s in sizes]
    if not all(math.isfinite(n) and n > 0 for n in ns):
        return None
    return [s for _, s in sorted(zip(ns, sizes), key=lambda p: p[0])]


def decay(sizes) -> Interval | None:
    """The exponent in n of the deviation's median (√n·dev's over √n) from the smallest to the
    largest n of a model's ``sizes`` (entries with ``n`` and ``median_ci``): −½ for the limit's
    decay, 0 for none. Its interval joins the two medians' intervals at their far ends (the samples
    are independent); None without two distinct sizes; NaN where a median is not stored (or not > 0)."""
    ordered = _sizes(sizes)
    if ordered is None or len(ordered) < 2 or real(ordered[0]["n"]) == real(ordered[-1]["n"]):
        return None
    a, b = ordered[0], ordered[-1]
    m0, m1 = _interval(a.get("median_ci")), _interval(b.get("median_ci"))
    span = math.log(real(b["n"]) / real(a["n"]))

    def slope(hi: float, lo: float) -> float:
        return float(np.log(hi / lo) / span - 0.5) if hi > 0 and lo > 0 else float("nan")

    return Interval(slope(m1.value, m0.value), slope(m1.ci_low, m0.ci_high), slope(m1.ci_high, m0.ci_low))


def correction(n: float) -> float:
    """The relative finite-n correction the rule allows √n·dev at context size ``n``: c/√n, c =
    :data:`COEFFICIENT` (a stated tolerance). Every threshold of the rule follows from it:
    :func:`limit_band`, :func:`decay_band` and :func:`gamma_tolerance`."""
    return float(COEFFICIENT / np.sqrt(n))


def limit_band(n: float) -> tuple[float, float]:
    """Near the limit at size ``n``: every q_δ of √n·dev over the limit's in [1 − c/√n, 1 + c/√n]
    (:func:`correction`; at n = 64: [0.875, 1.125])."""
    e = correction(n)
    return (1.0 - e, 1.0 + e)


def decay_bound(n0: float, n1: float) -> float:
    """The slowest decay of the median from ``n0`` to ``n1`` the claim allows: −½ plus the exponent
    of a correction 1 − c/√n shrinking from n0 to n1 (:func:`correction`, the sign that slows the
    decay), log((1 − c/√n1)/(1 − c/√n0))/log(n1/n0): −0.389 from 16 to 64, −0.437 from 16 to
    256. A slower median is a rate failure; +∞ when the correction at n0 is not below 1 (nothing
    bounded) or n1 ≤ n0."""
    if correction(n0) >= 1 or n1 <= n0:
        return float("inf")
    return float(RATE + np.log((1 - correction(n1)) / (1 - correction(n0))) / np.log(n1 / n0))


def decay_floor(n0: float, n1: float) -> float:
    """The fastest decay of the median from ``n0`` to ``n1`` the claim allows: −½ plus the exponent
    of a correction 1 + c/√n shrinking from n0 to n1 (the sign that speeds the decay):
    −0.576 from 16 to 64. A faster median (n^{−1}, say) is a rate failure too; −∞ when n1 ≤ n0."""
    if n1 <= n0:
        return -float("inf")
    return float(RATE + np.log((1 + correction(n1)) / (1 + correction(n0))) / np.log(n1 / n0))


def decay_band(n0: float, n1: float) -> tuple[float, float]:
    """The median's exponents in n from ``n0`` to ``n1`` the claim allows: (:func:`decay_floor`,
    :func:`decay_bound`)."""
    return decay_floor(n0, n1), decay_bound(n0, n1)


def refuting_span(n0: float, exponent: float) -> float:
    """The smallest largest n from ``n0`` on at which a median decaying like n^``exponent`` (slower
    than −½) lies beyond :func:`decay_bound`: how far a run must reach to refute it (≈ 98 for
    n^{−0.4} from 16: from 16 to 64 it passes). +∞ when no span does (``exponent`` ≤ −½)."""
    if not exponent > RATE or correction(n0) >= 1:
        return float("inf")
    gap = lambda log_n1: decay_bound(n0, math.exp(log_n1)) - exponent  # noqa: E731  (decreasing)
    lo, hi = math.log(n0) + 1e-9, math.log(n0) + 1.0
    while gap(hi) >= 0:
        lo, hi = hi, hi + 1.0
    root = optimize.brentq(gap, lo, hi, xtol=1e-12)
    return math.exp(float(root))  # pyright: ignore[reportArgumentType]


def gamma_tolerance(n: float, deltas) -> float:
    """How far the tail exponent γ at size ``n`` may exceed the limit's: quantile ratios anywhere in
    :func:`limit_band` change the log-log slope over ``deltas`` by at most
    log((1 + c/√n)/(1 − c/√n))/log(log(1/δ_min)/log(1/δ_max)); +∞ when the correction is not below 1
    (NaN when ``deltas`` are not stored as two or more levels in (0, 1))."""
    e = correction(n)
    if e >= 1:
        return float("inf")
    ds = [real(d) for d in deltas] if isinstance(deltas, (list, tuple)) else []
    if len(ds) < 2 or not all(0 < d < 1 for d in ds) or min(ds) == max(ds):
        return float("nan")
    span = np.log(np.log(1 / min(ds)) / np.log(1 / max(ds)))
    return float(np.log((1 + e) / (1 - e)) / span)


def near_limit(entry) -> list[Verdict]:
    """Per δ, q_δ over the limit's against :func:`limit_band` at the entry's n (inside holds,
    outside refuted, across an edge undecided); no stored ratio or n: one *not measured*."""
    n = real(entry.get("n")) if isinstance(entry, Mapping) else float("nan")
    r = entry.get("ratio") if isinstance(entry, Mapping) else None
    if not (math.isfinite(n) and n > 0) or not isinstance(r, Mapping):
        return [NOT_MEASURED]
    lows, highs = r.get("ci_low"), r.get("ci_high")
    if not isinstance(lows, list) or not isinstance(highs, list) or not lows or len(lows) != len(highs):
        return [NOT_MEASURED]
    band = limit_band(n)
    return [against_band(lo, hi, *band) for lo, hi in zip(lows, highs)]


def gamma_bound(entry, deltas) -> float:
    """The largest tail exponent the claim allows at the entry's n: the light tail's ½ or the limit's
    own γ, whichever is larger, plus :func:`gamma_tolerance` (NaN where the row stores no limit's γ,
    n or δ)."""
    n, lin = real(entry.get("n")), real(entry.get("gamma_lin"))
    if not (math.isfinite(n) and n > 0 and math.isfinite(lin)):
        return float("nan")
    return max(0.5, lin) + gamma_tolerance(n, deltas)


def gamma_verdict(entry, deltas) -> Verdict:
    """γ at the entry's n against :func:`gamma_bound`, the sub-exponential exponent 1 the alternative
    (:func:`~.verdicts.at_most`): reaching the bound and excluding 1 holds, wholly above it refuted;
    a bound at or beyond 1 cannot tell the tails apart: not tested; no bound (a ``null`` limit's γ):
    not measured."""
    bound = gamma_bound(entry, deltas)
    if math.isnan(bound):
        return NOT_MEASURED
    if not bound < SUB_EXPONENTIAL:
        return NOT_TESTED
    return V.at_most(gamma_of(entry), bound, alternative=SUB_EXPONENTIAL)


def decay_verdict(sizes) -> Verdict:
    """The median's exponent in n (:func:`decay`) against :func:`decay_band` of the smallest and the
    largest n: inside it holds, wholly outside it refuted (a rate failure, too slow or too fast),
    across an edge undecided; one size, or no median stored, not measured; sizes too small to bound
    the correction, not tested."""
    slope = decay(sizes)
    if slope is None or not measured(slope.ci_low, slope.ci_high):
        return NOT_MEASURED
    ordered = _sizes(sizes)
    assert ordered is not None  # decay() read them
    low, high = decay_band(real(ordered[0]["n"]), real(ordered[-1]["n"]))
    if not high < 0:
        return NOT_TESTED
    return against_band(slope.ci_low, slope.ci_high, low, high)


def model_checks(row) -> dict[str, Verdict]:
    """One model's checks by name: ``tail`` (γ at the largest n, :func:`gamma_verdict`), ``limit``
    (the worst of :func:`near_limit` at the largest n) and ``decay`` (:func:`decay_verdict`); every
    one *not measured* when the row stores no sizes."""
    ordered = _sizes(row.get("sizes")) if isinstance(row, Mapping) else None
    if not ordered:
        return {"tail": NOT_MEASURED, "limit": NOT_MEASURED, "decay": NOT_MEASURED}
    last = ordered[-1]
    return {
        "tail": gamma_verdict(last, row.get("deltas")),
        "limit": worst(near_limit(last)),
        "decay": decay_verdict(ordered),
    }


def model_verdict(row) -> Verdict:
    """One model's verdict: the worst of its checks (:func:`model_checks`)."""
    return worst(model_checks(row).values())


def coefficient_seen(row) -> float:
    """The relative correction's coefficient the model shows at its largest n: max over δ of
    |q_δ over the limit's − 1|·√n (point values; NaN when none is stored). The rule's tolerance is
    :data:`COEFFICIENT`, stated, not this."""
    ordered = _sizes(row.get("sizes")) if isinstance(row, Mapping) else None
    if not ordered:
        return float("nan")
    r = ordered[-1].get("ratio")
    stored = r.get("value") if isinstance(r, Mapping) else None
    values = [v for v in map(real, stored) if math.isfinite(v)] if isinstance(stored, list) else []
    if not values:
        return float("nan")
    return float(max(abs(v - 1) for v in values) * math.sqrt(real(ordered[-1]["n"])))


__all__ = [
    "COEFFICIENT",
    "RATE",
    "SUB_EXPONENTIAL",
    "coefficient_seen",
    "correction",
    "decay",
    "decay_band",
    "decay_bound",
    "decay_floor",
    "decay_verdict",
    "gamma_bound",
    "gamma_of",
    "gamma_tolerance",
    "gamma_verdict",
    "limit_band",
    "model_checks",
    "model_verdict",
    "near_limit",
    "refuting_span",
]
