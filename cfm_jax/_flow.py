"""The one forward loop of the contextual flow map (docs/theory.md §1), stepped by diffrax.

    dx/ds = V(x, μ_s; θ(s)),   dz_i/ds = V(z_i, μ_s; θ(s)),   μ_s = Σ_i w_i δ_{z_i(s)}.

The state is the tuple ``(x, z)`` of passive target tokens ``x: (B, d)`` and the context support
``z: (n, d)``, optionally followed by passive probe characteristics ``ζ: (R, d)`` (zero-mass
points that the hand adjoints follow; row r starts moving at step ``start[r]``). All rows are
evaluated in one call of the field on the stacked queries ``[x; z; ζ]``; the weights are carried
along unchanged.

Every path is cut into its L segments (layers) and :func:`loop` is a ``lax.scan`` over them with
one solve per segment (:func:`solve_segment`: the diffrax solver's own steps on a fixed grid, or
``diffrax.diffeqsolve`` where diffrax differentiates or adapts the steps), so no step ever
straddles a parameter jump or kink and higher-order solvers keep their order. With the default
``diffrax.Euler()`` and one step per layer this is exactly the L-layer residual transformer
x_{l+1} = x_l + (1/L) V(x_l, μ_l; θ_l).

Every strategy of :func:`cfm_jax.forward` runs this loop: autodiff through it (a diffrax
adjoint), or a hand adjoint that wraps it in a custom VJP and chooses which states it keeps
(:mod:`cfm_jax._adjoint`). :func:`solution` is the one assembly of what ``SaveAt`` asks for.
"""

from __future__ import annotations

import functools
from typing import Literal, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._measures import EmpiricalMeasure
from ._paths import AbstractCFM

Emit = Literal["none", "ends", "steps"]
"""What :func:`loop` returns per layer: nothing, the state at the layer's end, or after every step."""


class SaveAt(eqx.Module):
    """What :func:`cfm_jax.forward` returns besides the final state.

    ``SaveAt()`` – only ``x1, z1``; ``SaveAt(layers=True)`` – the states at every layer
    boundary s = l/L (L + 1 depths); ``SaveAt(steps=True)`` – the states after every solver step
    (fixed-step solves only; ``L·k + 1`` depths).
    """

    layers: bool = eqx.field(static=True, default=False)
    steps: bool = eqx.field(static=True, default=False)

    @property
    def emit(self) -> Emit:
        """What the loop must return per layer for these outputs."""
        return "steps" if self.steps else "ends" if self.layers else "none"


class FlowSolution(eqx.Module):
    """Result of :func:`cfm_jax.forward`.

    Attributes:
        x1: final target tokens, shaped like ``x0`` (``(d,)`` or ``(B, d)``).
        z1: final context points ``(n, d)``.
        weights: the context weights ``(n,)`` (unchanged by the flow).
        ss: depths of the saved states ``(S,)`` or None.
        xs: target trajectory ``(S,) + x0.shape`` or None.
        zs: context trajectory ``(S, n, d)`` or None.
        num_steps: total accepted solver steps.
    """

    x1: Array
    z1: Float[Array, "n d"]
    weights: Float[Array, " n"]
    ss: Array | None = None
    xs: Array | None = None
    zs: Array | None = None
    num_steps: Array | None = None

    @property
    def measure(self) -> EmpiricalMeasure:
        """Final context measure μ_1."""
        return EmpiricalMeasure.unchecked(self.z1, self.weights)


class FlowSpec(eqx.Module):
    """How the forward is integrated: the options of :func:`cfm_jax.forward` after validation.

    ``steps`` is the total number of (initial) steps, a multiple of L; ``steps_per_layer`` = steps / L.
    """

    solver: diffrax.AbstractSolver
    stepsize_controller: diffrax.AbstractStepSizeController | None
    saveat: SaveAt
    steps: int = eqx.field(static=True)
    max_steps: int = eqx.field(static=True, default=4096)

    @property
    def fixed(self) -> bool:
        """Whether the steps are fixed (no adaptive step-size control)."""
        ctrl = self.stepsize_controller
        return ctrl is None or isinstance(ctrl, (diffrax.ConstantStepSize, diffrax.StepTo))


