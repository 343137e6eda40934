"""Exact (discrete) adjoint of the explicit Euler scheme, i.e. of the L-layer residual network.

Forward, N = L·k steps of size h = 1/N (k steps per layer), state (x, z) and optional passive
probe characteristics ζ:

    x_{i+1} = x_i + h V(x_i, μ_i; θ_i),  z_{i+1} = z_i + h V(z_i, μ_i; θ_i),  μ_i = Σ_j w_j δ_{z_j,i}.

Backward, from the output cotangents (p_N = ∂L/∂x_N, b_N = ∂L/∂z_N; saved-trajectory
cotangents are added to p_i, b_i as the sweep passes step i):

    p_i = p_{i+1} + h D_xV(x_i)ᵀ p_{i+1}
    b_i = b_{i+1} + h [D_xV(z_i)ᵀ b_{i+1} + ∂_{z_i} Σ_r c_r·V(q_r, μ_i)]          (c = [p; b])
    ∂L/∂log w_j += h ∂_{log w_j} Σ_r c_r·V(q_r, μ_i),   ∂L/∂θ_i = h Σ_r D_θV(q_r)ᵀ c_r

which is the chain rule of the scheme, so it equals reverse-mode autodiff through the same
scheme to round-off (docs/theory.md §2). b_j = w_j a_j with a_j = ∇φ_s(z_j) the test-field
gradient. A probe started at step i₀ at point y follows the a-recursion with zero mass and
gives ∇φ_{s_{i₀}}(y); its value φ accumulates h Σ_r c_r·(δV/δμ)(q_r, μ_i)(ζ_i).
Memory: :mod:`cfm_jax.adjoint.memory` (StoreAll, StoreEvery(c), Recompute).
"""

from __future__ import annotations

import diffrax
import jax
import jax.numpy as jnp

from ..flow import FlowSolution
from ..measures import EmpiricalMeasure
from .base import AbstractHandAdjoint, finish, model_grads, step_params, system_vjp
from .memory import AbstractMemory, Recompute, StoreAll, segment_steps


def _dims(model, spec):
    L, N = model.num_layers, spec.steps
    k = N // L if model.piecewise_constant else 1
    return L, N, k


def _probe_rows(probes, N, d, dtype):
    """Probe characteristics: row r = i·P + j starts at step i at probes[j]; ``(R, d)``, ``(R,)``."""
    if probes is None:
        return jnp.zeros((0, d), dtype), jnp.zeros((0,), jnp.int32)
    P = probes.shape[0]
    return jnp.tile(probes.astype(dtype), (N + 1, 1)), jnp.repeat(jnp.arange(N + 1), P)


