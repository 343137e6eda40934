"""Continuous Eulerian adjoint: the backward ODE system of docs/theory.md §2 integrated with diffrax.

Backward in s from 1 to 0, layer by layer (no step straddles a parameter jump), with b = ∂L/∂z
(b_j = w_j a_j, a_j the test-field gradient) and c = [p; b]:

    dx/ds = V(x, μ),  dz_j/ds = V(z_j, μ)                          (state, backward)
    dp/ds = −D_xV(x, μ)ᵀ p,                                         p(1) = ∂L/∂x(1)
    db_j/ds = −D_xV(z_j)ᵀ b_j − ∂_{z_j} Σ_r c_r·V(q_r, μ),           b(1) = ∂L/∂z(1)
    d(∂L/∂w_j)/ds = −∂_{w_j} Σ_r c_r·V(q_r, μ),           dg/ds = −Σ_r D_θV(q_r)ᵀ c_r

Saved-trajectory cotangents are added to (p, b) at the saved depths. Probe characteristics
(started at each layer boundary at the fixed probe points) follow the a-equation with zero mass,
plus dφ/ds = −Σ_r c_r·(δV/δμ)(q_r, μ)(ζ).

With the same solver forwards and backwards the gradient converges to the exact gradient of
the continuous flow at the solver's order. Memory: ``StoreEvery(1)`` (default) restarts the
backward state from the forward state stored at every layer boundary (O(L) memory, limits
backsolve drift); ``Backsolve()`` stores nothing and integrates the state backward from s = 1.
"""

from __future__ import annotations

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from .._flow import (
    FlowSpec,
    first_failure,
    fixed_controller,
    layer_ends,
    loop,
    solution,
    solve_segment,
    state_before,
    with_progress,
)
from .base import AbstractHandAdjoint, AdjointResult, cotangent_or_zero, finish, system_vjp
from .memory import AbstractMemory, Backsolve, StoreEvery, check_memory, store_every_layers


def _last(ys):
    return jax.tree.map(lambda a: a[-1], ys)


_SECOND_ORDER = (
    "ContinuousAdjoint() is first order only: its gradient approximates the continuous one (at the solvers' "
    "order) and is not the derivative of any loss, so differentiating it again (jax.hessian, jax.jacfwd or "
    "jax.grad of jax.grad) would give a non-symmetric, meaningless 'Hessian'. Use DiscreteAdjoint() (the exact "
    "adjoint of Euler, whose second derivatives equal autodiff's) or diffrax.DirectAdjoint()."
)


@jax.custom_jvp
def _first_order_only(tree):
    """The identity, refusing to be differentiated (forward or reverse: a custom JVP that raises)."""
    return tree


@_first_order_only.defjvp
def _first_order_only_jvp(primals, tangents):
    raise TypeError(_SECOND_ORDER)