class Loop(NamedTuple):
    """Output of :func:`loop` over ``count`` layers.

    ``final``: the state after the last layer; ``ys``: per-layer states, ``(count, ...)`` (``ends``)
    or ``(count, k, ...)`` (``steps``), or None; ``ts``: ``(count, k)`` depths of ``ys`` (``steps``)
    or None; ``num_steps``: accepted solver steps.
    """

    final: tuple
    ys: tuple | None
    ts: Array | None
    num_steps: Array


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


def _fixed_steps(term, solver, grid, y0, args, save_steps: bool):
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
    return ys if save_steps else jax.tree.map(lambda a: a[None], y1)


def solve_segment(
    term,
    solver,
    t0,
    t1,
    k: int,
    y0,
    args,
    *,
    stepsize_controller=None,
    max_steps: int = 4096,
    save_steps: bool = False,
    adjoint: diffrax.AbstractAdjoint | None = None,
):
    """One solve over [t0, t1] (one layer): ``k`` fixed steps, or adaptive from dt0 = (t1 − t0)/k.

    Fixed steps run on a grid whose end points are pinned exactly (t0 + (t1 − t0) need not round to
    t1). Without ``adjoint`` (a hand adjoint's forward, the backward sweep of the continuous adjoint,
    the Gaussian limit) an explicit solver steps that grid in a plain ``lax.scan`` (:func:`_fixed_steps`);
    with a diffrax ``adjoint`` (autodiff through diffrax, which the caller asked for), an implicit
    solver or an adaptive controller, ``diffrax.diffeqsolve`` runs it. Both evaluate the same solver
    steps at the same times. Returns ``(ys, ts, accepted steps)`` with the states after every step
    (``save_steps``) or at t1 only.
    """
    controller: diffrax.AbstractStepSizeController
    if stepsize_controller is None or isinstance(stepsize_controller, (diffrax.ConstantStepSize, diffrax.StepTo)):
        grid = t0 + (t1 - t0) * jnp.arange(k + 1, dtype=jnp.result_type(t0)) / k
        grid = grid.at[0].set(t0).at[-1].set(t1)
        if adjoint is None and not isinstance(solver, diffrax.AbstractImplicitSolver):
            ys = _fixed_steps(term, solver, grid, y0, args, save_steps)
            return ys, (grid[1:] if save_steps else grid[-1:]), jnp.asarray(k)
        controller, dt0, cap = diffrax.StepTo(ts=grid), None, k
    else:
        controller, dt0, cap = stepsize_controller, (t1 - t0) / k, max_steps
    sol = diffrax.diffeqsolve(
        term,
        solver,
        t0=t0,
        t1=t1,
        dt0=dt0,
        y0=y0,
        args=args,
        stepsize_controller=controller,
        saveat=diffrax.SaveAt(steps=True) if save_steps else diffrax.SaveAt(t1=True),
        adjoint=diffrax.RecursiveCheckpointAdjoint() if adjoint is None else adjoint,
        max_steps=cap,
    )
    return sol.ys, sol.ts, sol.stats["num_accepted_steps"]


def velocity(model: AbstractCFM, state: tuple, w, params, start=None, step=None) -> tuple:
    """V at the stacked rows of ``state`` = ``(x, z)`` or ``(x, z, ζ)``, split back like the state.

    Probe rows ``ζ`` move from step ``start[r]`` on (``step``: the current step index; all move when
    ``start`` is None).
    """
    sizes = [a.shape[0] for a in state]
    v = model.velocity(jnp.concatenate(state, 0), EmpiricalMeasure.unchecked(state[1], w), params)
    parts = list(jnp.split(v, [sizes[0], sizes[0] + sizes[1]])[: len(state)])
    if start is not None and step is not None:
        parts[2] = jnp.where((start <= step.astype(start.dtype))[:, None], parts[2], 0.0)
    return tuple(parts)


