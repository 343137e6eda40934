"""Token-wise MLP velocity W2 σ(W1 x + b1) + b2 (no dependence on the measure)."""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax

from .base import AbstractField


class MLPField(AbstractField):
    """Reads ``W1: (m, d)``, ``b1: (m,)``, ``W2: (d, m)``, ``b2: (d,)`` from the layer parameters.

    Attributes:
        activation: elementwise σ, default :func:`jax.nn.gelu`.
    """

    activation: Callable = eqx.field(static=True, default=jax.nn.gelu)

    def __call__(self, x, measure, params):
        hidden = self.activation(x @ params["W1"].T + params["b1"])
        return hidden @ params["W2"].T + params["b2"]
