"""Conveniences on top of ``forward(adjoint=...)``: loss gradients and adjoint trajectories.

    loss, grads = cfm_jax.value_and_grad(model, x0, context, y)       # = eqx.filter_value_and_grad
    sol = cfm_jax.adjoint_trajectories(model, x0, context, y, probes=grid)   # p_s, a_i(s), ∇φ_s, φ_s

Any scalar function of :func:`cfm_jax.forward`'s outputs can be differentiated directly with
``jax.grad``; :func:`value_and_grad` is the common case of a loss of the final tokens.
``grads`` has the model's type and holds the per-layer partials ∂L/∂θ_l;
:func:`functional_gradient` turns them into the L²([0, 1]) gradient δL/δθ(s) = L·∂L/∂θ_l
(docs/theory.md §2).
"""

from __future__ import annotations

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from ._validation import check_finite
from .adjoint import AbstractHandAdjoint, DiscreteAdjoint, FlowSpec
from .flow import FlowSolution, SaveAt, check_inputs
from .paths import AbstractCFM
from .solve import Adjoint, forward


class AdjointSolution(eqx.Module):
    """Adjoint trajectories from :func:`adjoint_trajectories`.

    Attributes:
        ss: ``(S,)`` depths of the saved states: every Euler step for the discrete adjoint
            (``S = steps + 1``), every layer boundary for the continuous one (``S = L + 1``).
        xs: ``(S,) + x0.shape`` target tokens x_s.
        zs: ``(S, n, d)`` context particles z_i(s).
        ps: ``(S,) + x0.shape`` the token covector p_s (contains the 1/B of the batch mean).
        a: ``(S, n, d)`` particle adjoints a_i(s) = ∇φ_s(z_i(s)); ∂L/∂z_i(0) = w_i a_i(0).
        probe_grads: ``(S, P, d)`` ∇φ_{ss[k]}(probes[j]) at the fixed probe points, or None.
        probe_values: ``(S, P)`` φ_{ss[k]}(probes[j]) (centred: ∫ φ_s dμ_s = 0), or None.
        weight_grads: ``(n,)`` ∂L/∂w_j = φ_0(z_j) (the first variation in the initial measure).
        functional_grads: model-shaped δL/δθ(s) (= L·∂L/∂θ_l on layer l); for paths that are not
            piecewise constant (e.g. :class:`~cfm_jax.PiecewiseLinearCFM`) the plain node gradients.
        grads: model-shaped ∂L/∂θ_l.
        loss: the scalar loss.
    """

    ss: Array
    xs: Array
    zs: Array
    ps: Array
    a: Array
    probe_grads: Array | None
    probe_values: Array | None
    weight_grads: Array
    functional_grads: AbstractCFM
    grads: AbstractCFM
    loss: Array


def mean_squared_loss(x1, y):
    """½‖x_1 − y‖², averaged over the batch when x1 is ``(B, d)`` (the default loss)."""
    sq = 0.5 * jnp.sum((x1 - y) ** 2)
    return sq / x1.shape[0] if x1.ndim == 2 else sq


def _check_loss(loss, x0, y):
    if loss is not None and not callable(loss):
        raise ValueError(f"`loss` must be None or a callable loss(x1, y) -> scalar, got {loss!r}.")
    if loss is None:
        y = jnp.asarray(y)
        if y.shape != x0.shape:
            raise ValueError(f"`y` must have the shape of `x0` {x0.shape} for the default loss, got {y.shape}.")
        check_finite("y", y)
    return mean_squared_loss if loss is None else loss, y


@eqx.filter_jit
def _value_and_grad(model, x0, context, y, *, loss, options):
    def objective(m):
        return loss(forward(m, x0, context, **options).x1, y)

    return eqx.filter_value_and_grad(objective)(model)


def value_and_grad(
    model: AbstractCFM,
    x0,
    context,
    y,
    *,
    loss: Callable | None = None,
    adjoint: Adjoint | None = None,
    solver: diffrax.AbstractSolver | None = None,
    steps: int | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    max_steps: int = 4096,
):
    """Loss of the final tokens and its gradient with respect to the model's parameters.

    Exactly ``eqx.filter_value_and_grad(lambda m: loss(forward(m, x0, context, ...).x1, y))``,
    jit-compiled; ``adjoint`` and the solver options are those of :func:`cfm_jax.forward`
    (default: the exact hand adjoint of Euler). ``loss(x1, y) -> scalar`` defaults to
    ½‖x_1 − y‖² averaged over the batch. Returns ``(loss, grads)``, ``grads`` model-shaped
    (∂L/∂θ_l per layer).
    """
    x0, context, steps = check_inputs(model, x0, context, steps)
    loss, y = _check_loss(loss, x0, y)
    options = dict(solver=solver, steps=steps, stepsize_controller=stepsize_controller, adjoint=adjoint,
                   max_steps=max_steps)
    return _value_and_grad(model, x0, context, y, loss=loss, options=options)


