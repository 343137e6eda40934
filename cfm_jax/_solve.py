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
from typing import NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ._adjoint import AbstractHandAdjoint, AbstractStrategy, Autodiff, DiscreteAdjoint, as_strategy
from ._arguments import as_array, check_solved, finite, finite_params
from ._fields import attention_kernels
from ._flow import (
    AbstractCarriedContext,
    Ctx,
    EmpiricalContext,
    FlowSolution,
    FlowSpec,
    SaveAt,
    check_progress_meter,
    fixed_controller,
    options_checked_first,
    saved,
)
from ._gaussian_limit import GaussianContext, gaussian_field, gaussian_state
from ._measures import EmpiricalMeasure, GaussianMeasure, as_measure
from ._paths import AbstractCFM
from ._regime import notice_heavy_tail
from ._validation import compiled

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


def _strategy(context, adjoint, solver, stepsize_controller) -> AbstractStrategy:
    """The strategy a solve uses: ``adjoint``'s, or by default autodiff for a Gaussian context and
    :func:`default_adjoint` for atoms."""
    if adjoint is None and isinstance(context, GaussianMeasure):
        return Autodiff()
    return as_strategy(default_adjoint(solver, stepsize_controller) if adjoint is None else adjoint)


class Prepared(NamedTuple):
    """A solve's inputs, prepared once (:func:`prepare`): the model (value-checked), the context as a
    measure (value-checked) and as the loop carries it, the initial state (2-D tokens first), the
    options, the strategy, and whether ``x0`` was one token."""

    model: AbstractCFM
    measure: EmpiricalMeasure | GaussianMeasure
    context: AbstractCarriedContext
    y0: tuple
    spec: FlowSpec
    strategy: AbstractStrategy
    single: bool


def prepare(
    model: AbstractCFM, x0, context, *, adjoint: Adjoint | None = None, throw: bool = True, **options
) -> Prepared:
    """The one preparation of every entry point: the arguments of :func:`forward` (``options`` its
    integration options, :meth:`FlowSpec.of`) checked, the context made a measure, value-checked and
    given its carried form once, all in one dtype: the widest of the tokens, the context and the
    parameters.

    Types, shapes and options raise ``ValueError`` naming the argument when traced; values are
    checked by the value check (``cfm_jax._validation.check``) unless ``throw`` is False.
    """
    unknown = sorted(set(options) - set(FlowSpec.OPTIONS))
    if unknown:
        names = sorted((*FlowSpec.OPTIONS, "adjoint", "throw"))
        raise TypeError(f"unexpected option(s) {unknown}; the options of cfm_jax.forward are {names}.")
    if not isinstance(model, AbstractCFM):
        raise ValueError(f"`model` must be a cfm_jax model (AbstractCFM), got {type(model).__name__}.")
    measure = context if isinstance(context, GaussianMeasure) else as_measure(context)
    x0 = as_array("x0", x0)
    d = model.dim
    if x0.ndim not in (1, 2):
        raise ValueError(f"`x0` must have shape (d,) or (B, d), got {x0.shape}.")
    if x0.shape[-1] != d:
        raise ValueError(f"`x0` has dimension {x0.shape[-1]} but the model has d = {d}.")
    if measure.dim != d:
        raise ValueError(f"`context` has dimension {measure.dim} but the model has d = {d}.")
    if not jnp.issubdtype(x0.dtype, jnp.floating):
        raise ValueError(f"`x0` must be a floating array, got dtype {x0.dtype}.")
    spec = FlowSpec.of(model, **options)
    if isinstance(measure, GaussianMeasure):
        gaussian_field(model)  # TypeError naming the field if it has no Gaussian closed form
    strategy = _strategy(measure, adjoint, spec.solver, spec.stepsize_controller)
    if throw:
        model, x0, measure = finite_params(model), finite("x0", x0), measure.checked()
    dtype = jnp.result_type(x0, *jax.tree.leaves(measure), *jax.tree.leaves(model.stacked_params()))
    x = jnp.atleast_2d(x0).astype(dtype)
    carried: AbstractCarriedContext
    if isinstance(measure, GaussianMeasure):
        carried, y0 = GaussianContext(), gaussian_state(x, measure, dtype)
        # the exact limit is what sampled contexts are compared with: say when they approach it
        # slowly (here, outside any gradient a caller takes of the solve: its values are the model's)
        notice_heavy_tail(model, measure, y0[0])
    else:
        carried, y0 = EmpiricalContext(measure.weights.astype(dtype)), (x, measure.points.astype(dtype))
    return Prepared(model, measure, carried, y0, spec, strategy, x0.ndim == 1)


