"""``forward``: the flow solve with its differentiation strategy attached, compiled.

    sol = cfm_jax.forward(model, x0, context)                         # Euler, one step per layer
    g = jax.grad(lambda m: loss(cfm_jax.forward(m, x0, context)))(model)   # runs the hand adjoint

The ``adjoint=`` argument chooses how ``jax.grad`` (and ``jax.vjp``, ``eqx.filter_grad``,
optax loops, ...) differentiates the one forward loop (``_flow.loop``):

- [`DiscreteAdjoint`][cfm_jax.DiscreteAdjoint] — the exact hand adjoint of explicit Euler (the residual
  network): equal to autodiff to round-off, O(n) memory per stored state, no n×n buffer;
- [`ContinuousAdjoint`][cfm_jax.ContinuousAdjoint] — the adjoint ODE integrated backward with diffrax (any
  solver); converges to the continuous gradient at the solver's order;
- any ``diffrax.AbstractAdjoint`` (e.g. ``diffrax.RecursiveCheckpointAdjoint()``) — autodiff
  through the diffrax solve; also the only choice for forward mode (``diffrax.DirectAdjoint()``,
  ``diffrax.ForwardMode()``).

Default (``adjoint=None``): ``DiscreteAdjoint()`` whenever it is exact — the Euler solver (the
default) with fixed steps — and ``diffrax.RecursiveCheckpointAdjoint()`` otherwise.
Gradients flow to every input (the model's parameters, x0, the context points and weights)
from every output (x1, z1, the weights and the saved trajectories).

``forward`` is compiled with ``eqx.filter_jit``: Python ints and the option modules are static,
arrays are traced, and a repeated call with the same shapes reuses the compiled program. Argument
types and shapes are checked when it is traced (``ValueError`` naming the argument); values — finite
tokens, points and parameters, context weights that are non-negative and sum to one — are checked
inside the compiled program with ``eqx.error_if``, so they hold under a caller's own ``jax.jit``,
``vmap`` and ``grad`` too. They cost nothing measurable (``benchmarks/results/forward.md``), but a
program containing them is never stored by JAX's persistent compilation cache (they are host
callbacks): ``throw=False`` leaves them out, as sweeps over inputs they generate themselves do.
Under a plain ``jax.jit``, ``steps`` and ``max_steps`` must be marked static
(``jax.jit(forward, static_argnames="steps")``); ``eqx.filter_jit`` does that itself.
"""

from __future__ import annotations

from typing import NamedTuple, overload

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._adjoint import AbstractHandAdjoint, DiscreteAdjoint, solve
from ._flow import FlowSolution, FlowSpec, SaveAt
from ._gaussian_limit import GaussianMeasure, GaussianSolution, gaussian_flow
from ._measures import EmpiricalMeasure, as_measure, checked
from ._paths import AbstractCFM
from ._validation import finite, finite_params, static_int

Adjoint = AbstractHandAdjoint | diffrax.AbstractAdjoint
"""What ``forward(..., adjoint=...)`` accepts: a hand adjoint strategy or any diffrax adjoint."""


def default_adjoint(solver: diffrax.AbstractSolver | None, stepsize_controller) -> Adjoint:
    """``DiscreteAdjoint()`` for Euler with fixed steps (where it is exact), else RecursiveCheckpointAdjoint."""
    fixed = stepsize_controller is None or isinstance(stepsize_controller, diffrax.ConstantStepSize)
    if (solver is None or type(solver) is diffrax.Euler) and fixed:
        return DiscreteAdjoint()
    return diffrax.RecursiveCheckpointAdjoint()


class Prepared(NamedTuple):
    """Validated inputs of a solve: the value-checked model, 2-D tokens, context arrays and the options."""

    model: AbstractCFM
    x: Array
    z: Array
    w: Array
    spec: FlowSpec
    adjoint: Adjoint
    single: bool


