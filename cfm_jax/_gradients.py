"""Conveniences on top of ``forward(adjoint=...)``: loss gradients and adjoint trajectories.

    loss, grads = cfm_jax.loss_and_grad(model, x0, context, y)        # = eqx.filter_value_and_grad
    sol = cfm_jax.adjoint_trajectories(model, x0, context, y, probes=grid)   # p_s, a_i(s), ∇φ_s, φ_s

Any scalar function of :func:`cfm_jax.forward`'s outputs can be differentiated directly with
``jax.grad``; [`loss_and_grad`][cfm_jax.loss_and_grad] is the common case of a loss of the final tokens.
``grads`` has the model's type and holds the per-layer partials ∂L/∂θ_l;
:func:`functional_gradient` turns them into the L²([0, 1]) gradient δL/δθ(s) = L·∂L/∂θ_l
(docs/theory.md §2).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from ._adjoint import AbstractHandAdjoint, DiscreteAdjoint, probe_rows
from ._flow import FlowSolution
from ._paths import AbstractCFM
from ._solve import forward, prepare
from ._validation import finite


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


def _check_loss(loss, x0, y, throw: bool = True):
    if loss is not None and not callable(loss):
        raise ValueError(f"`loss` must be None or a callable loss(x1, y) -> scalar, got {loss!r}.")
    if loss is None:
        y = jnp.asarray(y)
        if y.shape != jnp.shape(x0):
            raise ValueError(f"`y` must have the shape of `x0` {jnp.shape(x0)} for the default loss, got {y.shape}.")
        y = finite("y", y) if throw else y
    return mean_squared_loss if loss is None else loss, y


@eqx.filter_jit
def loss_and_grad(model: AbstractCFM, x0, context, y, *, loss: Callable | None = None, throw: bool = True, **options):
    """Loss of the final tokens and its gradient with respect to the model's parameters; compiled.

    Exactly ``eqx.filter_value_and_grad(lambda m: loss(forward(m, x0, context, **options).x1, y))``;
    ``options`` are [`forward`][cfm_jax.forward]'s (default: the exact hand adjoint of Euler);
    ``throw`` as there (also for ``y``).
    ``loss(x1, y) -> scalar`` defaults to ½‖x_1 − y‖² averaged over the batch. Returns
    ``(loss, grads)``, ``grads`` model-shaped (∂L/∂θ_l per layer).
    """
    loss, y = _check_loss(loss, x0, y, throw)
    return eqx.filter_value_and_grad(lambda m: loss(forward(m, x0, context, throw=throw, **options).x1, y))(model)


def value_and_grad(model: AbstractCFM, x0, context, y, **kwargs):
    """Deprecated name of [`loss_and_grad`][cfm_jax.loss_and_grad] (it shadowed ``jax.value_and_grad``)."""
    warnings.warn(
        "cfm_jax.value_and_grad is deprecated: use cfm_jax.loss_and_grad (same arguments).",
        DeprecationWarning,
        stacklevel=2,
    )
    return loss_and_grad(model, x0, context, y, **kwargs)


def functional_gradient(model: AbstractCFM, grads: AbstractCFM) -> AbstractCFM:
    """δL/δθ(s) in L²([0, 1]): L·∂L/∂θ_l on layer l (piecewise-constant paths), model-shaped."""
    if not isinstance(model, AbstractCFM):
        raise ValueError(f"`model` must be a cfm_jax model (AbstractCFM), got {type(model).__name__}.")
    if not model.piecewise_constant:
        raise ValueError("functional_gradient is defined for piecewise-constant paths (L·∂L/∂θ_l per layer).")
    L = model.num_layers
    return jax.tree.map(lambda g: L * g, grads)


@eqx.filter_jit
def _trajectories(model, x0, context, y, probes, *, loss, options):
    p = prepare(model, x0, context, **options)
    adjoint, spec, x, w = p.adjoint, p.spec, p.x, p.w
    if not isinstance(adjoint, AbstractHandAdjoint):
        raise ValueError(
            f"`adjoint` must be a hand adjoint (DiscreteAdjoint() or ContinuousAdjoint(...)), got {adjoint!r}."
        )
    stride = adjoint.probe_stride(p.model, spec)
    zeta, start = probe_rows(
        None if probes is None else probes.astype(x.dtype), stride, spec.steps // stride + 1, x.shape[1], x.dtype
    )
    y0 = (x, p.z, zeta)
    sol, residuals = adjoint.run_forward(p.model, y0, w, spec, store=True, start=start)
    value, ct_x1 = jax.value_and_grad(lambda xx: loss(xx[0] if p.single else xx, y))(sol.x1)
    cotangents = FlowSolution(x1=ct_x1, z1=jnp.zeros_like(sol.z1), weights=jnp.zeros_like(sol.weights))
    res = adjoint.run_backward(p.model, y0, w, spec, residuals, cotangents, start=start, trajectories=True)
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
    throw: bool = True,
    **options,
) -> AdjointSolution:
    """States, token covector p_s, particle adjoints a_i(s) and probe gradients ∇φ_s(probes).

    ``adjoint`` is a hand adjoint: ``DiscreteAdjoint()`` (default; saved at every Euler step)
    or ``ContinuousAdjoint(...)`` (saved at layer boundaries; ``memory=StoreEvery(1)``), with any
    memory policy; ``options`` are [`forward`][cfm_jax.forward]'s other options (``saveat`` excepted;
    ``throw`` also covers ``y`` and ``probes``).
    The loss is ``loss(x1, y)``. ``probes: (P, d)`` are fixed points: ``probe_grads[k, j]`` is
    ∇φ_{ss[k]}(probes[j]), obtained from a passive characteristic started at (ss[k], probes[j]).
    Cost: every probe adds S characteristics (one per saved depth) to the adjoint.
    """
    adjoint = DiscreteAdjoint() if adjoint is None else adjoint
    if not isinstance(adjoint, AbstractHandAdjoint):
        raise ValueError(
            f"`adjoint` must be a hand adjoint (DiscreteAdjoint() or ContinuousAdjoint(...)), got {adjoint!r}."
        )
    if "saveat" in options:
        raise ValueError("`saveat` does not apply: adjoint_trajectories saves every depth it returns.")
    loss, y = _check_loss(loss, x0, y, throw)
    if probes is not None:
        probes = jnp.asarray(probes)
        d = model.dim if isinstance(model, AbstractCFM) else None
        if probes.ndim != 2 or probes.shape[-1] != d or probes.shape[0] < 1:
            raise ValueError(f"`probes` must have shape (P, d) with P >= 1 and d = {d}, got {probes.shape}.")
        probes = finite("probes", probes) if throw else probes
    value, res = _trajectories(
        model, x0, context, y, probes, loss=loss, options=dict(options, adjoint=adjoint, throw=throw)
    )
    assert res.traj is not None
    ss, xs, zs, ps, a = res.traj
    if jnp.ndim(x0) == 1:
        xs, ps = xs[:, 0], ps[:, 0]
    fgrads = functional_gradient(model, res.grads) if model.piecewise_constant else res.grads
    return AdjointSolution(
        ss=ss,
        xs=xs,
        zs=zs,
        ps=ps,
        a=a,
        probe_grads=res.probe_grads,
        probe_values=res.probe_values,
        weight_grads=res.weights,
        functional_grads=fgrads,
        grads=res.grads,
        loss=value,
    )


def probe_gradients(model, x0, context, y, probes, **kwargs):
    """``(ss, ∇φ_s(probes) (S, P, d), φ_s(probes) (S, P))`` via :func:`adjoint_trajectories`."""
    sol = adjoint_trajectories(model, x0, context, y, probes=probes, **kwargs)
    return sol.ss, sol.probe_grads, sol.probe_values


__all__ = [
    "AdjointSolution",
    "adjoint_trajectories",
    "functional_gradient",
    "loss_and_grad",
    "mean_squared_loss",
    "probe_gradients",
    "value_and_grad",
]
