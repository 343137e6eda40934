"""The options and the result of a forward solve: ``SaveAt``, the validated ``FlowSpec`` and the
one ``FlowSolution`` type (for an empirical and a Gaussian context alike).

Whether the steps are fixed, and whether they are the exact residual network (explicit Euler with
fixed steps), is decided once: :meth:`FlowSpec.of` brings the step-size controller to a normal form
(None for fixed steps) and :attr:`FlowSpec.fixed` / :attr:`FlowSpec.can_fail` /
:attr:`FlowSpec.exact_euler` are what every other part of the solve (the loop, the default adjoint,
the hand adjoints, ``SaveAt(steps=True)``, the token adjoint) reads.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, ClassVar, Generic, Literal, TypeVar

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._arguments import static_int
from .._deprecations import warn_renamed
from .._measures import EmpiricalMeasure, GaussianMeasure
from .._paths import AbstractCFM

Emit = Literal["none", "ends", "steps"]
"""What the loop returns per layer: nothing, the state at the layer's end, or after every step."""

Ctx = TypeVar("Ctx", EmpiricalMeasure, GaussianMeasure)
"""The kind of context a solution carries."""


def _depths(ts) -> tuple[tuple[float, ...] | None, float]:
    """``SaveAt(ts=...)`` as a static tuple of Python floats (None stays None) and the round-off of
    the dtype they were given in (float64's for Python numbers): a float32 ``1/3`` is the layer
    boundary 1/3 to float32's round-off, not to float64's."""
    if ts is None:
        return None, float(np.finfo(np.float64).eps)
    try:
        given = np.asarray(ts)
        values = tuple(float(t) for t in given.astype(np.float64).reshape(-1))
    except (TypeError, ValueError):
        raise ValueError(f"`ts` must be a sequence of depths s in [0, 1], got {ts!r}.") from None
    if given.dtype.kind not in "iuf" or given.dtype == object:
        raise ValueError(f"`ts` must be a sequence of depths s in [0, 1], got {ts!r}.")
    if not values or any(not 0.0 <= t <= 1.0 for t in values) or any(b <= a for a, b in zip(values, values[1:])):
        raise ValueError(
            f"`ts` must be a non-empty strictly increasing sequence of depths s in [0, 1] (no depth "
            f"repeated), got {list(values)}."
        )
    eps = np.finfo(given.dtype).eps if given.dtype.kind == "f" else np.finfo(np.float64).eps
    return values, float(eps)


