"""Exact (discrete) adjoint of the explicit Euler scheme, i.e. of the L-layer residual network.

Forward, N = L·k steps of size h = 1/N (k steps per layer), state (x, z) and optional passive
probe characteristics ζ:

    x_{i+1} = x_i + h V(x_i, μ_i; θ_i),  z_{i+1} = z_i + h V(z_i, μ_i; θ_i),  μ_i = Σ_j w_j δ_{z_j,i}.

Backward, from the output cotangents (p_N = ∂L/∂x_N, b_N = ∂L/∂z_N; saved-trajectory
cotangents are added to p_i, b_i as the sweep passes step i):

    p_i = p_{i+1} + h D_xV(x_i)ᵀ p_{i+1}
    b_i = b_{i+1} + h [D_xV(z_i)ᵀ b_{i+1} + ∂_{z_i} Σ_r c_r·V(q_r, μ_i)]          (c = [p; b])
    ∂L/∂w_j += h ∂_{w_j} Σ_r c_r·V(q_r, μ_i),           ∂L/∂θ_i = h Σ_r D_θV(q_r)ᵀ c_r

which is the chain rule of the scheme, so it equals reverse-mode autodiff through the same
scheme to round-off (docs/theory.md §2). b_j = w_j a_j with a_j = ∇φ_s(z_j) the test-field
gradient. A probe started at step i₀ at point y follows the a-recursion with zero mass and
gives ∇φ_{s_{i₀}}(y); its value φ accumulates h Σ_r c_r·(δV/δμ)(q_r, μ_i)(ζ_i).
Memory: :mod:`cfm_jax._adjoint.memory` (StoreAll, StoreEvery(c), Recompute).

The token rows alone (``token_only``) are the token covector of the loss with the context held on
its own trajectory, p_i = p_{i+1} + h D_xV(x_i, μ_i)ᵀ p_{i+1}: O(B·n) a step for atoms, and for a
Gaussian context (whose population law the tokens do not move) the infinite-context covector
p_i = (I + hM_i)ᵀ p_{i+1}. It is this same sweep, with the context's own token product
(``AbstractCarriedContext.token_vjp``), that :func:`cfm_jax.token_adjoint` runs: the one recursion
of the token adjoint.
"""

from __future__ import annotations

import functools

import diffrax
import jax
import jax.numpy as jnp

from .._flow import (
    EmpiricalContext,
    Loop,
    advance,
    loop,
    merge_leading,
    solution,
    state_before,
    vary_alike,
    with_progress,
)
from .._measures import EmpiricalMeasure
from .base import AbstractHandAdjoint, AdjointResult, cotangent_or_zero, finish, model_grads, step_params, system_vjp
from .memory import AbstractMemory, Recompute, StoreAll, StoreEvery, check_memory, store_every_layers


def _dims(model, spec):
    L, N = model.num_layers, spec.steps
    return L, N, N // L


def _inject(ct, k, saveat, N):
    """Dense per-step cotangents ``(N + 1, ...)`` from a saved-trajectory cotangent (or None)."""
    if ct is None:
        return None
    if saveat.steps:
        return ct
    return jnp.zeros((N + 1,) + ct.shape[1:], ct.dtype).at[::k].set(ct)


