"""Public gradient API: loss and ∂L/∂θ by the hand adjoint (discrete or continuous) or autodiff.

    loss, grads = cfm_jax.value_and_grad(model, x0, context, y)              # discrete adjoint
    loss, grads = cfm_jax.value_and_grad(..., method="continuous_adjoint", solver=diffrax.Bosh3())
    loss, grads = cfm_jax.value_and_grad(..., method="autodiff", adjoint=diffrax.RecursiveCheckpointAdjoint())
    sol = cfm_jax.adjoint_trajectories(model, x0, context, y, probes=grid)  # p_s, a_i(s), ∇φ_s(grid)

``grads`` has the model's type (``grads.Q``, ``grads.W1``, …; None where the model has None) and
holds the per-layer partials ∂L/∂θ_l; :func:`functional_gradient` turns them into the L²([0,1])
gradient δL/δθ(s) = L·∂L/∂θ_l (SPEC §2).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from ._validation import check_finite
from .adjoint.continuous import continuous_adjoint
from .adjoint.discrete import euler_adjoint, segment_length
from .flow import forward
from .measures import as_measure
from .paths import AbstractCFM

METHODS = ("discrete_adjoint", "continuous_adjoint", "autodiff")


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
        probe_values: ``(S, P)`` φ_{ss[k]}(probes[j]), or None.
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
    functional_grads: AbstractCFM
    grads: AbstractCFM
    loss: Array


def _default_loss(x1, y):
    """½‖x_1 − y‖², averaged over the batch when x1 is ``(B, d)``."""
    sq = 0.5 * jnp.sum((x1 - y) ** 2)
    return sq / x1.shape[0] if x1.ndim == 2 else sq


def _validate(model, x0, context, y, method, loss, steps, probes):
    if not isinstance(model, AbstractCFM):
        raise ValueError(f"`model` must be a cfm_jax model (AbstractCFM), got {type(model).__name__}.")
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {METHODS}, got {method!r}.")
    if loss is not None and not callable(loss):
        raise ValueError(f"`loss` must be None or a callable loss(x1, y) -> scalar, got {loss!r}.")
    context = as_measure(context)
    x0 = jnp.asarray(x0)
    d = model.dim
    if x0.ndim not in (1, 2) or x0.shape[-1] != d:
        raise ValueError(f"`x0` must have shape (d,) or (B, d) with d = {d}, got {x0.shape}.")
    if not jnp.issubdtype(x0.dtype, jnp.floating):
        raise ValueError(f"`x0` must be a floating array, got dtype {x0.dtype}.")
    if context.dim != d:
        raise ValueError(f"`context` has dimension {context.dim} but the model has d = {d}.")
    check_finite("x0", x0)
    if loss is None:
        y = jnp.asarray(y)
        if y.shape != x0.shape:
            raise ValueError(f"`y` must have the shape of `x0` {x0.shape} for the default loss, got {y.shape}.")
        check_finite("y", y)
    L = model.num_layers
    steps = L if steps is None else steps
    if isinstance(steps, numbers.Integral) and not isinstance(steps, bool):
        steps = int(steps)
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"`steps` must be a positive int, got {steps!r}.")
    if model.piecewise_constant and steps % L:
        raise ValueError(f"`steps`={steps} must be a multiple of the number of layers L={L}.")
    if probes is not None:
        probes = jnp.asarray(probes)
        if probes.ndim != 2 or probes.shape[-1] != d or probes.shape[0] < 1:
            raise ValueError(f"`probes` must have shape (P, d) with P >= 1 and d = {d}, got {probes.shape}.")
        check_finite("probes", probes)
    return x0, context, y, steps, probes


def _check_method_options(method, solver, stepsize_controller, adjoint, checkpoint):
    if method == "discrete_adjoint":
        if solver is not None and type(solver) is not diffrax.Euler:
            raise ValueError(
                "method='discrete_adjoint' is the exact adjoint of explicit Euler; `solver` must be None or "
                f"diffrax.Euler(), got {type(solver).__name__} (use method='continuous_adjoint')."
            )
        if stepsize_controller is not None and not isinstance(stepsize_controller, diffrax.ConstantStepSize):
            raise ValueError("method='discrete_adjoint' needs fixed steps; `stepsize_controller` must be None.")
    if adjoint is not None and method != "autodiff":
        raise ValueError("`adjoint` (a diffrax adjoint) applies only to method='autodiff'.")
    if adjoint is not None and not isinstance(adjoint, diffrax.AbstractAdjoint):
        raise ValueError(f"`adjoint` must be a diffrax.AbstractAdjoint, got {adjoint!r}.")
    if isinstance(adjoint, diffrax.BacksolveAdjoint):
        raise ValueError(
            "`adjoint`=diffrax.BacksolveAdjoint() does not apply: the forward solves one ODE per layer inside a "
            "lax.scan and each solve closes over that layer's traced parameters, which BacksolveAdjoint cannot "
            "differentiate. Use RecursiveCheckpointAdjoint() or DirectAdjoint(), or the hand-written backsolve: "
            "method='continuous_adjoint', checkpoint='recompute'."
        )
    if solver is not None and not isinstance(solver, diffrax.AbstractSolver):
        raise ValueError(f"`solver` must be a diffrax solver, got {solver!r}.")
    if method == "continuous_adjoint" and checkpoint not in (None, "steps", "layers", "recompute", "backsolve"):
        raise ValueError(
            f"`checkpoint` for method='continuous_adjoint' must be None, 'layers' or 'recompute', got {checkpoint!r}."
        )


def _cot_fn(loss, y, single):
    def cot(x1):  # x1: (B, d) -> ∇ℓ, (B, d)
        g = jax.grad(lambda xx: loss(xx[0] if single else xx, y))(x1)
        return g

    return cot


@eqx.filter_jit
def _hand_adjoint(model, x0, points, weights, y, probes, *, method, loss, solver, steps, controller, checkpoint,
                  trajectories, closed_form, chunk_size, max_steps):
    single = x0.ndim == 1
    dtype = jnp.result_type(x0, points, *jax.tree.leaves(model.stacked_params()))
    x = jnp.atleast_2d(x0).astype(dtype)
    z, w = points.astype(dtype), weights.astype(dtype)
    cot = _cot_fn(loss, y, single)
    common = dict(probes=probes, trajectories=trajectories, closed_form=closed_form, chunk_size=chunk_size)
    if method == "discrete_adjoint":
        res = euler_adjoint(model, x, z, w, cot, steps=steps, checkpoint=checkpoint, **common)
    else:
        res = continuous_adjoint(
            model, x, z, w, cot, solver=solver, steps=steps, stepsize_controller=controller,
            checkpoint=checkpoint, max_steps=max_steps, **common,
        )
    x1 = res.x1[0] if single else res.x1
    return loss(x1, y), res


@eqx.filter_jit
def _autodiff(model, x0, context, y, *, loss, solver, steps, controller, adjoint, max_steps):
    def objective(m):
        sol = forward(m, x0, context, solver=solver, steps=steps, stepsize_controller=controller,
                      adjoint=adjoint, max_steps=max_steps)
        return loss(sol.x1, y)

    return eqx.filter_value_and_grad(objective)(model)


def value_and_grad(
    model: AbstractCFM,
    x0,
    context,
    y,
    *,
    method: str = "discrete_adjoint",
    loss: Callable | None = None,
    solver: diffrax.AbstractSolver | None = None,
    steps: int | None = None,
    adjoint: diffrax.AbstractAdjoint | None = None,
    checkpoint=None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    closed_form: bool = True,
    chunk_size="field",
    max_steps: int = 4096,
):
    """Loss and its gradient with respect to the model's parameters.

    Args:
        model: a :class:`~cfm_jax.Transformer` or any :class:`~cfm_jax.paths.AbstractCFM`.
        x0: ``(d,)`` or ``(B, d)`` target tokens; context: measure or ``(n, d)`` array.
        y: targets for the loss (the shape of ``x0`` for the default loss).
        method: ``"discrete_adjoint"`` (exact hand adjoint of explicit Euler; default),
            ``"continuous_adjoint"`` (hand adjoint ODE integrated backward with ``solver``) or
            ``"autodiff"`` (reverse mode through the diffrax solve with ``adjoint``).
        loss: ``loss(x1, y) -> scalar``; default ½‖x_1 − y‖² averaged over the batch.
        solver: diffrax solver (default Euler; must be Euler for the discrete adjoint).
        steps: total steps over [0, 1] (default one per layer; a multiple of L).
        adjoint: diffrax adjoint for ``"autodiff"`` (default ``RecursiveCheckpointAdjoint()``).
        checkpoint: memory mode of the hand adjoints: None (store every state), ``"layers"``,
            an int c (store every c-th layer, discrete only) or ``"recompute"`` (memory
            independent of L; discrete: O(L²) recomputation, continuous: backsolve).
        stepsize_controller: e.g. ``diffrax.PIDController`` (continuous adjoint / autodiff).
        closed_form: hand-written local products for the built-in fields (False: ``jax.vjp``).
        chunk_size: attention query-block size of the hand adjoint (``"field"``: the model's).

    Returns:
        ``(loss, grads)`` with ``grads`` model-shaped (∂L/∂θ_l per layer).
    """
    x0, context, y, steps, _ = _validate(model, x0, context, y, method, loss, steps, None)
    _check_method_options(method, solver, stepsize_controller, adjoint, checkpoint)
    loss = _default_loss if loss is None else loss
    if method == "autodiff":
        adjoint = diffrax.RecursiveCheckpointAdjoint() if adjoint is None else adjoint
        return _autodiff(model, x0, context, y, loss=loss, solver=solver, steps=steps,
                         controller=stepsize_controller, adjoint=adjoint, max_steps=max_steps)
    if method == "discrete_adjoint":
        segment_length(checkpoint, model.num_layers, steps // model.num_layers if model.piecewise_constant else 1)
    value, res = _hand_adjoint(
        model, x0, context.points, context.weights, y, None, method=method, loss=loss, solver=solver, steps=steps,
        controller=stepsize_controller, checkpoint=checkpoint, trajectories=False, closed_form=closed_form,
        chunk_size=chunk_size, max_steps=max_steps,
    )
    return value, res.grads


def functional_gradient(model: AbstractCFM, grads: AbstractCFM) -> AbstractCFM:
    """δL/δθ(s) in L²([0, 1]): L·∂L/∂θ_l on layer l (piecewise-constant paths), model-shaped."""
    if not isinstance(model, AbstractCFM):
        raise ValueError(f"`model` must be a cfm_jax model (AbstractCFM), got {type(model).__name__}.")
    if not model.piecewise_constant:
        raise ValueError("functional_gradient is defined for piecewise-constant paths (L·∂L/∂θ_l per layer).")
    L = model.num_layers
    return jax.tree.map(lambda g: L * g, grads)


def adjoint_trajectories(
    model: AbstractCFM,
    x0,
    context,
    y,
    *,
    method: str = "discrete_adjoint",
    loss: Callable | None = None,
    probes=None,
    steps: int | None = None,
    solver: diffrax.AbstractSolver | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    closed_form: bool = True,
    chunk_size="field",
    max_steps: int = 4096,
) -> AdjointSolution:
    """States, token covector p_s, particle adjoints a_i(s) and probe gradients ∇φ_s(probes).

    ``method`` is ``"discrete_adjoint"`` (saved at every Euler step) or ``"continuous_adjoint"``
    (saved at layer boundaries). ``probes: (P, d)`` are fixed points: ``probe_grads[k, j]`` is
    ∇φ_{ss[k]}(probes[j]), obtained from a passive characteristic started at (ss[k], probes[j]).
    Cost: every probe adds S characteristics (one per saved depth) to the adjoint.
    """
    if method == "autodiff":
        raise ValueError("adjoint_trajectories needs a hand adjoint: method='discrete_adjoint' or 'continuous_adjoint'.")
    x0, context, y, steps, probes = _validate(model, x0, context, y, method, loss, steps, probes)
    _check_method_options(method, solver, stepsize_controller, None, None)
    loss = _default_loss if loss is None else loss
    value, res = _hand_adjoint(
        model, x0, context.points, context.weights, y, probes, method=method, loss=loss, solver=solver, steps=steps,
        controller=stepsize_controller, checkpoint=None, trajectories=True, closed_form=closed_form,
        chunk_size=chunk_size, max_steps=max_steps,
    )
    ss, xs, zs, ps, a = res.traj
    if x0.ndim == 1:
        xs, ps = xs[:, 0], ps[:, 0]
    fgrads = functional_gradient(model, res.grads) if model.piecewise_constant else res.grads
    return AdjointSolution(
        ss=ss, xs=xs, zs=zs, ps=ps, a=a, probe_grads=res.probe_grads, probe_values=res.probe_values,
        functional_grads=fgrads, grads=res.grads, loss=value,
    )


__all__ = ["METHODS", "AdjointSolution", "adjoint_trajectories", "functional_gradient", "value_and_grad"]