class ContinuousAdjoint(AbstractHandAdjoint):
    """The adjoint ODE integrated backward with diffrax (any solver, fixed or adaptive steps).

    Attributes:
        solver: solver of the backward system; None uses the forward's solver.
        stepsize_controller: controller of the backward system; None uses the forward's.
        memory: ``StoreEvery(1)`` (default) or ``Backsolve()`` (:mod:`cfm_jax._adjoint.memory`).

    Not the exact gradient of the discretised forward: it converges to the gradient of the
    continuous flow at the solver's order, so its accuracy is that of the solves. With the
    defaults (the forward's solver and steps, i.e. Euler with one step per layer) it is only first
    order in 1/steps: 0.80 relative error from the continuous gradient in ``cfm-jax gradcheck``'s
    default problem (L = 6), against 4.9e-4 with ``diffrax.Bosh3()`` and 8 steps per layer. Use
    ``DiscreteAdjoint()`` for the exact gradient of the residual network. The forward itself is the
    same loop as with any other adjoint.
    """

    solver: diffrax.AbstractSolver | None = None
    stepsize_controller: diffrax.AbstractStepSizeController | None = None
    memory: AbstractMemory = StoreEvery(1)

    def _backward_spec(self, spec: FlowSpec) -> FlowSpec:
        """The forward's spec with this adjoint's solver and controller (where given)."""
        if self.solver is not None and not isinstance(self.solver, diffrax.AbstractSolver):
            raise ValueError(f"ContinuousAdjoint `solver` must be a diffrax solver or None, got {self.solver!r}.")
        solver = spec.solver if self.solver is None else self.solver
        if self.stepsize_controller is None:
            controller = spec.stepsize_controller
        else:
            try:
                controller = fixed_controller(self.stepsize_controller)
            except ValueError as e:
                raise ValueError(f"ContinuousAdjoint {e}") from None
        if controller is not None and not isinstance(solver, diffrax.AbstractAdaptiveSolver):
            raise ValueError(
                f"ContinuousAdjoint `stepsize_controller`: the backward solver {type(solver).__name__}() has no "
                "error estimate to adapt the steps from; pass an adaptive solver (e.g. diffrax.Tsit5())."
            )
        return FlowSpec(solver, controller, spec.saveat, spec.steps, spec.max_steps)

    def check_spec(self, model, spec):
        self._backward_spec(spec)
        self._segment_steps(spec.steps // model.num_layers)

    def _segment_steps(self, steps_per_layer: int) -> int | None:
        """Steps per stored segment for this strategy's memory policy, by the policy's type (None:
        nothing stored, the state integrated backward); a ``ValueError`` naming ``memory`` otherwise."""
        memory = check_memory(self.memory)
        if isinstance(memory, Backsolve):
            return None
        if isinstance(memory, StoreEvery):
            c = store_every_layers(memory)
            if c != 1:
                raise ValueError(
                    f"`memory`=StoreEvery({c!r}): ContinuousAdjoint restarts the state from every layer "
                    "boundary; use StoreEvery(1) or Backsolve()."
                )
            return steps_per_layer
        raise ValueError(
            f"`memory`={type(memory).__name__}() does not apply to ContinuousAdjoint; use StoreEvery(1) "
            "(restart from layer boundaries) or Backsolve()."
        )

    def probe_stride(self, model, spec):
        return spec.steps // model.num_layers

    def run_forward(self, model, context, y0, spec, *, store):
        keep = store and not isinstance(self.memory, Backsolve)
        emit = "ends" if keep and spec.saveat.emit == "none" else spec.saveat.emit
        result = with_progress(spec, lambda meter: loop(model, context, y0, spec, emit=emit, meter=meter))
        sol = solution(model, context, y0, spec, result, emit)
        residuals = None
        if store:
            # the states at every layer's start, to restart the backward state from
            ends = None
            if keep:  # the layer ends; the start of layer l is y0 or the end of layer l − 1
                assert result.ys is not None
                ends = layer_ends(result.ys, emit)
            residuals = (result.final, ends)
        return sol, residuals

    def run_backward(self, model, context, y0, spec, residuals, cotangents, *, trajectories=False) -> AdjointResult:
        """The backward system of the module docstring; its result refuses second derivatives."""
        return _first_order_only(self._backward(model, context, y0, spec, residuals, cotangents, trajectories))

    def _backward(self, model, context, y0, spec, residuals, cotangents, trajectories):
        x, z, zeta0 = y0
        w, start = context.weights, context.start
        L = model.num_layers
        k = spec.steps // L
        start = jnp.zeros((0,), jnp.int32) if start is None else start
        dtype, B, n, d = x.dtype, x.shape[0], z.shape[0], x.shape[1]
        R = zeta0.shape[0]
        pc = model.piecewise_constant
        bspec = self._backward_spec(spec)
        final, ends = residuals
        if trajectories and ends is None:
            raise ValueError(
                "adjoint trajectories need the layer-boundary states: `memory`=StoreEvery(1), not Backsolve()."
            )
        field = model.field
        ct = cotangents
        # saved-trajectory cotangents are injected at every step (SaveAt(steps)) or layer boundary
        sub = k if spec.saveat.steps else 1
        per_sub = k // sub

        def split(a):  # (S, ...) saved cotangent -> boundary value (S−1 → reshaped to (L, sub, ...)) and final
            return None if a is None else (a[:-1].reshape((L, sub) + a.shape[1:]), a[-1])

        inj_x, inj_z = split(ct.xs), split(ct.zs)

        p1 = cotangent_or_zero(ct.x1, x) + (0 if inj_x is None else inj_x[1])
        b1 = cotangent_or_zero(ct.z1, z) + (0 if inj_z is None else inj_z[1])

        if pc:
            g_zero = jax.tree.map(jnp.zeros_like, model.segment_params(0, 0.0))
        else:
            g_zero = jax.tree.map(jnp.zeros_like, eqx.filter(model, eqx.is_inexact_array))

        def adj_field(s, Y, args):
            (xs, zs, zeta), (p, b, bz, phi, dw, _) = Y
            params, l = (args[0] if pc else model.params_at(s)), args[1]
            res = system_vjp(field, params, xs, zs, w, zeta, p, b, bz)
            live = (start <= (l * k).astype(start.dtype)).astype(dtype)
            vel = res.velocity
            dstate = (vel[:B], vel[B : B + n], live[:, None] * vel[B + n :])
            dp = -res.dx[:B]
            db = -(res.dx[B : B + n] + res.dz)
            if R:
                assert res.dtargets is not None and res.phi is not None
                dbz = -live[:, None] * (res.dx[B + n :] + res.dtargets)
                dphi = -live * res.phi
            else:
                dbz, dphi = jnp.zeros_like(bz), jnp.zeros_like(phi)
            if pc:
                dg = jax.tree.map(jnp.negative, res.dparams)
            else:
                _, pull = eqx.filter_vjp(lambda m: m.params_at(s), model)
                dg = jax.tree.map(jnp.negative, pull(res.dparams)[0])
            return dstate, (dp, db, dbz, dphi, -res.dw, dg)

        term = diffrax.ODETerm(adj_field)

        def bwd_layer(carry, inputs):
            state, adj = carry
            l, inj = inputs
            args = (model.segment_params(l, l / L) if pc else None, l)
            p, b, bz, phi, dw, g = adj
            g_in = g_zero if pc else g

            def bwd_sub(c, j):  # sub-interval j (from the end) of layer l
                st, (p, b, bz, phi, dw, g) = c
                t0 = (l.astype(dtype) + (j + 1).astype(dtype) / sub) / L
                t1 = (l.astype(dtype) + j.astype(dtype) / sub) / L
                seg = solve_segment(term, bspec, t0, t1, per_sub, (st, (p, b, bz, phi, dw, g)), args)
                nsteps = seg.accepted
                st, (p, b, bz, phi, dw, g) = _last(seg.ys)
                if inj is not None:
                    jx, jz = inj
                    p = p if jx is None else p + jx[j]
                    b = b if jz is None else b + jz[j]
                out = (nsteps, seg.result, (st[0], st[1], p, b) if trajectories else None)
                return (st, (p, b, bz, phi, dw, g)), out

            (state, (p, b, bz, phi, dw, g_out)), (nsteps, results, tr) = jax.lax.scan(
                bwd_sub, (state, (p, b, bz, phi, dw, g_in)), jnp.arange(sub), reverse=True
            )
            if ends is not None:  # restart from the stored forward state at this layer's start
                state = state_before(y0, ends, l)
            tr = None if tr is None else jax.tree.map(lambda a: a[0], tr)
            out = (g_out if pc else None, tr, nsteps.sum(), results)
            return (state, (p, b, bz, phi, dw, g_out if not pc else g)), out

        # the backward starts from the final state; after layer l it restarts from the stored start
        # of layer l (the end of layer l − 1) unless the state is backsolved
        inj = None
        if inj_x is not None or inj_z is not None:
            inj = (None if inj_x is None else inj_x[0], None if inj_z is None else inj_z[0])
        adj1 = (p1, b1, jnp.zeros_like(zeta0), jnp.zeros((R,), dtype), jnp.zeros_like(w), g_zero)
        (_, adj0), (g_layers, traj_bwd, _, results) = jax.lax.scan(
            bwd_layer, (final, adj1), (jnp.arange(L), inj), reverse=True
        )
        # an adaptive or implicit backward solve can fail: report its first failure (in depth order)
        result = first_failure(jax.tree.map(lambda r: r.reshape(-1), results)) if bspec.can_fail else None
        p0, b0, bz, phi, dw, g_total = adj0
        if pc:
            stacked, pull = eqx.filter_vjp(lambda m: m.stacked_params(), model)
            grads = pull(jax.tree.map(lambda g, p: g.astype(p.dtype), g_layers, stacked))[0]
        else:
            grads = g_total
        traj = None
        if trajectories:
            x1, z1, _ = final
            assert traj_bwd is not None and ends is not None
            _, _, ps_b, bs_b = traj_bwd  # values at the layer starts s = l/L
            iw = 1.0 / jnp.where(w > 0, w, 1.0)[None, :, None]
            traj = (
                jnp.arange(L + 1, dtype=dtype) / L,
                jnp.concatenate([x[None], ends[0]], 0),
                jnp.concatenate([z[None], ends[1]], 0),
                jnp.concatenate([ps_b, p1[None]], 0),
                jnp.concatenate([bs_b, b1[None]], 0) * iw,
            )
        return finish(grads, p0, b0, dw, ct, traj, bz, phi, L + 1, d)._replace(result=result)


__all__ = ["ContinuousAdjoint"]