class DiscreteAdjoint(AbstractHandAdjoint):
    """The exact adjoint of explicit Euler (the residual network), O(n) memory per stored state.

    Gradients equal reverse-mode autodiff through the same Euler scheme to round-off, at
    3.5–4× the cost of a forward and without any n×n buffer. Requires ``solver=diffrax.Euler()``
    (the default) and fixed steps. ``memory``: ``StoreAll()`` (default), ``StoreEvery(c)`` or
    ``Recompute()`` (:mod:`cfm_jax._adjoint.memory`). Second derivatives (``jax.hessian``, grad of
    grad) differentiate this exact sweep, so they equal autodiff's (docs/gradients.md).
    """

    memory: AbstractMemory = StoreAll()

    def check_spec(self, model, spec):
        if not spec.exact_euler:
            if spec.fixed:
                raise ValueError(
                    "`adjoint`=DiscreteAdjoint() is the exact adjoint of explicit Euler; `solver` must be "
                    f"diffrax.Euler() (the default), got {type(spec.solver).__name__}. Use ContinuousAdjoint() or a "
                    "diffrax adjoint."
                )
            raise ValueError("`adjoint`=DiscreteAdjoint() needs fixed steps; `stepsize_controller` must be None.")
        self._segment(model, spec)

    def _segment(self, model, spec) -> int | None:
        """Layers per stored segment (None: every step's state is stored)."""
        L, _, k = _dims(model, spec)
        seg = self._segment_steps(L, k)
        return None if seg is None else seg // k

    def _segment_steps(self, layers: int, steps_per_layer: int) -> int | None:
        """Steps per stored segment for this strategy's memory policy, by the policy's type (None:
        every step's state is stored); a ``ValueError`` naming ``memory`` for one it cannot use."""
        memory = check_memory(self.memory)
        if isinstance(memory, StoreAll):
            return None
        if isinstance(memory, Recompute):
            return steps_per_layer
        if isinstance(memory, StoreEvery):
            c = store_every_layers(memory)
            if layers % c:
                raise ValueError(f"`memory`=StoreEvery({c!r}): layers per stored state must divide L={layers}.")
            return c * steps_per_layer
        raise ValueError(
            f"`memory`={type(memory).__name__}() does not apply to DiscreteAdjoint (explicit Euler is not "
            "exactly reversible); use StoreAll(), StoreEvery(c) or Recompute()."
        )

    def probe_stride(self, model, spec):
        return 1

    def carried(self, weights, spec):
        """Its sweep reads the states at the steps' starts only: under ``SaveAt(context=False)`` the
        last step may move the tokens alone, and its backward then reads the token rows alone."""
        return EmpiricalContext(weights).ending(spec)

    # ---------------------------------------------------------------------------------- forward

    def run_forward(self, model, context, y0, spec, *, store):
        L = model.num_layers
        emit = spec.saveat.emit
        seg = self._segment(model, spec) if store else None
        if not store or seg is None:  # StoreAll keeps every step's state
            kept = "steps" if store else emit
            result = with_progress(spec, lambda meter: loop(model, context, y0, spec, emit=kept, meter=meter))
            sol = solution(model, context, y0, spec, result, kept)
            if not store:
                return sol, None
            assert result.ys is not None
            return sol, (result.final, result.ys)
        recompute = isinstance(self.memory, Recompute)
        progress = spec.progress_meter

        def segment(carry, iseg):
            state, meter_state = carry
            out = loop(
                model, context, state, spec, emit=emit, first=iseg * seg, count=seg, meter=(progress, meter_state)
            )
            return (out.final, out.meter), (None if recompute else state, out.ys, out.ts, out.accepted, out.rejected)

        (final, meter_state), (starts, ys, ts, acc, rej) = jax.lax.scan(
            segment, (y0, progress.init()), jnp.arange(L // seg)
        )
        progress.close(meter_state)
        ys = None if ys is None else jax.tree.map(merge_leading, ys)
        ts = None if ts is None else merge_leading(ts)
        # fixed Euler steps cannot fail: the result is a constant (no run-time check)
        result = Loop(final, ys, ts, acc.sum(), rej.sum(), diffrax.RESULTS.successful, meter_state)
        return solution(model, context, y0, spec, result, emit), (final, starts)

    # --------------------------------------------------------------------------------- backward

    def run_backward(
        self, model, context, y0, spec, residuals, cotangents, *, trajectories=False, token_only=False
    ) -> AdjointResult:
        """The sweep of the module docstring. ``token_only``: the token rows alone, the context held on
        its stored trajectory (any kind of context; no gradients but the trajectories ``(ss, xs, ps)``
        and ``p0``)."""
        L, N, k = _dims(model, spec)
        x = y0[0]
        dtype = x.dtype
        h = jnp.asarray(1.0 / N, dtype)
        B, d = x.shape
        seg = self._segment(model, spec)
        stored_all = seg is None
        seg = L if stored_all else seg
        recompute = isinstance(self.memory, Recompute)
        final, stored = residuals
        ct = cotangents
        inj_x = _inject(ct.xs, k, spec.saveat, N)
        inj_z = None if token_only else _inject(ct.zs, k, spec.saveat, N)

        # terminal condition: the final-state cotangents plus the last saved entry
        p1 = cotangent_or_zero(ct.x1, x) + (0 if inj_x is None else inj_x[N])
        if token_only:
            adj1 = p1
        else:
            z, zeta0 = y0[1], y0[2]
            b1 = cotangent_or_zero(ct.z1, z) + (0 if inj_z is None else inj_z[N])
            adj1 = (p1, b1, jnp.zeros_like(zeta0), jnp.zeros((zeta0.shape[0],), dtype), jnp.zeros_like(context.weights))
        step = _token_step if token_only else _system_step
        backward_step = step(model, context, k, N, h, B, inj_x, inj_z, trajectories)

        def backward_segment(adj, inputs):
            seg_start, iseg = inputs
            first = iseg * seg
            if stored_all:
                base, ys = y0, stored
            else:
                if recompute:  # replay from s = 0 to this segment's start
                    seg_start = advance(model, context, y0, spec, first)
                out = loop(model, context, seg_start, spec, emit="steps", first=first, count=seg)
                assert out.ys is not None
                base, ys = seg_start, out.ys
            ys = jax.tree.map(merge_leading, ys)  # (steps of the segment, ...)

            def step_at(adj, i):
                return backward_step(adj, (state_before(base, ys, i - first * k), i))

            return jax.lax.scan(step_at, adj, first * k + jnp.arange(seg * k), reverse=True)

        adj1 = vary_alike(adj1, model, y0, context, stored, ct)
        starts = None if (stored_all or recompute) else stored
        adj0, outs = jax.lax.scan(backward_segment, adj1, (starts, jnp.arange(L // seg)), reverse=True)
        gtheta, traj_out = jax.tree.map(merge_leading, outs)
        ss = jnp.arange(N + 1, dtype=dtype) / N
        if token_only:
            traj = None
            if trajectories:
                xs_all, ps = traj_out
                traj = (
                    ss,
                    jnp.concatenate([xs_all, final[0][None]], 0),
                    None,
                    jnp.concatenate([ps, p1[None]], 0),
                    None,
                )
            return AdjointResult(None, adj0, None, None, traj)  # pyright: ignore[reportArgumentType]
        grads = model_grads(model, gtheta, k, N, dtype)
        p0, b0, bz, phi, dw = adj0
        traj = None
        if trajectories:
            xs_all, zs_all, ps, bs = traj_out
            x1, z1, _ = final
            w = context.weights
            b1 = adj1[1]
            a_traj = jnp.concatenate([bs, b1[None]], 0) / jnp.where(w > 0, w, 1.0)[None, :, None]
            traj = (
                ss,
                jnp.concatenate([xs_all, x1[None]], 0),
                jnp.concatenate([zs_all, z1[None]], 0),
                jnp.concatenate([ps, p1[None]], 0),
                a_traj,
            )
        return finish(grads, p0, b0, dw, ct, traj, bz, phi, N + 1, d)


def _system_step(model, context, k, N, h, B, inj_x, inj_z, trajectories):
    """One backward Euler step of every row: tokens, context atoms (b), probes (bz, φ), weights, θ.

    At step ``context.last`` (the forward's last, where it moved the tokens alone) the token rows
    alone: nothing differentiates the final context there (the solution has none: b_N = 0, no probe
    rows), and a row of zero cotangent adds exactly zero to every product, so it is the same step
    without the context's n rows."""
    field, w, start = model.field, context.weights, context.start
    start = jnp.zeros((0,), jnp.int32) if start is None else start
    dtype = h.dtype

    def rows_step(adj, inputs, tokens_alone: bool):
        (xs, zs, zeta), i = inputs
        p, b, bz, phi, dw = adj
        n, R = zs.shape[0], zeta.shape[0]
        params = step_params(model, i, k, N, dtype)
        if tokens_alone:
            res = field.local_vjp(xs, EmpiricalMeasure.unchecked(zs, w), params, p)
            p_new, b_new = p + h * res.dx, b + h * res.dz
        else:
            res = system_vjp(field, params, xs, zs, w, zeta, p, b, bz)
            p_new, b_new = p + h * res.dx[:B], b + h * (res.dx[B : B + n] + res.dz)
        if inj_x is not None:
            p_new = p_new + inj_x[i]
        if inj_z is not None:
            b_new = b_new + inj_z[i]
        if R:
            assert res.dtargets is not None and res.phi is not None
            live = start <= i.astype(start.dtype)
            bz = jnp.where(live[:, None], bz + h * (res.dx[B + n :] + res.dtargets), bz)
            phi = jnp.where(live, phi + h * res.phi, phi)
        gtheta = jax.tree.map(lambda g: h * g, res.dparams)
        out = (gtheta, (xs, zs, p_new, b_new) if trajectories else None)
        return (p_new, b_new, bz, phi, dw + h * res.dw), out

    def backward_step(adj, inputs):
        every_row = functools.partial(rows_step, tokens_alone=False)
        if context.last is None or inputs[0][2].shape[0]:  # probes move on
            return every_row(adj, inputs)
        tokens = functools.partial(rows_step, tokens_alone=True)
        return jax.lax.cond(inputs[1] == context.last, tokens, every_row, adj, inputs)

    return backward_step


def _token_step(model, context, k, N, h, B, inj_x, inj_z, trajectories):
    """One backward Euler step of the token rows alone: p_i = p_{i+1} + h D_xV(x_i, μ_i)ᵀ p_{i+1}."""
    del B, inj_z

    def backward_step(p, inputs):
        state, i = inputs
        p_new = p + h * context.token_vjp(model, state, step_params(model, i, k, N, h.dtype), p)
        if inj_x is not None:
            p_new = p_new + inj_x[i]
        return p_new, (None, (state[0], p_new) if trajectories else None)

    return backward_step


__all__ = ["DiscreteAdjoint"]