def functional_gradient(model: AbstractCFM, grads: AbstractCFM) -> AbstractCFM:
    """δL/δθ(s) in L²([0, 1]): L·∂L/∂θ_l on layer l (piecewise-constant paths), model-shaped."""
    if not isinstance(model, AbstractCFM):
        raise ValueError(f"`model` must be a cfm_jax model (AbstractCFM), got {type(model).__name__}.")
    if not model.piecewise_constant:
        raise ValueError("functional_gradient is defined for piecewise-constant paths (L·∂L/∂θ_l per layer).")
    L = model.num_layers
    return jax.tree.map(lambda g: L * g, grads)


@eqx.filter_jit
def _trajectories(model, x0, points, weights, y, probes, *, loss, adjoint, spec):
    single = x0.ndim == 1
    dtype = jnp.result_type(x0, points, *jax.tree.leaves(model.stacked_params()))
    x = jnp.atleast_2d(x0).astype(dtype)
    z, w = points.astype(dtype), weights.astype(dtype)
    sol, residuals = adjoint.run_forward(model, x, z, w, spec, store=True, probes=probes)
    value, ct_x1 = jax.value_and_grad(lambda xx: loss(xx[0] if single else xx, y))(sol.x1)
    cotangents = FlowSolution(x1=ct_x1, z1=None, weights=None)
    res = adjoint.run_backward(model, x, z, w, spec, residuals, cotangents, probes=probes, trajectories=True)
    return value, res


def adjoint_trajectories(
    model: AbstractCFM,
    x0,
    context,
    y,
    *,
    loss: Callable | None = None,
    probes=None,
    adjoint: AbstractHandAdjoint | None = None,
    solver: diffrax.AbstractSolver | None = None,
    steps: int | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    max_steps: int = 4096,
) -> AdjointSolution:
    """States, token covector p_s, particle adjoints a_i(s) and probe gradients ∇φ_s(probes).

    ``adjoint`` is a hand adjoint: ``DiscreteAdjoint()`` (default; saved at every Euler step)
    or ``ContinuousAdjoint(...)`` (saved at layer boundaries); the loss is ``loss(x1, y)``.
    ``probes: (P, d)`` are fixed points: ``probe_grads[k, j]`` is ∇φ_{ss[k]}(probes[j]),
    obtained from a passive characteristic started at (ss[k], probes[j]). Cost: every probe
    adds S characteristics (one per saved depth) to the adjoint.
    """
    adjoint = DiscreteAdjoint() if adjoint is None else adjoint
    if not isinstance(adjoint, AbstractHandAdjoint):
        raise ValueError(f"`adjoint` must be a hand adjoint (DiscreteAdjoint() or ContinuousAdjoint(...)), got {adjoint!r}.")
    x0, context, steps = check_inputs(model, x0, context, steps)
    loss, y = _check_loss(loss, x0, y)
    if probes is not None:
        probes = jnp.asarray(probes)
        d = model.dim
        if probes.ndim != 2 or probes.shape[-1] != d or probes.shape[0] < 1:
            raise ValueError(f"`probes` must have shape (P, d) with P >= 1 and d = {d}, got {probes.shape}.")
        check_finite("probes", probes)
    solver = diffrax.Euler() if solver is None else solver
    spec = FlowSpec(solver=solver, stepsize_controller=stepsize_controller, saveat=SaveAt(), steps=steps,
                    max_steps=max_steps)
    adjoint.validate(model, spec)
    if isinstance(adjoint, DiscreteAdjoint):
        adjoint = DiscreteAdjoint()  # the trajectories are every step's state: store them all
    value, res = _trajectories(model, x0, context.points, context.weights, y, probes, loss=loss, adjoint=adjoint,
                               spec=spec)
    ss, xs, zs, ps, a = res.traj
    if x0.ndim == 1:
        xs, ps = xs[:, 0], ps[:, 0]
    fgrads = functional_gradient(model, res.grads) if model.piecewise_constant else res.grads
    return AdjointSolution(
        ss=ss, xs=xs, zs=zs, ps=ps, a=a, probe_grads=res.probe_grads, probe_values=res.probe_values,
        weight_grads=res.weights, functional_grads=fgrads, grads=res.grads, loss=value,
    )


def probe_gradients(model, x0, context, y, probes, **kwargs):
    """``(ss, ∇φ_s(probes) (S, P, d), φ_s(probes) (S, P))`` via :func:`adjoint_trajectories`."""
    sol = adjoint_trajectories(model, x0, context, y, probes=probes, **kwargs)
    return sol.ss, sol.probe_grads, sol.probe_values


__all__ = [
    "AdjointSolution",
    "adjoint_trajectories",
    "functional_gradient",
    "mean_squared_loss",
    "probe_gradients",
    "value_and_grad",
]
