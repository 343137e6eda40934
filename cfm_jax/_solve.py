"""``forward``: the flow solve with its differentiation strategy attached, compiled.

    sol = cfm_jax.forward(model, x0, context)                         # Euler, one step per layer
    g = jax.grad(lambda m: loss(cfm_jax.forward(m, x0, context)))(model)   # runs the hand adjoint

The context is an [`EmpiricalMeasure`][cfm_jax.EmpiricalMeasure] (n atoms) or a
[`GaussianMeasure`][cfm_jax.GaussianMeasure] (the exact infinite-context flow); both run the one
loop of ``cfm_jax._flow`` and return a [`FlowSolution`][cfm_jax.FlowSolution]. The ``adjoint=``
argument chooses how ``jax.grad`` (and ``jax.vjp``, ``eqx.filter_grad``, optax loops, ...)
differentiates that loop, through one hook (``AbstractStrategy.solve``):

- [`DiscreteAdjoint`][cfm_jax.DiscreteAdjoint] — the exact hand adjoint of explicit Euler (the residual
  network): equal to autodiff to round-off, O(n) memory per stored state, no n×n buffer;
- [`ContinuousAdjoint`][cfm_jax.ContinuousAdjoint] — the adjoint ODE integrated backward with diffrax (any
  solver); converges to the continuous gradient at the solver's order;
- any ``diffrax.AbstractAdjoint`` (e.g. ``diffrax.RecursiveCheckpointAdjoint()``) — autodiff
  through the diffrax solve; also the only choice for forward mode (``diffrax.DirectAdjoint()``,
  ``diffrax.ForwardMode()``).

Default (``adjoint=None``): for atoms, ``DiscreteAdjoint()`` whenever it is exact — the Euler solver
(the default) with fixed steps — and ``diffrax.RecursiveCheckpointAdjoint()`` otherwise; for a
Gaussian context, autodiff through the loop (every JAX transformation, forward mode included, with
fixed steps). Gradients flow to every input (the model's parameters, x0, the context) from every
output (x1, the final context and the saved trajectories). docs/gradients.md tables what each
strategy supports (``jax.jvp``, ``jax.hessian``, grad of grad).

``forward`` is compiled with ``eqx.filter_jit``: Python ints (and numpy integers) and the option
modules are static, arrays are traced, and a repeated call with the same shapes reuses the compiled
program. Argument types and shapes are checked when it is traced (``ValueError`` naming the
argument); values — finite tokens, points and parameters, context weights that are non-negative and
sum to one, a Gaussian covariance that is symmetric positive definite — and a failed adaptive solve
(``max_steps`` reached) are checked by the library's one value check (``cfm_jax._validation``): a
failed check raises ``equinox.EquinoxRuntimeError`` naming the argument. Called at top level, or
inside a user's step in ``cfm_jax.compiled``, the checks are data the program returns (no host
callback: JAX's persistent compilation cache, :func:`cfm_jax.enable_compilation_cache`, stores it);
inside a caller's own ``jax.jit``, ``vmap``, ``grad`` or ``checkify`` they are host callbacks tied
to the result and its gradient (a plain ``jax.jit`` wraps the message in
``jax.errors.JaxRuntimeError``). ``throw=False`` leaves the checks
out (a failed solve is then reported in ``FlowSolution.result``), as sweeps over inputs they
generate themselves do.
Under a plain ``jax.jit``, ``steps`` and
``max_steps`` must be marked static (``jax.jit(forward, static_argnames="steps")``);
``eqx.filter_jit`` does that itself.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import NamedTuple

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ._adjoint import AbstractHandAdjoint, AbstractStrategy, Autodiff, DiscreteAdjoint, as_strategy
from ._arguments import as_array
from ._fields import attention_kernels
from ._flow import (
    AbstractCarriedContext,
    Ctx,
    EmpiricalContext,
    FlowSolution,
    FlowSpec,
    SaveAt,
    fixed_controller,
    flow_spec as _flow_spec,
    options_checked_first,
    saved,
)
from ._gaussian_limit import GaussianContext, gaussian_field, gaussian_state
from ._measures import GaussianMeasure, as_measure
from ._paths import AbstractCFM
from ._regime import notice_heavy_tail
from ._validation import check_solved, compiled, finite, finite_params

Adjoint = AbstractHandAdjoint | diffrax.AbstractAdjoint
"""What ``forward(..., adjoint=...)`` accepts: a hand adjoint strategy or any diffrax adjoint."""


def default_adjoint(
    solver: diffrax.AbstractSolver | None = None, stepsize_controller: diffrax.AbstractStepSizeController | None = None
) -> Adjoint:
    """What ``forward(adjoint=None)`` uses for an empirical context: ``DiscreteAdjoint()`` for Euler with
    fixed steps (where it is exact, ``FlowSpec.exact_euler``), else ``diffrax.RecursiveCheckpointAdjoint()``."""
    if solver is not None and not isinstance(solver, diffrax.AbstractSolver):
        raise ValueError(f"`solver` must be a diffrax solver or None, got {solver!r}.")
    spec = FlowSpec(diffrax.Euler() if solver is None else solver, fixed_controller(stepsize_controller))
    return DiscreteAdjoint() if spec.exact_euler else diffrax.RecursiveCheckpointAdjoint()


class Prepared(NamedTuple):
    """Validated inputs of a solve: the value-checked model, the context as the loop carries it, the
    initial state (2-D tokens first), the options, the strategy, and whether ``x0`` was one token."""

    model: AbstractCFM
    context: AbstractCarriedContext
    y0: tuple
    spec: FlowSpec
    strategy: AbstractStrategy
    single: bool


def _option_defaults() -> dict:
    """forward's options and their defaults: its signature is their one definition."""
    params = inspect.signature(forward).parameters.values()
    return {p.name: p.default for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}


