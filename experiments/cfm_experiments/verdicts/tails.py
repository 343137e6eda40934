"""The tail-exponent part's rule (:mod:`.tail_exponent`): one model's verdict from its rows, and the
thresholds it uses, each derived from the claim.

The claim: √n·dev → sup_s ‖G_s‖, the linearised limiting Gaussian process's, with a light tail
(exponent ½ in log(1/δ), or the limit's own), not a sub-exponential one (exponent 1). The first
correction of √n·dev at finite n is of relative order n^{−½} (the next term of the expansion in the
empirical measure); the claim fixes that order, not its coefficient, and the rule takes the
coefficient 1 (:func:`correction`). Then:

- near the limit at the largest n: every q_δ over the limit's in [1 − 1/√n, 1 + 1/√n]
  (:func:`limit_band`; [0.875, 1.125] at n = 64);
- decaying at the claimed rate: the median's exponent in n no slower than −½ plus the exponent of a
  correction 1 − 1/√n shrinking from the smallest n to the largest (:func:`decay_bound`: −0.389
  from 16 to 64), so a median decaying like n^{−0.3} is a rate failure;
- light-tailed: γ at most max(½, the limit's γ) plus the slope change that quantile ratios within
  the band allow over the fitted δ (:func:`gamma_tolerance`), against the alternative 1.

Each check reads *holds* only on a finite interval on the claim's side, *refuted* on one wholly
beyond it and *undecided* across it (:mod:`cfm_experiments.verdicts`); a model's verdict is the
worst of its checks (:func:`model_verdict`).
"""

from __future__ import annotations

import numpy as np

from cfm_jax.stats import Interval

from . import claims as V
from .vocabulary import NOT_MEASURED, NOT_TESTED, Verdict, against_band, worst

#: the claimed decay exponent of the deviation in n (√n·dev converges to the limit).
RATE = -0.5
#: the exponent a sub-exponential tail would have: the light tail's alternative.
SUB_EXPONENTIAL = 1.0


def gamma_of(entry) -> Interval:
    return Interval(**entry["gamma"])


def decay(sizes) -> Interval | None:
    """The exponent in n of the deviation's median (√n·dev's over √n) from the smallest to the
    largest n of a model's ``sizes`` (entries with ``n`` and ``median_ci``): −½ for the limit's
    decay, 0 for none. Its interval joins the two medians' intervals at their far ends (the samples
    are independent); None without two sizes."""
    if len(sizes) < 2:
        return None
    a, b = min(sizes, key=lambda s: s["n"]), max(sizes, key=lambda s: s["n"])
    m0, m1 = Interval(**a["median_ci"]), Interval(**b["median_ci"])
    span = np.log(b["n"] / a["n"])
    slope = lambda hi, lo: float(np.log(hi / lo) / span - 0.5)  # noqa: E731
    return Interval(slope(m1.value, m0.value), slope(m1.ci_low, m0.ci_high), slope(m1.ci_high, m0.ci_low))


def correction(n: float) -> float:
    """The relative finite-n correction the rule allows √n·dev at context size ``n``: 1/√n.

    The claim is √n·dev → sup_s ‖G_s‖ (the linearised limit) with the first correction of the
    expansion in the empirical measure of relative order n^{−½}; the claim fixes its order, not its
    coefficient, and the rule takes the coefficient 1. Every threshold of the rule follows from it:
    :func:`limit_band`, :func:`decay_bound` and :func:`gamma_tolerance`."""
    return float(1.0 / np.sqrt(n))


def limit_band(n: float) -> tuple[float, float]:
    """Near the limit at size ``n``: every q_δ of √n·dev over the limit's in [1 − 1/√n, 1 + 1/√n]
    (:func:`correction`; at n = 64: [0.875, 1.125])."""
    e = correction(n)
    return (1.0 - e, 1.0 + e)


