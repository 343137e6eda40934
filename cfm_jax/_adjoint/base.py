"""The strategies of ``forward(adjoint=...)``: one hook, and the hand adjoints attached through it.

Every strategy is an :class:`AbstractStrategy` whose ``solve`` runs the one forward loop of
``cfm_jax._flow`` and decides how it is differentiated, as diffrax's ``AbstractAdjoint.loop`` does
for ``diffeqsolve``: :class:`Autodiff` lets JAX differentiate the loop (with a diffrax adjoint on each
layer's ``diffeqsolve``, or the plain loop), and a hand adjoint (:class:`AbstractHandAdjoint`) wraps
it in a custom VJP. ``forward`` calls the hook and nothing else; a diffrax adjoint given by the user
becomes ``Autodiff(adjoint)`` once, where the arguments are checked (:func:`as_strategy`).

A hand adjoint provides a forward pass that keeps what its backward
sweep needs (``run_forward``) and the backward sweep itself (``run_backward``), which takes the
cotangents of *every* output of the solve — final tokens x1, final context z1, weights, saved
trajectories — and returns the gradients with respect to *every* input: the model, x0, z0 and
the weights w. Its ``solve`` (the hook) wires the two together with ``eqx.filter_custom_vjp``, so
``jax.grad``, ``jax.vjp``, ``eqx.filter_grad``, ``jax.jit`` and ``jax.vmap`` all run the hand
adjoint.

Internally the context adjoint is carried as b_j = ∂L/∂z_j (the autodiff convention); the
test-field gradient of docs/theory.md §2 is a_j = ∇φ_s(z_j) = b_j / w_j, and the weight
gradient accumulates ∂L/∂w_j = φ_0(z_j) itself (centred: Σ_j w_j ∂L/∂w_j = 0 for softmax
attention, which is invariant to scaling all weights), never dividing by w_j: at a zero weight it
is the finite one-sided derivative (the fields' ``dw``, docs/gradients.md), as autodiff's.
"""

from __future__ import annotations

import abc
from typing import Any, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from .._arguments import check_solved
from .._fields import LocalVJP
from .._flow import AbstractCarriedContext, EmpiricalContext, FlowSolution, FlowSpec, loop, solution, with_progress
from .._measures import EmpiricalMeasure
from .._paths import AbstractCFM
from .memory import AbstractMemory


class Cotangents(NamedTuple):
    """The cotangents of a solve's outputs that a backward sweep reads (None: zero).

    ``x1 (B, d)``, ``z1 (n, d)``, ``weights (n,)`` (the final context's and the saved contexts'
    weights together), ``xs (S, B, d)`` and ``zs (S, n, d)`` (saved trajectories)."""

    x1: Array | None = None
    z1: Array | None = None
    weights: Array | None = None
    xs: Array | None = None
    zs: Array | None = None


def cotangents_of(ct: FlowSolution[EmpiricalMeasure]) -> Cotangents:
    """The :class:`Cotangents` of an empirical-context solution's cotangent (weights summed over depths)."""
    final, saved = ct.context, ct.contexts
    z1, w1 = (None, None) if final is None else (final.points, final.weights)
    zs, ws = (None, None) if saved is None else (saved.points, saved.weights)
    weights = w1 if ws is None else (ws.sum(0) if w1 is None else w1 + ws.sum(0))
    return Cotangents(ct.x1, z1, weights, ct.xs, zs)


class AbstractStrategy(eqx.Module):
    """How :func:`cfm_jax.forward` differentiates its one loop: the hook every strategy implements,
    and whether forward-mode autodiff (``jax.jvp``, ``jax.jacfwd``) runs through it."""

    @property
    @abc.abstractmethod
    def forward_mode(self) -> bool:
        """Whether forward-mode autodiff runs through the solve (a custom_vjp does not)."""

    @abc.abstractmethod
    def validate(self, model: AbstractCFM, context: AbstractCarriedContext, spec: FlowSpec) -> None:
        """Raise a ``ValueError`` naming the argument if the strategy does not apply."""

    @abc.abstractmethod
    def solve(self, model: AbstractCFM, context: AbstractCarriedContext, y0: tuple, spec: FlowSpec) -> FlowSolution:
        """The solve from the state ``y0`` (tokens first, then the context's rows), differentiable."""


