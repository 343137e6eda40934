"""Token-wise MLP velocity W2 σ(W1 x + b1) + b2 (no dependence on the measure).

Local products (docs/theory.md §2): with h = W1 q + b1 and k = σ'(h) ⊙ W2ᵀc,
D_xVᵀc = W1ᵀk, ∂/∂W2 = c σ(h)ᵀ, ∂/∂b2 = c, ∂/∂b1 = k, ∂/∂W1 = k qᵀ; the measure terms vanish.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from .base import AbstractField, LocalVJP, complete_params


def linear(x):
    """The identity activation σ(x) = x: declares an MLP affine (it then has a Gaussian closed form)."""
    return x


class MLPField(AbstractField):
    """Reads ``W1: (m, d)``, ``b1: (m,)``, ``W2: (d, m)``, ``b2: (d,)`` from the layer parameters.

    Attributes:
        activation: elementwise σ, default :func:`jax.nn.gelu`; [`linear`][cfm_jax.linear] declares the
            MLP affine (needed for :meth:`gaussian_affine`).
    """

    activation: Callable = eqx.field(static=True, default=jax.nn.gelu)

    def __call__(self, x, measure, params):
        hidden = self.activation(x @ params["W1"].T + params["b1"][None, :])
        return hidden @ params["W2"].T + params["b2"][None, :]

    def local_vjp(self, queries, measure, params, cot, *, active=None, targets=None) -> LocalVJP:
        """Closed-form local products (module docstring); σ and σ' from one forward-mode pass."""
        W1, b1, W2, b2 = params["W1"], params["b1"], params["W2"], params["b2"]
        hidden = queries @ W1.T + b1[None, :]
        sig, dsig = jax.jvp(self.activation, (hidden,), (jnp.ones_like(hidden),))
        velocity = sig @ W2.T + b2[None, :]
        k = dsig * (cot @ W2)
        dx = k @ W1
        act = 1.0 if active is None else jnp.asarray(active, queries.dtype)[:, None]
        ca, ka = cot * act, k * act
        dparams = complete_params({"W1": ka.T @ queries, "b1": ka.sum(0), "W2": ca.T @ sig, "b2": ca.sum(0)}, params)
        z = measure.points
        dtar = None if targets is None else jnp.zeros_like(targets)
        phi = None if targets is None else jnp.zeros(targets.shape[:1], targets.dtype)
        return LocalVJP(velocity, dx, jnp.zeros_like(z), jnp.zeros(z.shape[:1], z.dtype), dparams, dtar, phi)

    def gaussian_affine(self, params, mean, cov):
        """With σ = [`linear`][cfm_jax.linear]: V(x) = W2 W1 x + W2 b1 + b2 (no context dependence).

        Any other activation is refused (``TypeError`` naming the field and the activation): a
        nonlinear MLP maps a Gaussian context to a non-Gaussian one. Linearity is declared (the
        activation *is* [`linear`][cfm_jax.linear]), not guessed from the function's values.
        """
        if self.activation is not linear:
            raise TypeError(
                f"MLPField with activation {self.activation!r} has no Gaussian closed form "
                "(a nonlinear MLP does not keep "
                "the context Gaussian); only activation=cfm_jax.linear does."
            )
        W1, b1, W2, b2 = params["W1"], params["b1"], params["W2"], params["b2"]
        return W2 @ b1 + b2, W2 @ W1