def decay_bound(n0: float, n1: float) -> float:
    """The slowest decay of the median from ``n0`` to ``n1`` the claim allows: −½ plus the exponent
    of a correction 1 − 1/√n shrinking from n0 to n1 (:func:`correction`, the sign that slows the
    decay), log((1 − n1^{−½})/(1 − n0^{−½}))/log(n1/n0): −0.389 from 16 to 64, −0.437 from 16 to
    256. A slower median is a rate failure; +∞ when n0 ≤ 1 (no correction bounded)."""
    if n0 <= 1 or n1 <= n0:
        return float("inf")
    return float(RATE + np.log((1 - correction(n1)) / (1 - correction(n0))) / np.log(n1 / n0))


def gamma_tolerance(n: float, deltas) -> float:
    """How far the tail exponent γ at size ``n`` may exceed the limit's: quantile ratios anywhere in
    :func:`limit_band` change the log-log slope over ``deltas`` by at most
    log((1 + 1/√n)/(1 − 1/√n))/log(log(1/δ_min)/log(1/δ_max)); +∞ when n ≤ 1."""
    e = correction(n)
    if e >= 1:
        return float("inf")
    span = np.log(np.log(1 / min(deltas)) / np.log(1 / max(deltas)))
    return float(np.log((1 + e) / (1 - e)) / span)


def near_limit(entry) -> list[Verdict]:
    """Per δ, q_δ over the limit's against :func:`limit_band` at the entry's n (inside holds,
    outside refuted, across an edge undecided)."""
    r, band = entry["ratio"], limit_band(entry["n"])
    return [against_band(lo, hi, *band) for lo, hi in zip(r["ci_low"], r["ci_high"])]


def gamma_bound(entry, deltas) -> float:
    """The largest tail exponent the claim allows at the entry's n: the light tail's ½ or the limit's
    own γ, whichever is larger, plus :func:`gamma_tolerance`."""
    return max(0.5, entry["gamma_lin"]) + gamma_tolerance(entry["n"], deltas)


def gamma_verdict(entry, deltas) -> Verdict:
    """γ at the entry's n against :func:`gamma_bound`, the sub-exponential exponent 1 the alternative
    (:func:`~.verdicts.at_most`): reaching the bound and excluding 1 holds, wholly above it refuted;
    a bound that reaches 1 cannot tell the tails apart: not tested."""
    bound = gamma_bound(entry, deltas)
    if not bound < SUB_EXPONENTIAL:
        return NOT_TESTED
    return V.at_most(gamma_of(entry), bound, alternative=SUB_EXPONENTIAL)


def decay_verdict(sizes) -> Verdict:
    """The median's exponent in n (:func:`decay`) against :func:`decay_bound` of the smallest and the
    largest n: wholly at or below it holds, wholly above it refuted (a rate failure), across it
    undecided; one size, or sizes too small to bound the correction, not tested."""
    slope = decay(sizes)
    if slope is None:
        return NOT_MEASURED
    ns = sorted(s["n"] for s in sizes)
    bound = decay_bound(ns[0], ns[-1])
    if not bound < 0:
        return NOT_TESTED
    return against_band(slope.ci_low, slope.ci_high, high=bound)


def model_verdict(row) -> Verdict:
    """One model's verdict: the worst of γ at the largest n (:func:`gamma_verdict`), its decay in n
    (:func:`decay_verdict`) and its agreement with the limit at the largest n (:func:`near_limit`)."""
    last = max(row["sizes"], key=lambda s: s["n"])
    checks = [gamma_verdict(last, row["deltas"]), *near_limit(last), decay_verdict(row["sizes"])]
    return worst(checks)


__all__ = [
    "RATE",
    "SUB_EXPONENTIAL",
    "correction",
    "decay",
    "decay_bound",
    "decay_verdict",
    "gamma_bound",
    "gamma_of",
    "gamma_tolerance",
    "gamma_verdict",
    "limit_band",
    "model_verdict",
    "near_limit",
]
