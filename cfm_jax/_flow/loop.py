"""The one forward loop of the contextual flow map (docs/theory.md §1), stepped by diffrax.

    dx/ds = V(x, μ_s; θ(s)),   and the context μ_s moves with the same field.

The loop carries target tokens ``x: (B, d)`` and a context in one of two forms (a
:class:`AbstractCarriedContext`): the atoms ``z: (n, d)`` of an empirical measure
(:class:`EmpiricalContext`, optionally followed by passive probe rows ``ζ: (R, d)`` that the hand
adjoints follow, row r moving from step ``start[r]``), or the affine square root ``(m, F)`` of a
Gaussian context N(m, FFᵀ) (``cfm_jax._gaussian_limit``). Tokens and context move in one call of
the field per stage; a kind of context only says what its velocity is and which measure its rows
describe.

Every path is cut into its L segments (layers) and :func:`loop` is a ``lax.scan`` over them with
one solve per segment (:func:`solve_segment`: the diffrax solver's own steps on a fixed grid, or
``diffrax.diffeqsolve`` where diffrax differentiates or adapts the steps), so no step ever
straddles a parameter jump or kink and higher-order solvers keep their order. With the default
``diffrax.Euler()`` and one step per layer this is exactly the L-layer residual transformer
x_{l+1} = x_l + (1/L) V(x_l, μ_l; θ_l). Whether the steps are fixed, and whether they are the
exact residual network (Euler, fixed steps), is decided once, by :class:`FlowSpec`'s ``fixed``
and ``exact_euler``.

Every strategy of :func:`cfm_jax.forward` runs this loop (autodiff through it, or a hand adjoint
that wraps it in a custom VJP and chooses which states it keeps; ``cfm_jax._adjoint``);
:func:`solution` is the one assembly of what ``SaveAt`` asks for, the steps taken and the result.
"""

from __future__ import annotations

import abc
import functools
from typing import Any, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._measures import EmpiricalMeasure, GaussianMeasure
from .._paths import AbstractCFM
from .spec import Emit, FlowSolution, FlowSpec


class AbstractCarriedContext(eqx.Module):
    """How the loop carries one kind of context: its rows in the state tuple after the tokens, their
    velocity, and the measure they describe."""

    @abc.abstractmethod
    def velocity(self, model: AbstractCFM, state: tuple, params, step) -> tuple:
        """d(state)/ds at ``state`` (``step``: the index of the current solver step)."""

    @abc.abstractmethod
    def measure(self, state: tuple) -> EmpiricalMeasure | GaussianMeasure:
        """The context measure of ``state`` (of every entry, when the arrays carry a leading axis)."""

    @abc.abstractmethod
    def token_vjp(self, model: AbstractCFM, state: tuple, params, p) -> Array:
        """D_xV(x, μ)ᵀ p row by row for the tokens ``x = state[0]`` (the context held fixed)."""

    def ending(self, spec: FlowSpec) -> AbstractCarriedContext:
        """This context as a loop under ``spec`` carries it: by default as it is, moved at every step."""
        del spec
        return self


