"""One OGD update: the gradient source, the functional scaling L·∂ℓ/∂θ_l and the optimiser step."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

import diffrax
import equinox as eqx

from .._gradients import functional_gradient, loss_and_grad
from .._measures import EmpiricalMeasure
from .._paths import AbstractCFM
from .._streams import Sample

GradFn: TypeAlias = Callable[..., tuple]  # (model, x0 (B, d), context measure, y (B, d)) -> (loss, grads)


def autodiff_value_and_grad(model, x0, context, y):
    """$ℓ = ½‖x_1 − y‖^2$ (batch mean) and its plain per-layer gradient, by autodiff through the
    forward (``diffrax.RecursiveCheckpointAdjoint()``). Fallback gradient source."""
    return loss_and_grad(model, x0, context, y, adjoint=diffrax.RecursiveCheckpointAdjoint())


def default_grad_fn() -> GradFn:
    """[`loss_and_grad`][cfm_jax.loss_and_grad]: ``jax.grad`` through ``forward`` with the default (hand) adjoint."""
    return loss_and_grad


def functional_scale(model: AbstractCFM, grads):
    """$δℓ/δθ$ on layer l $= L ∂ℓ/∂θ_l$ (docs/theory.md §2)."""
    return functional_gradient(model, grads)


def context_head(points, n):
    """First ``n`` points of the reference sample as a uniform measure (all of them for None)."""
    return EmpiricalMeasure(points if n is None else points[:n])


def trajectory_context(points, n, population):
    """The context trajectory t sees: the population law when given and n is None, else the
    first ``n`` sample points (:func:`context_head`)."""
    return population if (n is None and population is not None) else context_head(points, n)


def ogd_update(static, params, opt_state, sample: Sample, n, optimizer, grad_fn, functional, population=None):
    model = eqx.combine(params, static)
    loss, grads = grad_fn(model, sample.x0, trajectory_context(sample.context, n, population), sample.y)
    if functional:
        grads = functional_scale(model, grads)
    grads = eqx.filter(grads, eqx.is_inexact_array)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return eqx.apply_updates(params, updates), opt_state, loss


__all__ = [
    "GradFn",
    "autodiff_value_and_grad",
    "context_head",
    "default_grad_fn",
    "functional_scale",
    "ogd_update",
    "trajectory_context",
]
