"""Conveniences on top of ``forward(adjoint=...)``: loss gradients and adjoint trajectories.

    loss, grads = cfm_jax.loss_and_grad(model, x0, context, y)        # = eqx.filter_value_and_grad
    sol = cfm_jax.adjoint_trajectories(model, x0, context, y, probes=grid)   # p_s, a_i(s), ∇φ_s, φ_s
    sol, ps = cfm_jax.token_adjoint(model, x0, context, y)            # p_s alone, any kind of context

The loss is ``loss(x1, y)``, by default :func:`mean_squared_loss` (the one written in the library).

Any scalar function of :func:`cfm_jax.forward`'s outputs can be differentiated directly with
``jax.grad``; [`loss_and_grad`][cfm_jax.loss_and_grad] is the common case of a loss of the final tokens.
``grads`` has the model's type and holds the per-layer partials $∂L/∂θ_l$;
:func:`functional_gradient` turns them into the $L^2([0, 1])$ gradient $δL/δθ(s) = L ∂L/∂θ_l$
(docs/theory.md §2).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._adjoint import AbstractHandAdjoint, Cotangents, DiscreteAdjoint, probe_rows
from ._arguments import as_array, finite
from ._deprecations import warn_renamed
from ._flow import EmpiricalContext, FlowSolution, FlowSpec, SaveAt, options_checked_first
from ._measures import EmpiricalMeasure, GaussianMeasure
from ._paths import AbstractCFM
from ._solve import check_solved, prepare, solve
from ._validation import compiled


class AdjointSolution(eqx.Module):
    r"""Adjoint trajectories from :func:`adjoint_trajectories`.

    Attributes:
        ts: ``(S,)`` depths of the saved states: every Euler step for the discrete adjoint
            (``S = steps + 1``), every layer boundary for the continuous one (``S = L + 1``). ``ss``,
            its former name, works for one release with a ``DeprecationWarning``.
        xs: ``(S,) + x0.shape`` target tokens $x_s$.
        contexts: the context trajectory, an [`EmpiricalMeasure`][cfm_jax.EmpiricalMeasure] with
            points ``(S, n, d)`` (the particles $z_i(s)$) and weights ``(S, n)``, as on
            [`FlowSolution`][cfm_jax.FlowSolution].
        ps: ``(S,) + x0.shape`` the token covector $p_s$ (contains the 1/B of the batch mean).
        a: ``(S, n, d)`` particle adjoints $a_i(s) = ∇φ_s(z_i(s))$; $∂L/∂z_i(0) = w_i a_i(0)$.
        probe_grads: ``(S, P, d)`` $∇φ_{s_k}(\mathrm{probes}_j)$ ($s_k$ = ``ts[k]``) at the fixed probe points, or None.
        probe_values: ``(S, P)`` $φ_{s_k}(\mathrm{probes}_j)$ (centred: $∫ φ_s dμ_s = 0$), or None.
        weight_grads: ``(n,)`` $∂L/∂w_j = φ_0(z_j)$ (the first variation in the initial measure).
        functional_grads: model-shaped $δL/δθ(s)$ (= $L ∂L/∂θ_l$ on layer l); for paths that are not
            piecewise constant (e.g. :class:`~cfm_jax.PiecewiseLinearCFM`) the plain node gradients.
        grads: model-shaped $∂L/∂θ_l$.
        loss: the scalar loss.
        result: the outcome of the solves (``diffrax.RESULTS``): the forward's failure if it failed,
            else the backward's (an adaptive ``ContinuousAdjoint``), else successful. With
            ``throw=True`` (default) a failure is raised instead; ``throw=False`` reports it here.
    """

    ts: Array
    xs: Array
    contexts: EmpiricalMeasure
    ps: Array
    a: Array
    probe_grads: Array | None
    probe_values: Array | None
    weight_grads: Array
    functional_grads: AbstractCFM
    grads: AbstractCFM
    loss: Array
    result: diffrax.RESULTS

    @property
    def ss(self) -> Array:
        """Deprecated: [`ts`][cfm_jax.AdjointSolution], the depths of the saved states."""
        warn_renamed("AdjointSolution", "ss", "ts")
        return self.ts


def mean_squared_loss(x1, y):
    """$½‖x_1 − y‖^2$, averaged over the batch when x1 is ``(B, d)`` (the default loss)."""
    if jnp.shape(y) != jnp.shape(x1):
        # broadcasting would silently average over a wrong pairing of tokens and targets
        raise ValueError(f"`y` must have the shape of `x1` {jnp.shape(x1)}, got {jnp.shape(y)}.")
    if jnp.ndim(x1) == 2 and jnp.shape(x1)[0] == 0:
        raise ValueError(f"`x1` has no tokens (shape {jnp.shape(x1)}): the batch mean of the loss is undefined.")
    sq = 0.5 * jnp.sum((x1 - y) ** 2)
    return sq / x1.shape[0] if x1.ndim == 2 else sq


def _check_loss(loss, x0, y, throw: bool = True):
    """``(loss, y)``: a callable loss (the default :func:`mean_squared_loss`) and ``y``, checked; for the
    default loss ``y`` must be real and have the shape of ``x0``; whatever the loss, with ``throw``,
    the floating entries of ``y`` (its array leaves) must be finite (inside jit too)."""
    if loss is not None and not callable(loss):
        raise ValueError(f"`loss` must be None or a callable loss(x1, y) -> scalar, got {loss!r}.")
    if loss is None:
        y = as_array("y", y)
        if jnp.iscomplexobj(y):  # the loss would be complex: jax.grad's error names no argument
            raise ValueError(f"`y` must be real for the default loss ½‖x1 − y‖², got dtype {y.dtype}.")
        if y.shape != jnp.shape(x0):
            raise ValueError(f"`y` must have the shape of `x0` {jnp.shape(x0)} for the default loss, got {y.shape}.")
        if y.ndim == 2 and y.shape[0] == 0:
            raise ValueError(
                f"`x0` and `y` hold no target tokens (shape {y.shape}): the default loss is their batch mean, "
                "undefined for B = 0."
            )
    if throw:  # a NaN target makes a NaN loss with any loss
        y = jax.tree.map(lambda a: finite("y", a) if eqx.is_inexact_array(a) else a, y)
    return mean_squared_loss if loss is None else loss, y


def _real_scalar_loss(value, y):
    """``value`` (the loss) if it is a real scalar, else a ``ValueError`` naming ``loss`` (and ``y`` when it
    is complex): ``jax.grad``'s own error ("grad requires real-valued outputs") names neither."""
    if jnp.ndim(value) != 0 or not jnp.issubdtype(jnp.result_type(value), jnp.floating):
        complex_y = any(jnp.iscomplexobj(a) for a in jax.tree.leaves(y) if eqx.is_array(a))
        hint = " (`y` is complex)" if complex_y else ""
        raise ValueError(
            f"`loss(x1, y)` must return a real scalar, got shape {jnp.shape(value)} and dtype "
            f"{jnp.result_type(value)}{hint}."
        )
    return value