class EmpiricalContext(AbstractCarriedContext):
    """A context of atoms: state ``(x, z)`` or ``(x, z, ζ)`` with probe rows ζ moving from step
    ``start[r]`` on (all of them when ``start`` is None); the weights ride along unchanged. At step
    ``last`` (None: none) the tokens alone move (:meth:`ending`)."""

    weights: Float[Array, " n"]
    start: Array | None = None
    last: int | None = eqx.field(static=True, default=None)

    def velocity(self, model, state, params, step):
        """V at the stacked rows of ``state``, one call of the field, split back like the state."""

        def every_row():
            sizes = [a.shape[0] for a in state]
            v = model.velocity(jnp.concatenate(state, 0), EmpiricalMeasure.unchecked(state[1], self.weights), params)
            parts = list(jnp.split(v, [sizes[0], sizes[0] + sizes[1]])[: len(state)])
            if self.start is not None and step is not None:
                parts[2] = jnp.where((self.start <= step.astype(self.start.dtype))[:, None], parts[2], 0.0)
            return tuple(parts)

        def tokens():  # the rows after the tokens stay put: the solve's end reads none of them
            v = model.velocity(state[0], EmpiricalMeasure.unchecked(state[1], self.weights), params)
            return (v, *(jnp.zeros_like(a) for a in state[1:]))

        if self.last is None or step is None or sum(a.shape[0] for a in state[2:]):  # probes move on
            return every_row()
        return jax.lax.cond(step == self.last, tokens, every_row)

    def ending(self, spec):
        """Without probe rows, and where nothing reads the final context (:attr:`FlowSpec.tokens_last`),
        the context whose last step moves the tokens alone: the context's own last step only produces
        the final context (explicit Euler evaluates the field at the step's start)."""
        if self.start is not None or not spec.tokens_last:
            return self
        return EmpiricalContext(self.weights, None, spec.steps - 1)

    def measure(self, state):
        z = state[1]
        return EmpiricalMeasure.unchecked(z, jnp.broadcast_to(self.weights, z.shape[:-1]))

    def token_vjp(self, model, state, params, p):
        mu = EmpiricalMeasure.unchecked(state[1], self.weights)
        return model.field.local_vjp(state[0], mu, params, p).dx


class Loop(NamedTuple):
    """Output of :func:`loop` over ``count`` layers.

    ``final``: the state after the last layer; ``ys``: per-layer states, ``(count, ...)`` (``ends``)
    or ``(count, k, ...)`` (``steps``), or None; ``ts``: ``(count, k)`` depths of ``ys`` (``steps``)
    or None; ``accepted``, ``rejected``: solver steps; ``result``: the first failure of a layer's
    solve (``diffrax.RESULTS``); ``meter``: the progress meter's state.
    """

    final: tuple
    ys: tuple | None
    ts: Array | None
    accepted: Array
    rejected: Array
    result: diffrax.RESULTS
    meter: object = None


def vary_alike(tree, *sources):
    """``tree`` unchanged in value, typed as varying over every manual mesh axis that any array of
    ``tree`` or ``sources`` varies over (a no-op outside ``shard_map``).

    Inside a caller's ``shard_map`` (``check_vma=True``), a scan carry must keep its type, and a state
    moved by a field of varying inputs becomes varying; so every carry starts varying like all the
    inputs. ``any`` over an empty slice of each array is an exact False that carries the array's type.
    """
    arrays = [a for a in jax.tree.leaves((tree, sources)) if isinstance(a, jax.Array)]
    if not arrays:
        return tree
    tag = functools.reduce(jnp.logical_or, [jnp.any(a.reshape(-1)[:0] != 0) for a in arrays])

    def tagged(a):
        return jax.lax.select(jnp.broadcast_to(tag, a.shape), a, a) if isinstance(a, jax.Array) else a

    return jax.tree.map(tagged, tree)


def _fixed_steps(term, solver, grid, y0, args, save_steps: bool) -> tuple:
    """``len(grid) − 1`` steps of ``solver`` through the points of ``grid``: a ``lax.scan`` of the
    solver's own ``step``, which is what ``diffeqsolve`` runs on a ``StepTo`` grid, without its
    while loop, its run-time checks (host callbacks, which JAX's persistent compilation cache never
    stores) or its step-acceptance bookkeeping, none of which a fixed grid needs."""
    state = solver.init(term, grid[0], grid[1], y0, args)
    y0, state = vary_alike((y0, state), args, grid)

    def step(carry, tt):
        y, st = carry
        y1, _, _, st, _ = solver.step(term, tt[0], tt[1], y, args, st, made_jump=False)
        return (y1, st), (y1 if save_steps else None)

    (y1, _), ys = jax.lax.scan(step, (y0, state), (grid[:-1], grid[1:]))
    return ys if save_steps else jax.tree.map(lambda a: a[None], y1)  # pyright: ignore[reportReturnType]


def _progress(value):
    """A progress fraction in the default float dtype (the dtype of diffrax's meter states)."""
    return jnp.asarray(value, jnp.result_type(float))


