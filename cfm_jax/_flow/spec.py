"""The options and the result of a forward solve: ``SaveAt``, the validated ``FlowSpec`` and the
one ``FlowSolution`` type (for an empirical and a Gaussian context alike).

Whether the steps are fixed, and whether they are the exact residual network (explicit Euler with
fixed steps), is decided once: :func:`flow_spec` brings the step-size controller to a normal form
(None for fixed steps) and :attr:`FlowSpec.fixed` / :attr:`FlowSpec.can_fail` /
:attr:`FlowSpec.exact_euler` are what every other part of the solve (the loop, the default adjoint,
the hand adjoints, ``SaveAt(steps=True)``, the token adjoint) reads.
"""

from __future__ import annotations

from typing import Generic, Literal, TypeVar

import diffrax
import equinox as eqx
from jaxtyping import Array

from .._measures import EmpiricalMeasure, GaussianMeasure
from .._paths import AbstractCFM
from .._validation import static_int

Emit = Literal["none", "ends", "steps"]
"""What the loop returns per layer: nothing, the state at the layer's end, or after every step."""

Ctx = TypeVar("Ctx", EmpiricalMeasure, GaussianMeasure)
"""The kind of context a solution carries."""


class SaveAt(eqx.Module):
    """What :func:`cfm_jax.forward` returns besides the final state.

    ``SaveAt()`` – only ``x1`` and ``context``; ``SaveAt(layers=True)`` – the states at every
    layer boundary s = l/L (L + 1 depths); ``SaveAt(steps=True)`` – the states after every solver
    step (fixed-step solves only; ``L·k + 1`` depths).
    """

    layers: bool = eqx.field(static=True, default=False)
    steps: bool = eqx.field(static=True, default=False)

    @property
    def emit(self) -> Emit:
        """What the loop must return per layer for these outputs."""
        return "steps" if self.steps else "ends" if self.layers else "none"


class FlowSolution(eqx.Module, Generic[Ctx]):
    """Result of :func:`cfm_jax.forward`, for an empirical and a Gaussian context alike.

    Attributes:
        x1: final target tokens, shaped like ``x0`` (``(d,)`` or ``(B, d)``).
        context: the final context: an [`EmpiricalMeasure`][cfm_jax.EmpiricalMeasure] (points
            ``(n, d)``, the weights unchanged by the flow) or a
            [`GaussianMeasure`][cfm_jax.GaussianMeasure], like the initial one.
        ss: depths of the saved states ``(S,)``, or None.
        xs: token trajectory ``(S,) + x0.shape``, or None.
        contexts: the context trajectory, the same kind of measure with a leading ``S`` axis on
            every array (``points (S, n, d)`` and ``weights (S, n)``, or ``mean (S, d)`` and
            ``cov (S, d, d)``), or None.
        result: a ``diffrax.RESULTS``: ``diffrax.RESULTS.successful``, or why an (adaptive) solve
            stopped, e.g. ``max_steps_reached``. With ``throw=True`` (the default) a failure raises
            instead; with ``throw=False`` it is reported here.
        stats: ``{"num_steps", "num_accepted_steps", "num_rejected_steps", "max_steps"}``: solver
            steps over all layers (``num_steps`` = accepted + rejected; ``L·k`` for fixed steps) and
            the cap per layer.
    """

    x1: Array
    context: Ctx
    ss: Array | None = None
    xs: Array | None = None
    contexts: Ctx | None = None
    result: diffrax.RESULTS = eqx.field(default_factory=lambda: diffrax.RESULTS.successful)
    stats: dict[str, Array] = eqx.field(default_factory=dict)


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
    (:func:`flow_spec`). ``steps`` is the total number of (initial) steps, a multiple of L.

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


def flow_spec(
    model: AbstractCFM,
    *,
    solver,
    steps,
    stepsize_controller,
    saveat,
    max_steps,
    progress_meter,
) -> FlowSpec:
    """Validate the integration options of :func:`cfm_jax.forward` (its docstring): ``ValueError``
    naming the argument, at trace time."""
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
    if saveat.steps and controller is not None:
        raise ValueError("`saveat`=SaveAt(steps=True) needs fixed steps; use SaveAt(layers=True) with adaptive solves.")
    if not isinstance(progress_meter, diffrax.AbstractProgressMeter):
        raise ValueError(
            "`progress_meter` must be a diffrax progress meter (e.g. diffrax.TextProgressMeter()), "
            f"got {progress_meter!r}."
        )
    return FlowSpec(solver, controller, saveat, steps, max_steps, progress_meter)


__all__ = ["Ctx", "Emit", "FlowSolution", "FlowSpec", "SaveAt", "fixed_controller", "flow_spec"]