class SaveAt(eqx.Module):
    """What :func:`cfm_jax.forward` returns besides the final state (diffrax's ``SaveAt``, at the
    depths a layered flow has).

    Where:

    - ``SaveAt()`` – only ``x1`` and ``context``;
    - ``layers=True`` – the states at every layer boundary s = l/L (L + 1 depths);
    - ``steps=True`` – the states after every solver step (fixed-step solves only; ``L·k + 1`` depths);
    - ``ts=(s_1, …)`` – the states at these depths only, each on the solve's grid: a layer boundary
      l/L, or with fixed steps a step's end j/(L·k). Increasing, in [0, 1]; instead of
      ``layers``/``steps``.

    What: by default the tokens (``FlowSolution.xs``) and the context (``contexts``); with
    ``fn(s, x, context) -> PyTree`` (x shaped like ``x0``, ``context`` the measure at depth s), only
    ``fn``'s output, in ``FlowSolution.ys`` with a leading depth axis: ``fn=lambda s, x, context: x``
    saves the tokens' path without the ``(S, n, d)`` context trajectory. The unused states are never
    written out of the compiled program (XLA drops them); a hand adjoint under ``grad`` still keeps
    the states it needs (its ``memory=``).

    ``context=False``: the solution carries no context (``FlowSolution.context`` and ``contexts``
    are None), only tokens. The context's last step then produces nothing anyone reads, so with the
    residual network (explicit Euler, fixed steps) and an empirical context it is not taken: the last
    step moves the tokens alone, and ``DiscreteAdjoint``'s backward reads the token rows alone there.
    That saves 1/(L·k) of the O(n²) work of the solve and of its gradient (a quarter at L = 4, one
    step per layer) for a second, token-rows copy of the last step in the compiled program. Not with
    ``fn`` (it reads the context at every depth).
    """

    layers: bool = eqx.field(static=True, default=False)
    steps: bool = eqx.field(static=True, default=False)
    ts: tuple[float, ...] | None = eqx.field(static=True, default=None)
    fn: Callable[..., Any] | None = eqx.field(static=True, default=None)
    context: bool = eqx.field(static=True, default=True)
    #: the relative round-off of the dtype ``ts`` was given in (float64's for Python numbers)
    ts_eps: float = eqx.field(static=True, default=float(np.finfo(np.float64).eps), repr=False)

    def __init__(
        self,
        layers: bool = False,
        steps: bool = False,
        ts=None,
        fn: Callable[..., Any] | None = None,
        context: bool = True,
    ) -> None:
        self.layers, self.steps, self.fn, self.context = layers, steps, fn, context
        self.ts, self.ts_eps = _depths(ts)

    def __check_init__(self):
        if not isinstance(self.context, (bool, np.bool_)):
            raise ValueError(f"`context` must be True or False, got {self.context!r}.")
        if self.fn is not None and not self.context:
            raise ValueError(
                "`context`=False drops the context, which `fn` reads at every depth: save the tokens with "
                "SaveAt(..., context=False) and no `fn`, or keep the context."
            )
        if self.ts is not None and (self.layers or self.steps):
            raise ValueError("`ts` replaces `layers`/`steps`: pass SaveAt(ts=...) alone (the depths to save).")
        if self.fn is not None and not callable(self.fn):
            raise ValueError(f"`fn` must be a function fn(s, x, context) or None, got {self.fn!r}.")
        if self.fn is not None and not (self.layers or self.steps or self.ts is not None):
            raise ValueError(
                "`fn` says what to save at each depth: pass the depths too (layers=True, steps=True or ts=)."
            )

    @property
    def emit(self) -> Emit:
        """What the loop must return per layer for these outputs (``ts`` is resolved by
        ``FlowSpec.of`` into ``layers`` or ``steps`` first)."""
        return "steps" if self.steps else "ends" if self.layers else "none"

    def grid(self, num_layers: int, steps: int, fixed: bool) -> tuple[SaveAt, tuple[int, ...] | None]:
        """The saved grid a solve must produce (``SaveAt(layers=…)`` or ``SaveAt(steps=…)``) and the
        indices of ``ts`` into it (None without ``ts``); ``ValueError`` naming ``ts`` for a depth off
        the solve's grid."""
        if self.ts is None:
            return SaveAt(layers=self.layers, steps=self.steps, context=self.context), None
        # a depth given in float32 is l/L to float32's round-off (a few ulps of linspace's arithmetic);
        # 1e-9 at least, for depths typed with nine digits
        tolerance = max(1e-9, 4 * self.ts_eps)
        for count, needs_fixed in ((num_layers, False), (steps, True)):
            index = [round(t * count) for t in self.ts]  # the nearest point: 0.57·100 is 56.99…
            if (fixed or not needs_fixed) and all(
                abs(t * count - i) <= tolerance * count for t, i in zip(self.ts, index)
            ):
                return SaveAt(layers=not needs_fixed, steps=needs_fixed, context=self.context), tuple(index)
        grid = f"the layer boundaries l/{num_layers}" + (
            f" or the step ends j/{steps}" if fixed and steps > num_layers else ""
        )
        raise ValueError(f"`ts`={list(self.ts)}: every depth must be one of {grid} (the depths a state exists at).")


class FlowSolution(eqx.Module, Generic[Ctx]):
    """Result of :func:`cfm_jax.forward`, for an empirical and a Gaussian context alike.

    Attributes:
        x1: final target tokens, shaped like ``x0`` (``(d,)`` or ``(B, d)``).
        context: the final context: an [`EmpiricalMeasure`][cfm_jax.EmpiricalMeasure] (points
            ``(n, d)``, the weights unchanged by the flow) or a
            [`GaussianMeasure`][cfm_jax.GaussianMeasure], like the initial one; None with
            ``SaveAt(context=False)``.
        ts: depths of the saved states ``(S,)``, or None (``diffrax.Solution.ts``'s name; ``ss``, its
            former name, works for one release with a ``DeprecationWarning``).
        xs: token trajectory ``(S,) + x0.shape``, or None.
        contexts: the context trajectory, the same kind of measure with a leading ``S`` axis on
            every array (``points (S, n, d)`` and ``weights (S, n)``, or ``mean (S, d)`` and
            ``cov (S, d, d)``), or None.
        ys: ``SaveAt(fn=...)``'s output at the saved depths, a leading ``S`` axis on every array
            (``xs`` and ``contexts`` are then None), or None.
        result: a ``diffrax.RESULTS``: ``diffrax.RESULTS.successful``, or why an (adaptive) solve
            stopped, e.g. ``max_steps_reached``. With ``throw=True`` (the default) a failure raises
            instead; with ``throw=False`` it is reported here.
        stats: ``{"num_steps", "num_accepted_steps", "num_rejected_steps", "max_steps"}``: solver
            steps over all layers (``num_steps`` = accepted + rejected; ``L·k`` for fixed steps) and
            the cap per layer.
    """

    x1: Array
    context: Ctx  # None under SaveAt(context=False), typed for the usual case
    ts: Array | None = None
    xs: Array | None = None
    contexts: Ctx | None = None
    ys: Any = None
    result: diffrax.RESULTS = eqx.field(default_factory=lambda: diffrax.RESULTS.successful)
    stats: dict[str, Array] = eqx.field(default_factory=dict)

    @property
    def ss(self) -> Array | None:
        """Deprecated: [`ts`][cfm_jax.FlowSolution], the depths of the saved states."""
        warn_renamed("FlowSolution", "ss", "ts")
        return self.ts


