"""Token-wise MLP velocity W2 σ(W1 x + b1) + b2 (no dependence on the measure).

Local products (docs/theory.md §2): with h = W1 q + b1 and k = σ'(h) ⊙ W2ᵀc,
D_xVᵀc = W1ᵀk, ∂/∂W2 = c σ(h)ᵀ, ∂/∂b2 = c, ∂/∂b1 = k, ∂/∂W1 = k qᵀ; the measure terms vanish.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from .base import AbstractField, AbstractGaussianField, LocalVJP, complete_params


def _local_vjp(activation, queries, measure, params, cot, active, targets) -> LocalVJP:
    """Closed-form local products of W2 σ(W1 q + b1) + b2 (module docstring); σ, σ' from one jvp."""
    W1, b1, W2, b2 = params["W1"], params["b1"], params["W2"], params["b2"]
    hidden = queries @ W1.T + b1[None, :]
    sig, dsig = jax.jvp(activation, (hidden,), (jnp.ones_like(hidden),))
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


class MLPField(AbstractField):
    """Reads ``W1: (m, d)``, ``b1: (m,)``, ``W2: (d, m)``, ``b2: (d,)`` from the layer parameters.

    Attributes:
        activation: elementwise σ, default :func:`jax.nn.gelu`. A nonlinear MLP maps a Gaussian
            context to a non-Gaussian one, so this field has no Gaussian closed form; the affine MLP
            is [`LinearMLPField`][cfm_jax.LinearMLPField].
    """

    activation: Callable = eqx.field(static=True, default=jax.nn.gelu)

    def __check_init__(self):
        if not callable(self.activation):
            raise ValueError(f"`activation` must be a callable elementwise σ, got {self.activation!r}.")

    def __call__(self, x, measure, params):
        hidden = self.activation(x @ params["W1"].T + params["b1"][None, :])
        return hidden @ params["W2"].T + params["b2"][None, :]

    def local_vjp(self, queries, measure, params, cot, *, active=None, targets=None) -> LocalVJP:
        """Closed-form local products (module docstring)."""
        return _local_vjp(self.activation, queries, measure, params, cot, active, targets)


class LinearMLPField(AbstractGaussianField):
    """The affine MLP W2 (W1 x + b1) + b2 (σ the identity, ``jax.nn.identity``), with the parameters of
    [`MLPField`][cfm_jax.MLPField]; independent of the context, so it has a Gaussian closed form."""

    def __call__(self, x, measure, params):
        return (x @ params["W1"].T + params["b1"][None, :]) @ params["W2"].T + params["b2"][None, :]

    def local_vjp(self, queries, measure, params, cot, *, active=None, targets=None) -> LocalVJP:
        """Closed-form local products (module docstring, σ' = 1)."""
        return _local_vjp(jax.nn.identity, queries, measure, params, cot, active, targets)

    def gaussian_affine(self, params, mean, cov):
        """V(x) = W2 W1 x + W2 b1 + b2 (no context dependence)."""
        W1, b1, W2, b2 = params["W1"], params["b1"], params["W2"], params["b2"]
        return W2 @ b1 + b2, W2 @ W1


def mlp_field(activation: Callable) -> AbstractField:
    """:class:`LinearMLPField` when ``activation`` is ``jax.nn.identity`` (declared, not guessed from its
    values), else ``MLPField(activation)``."""
    return LinearMLPField() if activation is jax.nn.identity else MLPField(activation=activation)


__all__ = ["LinearMLPField", "MLPField", "mlp_field"]