class Autodiff(AbstractStrategy):
    """JAX's autodiff through the loop: ``adjoint`` a diffrax adjoint differentiating each layer's
    ``diffeqsolve``, or None for the plain loop (fixed steps: a ``lax.scan`` of the solver's steps,
    which every JAX transformation, forward mode included, differentiates; adaptive steps:
    ``diffrax.RecursiveCheckpointAdjoint()``)."""

    adjoint: diffrax.AbstractAdjoint | None = None

    @property
    def forward_mode(self) -> bool:
        return self.adjoint is None or isinstance(self.adjoint, (diffrax.DirectAdjoint, diffrax.ForwardMode))

    def validate(self, model, context, spec):
        if isinstance(self.adjoint, diffrax.BacksolveAdjoint):
            raise ValueError(
                "`adjoint`=diffrax.BacksolveAdjoint() does not apply: the forward solves one ODE per layer inside a "
                "lax.scan and each solve closes over that layer's traced parameters, which BacksolveAdjoint cannot "
                "differentiate. Use ContinuousAdjoint(memory=Backsolve()) (the hand-written backsolve) or "
                "diffrax.RecursiveCheckpointAdjoint()."
            )

    def solve(self, model, context, y0, spec):
        emit = spec.saveat.emit
        context = context.ending(spec)  # autodiff differentiates whatever the loop takes
        out = with_progress(
            spec, lambda meter: loop(model, context, y0, spec, emit=emit, adjoint=self.adjoint, meter=meter)
        )
        return solution(model, context, y0, spec, out, emit)


#: the prefix of a failed backward solve's message (diffrax's own message follows)
BACKWARD_FAILED = "the adjoint's backward solve failed: "


class AdjointResult(NamedTuple):
    """Gradients of the backward sweep, plus optional trajectories and probe values.

    ``grads``: model-shaped ∂L/∂θ; ``x0``: ``(B, d)``; ``z0``: ``(n, d)`` (= w_j a_j(0));
    ``weights``: ``(n,)`` ∂L/∂w. ``traj``: ``(ss (S,), xs (S,B,d), zs (S,n,d), ps (S,B,d),
    a (S,n,d))`` with a the test-field gradients, or None. ``probe_grads (S, P, d)``,
    ``probe_values (S, P)`` or None. ``result``: the backward solve's outcome (``diffrax.RESULTS``)
    where it can fail (an adaptive or implicit backward solve), else None.
    """

    grads: AbstractCFM
    x0: Array
    z0: Array
    weights: Array
    traj: tuple | None = None
    probe_grads: Array | None = None
    probe_values: Array | None = None
    result: diffrax.RESULTS | None = None


class AbstractHandAdjoint(AbstractStrategy):
    """A hand-written adjoint of the forward solve, passed as ``forward(..., adjoint=...)``: its own
    forward of the one loop, keeping what its backward sweep needs, attached as a custom VJP."""

    memory: eqx.AbstractVar[AbstractMemory]

    @property
    def forward_mode(self) -> bool:
        return False  # a custom VJP

    @abc.abstractmethod
    def check_spec(self, model: AbstractCFM, spec: FlowSpec) -> None:
        """Raise a ``ValueError`` naming the argument if the strategy does not apply to these options."""

    def carried(self, weights: Array, spec: FlowSpec) -> EmpiricalContext:
        """The context its forward and backward carry: by default moved at every step (a backward that
        integrates back from the final state needs the final context, whatever the caller keeps)."""
        del spec
        return EmpiricalContext(weights)

    def validate(self, model, context, spec):
        if not isinstance(context, EmpiricalContext):
            raise ValueError(
                f"`adjoint`={type(self).__name__}() follows the atoms of an EmpiricalMeasure context; a "
                "GaussianMeasure context is differentiated by autodiff through the loop (leave `adjoint` out, "
                "or pass a diffrax adjoint)."
            )
        self.check_spec(model, spec)

    def solve(self, model, context, y0, spec):
        assert isinstance(context, EmpiricalContext)
        x, z = y0
        return _solve((model, x, z, context.weights), self, spec)

    @abc.abstractmethod
    def probe_stride(self, model: AbstractCFM, spec: FlowSpec) -> int:
        """Steps between the depths at which probes start (and trajectories are saved)."""

    @abc.abstractmethod
    def run_forward(
        self, model: AbstractCFM, context: AbstractCarriedContext, y0: tuple, spec: FlowSpec, *, store: bool
    ) -> tuple[FlowSolution, Any]:
        """The forward loop (the one loop of ``_flow.loop``), keeping what the backward sweep needs.

        ``y0 = (x (B, d), z (n, d), ζ (R, d))`` with probe rows started at steps ``context.start (R,)``.
        Returns ``(FlowSolution, residuals)`` (residuals None unless ``store``).
        """

    @abc.abstractmethod
    def run_backward(
        self,
        model: AbstractCFM,
        context: AbstractCarriedContext,
        y0: tuple,
        spec: FlowSpec,
        residuals,
        cotangents: Cotangents,
        *,
        trajectories: bool = False,
    ) -> AdjointResult:
        """Backward sweep from the output cotangents (None entries are zero)."""


