"""The exact infinite-context flow for a Gaussian context (docs/theory.md, Gaussian limit), as a
kind of context the one forward loop carries.

For μ = N(m, Σ) the softmax-weighted mean is the mean of an exponentially tilted Gaussian,
∫ e^{u·z} z dμ / ∫ e^{u·z} dμ = m + Σu, so attention (and the affine MLP) is affine in the query
at a Gaussian context (:class:`cfm_jax.AbstractGaussianField`):

    V(x, N(m, Σ); θ) = c + M x,      attention: c = Σ_h V_h m,  M = Σ_h V_h Σ A_hᵀ,  A_h = Q_hᵀ K_h.

Every context particle moves by the same affine map, so the context stays the image of a standard
normal ξ under an affine map, z = m + Fξ (Σ = FFᵀ), and (m, F) move like particles:

    dx/ds = c + Mx,   dm/ds = c + Mm,   dF/ds = MF        (so dΣ/ds = MΣ + ΣMᵀ).

One Euler step of size h is then exactly the residual layer on the infinite context: x ↦ x + h(c +
Mx), m ↦ m + h(c + Mm), F ↦ (I + hM)F, i.e. Σ ↦ (I + hM)Σ(I + hM)ᵀ; any other diffrax solver
integrates the moment ODE. Each step costs O(d³) (O(H d³) for the closed form), independent of any
sample size.

Why this is a context the loop carries rather than a flow of its own: in the square-root form the
Gaussian moves by the same kind of velocity as the atoms of an empirical context, so it needs
nothing of its own — :func:`cfm_jax.forward` runs the same loop, the same ``SaveAt`` assembly, the
same step count and result, the same solvers, adaptive steps and progress meter, and the token
covector p_s comes from the discrete adjoint's one recursion (:func:`cfm_jax.token_adjoint`). What
differs is only what the rows are (here ``(x, m, F)``), their velocity and the measure they describe
(:class:`GaussianContext`). Gradients in the model, x0 and N(m, Σ) are autodiff through the loop (the
hand adjoints are for atoms).
"""

from __future__ import annotations

import jax.numpy as jnp

from ._fields import AbstractField, AbstractGaussianField, AbstractSumField, MLPField
from ._flow import AbstractCarriedContext
from ._measures import GaussianMeasure
from ._paths import AbstractCFM


def _covariance(F):
    """Σ = F Fᵀ (also for stacked F)."""
    return jnp.einsum("...ij,...kj->...ik", F, F)


def _why_not_gaussian(field: AbstractField) -> str:
    if isinstance(field, MLPField):
        return (
            f"MLPField with activation {field.activation!r} has no Gaussian closed form (a nonlinear MLP does not "
            "keep the context Gaussian); the affine MLP is cfm_jax.LinearMLPField (Transformer(..., "
            "activation=jax.nn.identity) builds it)"
        )
    if isinstance(field, AbstractSumField):
        parts = [_why_not_gaussian(f) for f in field.fields if not isinstance(f, AbstractGaussianField)]
        if parts:
            return "; ".join(parts)
        return (
            f"{type(field).__name__} is not typed as having one although every summand has: build the sum "
            "with `+` (a GaussianSumField)"
        )
    return (
        f"{type(field).__name__} has no Gaussian closed form: it is not an AbstractGaussianField (a field whose "
        "velocity at a Gaussian context is affine in x, so that the infinite-context flow stays Gaussian)"
    )


def gaussian_field(model: AbstractCFM) -> AbstractGaussianField:
    """``model.field`` as an :class:`~cfm_jax.AbstractGaussianField`; ``TypeError`` naming the field otherwise."""
    field = model.field
    if not isinstance(field, AbstractGaussianField):
        raise TypeError(
            f"A GaussianMeasure context needs a field with a Gaussian closed form: {_why_not_gaussian(field)}."
        )
    return field


class GaussianContext(AbstractCarriedContext):
    """A Gaussian context N(m, FFᵀ) carried as the rows ``(m (d,), F (d, d))`` after the tokens; the
    model's field must be an :class:`~cfm_jax.AbstractGaussianField` (:func:`gaussian_field`)."""

    def velocity(self, model, state, params, step):
        x, m, F = state
        c, M = gaussian_field(model).gaussian_affine(params, m, _covariance(F))
        return c + x @ M.T, c + M @ m, M @ F

    def measure(self, state):
        return GaussianMeasure.unchecked(state[1], _covariance(state[2]))

    def token_vjp(self, model, state, params, p):
        _, m, F = state
        return p @ gaussian_field(model).gaussian_affine(params, m, _covariance(F))[1]


def gaussian_state(x, mu: GaussianMeasure, dtype) -> tuple:
    """The loop's state ``(x, m, F)`` with F the Cholesky factor of the covariance."""
    return x.astype(dtype), mu.mean.astype(dtype), jnp.linalg.cholesky(mu.cov.astype(dtype))


__all__ = ["GaussianContext", "GaussianMeasure", "gaussian_field", "gaussian_state"]