class _LayerProgress(diffrax.AbstractProgressMeter):
    """The forward's progress meter seen from inside one layer's adaptive solve: progress p of the
    layer is (l + p)/L of the whole (p = 1 at the layer's end); the meter is opened and closed by the
    whole solve."""

    meter: diffrax.AbstractProgressMeter
    state: object
    layer: Array
    num_layers: int = eqx.field(static=True)

    def init(self):
        return self.state

    def step(self, state, progress):
        return self.meter.step(state, _progress((self.layer + progress) / self.num_layers))

    def close(self, state):
        del state


class _Grid(diffrax.AbstractStepSizeController):
    """``diffrax.StepTo(ts)`` without its in-program checks of ``ts`` (increasing, ends t0 and t1):
    the layer grids of :func:`solve_segment` are so by construction, and each check is a host
    callback, run at every layer, in a program the persistent compilation cache then never stores."""

    ts: Float[Array, " times"]

    def wrap(self, direction):
        return _Grid(self.ts * direction)

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        del terms, t0, t1, y0, dt0, args, func, error_order
        return self.ts[1], 2

    def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state):
        del t0, y0, y1_candidate, args, y_error, error_order
        return True, t1, self.ts[controller_state], False, controller_state + 1, diffrax.RESULTS.successful


class Segment(NamedTuple):
    """One solve of :func:`solve_segment`: states ``ys``, their depths ``ts``, steps and the result."""

    ys: tuple
    ts: Array
    accepted: Array
    rejected: Array
    result: diffrax.RESULTS


def solve_segment(
    term,
    spec: FlowSpec,
    t0,
    t1,
    k: int,
    y0,
    args,
    *,
    save_steps: bool = False,
    adjoint: diffrax.AbstractAdjoint | None = None,
    progress: diffrax.AbstractProgressMeter | None = None,
) -> Segment:
    """One solve over [t0, t1] (one layer) by ``spec``'s solver: ``k`` fixed steps
    (``spec.fixed``), or adaptive from dt0 = (t1 − t0)/k with at most ``max_steps``.

    Fixed steps run on a grid whose end points are pinned exactly (t0 + (t1 − t0) need not round to
    t1). Without ``adjoint`` (a hand adjoint's forward, the backward sweep of the continuous adjoint,
    plain autodiff) an explicit solver steps that grid in a plain ``lax.scan`` (:func:`_fixed_steps`);
    with a diffrax ``adjoint`` (autodiff through diffrax, which the caller asked for), an implicit
    solver or an adaptive controller, ``diffrax.diffeqsolve`` runs it (``throw=False``: a failure is
    the returned result). Both evaluate the same solver steps at the same times. ``ys`` holds the
    states after every step (``save_steps``) or at t1 only.
    """
    controller: diffrax.AbstractStepSizeController
    if spec.fixed:
        grid = t0 + (t1 - t0) * jnp.arange(k + 1, dtype=jnp.result_type(t0)) / k
        grid = grid.at[0].set(t0).at[-1].set(t1)
        if adjoint is None and not spec.can_fail:
            ys = _fixed_steps(term, spec.solver, grid, y0, args, save_steps)
            ts = grid[1:] if save_steps else grid[-1:]
            return Segment(ys, ts, jnp.asarray(k), jnp.asarray(0), diffrax.RESULTS.successful)
        controller, dt0, cap = _Grid(grid), None, k  # StepTo's steps, without its checks
    else:
        assert spec.stepsize_controller is not None
        controller, dt0, cap = spec.stepsize_controller, (t1 - t0) / k, spec.max_steps
    sol = diffrax.diffeqsolve(
        term,
        spec.solver,
        t0=t0,
        t1=t1,
        dt0=dt0,
        y0=y0,
        args=args,
        stepsize_controller=controller,
        saveat=diffrax.SaveAt(steps=True) if save_steps else diffrax.SaveAt(t1=True),
        adjoint=diffrax.RecursiveCheckpointAdjoint() if adjoint is None else adjoint,
        max_steps=cap,
        throw=False,
        progress_meter=diffrax.NoProgressMeter() if progress is None else progress,
    )
    assert sol.ys is not None and sol.ts is not None
    return Segment(sol.ys, sol.ts, sol.stats["num_accepted_steps"], sol.stats["num_rejected_steps"], sol.result)