def _saved(states, k, saveat, final):
    """SaveAt outputs from the step-start states ``(N, ...)`` plus the final state."""
    xs_all = jnp.concatenate([states[0], final[0][None]], 0)
    zs_all = jnp.concatenate([states[1], final[1][None]], 0)
    if saveat.steps:
        return xs_all, zs_all
    return xs_all[::k], zs_all[::k]


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
    ``Recompute()`` (:mod:`cfm_jax.adjoint.memory`).
    """

    memory: AbstractMemory = StoreAll()

    def validate(self, model, spec):
        if type(spec.solver) is not diffrax.Euler:
            raise ValueError(
                "`adjoint`=DiscreteAdjoint() is the exact adjoint of explicit Euler; `solver` must be diffrax.Euler() "
                f"(the default), got {type(spec.solver).__name__}. Use ContinuousAdjoint() or a diffrax adjoint."
            )
        if spec.stepsize_controller is not None and not isinstance(spec.stepsize_controller, diffrax.ConstantStepSize):
            raise ValueError("`adjoint`=DiscreteAdjoint() needs fixed steps; `stepsize_controller` must be None.")
        L, N, k = _dims(model, spec)
        segment_steps(self.memory, "discrete", layers=L, steps=N, steps_per_layer=k)

    # ---------------------------------------------------------------------------------- forward

    def _step_fn(self, model, w, spec, start):
        L, N, k = _dims(model, spec)

        def step(state, i):
            x, z, zeta = state
            dtype = x.dtype
            h = jnp.asarray(1.0 / N, dtype)
            B, n = x.shape[0], z.shape[0]
            vel = model.velocity(jnp.concatenate([x, z, zeta], 0), EmpiricalMeasure.unchecked(z, w), step_params(model, i, k, N, dtype))
            moving = (start <= i)[:, None].astype(dtype)
            return (x + h * vel[:B], z + h * vel[B : B + n], zeta + h * moving * vel[B + n :])

        return step

    def _run_steps(self, step, state, first, count, emit: bool):
        def body(st, i):
            return step(st, i), (st if emit else None)

        return jax.lax.scan(body, state, first + jnp.arange(count))

    def run_forward(self, model, x, z, w, spec, *, store, probes=None):
        L, N, k = _dims(model, spec)
        zeta0, start = _probe_rows(probes, N, x.shape[1], x.dtype)
        step = self._step_fn(model, w, spec, start)
        state0 = (x, z, zeta0)
        saving = spec.saveat.steps or spec.saveat.layers
        seg = segment_steps(self.memory, "discrete", layers=L, steps=N, steps_per_layer=k) if store else None
        residuals = None
        if not store or seg is None:
            keep = saving or store
            final, states = self._run_steps(step, state0, 0, N, keep)
            if store:
                residuals = states
        else:
            recompute = isinstance(self.memory, Recompute)

            def seg_body(st, iseg):
                out, sts = self._run_steps(step, st, iseg * seg, seg, saving)
                return out, (None if recompute else st, sts)

            final, (starts, states) = jax.lax.scan(seg_body, state0, jnp.arange(N // seg))
            if saving:
                states = jax.tree.map(lambda a: a.reshape((N,) + a.shape[2:]), states)
            residuals = starts
        sol = self._solution(final, states if saving else None, w, spec, k, N)
        return sol, residuals

    def _solution(self, final, states, w, spec, k, N):
        x1, z1, _ = final
        ss = xs = zs = None
        if states is not None:
            xs, zs = _saved(states, k, spec.saveat, final)
            ss = jnp.arange(N + 1, dtype=x1.dtype) / N
            ss = ss if spec.saveat.steps else ss[::k]
        return FlowSolution(x1=x1, z1=z1, weights=w, ss=ss, xs=xs, zs=zs, num_steps=jnp.asarray(N))

    # --------------------------------------------------------------------------------- backward

    def run_backward(self, model, x, z, w, spec, residuals, cotangents, *, probes=None, trajectories=False):
        L, N, k = _dims(model, spec)
        dtype = x.dtype
        h = jnp.asarray(1.0 / N, dtype)
        B, n, d = x.shape[0], z.shape[0], x.shape[1]
        zeta0, start = _probe_rows(probes, N, d, dtype)
        R = zeta0.shape[0]
        step = self._step_fn(model, w, spec, start)
        state0 = (x, z, zeta0)
        seg = segment_steps(self.memory, "discrete", layers=L, steps=N, steps_per_layer=k)
        stored_all = seg is None
        seg = N if stored_all else seg
        nseg = N // seg
        recompute = isinstance(self.memory, Recompute)
        ct = cotangents
        inj_x = _inject(ct.xs, k, spec.saveat, N)
        inj_z = _inject(ct.zs, k, spec.saveat, N)

        def zero_or(a, like):
            return jnp.zeros_like(like) if a is None else a.astype(like.dtype)

        # terminal condition: the final-state cotangents plus the last saved entry
        p1 = zero_or(ct.x1, x) + (0 if inj_x is None else inj_x[N])
        b1 = zero_or(ct.z1, z) + (0 if inj_z is None else inj_z[N])
        field = model.field

        def backward_step(adj, inputs):
            (xs, zs, zeta), i = inputs
            p, b, bz, phi, dlogw = adj
            res = system_vjp(field, step_params(model, i, k, N, dtype), xs, zs, w, zeta, p, b, bz)
            p_new = p + h * res.dx[:B]
            b_new = b + h * (res.dx[B : B + n] + res.dz)
            if inj_x is not None:
                p_new = p_new + inj_x[i]
            if inj_z is not None:
                b_new = b_new + inj_z[i]
            if R:
                live = start <= i
                bz = jnp.where(live[:, None], bz + h * (res.dx[B + n :] + res.dtargets), bz)
                phi = jnp.where(live, phi + h * res.phi, phi)
            gtheta = jax.tree.map(lambda g: h * g, res.dparams)
            out = (gtheta, (p_new, b_new) if trajectories else None)
            return (p_new, b_new, bz, phi, dlogw + h * res.dlogw), out

        def backward_segment(adj, inputs):
            seg_start, iseg = inputs
            first = iseg * seg
            if stored_all:
                seg_states = residuals
            else:
                if recompute:  # replay from s = 0 to this segment's start
                    seg_start = jax.lax.fori_loop(0, first, lambda i, st: step(st, i), state0)
                _, seg_states = self._run_steps(step, seg_start, first, seg, True)
            return jax.lax.scan(backward_step, adj, (seg_states, first + jnp.arange(seg)), reverse=True)

        adj1 = (p1, b1, jnp.zeros_like(zeta0), jnp.zeros((R,), dtype), jnp.zeros_like(w))
        starts = None if (stored_all or recompute) else residuals
        adj0, outs = jax.lax.scan(
            backward_segment, adj1, (starts, jnp.arange(nseg)), reverse=True
        )
        flat = lambda t: t.reshape((N,) + t.shape[2:])  # noqa: E731
        gtheta, traj_adj = jax.tree.map(flat, outs)
        grads = model_grads(model, gtheta, k, N, dtype)
        p0, b0, bz, phi, dlogw = adj0
        traj = None
        if trajectories:
            if not stored_all:
                raise ValueError("trajectories need `memory`=StoreAll().")
            xs_all, zs_all, _ = residuals
            x1, z1, _ = step(jax.tree.map(lambda a: a[-1], residuals), N - 1)
            ps, bs = traj_adj
            a_traj = jnp.concatenate([bs, b1[None]], 0) / jnp.where(w > 0, w, 1.0)[None, :, None]
            traj = (
                jnp.arange(N + 1, dtype=dtype) / N,
                jnp.concatenate([xs_all, x1[None]], 0),
                jnp.concatenate([zs_all, z1[None]], 0),
                jnp.concatenate([ps, p1[None]], 0),
                a_traj,
            )
        return finish(grads, p0, b0, dlogw, w, ct, traj, bz, phi, N + 1, d)


__all__ = ["DiscreteAdjoint"]