def fixed_controller(controller) -> diffrax.AbstractStepSizeController | None:
    """A forward's ``stepsize_controller`` in normal form: None for fixed steps (None or
    ``ConstantStepSize()``), else the adaptive controller; ``ValueError`` naming the argument otherwise."""
    if controller is None or isinstance(controller, diffrax.ConstantStepSize):
        return None
    if isinstance(controller, diffrax.StepTo):
        raise ValueError(
            "`stepsize_controller`=diffrax.StepTo(...) is not supported: every layer is stepped on its own uniform "
            "grid of steps/L steps (no step straddles a layer), so its `ts` would be ignored. Pass `steps=` (a "
            "multiple of L) for fixed steps, or an adaptive controller such as diffrax.PIDController(rtol, atol)."
        )
    if not isinstance(controller, diffrax.AbstractStepSizeController):
        raise ValueError(f"`stepsize_controller` must be a diffrax step-size controller or None, got {controller!r}.")
    return controller


class FlowSpec(eqx.Module):
    """How the forward is integrated: the options of :func:`cfm_jax.forward` after validation
    (:meth:`FlowSpec.of`). ``steps`` is the total number of (initial) steps, a multiple of L.

    ``stepsize_controller`` is None for fixed steps (its normal form, :func:`fixed_controller`), so
    :attr:`fixed` and :attr:`exact_euler` are the one decision everything else reads.
    """

    solver: diffrax.AbstractSolver
    stepsize_controller: diffrax.AbstractStepSizeController | None
    saveat: SaveAt = SaveAt()
    steps: int = eqx.field(static=True, default=1)
    max_steps: int = eqx.field(static=True, default=4096)
    progress_meter: diffrax.AbstractProgressMeter = diffrax.NoProgressMeter()

    @property
    def fixed(self) -> bool:
        """Fixed steps: each layer is ``steps / L`` equal steps of the solver."""
        return self.stepsize_controller is None

    @property
    def can_fail(self) -> bool:
        """Whether a solve can fail at run time: adaptive steps (``max_steps``) or an implicit solver
        (its root find); an explicit solver on fixed steps cannot."""
        return not (self.fixed and not isinstance(self.solver, diffrax.AbstractImplicitSolver))

    @property
    def exact_euler(self) -> bool:
        """Explicit Euler with fixed steps: the flow is exactly the residual network, whose exact
        (discrete) adjoint and token covector exist."""
        return self.fixed and type(self.solver) is diffrax.Euler

    @property
    def tokens_last(self) -> bool:
        """Whether the last step may move the tokens alone: nothing reads the final context
        (``SaveAt(context=False)``) and every step is the residual network's (:attr:`exact_euler`:
        one evaluation of the field, at the step's start)."""
        return not self.saveat.context and self.exact_euler

    #: the integration options of :func:`cfm_jax.forward`, which :meth:`of` takes
    OPTIONS: ClassVar[tuple[str, ...]] = (
        "solver",
        "steps",
        "stepsize_controller",
        "saveat",
        "max_steps",
        "progress_meter",
    )

    @classmethod
    def of(
        cls,
        model: AbstractCFM,
        *,
        solver: diffrax.AbstractSolver | None = None,
        steps: int | np.integer | None = None,
        stepsize_controller: diffrax.AbstractStepSizeController | None = None,
        saveat: SaveAt = SaveAt(),
        max_steps: int | np.integer = 4096,
        progress_meter: diffrax.AbstractProgressMeter = diffrax.NoProgressMeter(),
    ) -> FlowSpec:
        """The integration options of :func:`cfm_jax.forward` (its docstring) validated, defaults filled
        in: ``ValueError`` naming the argument, at trace time. These keyword defaults are the options'
        one definition."""
        L = model.num_layers
        steps = L if steps is None else static_int("steps", steps)
        if steps % L:
            raise ValueError(
                f"`steps`={steps} must be a multiple of the number of layers L={L} so that no step "
                "straddles a parameter jump or kink."
            )
        max_steps = static_int("max_steps", max_steps)
        if solver is not None and not isinstance(solver, diffrax.AbstractSolver):
            raise ValueError(f"`solver` must be a diffrax solver, got {solver!r}.")
        solver = diffrax.Euler() if solver is None else solver
        terms = solver.term_structure  # what the solver integrates: one ODE term, or several (an SDE's)
        if not (isinstance(terms, type) and issubclass(diffrax.ODETerm, terms)):
            raise ValueError(
                f"`solver`={type(solver).__name__}() integrates several terms (an SDE solver); the flow is one "
                "ODE dx/ds = V(x, μ_s): pass an ODE solver such as diffrax.Euler(), diffrax.Heun() or diffrax.Tsit5()."
            )
        controller = fixed_controller(stepsize_controller)
        if controller is not None and not isinstance(solver, diffrax.AbstractAdaptiveSolver):
            raise ValueError(
                f"`stepsize_controller`={type(controller).__name__}(...) adapts the steps from the solver's error "
                f"estimate, and `solver`={type(solver).__name__}() has none: pass an adaptive solver such as "
                "diffrax.Tsit5() or diffrax.Heun(), or leave `stepsize_controller` out for fixed steps."
            )
        if not isinstance(saveat, SaveAt):
            raise ValueError(f"`saveat` must be a cfm_jax.SaveAt, got {saveat!r}.")
        saveat, _ = saveat.grid(L, steps, controller is None)  # the grid the loop saves; ts picked after
        if saveat.steps and controller is not None:
            raise ValueError(
                "`saveat`=SaveAt(steps=True) needs fixed steps; use SaveAt(layers=True) with adaptive solves."
            )
        check_progress_meter(progress_meter)
        return cls(solver, controller, saveat, steps, max_steps, progress_meter)