def probe_rows(probes, stride: int, depths: int, d: int, dtype):
    """Probe characteristics started at steps ``0, stride, …, (depths − 1)·stride``: row r = i·P + j
    starts at probes[j]. Returns ``ζ (R, d)`` and ``start (R,)`` (empty without probes)."""
    if probes is None:
        return jnp.zeros((0, d), dtype), jnp.zeros((0,), jnp.int32)
    P = probes.shape[0]
    return jnp.tile(probes.astype(dtype), (depths, 1)), jnp.repeat(stride * jnp.arange(depths), P)


def system_vjp(field, params, x, z, w, probes, p, b, b_probes) -> LocalVJP:
    """Local products of the stacked rows ``[x; z; probes]`` with cotangents ``[p; b; b_probes]``.

    Targets and context rows act on μ and θ; probe rows (passive, zero-mass characteristics)
    do not, but receive the measure term and the φ increment at their own positions.
    """
    R = probes.shape[0]
    active = None
    if R:
        active = jnp.concatenate([jnp.ones((x.shape[0] + z.shape[0],), z.dtype), jnp.zeros((R,), z.dtype)])
    return field.local_vjp(
        jnp.concatenate([x, z, probes], 0),
        EmpiricalMeasure.unchecked(z, w),
        params,
        jnp.concatenate([p, b, b_probes], 0),
        active=active,
        targets=probes if R else None,
    )


