"""The verdict rules of ``cfm-jax rates`` (:mod:`cfm_experiments.rates.claims` writes the lines).

Verdict of a claim, from its fits (one per row, :func:`~cfm_experiments.rates.fits.fit_rates`):

- a fit **counts** when it is not floor-limited (the reference's own error is below half the
  deviation at the largest n) and its 95 % CI excludes 0 (a decay is detected at all);
- it **agrees** when its CI meets the exponents the claim allows
  (:func:`~cfm_experiments.rates.fits.expected_band`: the exponent itself, or at dʹ = 2 from
  −1/2 to the slope of √(log n / n));
- **holds**: every counted fit agrees; **not observed at these sizes**: some counted fit does
  not (a finite-n fit cannot refute an asymptotic rate); **not measured: no usable rows**: no fit
  counts. The measured text lists every fit, and the ones not counted with the reason.

A fit is read as a JSON row stores it: a ``null`` or missing CI, flag or band does not count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .vocabulary import HOLDS, NOT_MEASURED, NOT_OBSERVED, Verdict, edges, measured


def counts(fit: Mapping) -> bool:
    """Whether a fit enters its claim's verdict: not floor-limited (``meaningful`` true), a finite CI
    that excludes 0, and a finite band of allowed exponents to meet."""
    lo, hi = edges(fit)
    return (
        fit.get("meaningful") is True
        and measured(lo, hi)
        and (hi < 0 or lo > 0)
        and measured(*edges(fit.get("expected_band")))
    )


def agrees(fit: Mapping) -> bool:
    """Whether a fit's 95 % CI meets the exponents its claim allows (``expected_band``); no CI or
    band (``null``) meets nothing."""
    (lo, hi), (ci_low, ci_high) = edges(fit.get("expected_band")), edges(fit)
    return bool(ci_low <= hi and lo <= ci_high)


def verdict(fits: Sequence[Mapping]) -> Verdict:
    """The verdict of one claim from its fits (module docstring)."""
    counted = [f for f in fits if counts(f)]
    if not counted:
        return NOT_MEASURED
    return HOLDS if all(agrees(f) for f in counted) else NOT_OBSERVED


__all__ = ["agrees", "counts", "verdict"]
