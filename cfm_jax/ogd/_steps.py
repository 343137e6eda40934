"""Step sizes of ridge-regularised OGD and its optax optimiser θ ← (1 − ηλ)θ − η g."""

from __future__ import annotations

import functools

import numpy as np
import optax


def check_step_sizes(learning_rate, weight_decay) -> None:
    """η > 0, λ >= 0, η·λ < 1 (so that the ridge factor 1 − ηλ stays in (0, 1])."""
    try:
        eta, lam = float(learning_rate), float(weight_decay)
    except (TypeError, ValueError):
        raise ValueError(
            f"`learning_rate` and `weight_decay` must be numbers, got {learning_rate!r}, {weight_decay!r}."
        ) from None
    if not np.isfinite(eta) or eta <= 0:
        raise ValueError(f"`learning_rate` η must be finite and > 0, got {learning_rate!r}.")
    if not np.isfinite(lam) or lam < 0:
        raise ValueError(f"`weight_decay` λ must be finite and >= 0, got {weight_decay!r}.")
    if eta * lam >= 1:
        raise ValueError(
            f"η·λ = {eta}·{lam} = {eta * lam:.4g} must be < 1: the ridge factor 1 − ηλ would not be positive."
        )


def ridge_sgd(learning_rate: float, weight_decay: float = 0.0) -> optax.GradientTransformation:
    """``optax.chain(optax.add_decayed_weights(λ), optax.sgd(η))``: θ ← (1 − ηλ)θ − η g.

    Cached on (η, λ): the same values give the same object, so jit-compiled loops are reused.
    """
    check_step_sizes(learning_rate, weight_decay)
    return _ridge_sgd(float(learning_rate), float(weight_decay))


@functools.lru_cache(maxsize=64)
def _ridge_sgd(eta: float, lam: float) -> optax.GradientTransformation:
    return optax.chain(optax.add_decayed_weights(lam), optax.sgd(eta))


__all__ = ["check_step_sizes", "ridge_sgd"]