def _last(ys):
    return jax.tree.map(lambda a: a[-1], ys)


def _layer_fn(model: AbstractCFM, context: AbstractCarriedContext, spec: FlowSpec, *, emit: Emit, adjoint, meter):
    """``layer((state, meter state), l) -> ((state after layer l, meter state), per-layer output)``."""
    L = model.num_layers
    k = spec.steps // L

    def term_fn(s, state, l):
        # the step index of a probe's start: Euler evaluates at each step's left end; other stages
        # stay inside [l/L, (l+1)/L], clipped so a probe started at the next boundary stays put
        step = l * k + jnp.clip(jnp.round((s * L - l.astype(s.dtype)) * k).astype(l.dtype), 0, k - 1)
        return context.velocity(model, state, model.segment_params(l, s), step)

    term = diffrax.ODETerm(term_fn)

    def layer(carry, l):
        state, meter_state = carry
        dtype = state[0].dtype
        t0, t1 = l.astype(dtype) / L, (l + 1).astype(dtype) / L
        inner = None if spec.fixed else _LayerProgress(meter, meter_state, l, L)
        seg = solve_segment(
            term, spec, t0, t1, k, state, l, save_steps=emit == "steps", adjoint=adjoint, progress=inner
        )
        # the meter's state after the solve: later callbacks (the next layer's, the closing one) wait for it
        final, meter_state = jax.lax.optimization_barrier((_last(seg.ys), meter_state))
        if inner is None:  # an adaptive solve reports its own steps, up to the layer's end
            meter_state = meter.step(meter_state, _progress((l + 1) / L))
        out = {"none": None, "ends": final, "steps": (seg.ys, seg.ts)}[emit]
        return (final, meter_state), (out, seg.accepted, seg.rejected, seg.result)

    return layer


def first_failure(results: diffrax.RESULTS) -> diffrax.RESULTS:
    """The first unsuccessful entry of per-layer results ``(count,)`` (successful if none)."""
    failed = results != diffrax.RESULTS.successful  # (count,)
    first = jax.tree.map(lambda code: code[jnp.argmax(failed)], results)  # the entry, as a pytree
    return diffrax.RESULTS.where(jnp.any(failed), first, diffrax.RESULTS.successful)


def loop(
    model: AbstractCFM,
    context: AbstractCarriedContext,
    y0: tuple,
    spec: FlowSpec,
    *,
    emit: Emit = "none",
    adjoint: diffrax.AbstractAdjoint | None = None,
    first=0,
    count: int | None = None,
    meter: tuple | None = None,
) -> Loop:
    """Integrate layers ``first, …, first + count − 1`` (default: all L) from the state ``y0``.

    ``y0``: the tokens ``x (B, d)`` followed by the context's rows; ``first`` may be traced, ``count``
    is static. ``adjoint``: the diffrax adjoint of each segment's solve (autodiff through the loop;
    irrelevant inside a hand adjoint's custom VJP). ``meter``: ``(progress meter, its state)``,
    stepped at every layer end and inside adaptive solves (see :func:`with_progress`); the new state
    is returned in ``Loop.meter``.
    """
    count = model.num_layers if count is None else count
    progress, meter_state = (diffrax.NoProgressMeter(), None) if meter is None else meter
    layer = _layer_fn(model, context, spec, emit=emit, adjoint=adjoint, meter=progress)
    y0 = vary_alike(y0, model, context, first)
    (final, meter_state), (out, acc, rej, res) = jax.lax.scan(layer, (y0, meter_state), first + jnp.arange(count))
    ys, ts = out if emit == "steps" else (out, None)
    # fixed steps outside diffeqsolve cannot fail: keep the result a constant (no run-time check)
    plain = adjoint is None and not spec.can_fail
    result = diffrax.RESULTS.successful if plain else first_failure(res)
    return Loop(final, ys, ts, acc.sum(), rej.sum(), result, meter_state)


def with_progress(spec: FlowSpec, run) -> Loop:
    """``run(meter)`` with ``spec``'s progress meter opened before and closed after (``meter``:
    ``(progress meter, state)`` for :func:`loop`, whose ``Loop.meter`` it closes)."""
    progress = spec.progress_meter
    out = run((progress, progress.init()))
    progress.close(out.meter)
    return out