def prepare(
    model: AbstractCFM,
    x0,
    context,
    *,
    solver: diffrax.AbstractSolver | None = None,
    steps: int | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    saveat: SaveAt = SaveAt(),
    adjoint: Adjoint | None = None,
    max_steps: int = 4096,
    throw: bool = True,
) -> Prepared:
    """Check the arguments of :func:`forward` and bring them to one dtype (see its docstring).

    Types, shapes and options raise ``ValueError`` naming the argument when traced; values are
    checked inside the compiled program (``eqx.error_if``) unless ``throw`` is False.
    """
    if not isinstance(model, AbstractCFM):
        raise ValueError(f"`model` must be a cfm_jax model (AbstractCFM), got {type(model).__name__}.")
    if not isinstance(context, EmpiricalMeasure):
        context = as_measure(context)
    x0 = jnp.asarray(x0)
    d, L = model.dim, model.num_layers
    if x0.ndim not in (1, 2):
        raise ValueError(f"`x0` must have shape (d,) or (B, d), got {x0.shape}.")
    if x0.shape[-1] != d:
        raise ValueError(f"`x0` has dimension {x0.shape[-1]} but the model has d = {d}.")
    if context.dim != d:
        raise ValueError(f"`context` has dimension {context.dim} but the model has d = {d}.")
    if not jnp.issubdtype(x0.dtype, jnp.floating):
        raise ValueError(f"`x0` must be a floating array, got dtype {x0.dtype}.")
    steps = L if steps is None else static_int("steps", steps)
    if steps % L:
        raise ValueError(
            f"`steps`={steps} must be a multiple of the number of layers L={L} so that no step "
            "straddles a parameter jump or kink."
        )
    max_steps = static_int("max_steps", max_steps)
    if solver is not None and not isinstance(solver, diffrax.AbstractSolver):
        raise ValueError(f"`solver` must be a diffrax solver, got {solver!r}.")
    if stepsize_controller is not None and not isinstance(stepsize_controller, diffrax.AbstractStepSizeController):
        raise ValueError(
            f"`stepsize_controller` must be a diffrax step-size controller or None, got {stepsize_controller!r}."
        )
    if not isinstance(saveat, SaveAt):
        raise ValueError(f"`saveat` must be a cfm_jax.SaveAt, got {saveat!r}.")
    adjoint = default_adjoint(solver, stepsize_controller) if adjoint is None else adjoint
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
    spec = FlowSpec(
        solver=diffrax.Euler() if solver is None else solver,
        stepsize_controller=stepsize_controller,
        saveat=saveat,
        steps=steps,
        max_steps=max_steps,
    )
    if saveat.steps and not spec.fixed:
        raise ValueError("`saveat`=SaveAt(steps=True) needs fixed steps; use SaveAt(layers=True) with adaptive solves.")
    if isinstance(adjoint, AbstractHandAdjoint):
        adjoint.validate(model, spec)
    if throw:
        context, model, x0 = checked(context), finite_params(model), finite("x0", x0)
    dtype = jnp.result_type(x0, context.points, *jax.tree.leaves(model.stacked_params()))
    x = jnp.atleast_2d(x0).astype(dtype)
    return Prepared(model, x, context.points.astype(dtype), context.weights.astype(dtype), spec, adjoint, x0.ndim == 1)


@overload
def forward(
    model: AbstractCFM,
    x0: Float[Array, "*B d"],
    context: GaussianMeasure,
    *,
    solver: diffrax.AbstractSolver | None = None,
    steps: int | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    saveat: SaveAt = SaveAt(),
    adjoint: Adjoint | None = None,
    max_steps: int = 4096,
    throw: bool = True,
) -> GaussianSolution: ...


@overload
def forward(
    model: AbstractCFM,
    x0: Float[Array, "*B d"],
    context: EmpiricalMeasure | Float[Array, "n d"],
    *,
    solver: diffrax.AbstractSolver | None = None,
    steps: int | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    saveat: SaveAt = SaveAt(),
    adjoint: Adjoint | None = None,
    max_steps: int = 4096,
    throw: bool = True,
) -> FlowSolution: ...