def prepare(model: AbstractCFM, x0, context, **options) -> Prepared:
    """Check the arguments of :func:`forward` (its options in ``options``, defaults filled in) and bring
    them to one dtype: the widest of the tokens, the context and the parameters.

    Types, shapes and options raise ``ValueError`` naming the argument when traced; values are
    checked by the value check (``cfm_jax._validation.check``) unless ``throw`` is False.
    """
    defaults = _option_defaults()
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise TypeError(f"unexpected option(s) {unknown}; the options of cfm_jax.forward are {sorted(defaults)}.")
    options = {**defaults, **options}
    adjoint, throw = options.pop("adjoint"), options.pop("throw")
    if not isinstance(model, AbstractCFM):
        raise ValueError(f"`model` must be a cfm_jax model (AbstractCFM), got {type(model).__name__}.")
    if not isinstance(context, GaussianMeasure):
        context = as_measure(context)
    x0 = as_array("x0", x0)
    d = model.dim
    if x0.ndim not in (1, 2):
        raise ValueError(f"`x0` must have shape (d,) or (B, d), got {x0.shape}.")
    if x0.shape[-1] != d:
        raise ValueError(f"`x0` has dimension {x0.shape[-1]} but the model has d = {d}.")
    if context.dim != d:
        raise ValueError(f"`context` has dimension {context.dim} but the model has d = {d}.")
    if not jnp.issubdtype(x0.dtype, jnp.floating):
        raise ValueError(f"`x0` must be a floating array, got dtype {x0.dtype}.")
    spec = _flow_spec(model, **options)
    carried: AbstractCarriedContext
    if isinstance(context, GaussianMeasure):
        gaussian_field(model)  # TypeError naming the field if it has no Gaussian closed form
        carried, strategy = GaussianContext(), Autodiff() if adjoint is None else as_strategy(adjoint)
    else:
        carried = EmpiricalContext(context.weights)
        strategy = as_strategy(default_adjoint(spec.solver, spec.stepsize_controller) if adjoint is None else adjoint)
    strategy.validate(model, carried, spec)
    if throw:
        model, x0, context = checked_inputs(model, x0, context)
    dtype = jnp.result_type(x0, *jax.tree.leaves(context), *jax.tree.leaves(model.stacked_params()))
    x = jnp.atleast_2d(x0).astype(dtype)
    if isinstance(context, GaussianMeasure):
        y0 = gaussian_state(x, context, dtype)
    else:
        carried = EmpiricalContext(context.weights.astype(dtype))
        y0 = (x, context.points.astype(dtype))
    return Prepared(model, carried, y0, spec, strategy, x0.ndim == 1)