def model_grads(model: AbstractCFM, per_step: dict, k: int, N: int, dtype) -> AbstractCFM:
    """Map per-step θ cotangents ``(N, ...)`` to a model-shaped gradient (the path's own chain rule)."""
    if model.piecewise_constant:
        per_layer = jax.tree.map(lambda g: g.reshape((N // k, k) + g.shape[1:]).sum(1), per_step)
        stacked, pull = eqx.filter_vjp(lambda m: m.stacked_params(), model)
        # the solve may run in a wider dtype than the parameters (e.g. float64 tokens)
        return pull(jax.tree.map(lambda g, p: g.astype(p.dtype), per_layer, stacked))[0]
    idx = jnp.arange(N)
    path, pull = eqx.filter_vjp(lambda m: jax.vmap(lambda i: m.params_at(i.astype(dtype) / N))(idx), model)
    return pull(jax.tree.map(lambda g, p: g.astype(p.dtype), per_step, path))[0]


def step_params(model: AbstractCFM, i, k: int, N: int, dtype):
    """θ used by Euler step ``i`` (as in the forward loop): segment ⌊i/k⌋ at depth i/N."""
    return model.segment_params(i // k, i.astype(dtype) / N)


def cotangent_or_zero(ct, like):
    """An output cotangent in the state's dtype, zeros for an output nobody differentiated (None)."""
    return jnp.zeros_like(like) if ct is None else ct.astype(like.dtype)


def weight_gradient(dw, ct_weights):
    """∂L/∂w: the accumulated ∂L/∂w (finite at zero weights too) plus the direct cotangent."""
    return dw if ct_weights is None else dw + ct_weights


def finish(grads, p0, b0, dw, cotangents, traj, probe_adjoints, probe_phi, depths: int, d: int) -> AdjointResult:
    """Assemble an :class:`AdjointResult`: the weight gradient, and probe rows reshaped to ``(S, P, ...)``."""
    probe_grads = probe_values = None
    if probe_adjoints.shape[0]:
        probe_grads = probe_adjoints.reshape(depths, -1, d)
        probe_values = probe_phi.reshape(depths, -1)
    return AdjointResult(grads, p0, b0, weight_gradient(dw, cotangents.weights), traj, probe_grads, probe_values)


def _inexact_like(grads, tree):
    """``grads`` restricted to the inexact-array leaves of ``tree`` (None elsewhere), as custom_vjp wants."""
    return jax.tree.map(lambda g, t: g if eqx.is_inexact_array(t) else None, grads, tree, is_leaf=lambda x: x is None)


def _check_only_theta_is_perturbed(model, perturbed_model):
    """The hand adjoints differentiate θ (the path's stacked parameters), not arrays held elsewhere in
    the model (e.g. a W1ControlField's target measure): refuse to return a silent zero for those."""
    theta = {id(a) for a in jax.tree.leaves(model.stacked_params())}
    other = [a for a, p in zip(jax.tree.leaves(model), jax.tree.leaves(perturbed_model)) if p and id(a) not in theta]
    if other:
        raise ValueError(
            f"the model holds {len(other)} differentiated array(s) outside its parameters θ (e.g. inside its field); "
            "the hand adjoints compute gradients in θ, x0 and the context only. Use forward(..., "
            "adjoint=diffrax.RecursiveCheckpointAdjoint()) for gradients in those arrays, or differentiate only θ "
            "(eqx.partition the model, or jax.lax.stop_gradient the field's arrays)."
        )


def _state(x, z):
    return x, z, jnp.zeros((0, x.shape[1]), x.dtype)


@eqx.filter_custom_vjp
def _solve(inputs, adjoint, spec):
    model, x, z, w = inputs
    sol, _ = adjoint.run_forward(model, adjoint.carried(w, spec), _state(x, z), spec, store=False)
    return sol


@_solve.def_fwd
def _solve_fwd(perturbed, inputs, adjoint, spec):
    del perturbed
    model, x, z, w = inputs
    return adjoint.run_forward(model, adjoint.carried(w, spec), _state(x, z), spec, store=True)


@_solve.def_bwd
def _solve_bwd(residuals, cotangents, perturbed, inputs, adjoint, spec):
    model, x, z, w = inputs
    _check_only_theta_is_perturbed(model, perturbed[0])
    ct = cotangents_of(cotangents)
    res = adjoint.run_backward(model, adjoint.carried(w, spec), _state(x, z), spec, residuals, ct)
    grads = _inexact_like(res.grads, eqx.filter(model, eqx.is_inexact_array))
    out = grads, res.x0, res.z0, res.weights
    # a backward solve that failed (max_steps reached…) is raised with the gradients it would return
    return out if res.result is None else check_solved(out, res.result, BACKWARD_FAILED)


def as_strategy(adjoint) -> AbstractStrategy:
    """The strategy of ``forward(adjoint=...)``: a hand adjoint as it is, a diffrax adjoint as
    ``Autodiff(adjoint)``; ``ValueError`` naming ``adjoint`` otherwise."""
    if isinstance(adjoint, AbstractStrategy):
        return adjoint
    if isinstance(adjoint, diffrax.AbstractAdjoint):
        return Autodiff(adjoint)
    raise ValueError(
        "`adjoint` must be DiscreteAdjoint(), ContinuousAdjoint(...) or a diffrax adjoint such as "
        f"diffrax.RecursiveCheckpointAdjoint(), got {adjoint!r}."
    )


__all__ = [
    "AbstractHandAdjoint",
    "AbstractStrategy",
    "AdjointResult",
    "Autodiff",
    "Cotangents",
    "as_strategy",
    "cotangent_or_zero",
    "cotangents_of",
    "finish",
    "model_grads",
    "probe_rows",
    "step_params",
    "system_vjp",
    "weight_gradient",
]