def solve(p: Prepared, saveat: SaveAt, throw: bool) -> FlowSolution:
    """The solve of a prepared problem by its strategy (which refuses what it does not apply to, when
    traced), shaped as :func:`forward` returns it; with ``throw``, a failed solve raises
    (``check_solved``, once)."""
    p.strategy.validate(p.model, p.context, p.spec)
    sol = p.strategy.solve(p.model, p.context, p.y0, p.spec)
    x1 = sol.x1
    if throw and p.spec.can_fail:
        x1 = check_solved(x1, sol.result)
    if p.single:
        sol = dataclasses.replace(sol, x1=x1[0], xs=None if sol.xs is None else sol.xs[:, 0])
    else:
        sol = dataclasses.replace(sol, x1=x1)
    return saved(sol, saveat, p.model.num_layers, p.spec.steps, p.spec.fixed)


def _traces_alone(fn, args, kwargs) -> bool:
    """Whether ``fn(*args, **kwargs)`` traces on abstract copies of its arrays, outside the caller's
    transformations: then an error the call raised came from those transformations, not the call."""
    try:
        eqx.filter_eval_shape(fn, *args, **kwargs)
    except Exception:  # noqa: BLE001 - any failure of the call itself: the caller's error stands
        return False
    return True


def _entry(fn):
    """:func:`forward`'s compiled call with what must happen around it: ``progress_meter`` checked
    first (the options are static arguments, compared with earlier calls' before anything inside runs,
    and an object that is not a progress meter may fail that comparison), and forward-mode autodiff
    through a reverse-mode (custom_vjp) kernel or strategy named with its fix instead of JAX's generic
    ``TypeError``. The strategies and kernels say whether forward mode runs through them; a
    ``TypeError`` that the same call does not raise when traced alone came from the caller's
    transformation, and with a reverse-only strategy or kernel the one that fails is forward mode."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if "progress_meter" in kwargs:
            check_progress_meter(kwargs["progress_meter"])
        try:
            return fn(*args, **kwargs)
        except TypeError:
            model = args[0] if args else kwargs.get("model")
            kernels = attention_kernels(model.field) if isinstance(model, AbstractCFM) else ()
            reverse_kernels = sorted({type(k).__name__ for k in kernels if not k.forward_mode})
            adjoint = kwargs.get("adjoint")
            context = args[2] if len(args) > 2 else kwargs.get("context")
            if not _traces_alone(fn, args, kwargs):
                raise
            strategy = _strategy(context, adjoint, kwargs.get("solver"), kwargs.get("stepsize_controller"))
            if strategy.forward_mode and not reverse_kernels:
                raise
            if reverse_kernels:
                raise TypeError(
                    f"the model's attention kernel ({', '.join(reverse_kernels)}) is reverse-mode only (a "
                    "custom_vjp), so forward-mode autodiff (jax.jvp, jax.jacfwd, jax.hessian) cannot run through "
                    "it whatever the adjoint. Use the XLA path for forward mode: "
                    "model.with_kernel(cfm_jax.XLAAttention())."
                ) from None
            used = "the default adjoint" if adjoint is None else f"{type(adjoint).__name__}()"
            raise TypeError(
                f"{used} is a reverse-mode (custom_vjp) strategy, so forward-mode autodiff (jax.jvp, jax.jacfwd) "
                "cannot run through it. Use forward(..., adjoint=diffrax.DirectAdjoint()) for forward mode (or "
                "diffrax.ForwardMode() for jax.jvp alone); docs/gradients.md lists what each adjoint supports."
            ) from None

    return call


@_entry
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
    p = prepare(
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
    return solve(p, saveat, throw)


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
    throw = options.get("throw", True)
    return solve(prepare(model, x0, mu, **options), options.get("saveat", SaveAt()), throw)


__all__ = [
    "Adjoint",
    "Prepared",
    "check_solved",
    "default_adjoint",
    "forward",
    "prepare",
    "solve",
]