def checked_inputs(model, x0, context):
    """``(model, x0, context)`` with the value checks :func:`forward` makes with ``throw=True``
    (finite parameters and tokens, the context's rule), as measures (an array context as its
    empirical measure)."""
    if not isinstance(context, GaussianMeasure):
        context = as_measure(context)
    return finite_params(model), finite("x0", x0), context.checked()


def _names_the_forward_mode_fix(fn):
    """Forward-mode autodiff met a reverse-mode (custom_vjp) strategy: name the fix instead of JAX's
    generic message. (The error is raised by JAX around the compiled call, so it is caught here.)"""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TypeError as e:
            model = args[0] if args else kwargs.get("model")
            forward_mode = "forward-mode" in str(e) or "jvp" in str(e)
            # the model's kernels say whether forward mode runs through them
            kernels = attention_kernels(model.field) if isinstance(model, AbstractCFM) else ()
            reverse_only = sorted({type(k).__name__ for k in kernels if not k.forward_mode})
            if forward_mode and reverse_only:
                raise TypeError(
                    f"the model's attention kernel ({', '.join(reverse_only)}) is reverse-mode only (a custom_vjp), "
                    "so forward-mode autodiff (jax.jvp, jax.jacfwd, jax.hessian) cannot run through it whatever the "
                    "adjoint. Use the XLA path for forward mode: model.with_kernel(cfm_jax.XLAAttention())."
                ) from None
            adjoint = kwargs.get("adjoint")
            if isinstance(adjoint, (diffrax.DirectAdjoint, diffrax.ForwardMode)) or (
                "forward-mode" not in str(e) and "jvp" not in str(e)
            ):
                raise
            used = "the default adjoint" if adjoint is None else f"{type(adjoint).__name__}()"
            raise TypeError(
                f"{used} is a reverse-mode (custom_vjp) strategy, so forward-mode autodiff (jax.jvp, jax.jacfwd) "
                "cannot run through it. Use forward(..., adjoint=diffrax.DirectAdjoint()) for forward mode (or "
                "diffrax.ForwardMode() for jax.jvp alone); docs/gradients.md lists what each adjoint supports."
            ) from None

    return call