@options_checked_first
@compiled
def loss_and_grad(model: AbstractCFM, x0, context, y, *, loss: Callable | None = None, throw: bool = True, **options):
    """Loss of the final tokens and its gradient with respect to the model's parameters; compiled.

    ``eqx.filter_value_and_grad(lambda m: loss(forward(m, x0, context, **options).x1, y))``;
    ``options`` are [`forward`][cfm_jax.forward]'s (default: the exact hand adjoint of Euler).
    ``throw`` as there (also for ``y``): ``True`` checks the inputs and raises if an adaptive solve
    fails (``max_steps`` reached); ``False`` leaves the checks out and, since the failure that
    ``forward`` would report in ``FlowSolution.result`` has nowhere to go here, returns a NaN loss
    and NaN gradients for a failed solve, never its numbers.
    ``loss(x1, y) -> real scalar`` defaults to [`mean_squared_loss`][cfm_jax.mean_squared_loss],
    $½‖x_1 − y‖^2$ averaged over the batch (the ½ included: half the mean squared error
    ``jnp.mean(jnp.sum((x1 - y) ** 2, -1))``); ``y`` is then real and shaped like ``x0``. Whatever the
    loss, ``y``'s floating entries are checked finite (with ``throw``). Returns ``(loss, grads)``,
    ``grads`` model-shaped ($∂L/∂θ_l$ per layer).
    """
    loss, y = _check_loss(loss, x0, y, throw)
    p = prepare(model, x0, context, throw=throw, **options)

    def value(m):
        sol = solve(p._replace(model=m), SaveAt(), throw=False)  # its failure is checked once, below
        return _real_scalar_loss(loss(sol.x1, y), y), sol.result

    (val, result), grads = eqx.filter_value_and_grad(value, has_aux=True)(p.model)
    if throw:
        val = check_solved(val, result)
    else:
        failed = result != diffrax.RESULTS.successful
        val = jnp.where(failed, jnp.nan, val)
        grads = jax.tree.map(lambda g: jnp.where(failed, jnp.nan, g) if eqx.is_inexact_array(g) else g, grads)
    return val, grads