def advance(model: AbstractCFM, context: AbstractCarriedContext, y0: tuple, spec: FlowSpec, layers) -> tuple:
    """The state after the first ``layers`` layers (``layers`` may be traced), keeping nothing (a hand
    adjoint's replay from s = 0). A loop of static length L whose layers past ``layers`` are skipped by
    ``lax.cond``, so that it stays reverse-differentiable (a traced trip count would be a while loop)."""
    layer = _layer_fn(model, context, spec, emit="none", adjoint=None, meter=diffrax.NoProgressMeter())

    def body(l, st):
        return jax.lax.cond(l < layers, lambda: layer((st, None), l)[0][0], lambda: st)

    return jax.lax.fori_loop(0, model.num_layers, body, vary_alike(y0, model, context, layers))


def merge_leading(a):
    """``(m, k, ...)`` -> ``(m·k, ...)`` (explicit sizes: probe rows may be empty)."""
    return a.reshape((a.shape[0] * a.shape[1],) + a.shape[2:])


def state_before(y_start: tuple, ys: tuple, j) -> tuple:
    """The state at the start of step (or layer) ``j`` of a loop from ``y_start``: ``y_start`` for
    ``j = 0``, else entry ``j − 1`` of the states ``ys (m, ...)`` it emitted after each step. An index
    into ``ys``, so a backward sweep reads the stored states without a shifted copy of them."""
    prev = jax.tree.map(lambda a: jax.lax.dynamic_index_in_dim(a, jnp.maximum(j - 1, 0), keepdims=False), ys)
    return jax.tree.map(lambda s, p: jnp.where(j == 0, s, p), y_start, prev)


def layer_ends(ys: tuple, emitted: Emit) -> tuple:
    """The states at the end of every layer, ``(L, ...)``, from a loop's ``ys``."""
    return jax.tree.map(lambda a: a[:, -1], ys) if emitted == "steps" else ys


def solution(
    model: AbstractCFM, context: AbstractCarriedContext, y0: tuple, spec: FlowSpec, result: Loop, emitted: Emit
) -> FlowSolution:
    """The :class:`FlowSolution` of a loop over all L layers: the final state, what ``spec.saveat``
    asks for (``emitted``: what the loop returned per layer, at least ``spec.saveat.emit``), the steps
    taken and the result. The one assembly of saved states, for every kind of context."""
    dtype = y0[0].dtype
    L = model.num_layers
    ss = traj = None
    if spec.saveat.steps:
        assert result.ys is not None and result.ts is not None
        ss = jnp.concatenate([jnp.zeros((1,), dtype), result.ts.reshape(-1)])
        traj = jax.tree.map(lambda a0, a: jnp.concatenate([a0[None], merge_leading(a)], 0), y0, result.ys)
    elif spec.saveat.layers:
        assert result.ys is not None
        ss = jnp.arange(L + 1, dtype=dtype) / L
        traj = jax.tree.map(lambda a0, a: jnp.concatenate([a0[None], a], 0), y0, layer_ends(result.ys, emitted))
    stats = {
        "num_steps": result.accepted + result.rejected,
        "num_accepted_steps": result.accepted,
        "num_rejected_steps": result.rejected,
        "max_steps": jnp.asarray(spec.max_steps if not spec.fixed else spec.steps // L),
    }
    kept = spec.saveat.context  # SaveAt(context=False): no context (its last step may not be taken)
    fields: dict[str, Any] = dict(  # the context's kind of measure, at the end and along the trajectory
        context=context.measure(result.final) if kept else None,
        contexts=None if traj is None or not kept else context.measure(traj),
    )
    return FlowSolution(
        x1=result.final[0], ts=ss, xs=None if traj is None else traj[0], result=result.result, stats=stats, **fields
    )


__all__ = [
    "AbstractCarriedContext",
    "EmpiricalContext",
    "Loop",
    "Segment",
    "advance",
    "first_failure",
    "layer_ends",
    "loop",
    "merge_leading",
    "solution",
    "solve_segment",
    "state_before",
    "vary_alike",
    "with_progress",
]