@options_checked_first
@_names_the_forward_mode_fix
@compiled
def forward(
    model: AbstractCFM,
    x0: Float[Array, "*B d"],
    context: Ctx | Float[ArrayLike, "n d"],
    *,
    solver: diffrax.AbstractSolver | None = None,
    steps: int | np.integer | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    saveat: SaveAt = SaveAt(),
    adjoint: Adjoint | None = None,
    max_steps: int | np.integer = 4096,
    progress_meter: diffrax.AbstractProgressMeter = diffrax.NoProgressMeter(),
    throw: bool = True,
) -> FlowSolution[Ctx]:
    """Integrate the contextual flow map over s ∈ [0, 1], differentiable by ``adjoint``; compiled.

    Args:
        model: a [`Transformer`][cfm_jax.Transformer] or any [`AbstractCFM`][cfm_jax.AbstractCFM].
        x0: target token(s), ``(d,)`` or ``(B, d)``; passive, they do not enter the context.
        context: an [`EmpiricalMeasure`][cfm_jax.EmpiricalMeasure] (or an ``(n, d)`` array, uniform
            weights), or a [`GaussianMeasure`][cfm_jax.GaussianMeasure]: the exact infinite-context
            flow, for fields with a Gaussian closed form
            ([`AbstractGaussianField`][cfm_jax.AbstractGaussianField]: attention, the affine MLP, their
            sums). There, a model in the heavy-tail regime (some head with ρ ≥ 1 at that context,
            [`attention_regime`][cfm_jax.attention_regime]) gets one
            [`HeavyTailWarning`][cfm_jax.HeavyTailWarning] per process after a top-level call:
            sampled contexts approach this limit much more slowly than $n^{-1/2}$.
        solver: any diffrax ODE solver; default ``diffrax.Euler()`` (with fixed steps: the residual
            network, also on a Gaussian context).
        steps: total number of (initial) steps over [0, 1], a multiple of L (no step straddles a
            layer); default one per layer. Static.
        stepsize_controller: default fixed steps; e.g. ``diffrax.PIDController(rtol, atol)`` with an
            adaptive solver (``diffrax.Tsit5()``, ...) for adaptive stepping (``steps`` then sets the
            first trial step). ``diffrax.StepTo`` is refused (each layer has its own grid).
        saveat: [`SaveAt`][cfm_jax.SaveAt].
        adjoint: how the solve is differentiated (module docstring); default: the exact hand adjoint
            for atoms with Euler and fixed steps, autodiff otherwise.
        max_steps: step cap per layer for adaptive solves. Static.
        progress_meter: a diffrax progress meter (``diffrax.TextProgressMeter()``,
            ``diffrax.TqdmProgressMeter()``) showing the progress over s ∈ [0, 1]: at every step of an
            adaptive solve, at every layer end otherwise. Default none.
        throw: check the values of the inputs (default), raising an error that names the argument,
            and raise if an adaptive solve fails (module docstring). ``False`` leaves the checks out,
            for inputs a program generated itself, and reports a failed solve in ``result``
            (``diffrax.diffeqsolve(throw=...)`` likewise). Static.

    Returns:
        [`FlowSolution`][cfm_jax.FlowSolution]: ``x1`` shaped like ``x0``, ``context`` the final
        context (the same kind of measure), ``xs``/``contexts`` the saved trajectories, ``result``
        and ``stats``.
    """
    return _flow(
        model,
        x0,
        context,
        solver=solver,
        steps=steps,
        stepsize_controller=stepsize_controller,
        saveat=saveat,
        adjoint=adjoint,
        max_steps=max_steps,
        progress_meter=progress_meter,
        throw=throw,
    )


def _flow(model: AbstractCFM, x0, context, **options) -> FlowSolution:
    """:func:`forward`'s body, uncompiled: for the compiled functions that solve the flow as one step of
    their own program (their checks are then that program's)."""
    p = prepare(model, x0, context, **options)
    # the exact limit is what sampled contexts are compared with: say when they approach it slowly
    if isinstance(context, GaussianMeasure):
        notice_heavy_tail(p.model, context, p.y0[0])
    sol = p.strategy.solve(p.model, p.context, p.y0, p.spec)
    x1 = sol.x1
    if options.get("throw", True) and p.spec.can_fail:
        x1 = check_solved(x1, sol.result)
    if p.single:
        sol = dataclasses.replace(sol, x1=x1[0], xs=None if sol.xs is None else sol.xs[:, 0])
    else:
        sol = dataclasses.replace(sol, x1=x1)
    saveat = options.get("saveat", SaveAt())
    return saved(sol, saveat, p.model.num_layers, p.spec.steps, p.spec.fixed)


@options_checked_first
@compiled
def gaussian_flow(
    model: AbstractCFM, x0: Float[Array, "*B d"], mu: GaussianMeasure, **options
) -> FlowSolution[GaussianMeasure]:
    """Deprecated: ``forward(model, x0, mu, **options)``, which it is (the same loop and options), refusing
    any other context; served as ``cfm_jax.gaussian_flow`` for one release, with a warning.

    Returns a [`FlowSolution`][cfm_jax.FlowSolution] whose ``context``/``contexts`` are
    [`GaussianMeasure`][cfm_jax.GaussianMeasure]s. Differentiable in the model, ``x0`` and ``mu``.
    """
    if not isinstance(mu, GaussianMeasure):
        raise ValueError(f"`mu` must be a GaussianMeasure, got {type(mu).__name__}.")
    if isinstance(model, AbstractCFM) and mu.dim != model.dim:
        raise ValueError(f"`mu` has dimension {mu.dim} but the model has d = {model.dim}.")
    return _flow(model, x0, mu, **options)


__all__ = [
    "Adjoint",
    "Prepared",
    "check_solved",
    "checked_inputs",
    "default_adjoint",
    "forward",
    "prepare",
]