def _layer_fn(
    model: AbstractCFM, w, spec: FlowSpec, *, emit: Emit, start=None, adjoint: diffrax.AbstractAdjoint | None = None
):
    """``layer(state, l) -> (state after layer l, per-layer output)``: one solve of segment l."""
    L = model.num_layers
    k = spec.steps // L

    def term_fn(s, state, l):
        # the step index of a probe's start: Euler evaluates at each step's left end; other stages
        # stay inside [l/L, (l+1)/L], clipped so a probe started at the next boundary stays put
        step = l * k + jnp.clip(jnp.round((s * L - l.astype(s.dtype)) * k).astype(l.dtype), 0, k - 1)
        return velocity(model, state, w, model.segment_params(l, s), start, step)

    term = diffrax.ODETerm(term_fn)

    def layer(state, l):
        dtype = state[0].dtype
        t0, t1 = l.astype(dtype) / L, (l + 1).astype(dtype) / L
        ys, ts, nsteps = solve_segment(
            term,
            spec.solver,
            t0,
            t1,
            k,
            state,
            l,
            stepsize_controller=spec.stepsize_controller,
            max_steps=spec.max_steps,
            save_steps=emit == "steps",
            adjoint=adjoint,
        )
        final = jax.tree.map(lambda a: a[-1], ys)
        out = {"none": None, "ends": final, "steps": (ys, ts)}[emit]
        return final, (out, nsteps)

    return layer


def loop(
    model: AbstractCFM,
    y0: tuple,
    w,
    spec: FlowSpec,
    *,
    emit: Emit = "none",
    start=None,
    adjoint: diffrax.AbstractAdjoint | None = None,
    first=0,
    count: int | None = None,
) -> Loop:
    """Integrate layers ``first, …, first + count − 1`` (default: all L) from the state ``y0``.

    ``y0``: ``(x (B, d), z (n, d))`` or with probe rows ``ζ (R, d)`` started at steps ``start (R,)``;
    ``first`` may be traced, ``count`` is static. ``adjoint``: the diffrax adjoint of each
    segment's solve (autodiff through the loop; irrelevant inside a hand adjoint's custom VJP).
    """
    count = model.num_layers if count is None else count
    layer = _layer_fn(model, w, spec, emit=emit, start=start, adjoint=adjoint)
    y0 = vary_alike(y0, model, w, start, first)
    final, (out, nsteps) = jax.lax.scan(layer, y0, first + jnp.arange(count))
    ys, ts = out if emit == "steps" else (out, None)
    return Loop(final, ys, ts, nsteps.sum())


def advance(model: AbstractCFM, y0: tuple, w, spec: FlowSpec, layers, *, start=None) -> tuple:
    """The state after the first ``layers`` layers (``layers`` may be traced), keeping nothing (a hand
    adjoint's replay from s = 0). A loop of static length L whose layers past ``layers`` are skipped by
    ``lax.cond``, so that it stays reverse-differentiable (a traced trip count would be a while loop)."""
    layer = _layer_fn(model, w, spec, emit="none", start=start)

    def body(l, st):
        return jax.lax.cond(l < layers, lambda: layer(st, l)[0], lambda: st)

    return jax.lax.fori_loop(0, model.num_layers, body, vary_alike(y0, model, w, start, layers))


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


def solution(model: AbstractCFM, y0: tuple, w, spec: FlowSpec, result: Loop, emitted: Emit) -> FlowSolution:
    """The :class:`FlowSolution` of a loop over all L layers: final state plus what ``spec.saveat`` asks for.

    ``emitted`` is what the loop returned per layer (at least ``spec.saveat.emit``).
    """
    x, z = y0[:2]
    x1, z1 = result.final[:2]
    dtype = x.dtype
    L = model.num_layers
    ss = xs = zs = None
    if spec.saveat.steps:
        ys, ts = result.ys, result.ts
        assert ys is not None and ts is not None
        ss = jnp.concatenate([jnp.zeros((1,), dtype), ts.reshape(-1)])
        xs = jnp.concatenate([x[None], ys[0].reshape((-1,) + x.shape)], 0)
        zs = jnp.concatenate([z[None], ys[1].reshape((-1,) + z.shape)], 0)
    elif spec.saveat.layers:
        assert result.ys is not None
        ends = layer_ends(result.ys, emitted)
        ss = jnp.arange(L + 1, dtype=dtype) / L
        xs = jnp.concatenate([x[None], ends[0]], 0)
        zs = jnp.concatenate([z[None], ends[1]], 0)
    return FlowSolution(x1=x1, z1=z1, weights=w, ss=ss, xs=xs, zs=zs, num_steps=result.num_steps)


__all__ = [
    "Emit",
    "FlowSolution",
    "FlowSpec",
    "Loop",
    "SaveAt",
    "advance",
    "layer_ends",
    "loop",
    "merge_leading",
    "solution",
    "solve_segment",
    "state_before",
    "vary_alike",
    "velocity",
]
