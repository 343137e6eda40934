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
"""

from __future__ import annotations

from collections.abc import Sequence

from .vocabulary import HOLDS, NOT_MEASURED, NOT_OBSERVED, Verdict, measured


def counts(fit: dict) -> bool:
    """Whether a fit enters its claim's verdict: not floor-limited, a finite CI, and one that excludes 0."""
    lo, hi = float(fit["ci_low"]), float(fit["ci_high"])
    return bool(fit["meaningful"]) and measured(lo, hi) and (hi < 0 or lo > 0)


def agrees(fit: dict) -> bool:
    """Whether a fit's 95 % CI meets the exponents its claim allows (``expected_band``)."""
    lo, hi = fit["expected_band"]
    return bool(fit["ci_low"] <= hi and lo <= fit["ci_high"])


def verdict(fits: Sequence[dict]) -> Verdict:
    """The verdict of one claim from its fits (module docstring)."""
    counted = [f for f in fits if counts(f)]
    if not counted:
        return NOT_MEASURED
    return HOLDS if all(agrees(f) for f in counted) else NOT_OBSERVED


__all__ = ["agrees", "counts", "verdict"]
