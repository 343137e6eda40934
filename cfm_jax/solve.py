"""``forward``: the flow solve with its differentiation strategy attached.

    sol = cfm_jax.forward(model, x0, context)                         # Euler, one step per layer
    g = jax.grad(lambda m: loss(cfm_jax.forward(m, x0, context)))(model)   # runs the hand adjoint

The ``adjoint=`` argument chooses how ``jax.grad`` (and ``jax.vjp``, ``eqx.filter_grad``,
optax loops, ...) differentiates the solve:

- :class:`~cfm_jax.DiscreteAdjoint` — the exact hand adjoint of explicit Euler (the residual
  network): equal to autodiff to round-off, O(n) memory per stored state, no n×n buffer;
- :class:`~cfm_jax.ContinuousAdjoint` — the adjoint ODE integrated backward with diffrax (any
  solver); converges to the continuous gradient at the solver's order;
- any ``diffrax.AbstractAdjoint`` (e.g. ``diffrax.RecursiveCheckpointAdjoint()``) — autodiff
  through the diffrax solve; also the only choice for forward mode (``diffrax.DirectAdjoint()``,
  ``diffrax.ForwardMode()``).

Default (``adjoint=None``): ``DiscreteAdjoint()`` whenever it is exact — the Euler solver (the
default) with fixed steps — and ``diffrax.RecursiveCheckpointAdjoint()`` otherwise.
Gradients flow to every input (the model's parameters, x0, the context points and weights)
from every output (x1, z1, the weights and the saved trajectories).
"""

from __future__ import annotations

import diffrax
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .adjoint import AbstractHandAdjoint, DiscreteAdjoint, FlowSpec, solve
from .flow import FlowSolution, SaveAt, check_inputs, integrate
from .paths import AbstractCFM

Adjoint = AbstractHandAdjoint | diffrax.AbstractAdjoint
"""What ``forward(..., adjoint=...)`` accepts: a hand adjoint strategy or any diffrax adjoint."""


def default_adjoint(solver: diffrax.AbstractSolver | None, stepsize_controller) -> Adjoint:
    """``DiscreteAdjoint()`` for Euler with fixed steps (where it is exact), else RecursiveCheckpointAdjoint."""
    fixed = stepsize_controller is None or isinstance(stepsize_controller, diffrax.ConstantStepSize)
    if (solver is None or type(solver) is diffrax.Euler) and fixed:
        return DiscreteAdjoint()
    return diffrax.RecursiveCheckpointAdjoint()


def _check_options(model, solver, stepsize_controller, saveat, adjoint, max_steps):
    if solver is not None and not isinstance(solver, diffrax.AbstractSolver):
        raise ValueError(f"`solver` must be a diffrax solver, got {solver!r}.")
    if stepsize_controller is not None and not isinstance(stepsize_controller, diffrax.AbstractStepSizeController):
        raise ValueError(f"`stepsize_controller` must be a diffrax step-size controller or None, got {stepsize_controller!r}.")
    if not isinstance(saveat, SaveAt):
        raise ValueError(f"`saveat` must be a cfm_jax.SaveAt, got {saveat!r}.")
    if not isinstance(adjoint, (AbstractHandAdjoint, diffrax.AbstractAdjoint)):
        raise ValueError(
            "`adjoint` must be DiscreteAdjoint(), ContinuousAdjoint(...) or a diffrax adjoint such as "
            f"diffrax.RecursiveCheckpointAdjoint(), got {adjoint!r}."
        )
    if isinstance(adjoint, diffrax.BacksolveAdjoint):
        raise ValueError(
            "`adjoint`=diffrax.BacksolveAdjoint() does not apply: the forward solves one ODE per layer inside a "
            "lax.scan and each solve closes over that layer's traced parameters, which BacksolveAdjoint cannot "
            "differentiate. Use ContinuousAdjoint(memory=Backsolve()) (the hand-written backsolve) or "
            "diffrax.RecursiveCheckpointAdjoint()."
        )
    adaptive = stepsize_controller is not None and not isinstance(
        stepsize_controller, (diffrax.ConstantStepSize, diffrax.StepTo)
    )
    if saveat.steps and adaptive:
        raise ValueError("`saveat`=SaveAt(steps=True) needs fixed steps; use SaveAt(layers=True) with adaptive solves.")
    if saveat.layers and not saveat.steps and not model.piecewise_constant:
        raise ValueError("`saveat`=SaveAt(layers=True) needs a piecewise-constant path; use SaveAt(steps=True).")
    if not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"`max_steps` must be a positive int, got {max_steps!r}.")


def forward(
    model: AbstractCFM,
    x0: Float[Array, "*B d"],
    context,
    *,
    solver: diffrax.AbstractSolver | None = None,
    steps: int | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    saveat: SaveAt = SaveAt(),
    adjoint: Adjoint | None = None,
    max_steps: int = 4096,
) -> FlowSolution:
    """Integrate the contextual flow map over s ∈ [0, 1], differentiable by ``adjoint``.

    Args:
        model: a :class:`~cfm_jax.Transformer` or any :class:`~cfm_jax.AbstractCFM`.
        x0: target token(s), ``(d,)`` or ``(B, d)``; passive, they do not enter the context.
        context: :class:`~cfm_jax.EmpiricalMeasure` (or an ``(n, d)`` array, uniform weights).
        solver: any diffrax ODE solver; default ``diffrax.Euler()``.
        steps: total number of (initial) steps over [0, 1]; default one per layer. For
            piecewise-constant paths it must be a multiple of L.
        stepsize_controller: default fixed steps; e.g. ``diffrax.PIDController(rtol, atol)``
            for adaptive stepping (then ``steps`` sets the first trial step).
        saveat: :class:`SaveAt`.
        adjoint: how the solve is differentiated (module docstring); default: the exact hand
            adjoint for Euler with fixed steps, ``diffrax.RecursiveCheckpointAdjoint()`` otherwise.
        max_steps: step cap per layer for adaptive solves.

    Returns:
        :class:`FlowSolution` (``x1`` shaped like ``x0``; ``xs`` ``(S,) + x0.shape``).
    """
    x0, context, steps = check_inputs(model, x0, context, steps)
    adjoint = default_adjoint(solver, stepsize_controller) if adjoint is None else adjoint
    _check_options(model, solver, stepsize_controller, saveat, adjoint, max_steps)
    solver = diffrax.Euler() if solver is None else solver
    dtype = jnp.result_type(x0, context.points, *jax.tree.leaves(model.stacked_params()))
    single = x0.ndim == 1
    x = jnp.atleast_2d(x0).astype(dtype)
    z = context.points.astype(dtype)
    w = context.weights.astype(dtype)
    if isinstance(adjoint, AbstractHandAdjoint):
        spec = FlowSpec(solver=solver, stepsize_controller=stepsize_controller, saveat=saveat, steps=steps,
                        max_steps=max_steps)
        adjoint.validate(model, spec)
        sol = solve(adjoint, model, x, z, w, spec)
    else:
        sol = integrate(model, x, z, w, solver=solver, steps=steps, stepsize_controller=stepsize_controller,
                        saveat=saveat, adjoint=adjoint, max_steps=max_steps)
    if single:
        sol = FlowSolution(x1=sol.x1[0], z1=sol.z1, weights=sol.weights, ss=sol.ss,
                           xs=None if sol.xs is None else sol.xs[:, 0], zs=sol.zs, num_steps=sol.num_steps)
    return sol


__all__ = ["Adjoint", "default_adjoint", "forward"]