def forward(
    model: AbstractCFM,
    x0: Float[Array, "*B d"],
    context: EmpiricalMeasure | GaussianMeasure | Float[Array, "n d"],
    *,
    solver: diffrax.AbstractSolver | None = None,
    steps: int | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    saveat: SaveAt = SaveAt(),
    adjoint: Adjoint | None = None,
    max_steps: int = 4096,
    throw: bool = True,
) -> FlowSolution | GaussianSolution:
    """Integrate the contextual flow map over s ∈ [0, 1], differentiable by ``adjoint``; compiled.

    Args:
        model: a [`Transformer`][cfm_jax.Transformer] or any [`AbstractCFM`][cfm_jax.AbstractCFM].
        x0: target token(s), ``(d,)`` or ``(B, d)``; passive, they do not enter the context.
        context: [`EmpiricalMeasure`][cfm_jax.EmpiricalMeasure] (or an ``(n, d)`` array, uniform weights),
            or a [`GaussianMeasure`][cfm_jax.GaussianMeasure]: the exact infinite-context flow
            ([`gaussian_flow`][cfm_jax.gaussian_flow]; attention fields and linear MLPs), returned as a
            [`GaussianSolution`][cfm_jax.GaussianSolution] whose ``context`` is the final Gaussian.
        solver: any diffrax ODE solver; default ``diffrax.Euler()``.
        steps: total number of (initial) steps over [0, 1], a multiple of L (no step straddles a
            layer); default one per layer. Static.
        stepsize_controller: default fixed steps; e.g. ``diffrax.PIDController(rtol, atol)``
            for adaptive stepping (then ``steps`` sets the first trial step).
        saveat: [`SaveAt`][cfm_jax.SaveAt].
        adjoint: how the solve is differentiated (module docstring); default: the exact hand
            adjoint for Euler with fixed steps, ``diffrax.RecursiveCheckpointAdjoint()`` otherwise.
        max_steps: step cap per layer for adaptive solves. Static.
        throw: check the values of the inputs inside the compiled program (default), raising an
            error that names the argument. ``False`` leaves the checks out, for inputs a program
            generated itself: JAX's persistent compilation cache never stores a program containing
            host callbacks, which ``eqx.error_if`` is (``diffrax.diffeqsolve(throw=...)`` likewise). Static.

    Returns:
        [`FlowSolution`][cfm_jax.FlowSolution] (``x1`` shaped like ``x0``; ``xs`` ``(S,) + x0.shape``).
    """
    if isinstance(context, GaussianMeasure):
        if adjoint is not None:
            raise ValueError(
                "`adjoint` does not apply to a GaussianMeasure context: its exact infinite-context flow is "
                "an O(d²) moment recursion, differentiated by autodiff."
            )
        return _gaussian_flow(
            model,
            x0,
            context,
            solver=solver,
            steps=steps,
            stepsize_controller=stepsize_controller,
            saveat=saveat,
            max_steps=max_steps,
            throw=throw,
        )
    try:
        return _forward(
            model,
            x0,
            context,
            solver=solver,
            steps=steps,
            stepsize_controller=stepsize_controller,
            saveat=saveat,
            adjoint=adjoint,
            max_steps=max_steps,
            throw=throw,
        )
    except TypeError as e:
        # forward mode met a reverse-mode strategy: name the fix instead of JAX's generic custom_vjp message
        used = default_adjoint(solver, stepsize_controller) if adjoint is None else adjoint
        forward_mode = isinstance(used, (diffrax.DirectAdjoint, diffrax.ForwardMode))
        if forward_mode or ("forward-mode" not in str(e) and "jvp" not in str(e)):
            raise
        raise TypeError(
            f"{type(used).__name__} is a reverse-mode (custom_vjp) strategy, so forward-mode autodiff "
            "(jax.jvp, jax.jacfwd, and jax.hessian for the hand adjoints) cannot run through it. Use "
            "forward(..., adjoint=diffrax.DirectAdjoint()) for forward mode (or diffrax.ForwardMode() for jax.jvp "
            "alone); docs/gradients.md lists what each adjoint supports."
        ) from None


_gaussian_flow = eqx.filter_jit(gaussian_flow)


@eqx.filter_jit
def _forward(model, x0, context, **options) -> FlowSolution:
    p = prepare(model, x0, context, **options)
    sol = solve(p.adjoint, p.model, p.x, p.z, p.w, p.spec)
    if p.single:
        sol = FlowSolution(
            x1=sol.x1[0],
            z1=sol.z1,
            weights=sol.weights,
            ss=sol.ss,
            xs=None if sol.xs is None else sol.xs[:, 0],
            zs=sol.zs,
            num_steps=sol.num_steps,
        )
    return sol


__all__ = ["Adjoint", "Prepared", "default_adjoint", "forward", "prepare"]