def check_progress_meter(progress_meter) -> None:
    """ValueError naming ``progress_meter`` unless it is a diffrax progress meter."""
    if not isinstance(progress_meter, diffrax.AbstractProgressMeter):
        raise ValueError(
            "`progress_meter` must be a diffrax progress meter: diffrax.NoProgressMeter() (the default), "
            "diffrax.TextProgressMeter() or diffrax.TqdmProgressMeter() (which draws its own tqdm bar; a tqdm "
            f"bar itself is not one), got {type(progress_meter).__name__} {progress_meter!r:.60}."
        )


def options_checked_first(fn):
    """``fn`` (a compiled entry point taking forward's options) checking ``progress_meter`` before its
    compiled call: the options are static arguments of the program, compared with those of earlier
    calls before anything inside runs, and an object that is not a progress meter may fail that
    comparison (a tqdm bar compared with a diffrax meter raises inside equinox)."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if "progress_meter" in kwargs:
            check_progress_meter(kwargs["progress_meter"])
        return fn(*args, **kwargs)

    return call


def saved(sol: FlowSolution, saveat: SaveAt, num_layers: int, steps: int, fixed: bool) -> FlowSolution:
    """``sol`` (saved on ``saveat``'s grid, :meth:`SaveAt.grid`) reduced to what ``saveat`` asks
    for: the depths of ``ts``, then ``fn`` of each saved state in ``ys``."""
    _, index = saveat.grid(num_layers, steps, fixed)
    if index is not None:
        at = jnp.asarray(index)
        take = lambda tree: jax.tree.map(lambda a: a[at], tree)  # noqa: E731
        sol = dataclasses.replace(sol, ts=take(sol.ts), xs=take(sol.xs), contexts=take(sol.contexts))
    if saveat.fn is not None:
        ys = jax.vmap(saveat.fn)(sol.ts, sol.xs, sol.contexts)
        sol = dataclasses.replace(sol, xs=None, contexts=None, ys=ys)
    return sol


__all__ = ["Ctx", "Emit", "FlowSolution", "FlowSpec", "SaveAt", "fixed_controller", "saved"]