def functional_gradient(model: AbstractCFM, grads: AbstractCFM) -> AbstractCFM:
    """$δL/δθ(s)$ in $L^2([0, 1])$: $L ∂L/∂θ_l$ on layer l (piecewise-constant paths), model-shaped."""
    if not isinstance(model, AbstractCFM):
        raise ValueError(f"`model` must be a cfm_jax model (AbstractCFM), got {type(model).__name__}.")
    if not model.piecewise_constant:
        raise ValueError("functional_gradient is defined for piecewise-constant paths (L·∂L/∂θ_l per layer).")
    if type(grads) is not type(model):
        raise ValueError(
            f"`grads` must be model-shaped (a {type(model).__name__} of gradients), got {type(grads).__name__}."
        )
    L = model.num_layers
    return jax.tree.map(lambda g: L * g, grads)


@options_checked_first
@compiled
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
    r"""States, token covector $p_s$, particle adjoints $a_i(s)$ and probe gradients $∇φ_s(\mathrm{probes})$.

    ``adjoint`` is a hand adjoint: ``DiscreteAdjoint()`` (default; saved at every Euler step)
    or ``ContinuousAdjoint(...)`` (saved at layer boundaries; ``memory=StoreEvery(1)``), with any
    memory policy; ``options`` are [`forward`][cfm_jax.forward]'s other options (``saveat`` excepted;
    ``throw`` also covers ``y`` and ``probes``).
    The loss is ``loss(x1, y)``. ``probes: (P, d)`` are fixed points: ``probe_grads[k, j]`` is
    $∇φ_{s_k}(\mathrm{probes}_j)$ ($s_k$ = ``ts[k]``), obtained from a passive characteristic started at
    (``ts[k]``, ``probes[j]``).
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
    if isinstance(context, GaussianMeasure):
        raise ValueError(
            "`context`: a GaussianMeasure has no particle adjoints (a_i, ∇φ_s); its token covector p_s is "
            "cfm_jax.token_adjoint."
        )
    p = prepare(model, x0, context, adjoint=adjoint, throw=throw, **options)
    adjoint.validate(p.model, p.context, p.spec)
    spec, x = p.spec, p.y0[0]
    stride = adjoint.probe_stride(p.model, spec)
    zeta, start = probe_rows(
        None if probes is None else probes.astype(x.dtype), stride, spec.steps // stride + 1, x.shape[1], x.dtype
    )
    assert isinstance(p.context, EmpiricalContext)
    carried = EmpiricalContext(p.context.weights, start)
    y0 = (*p.y0, zeta)
    sol, residuals = adjoint.run_forward(p.model, carried, y0, spec, store=True)
    value, ct_x1 = jax.value_and_grad(lambda xx: _real_scalar_loss(loss(xx[0] if p.single else xx, y), y))(sol.x1)
    res = adjoint.run_backward(p.model, carried, y0, spec, residuals, Cotangents(x1=ct_x1), trajectories=True)
    assert res.traj is not None
    ss, xs, zs, ps, a = res.traj
    if jnp.ndim(x0) == 1:
        xs, ps = xs[:, 0], ps[:, 0]
    fgrads = functional_gradient(model, res.grads) if model.piecewise_constant else res.grads
    result = sol.result
    if res.result is not None:  # the backward can fail too: the forward's failure comes first
        result = diffrax.RESULTS.where(result == diffrax.RESULTS.successful, res.result, result)
    if throw:
        value = check_solved(value, result)
    return AdjointSolution(
        ts=ss,
        xs=xs,
        contexts=EmpiricalMeasure.unchecked(zs, jnp.broadcast_to(carried.weights, zs.shape[:2])),
        ps=ps,
        a=a,
        probe_grads=res.probe_grads,
        probe_values=res.probe_values,
        weight_grads=res.weights,
        functional_grads=fgrads,
        grads=res.grads,
        loss=value,
        result=result,
    )


def probe_gradients(model, x0, context, y, probes, **kwargs):
    """``(ts, ∇φ_s(probes) (S, P, d), φ_s(probes) (S, P))`` via :func:`adjoint_trajectories`."""
    sol = adjoint_trajectories(model, x0, context, y, probes=probes, **kwargs)
    return sol.ts, sol.probe_grads, sol.probe_values


@options_checked_first
@compiled
def token_adjoint(
    model: AbstractCFM,
    x0: Float[Array, "*B d"],
    context: EmpiricalMeasure | GaussianMeasure | Float[ArrayLike, "n d"],
    y: Any,
    *,
    loss: Callable | None = None,
    saveat: SaveAt = SaveAt(layers=True),
    throw: bool = True,
    **options: Any,
) -> tuple[FlowSolution, Array]:
    """The token covector $p_s = ∂ℓ/∂x_s$ with the context held on its own trajectory; compiled.

    For a Gaussian context this is the infinite-context covector (the tokens do not move the population
    law): $p_1 = ∇ℓ(x_1)$, $p_i = (I + hM_i)^⊤ p_{i+1}$. For atoms it is the ``ps`` of
    [`adjoint_trajectories`][cfm_jax.adjoint_trajectories] (the tokens do not act on the context either)
    at $O(Bn)$ a step instead of $O(n^2)$: $p_i = p_{i+1} + h D_xV(x_i, μ_i)^⊤ p_{i+1}$. Both are the token rows
    of [`DiscreteAdjoint`][cfm_jax.DiscreteAdjoint]'s backward sweep, the one recursion.

    Args:
        model: as in [`forward`][cfm_jax.forward].
        x0: as in [`forward`][cfm_jax.forward].
        context: as in [`forward`][cfm_jax.forward] (``EmpiricalMeasure``, array or
            ``GaussianMeasure``).
        y: loss targets, shaped like ``x0`` for the default loss.
        loss: ``loss(x1, y) -> scalar``, default [`mean_squared_loss`][cfm_jax.mean_squared_loss] (the
            batch mean of $½‖x_1 − y‖^2$, so p contains the 1/B).
        saveat: ``SaveAt(layers=True)`` (default) or ``SaveAt(steps=True)``: the depths of ``ps``.
        throw: as in ``forward`` (also for ``y``).
        options: ``forward``'s other options; the solve must be explicit Euler with fixed steps (the
            default), where the covector is exact.

    Returns:
        ``(solution, ps)``: the forward's [`FlowSolution`][cfm_jax.FlowSolution] saved at ``saveat``
        and ``ps (S,) + x0.shape`` at its depths ``solution.ts``.
    """
    if not isinstance(saveat, SaveAt) or not (saveat.layers or saveat.steps) or saveat.fn is not None:
        raise ValueError(f"`saveat` must be SaveAt(layers=True) or SaveAt(steps=True) (no fn), got {saveat!r}.")
    if "adjoint" in options:
        raise ValueError("`adjoint` does not apply: the token covector is the exact (discrete) adjoint's.")
    loss, y = _check_loss(loss, x0, y, throw)
    adjoint = DiscreteAdjoint()
    p = prepare(model, x0, context, saveat=saveat, throw=throw, **options)
    adjoint.check_spec(p.model, p.spec)
    sol, residuals = adjoint.run_forward(p.model, p.context, p.y0, p.spec, store=True)
    ct_x1 = jax.grad(lambda xx: _real_scalar_loss(loss(xx[0] if p.single else xx, y), y))(sol.x1)
    res = adjoint.run_backward(
        p.model, p.context, p.y0, p.spec, residuals, Cotangents(x1=ct_x1), trajectories=True, token_only=True
    )
    assert res.traj is not None
    ps = res.traj[3]
    if not saveat.steps:  # the layer boundaries
        ps = ps[:: p.spec.steps // p.model.num_layers]
    if p.single:
        sol = dataclasses.replace(sol, x1=sol.x1[0], xs=None if sol.xs is None else sol.xs[:, 0])
        ps = ps[:, 0]
    return sol, ps


def token_covectors(model: AbstractCFM, xs, zs, weights, y, *, loss: Callable | None = None) -> Array:
    """``(L + 1, B, d)`` token covectors p_l from the layer states ``xs (L + 1, B, d)``, ``zs (L + 1, n, d)``
    of an Euler solve with one step per layer and the context ``weights (n,)``: what
    :func:`token_adjoint` computes after its own forward (the same sweep), for a caller that already
    holds the states. ``loss`` as there."""
    if loss is None and jnp.ndim(xs) == 3 and jnp.shape(xs)[1] == 0:
        raise ValueError(f"`xs` holds no target tokens (shape {jnp.shape(xs)}): the default loss is their batch mean.")
    loss = mean_squared_loss if loss is None else loss
    spec = FlowSpec(diffrax.Euler(), None, SaveAt(steps=True), model.num_layers)
    # the stored states of every step, (layers, steps per layer = 1, ...) as DiscreteAdjoint keeps them
    y0, residuals = (xs[0], zs[0]), ((xs[-1], zs[-1]), (xs[1:, None], zs[1:, None]))
    ct_x1 = jax.grad(loss)(xs[-1], y)
    res = DiscreteAdjoint().run_backward(
        model, EmpiricalContext(weights), y0, spec, residuals, Cotangents(x1=ct_x1), trajectories=True, token_only=True
    )
    assert res.traj is not None
    return res.traj[3]


__all__ = [
    "AdjointSolution",
    "adjoint_trajectories",
    "functional_gradient",
    "loss_and_grad",
    "mean_squared_loss",
    "probe_gradients",
    "token_adjoint",
    "token_covectors",
]
