"""Continuous Eulerian adjoint: the backward ODE system of SPEC §2 integrated with diffrax.

Backward in s from 1 to 0, layer by layer (no step straddles a parameter jump):

    dx/ds = V(x, μ),  dz_i/ds = V(z_i, μ)                         (state re-computed backward)
    dp/ds = −D_xV(x, μ)ᵀ p,                                       p(1) = ∇ℓ(x(1))
    da_i/ds = −D_xV(z_i)ᵀ a_i − Σ_b G(x_b; z_i)ᵀ p_b − Σ_k w_k G(z_k; z_i)ᵀ a_k,   a_i(1) = 0
    dg/ds = −Σ_b D_θV(x_b)ᵀ p_b − Σ_k w_k D_θV(z_k)ᵀ a_k,           g(1) = 0, ∂L/∂θ = g(0)

Probe characteristics (started at each layer boundary s_l at the fixed probe points) follow the
same a-equation with zero mass, plus dφ/ds = −Σ_q c_q·(δV/δμ)(q, μ)(ζ).

Any diffrax solver and step-size controller can be used; with the same solver forwards and
backwards the gradient converges to the exact gradient of the continuous flow at the solver's
order. ``checkpoint``: ``None``/``"layers"`` restarts the backward state (x, z, ζ) from the forward
state stored at every layer boundary (O(L) memory, limits backsolve drift), ``"recompute"``
(alias ``"backsolve"``) stores nothing and integrates the state backward from s = 1 (memory
independent of L).
"""

from __future__ import annotations

from typing import NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from ..measures import EmpiricalMeasure
from ..paths import AbstractCFM
from .local import particle_system_vjp


class ContinuousAdjoint(NamedTuple):
    """Raw output of :func:`continuous_adjoint`; ``traj`` holds layer-boundary values."""

    x1: jax.Array
    z1: jax.Array
    grads: AbstractCFM
    p0: jax.Array
    a0: jax.Array
    traj: tuple | None
    probe_grads: jax.Array | None
    probe_values: jax.Array | None
    num_steps: jax.Array


def _solve(term, solver, t0, t1, k, y0, args, controller, max_steps, dtype):
    if controller is None or isinstance(controller, (diffrax.ConstantStepSize, diffrax.StepTo)):
        ts = t0 + (t1 - t0) * jnp.arange(k + 1, dtype=dtype) / k
        # XLA may turn "/ k" into "* (1/k)": pin the end points that StepTo checks exactly
        ctrl = diffrax.StepTo(ts=ts.at[0].set(t0).at[-1].set(t1))
        dt0, cap = None, k
    else:
        ctrl, dt0, cap = controller, (t1 - t0) / k, max_steps
    sol = diffrax.diffeqsolve(
        term, solver, t0=t0, t1=t1, dt0=dt0, y0=y0, args=args, stepsize_controller=ctrl, max_steps=cap
    )
    return jax.tree.map(lambda a: a[-1], sol.ys), sol.stats["num_accepted_steps"]


def continuous_adjoint(
    model: AbstractCFM,
    x,
    z,
    w,
    cot_fn,
    *,
    solver=None,
    steps: int,
    stepsize_controller=None,
    checkpoint=None,
    probes=None,
    trajectories: bool = False,
    closed_form: bool = True,
    chunk_size="field",
    max_steps: int = 4096,
) -> ContinuousAdjoint:
    """Forward solve, then the adjoint ODE backward (see the module docstring).

    Shapes as in :func:`~.discrete.euler_adjoint`; ``steps`` is the total number of (initial)
    steps over [0, 1], split evenly over the L layers.
    """
    if checkpoint not in (None, "steps", "layers", "recompute", "backsolve"):
        raise ValueError(
            f"`checkpoint` for the continuous adjoint must be None, 'layers' or 'recompute'/'backsolve', got {checkpoint!r}."
        )
    backsolve = checkpoint in ("recompute", "backsolve")
    dtype = x.dtype
    solver = diffrax.Euler() if solver is None else solver
    L = model.num_layers
    k = steps // L if steps % L == 0 else -(-steps // L)
    B, n, d = x.shape[0], z.shape[0], x.shape[1]
    field = model.field
    pc = model.piecewise_constant
    if probes is not None:
        P = probes.shape[0]
        zeta0 = jnp.tile(probes.astype(dtype), (L + 1, 1))
        start = jnp.repeat(jnp.arange(L + 1), P)  # starts at layer boundary s_l = l/L
    else:
        zeta0 = jnp.zeros((0, d), dtype)
        start = jnp.zeros((0,), jnp.int32)
    R = zeta0.shape[0]

    def theta(s, args):
        return args[0] if pc else model.params_at(s)

    def fwd_field(s, state, args):
        xs, zs, zeta = state
        vel = model.velocity(jnp.concatenate([xs, zs, zeta], 0), EmpiricalMeasure(zs, w), theta(s, args))
        moving = (start <= args[1])[:, None].astype(dtype)
        return vel[:B], vel[B : B + n], moving * vel[B + n :]

    fwd_term = diffrax.ODETerm(fwd_field)

    def fwd_layer(state, l):
        t0, t1 = l.astype(dtype) / L, (l + 1).astype(dtype) / L
        args = (model.layer_params(l) if pc else None, l)
        out, nsteps = _solve(fwd_term, solver, t0, t1, k, state, args, stepsize_controller, max_steps, dtype)
        return out, (state, nsteps)

    final, (bounds, fwd_steps) = jax.lax.scan(fwd_layer, (x, z, zeta0), jnp.arange(L))
    x1, z1, zeta1 = final
    p1 = cot_fn(x1)

    if pc:
        g_zero = jax.tree.map(jnp.zeros_like, model.layer_params(0))
    else:
        g_zero = jax.tree.map(jnp.zeros_like, eqx.filter(model, eqx.is_inexact_array))

    def adj_field(s, Y, args):
        (xs, zs, zeta), (p, a, azeta, phi, _) = Y
        params, l = theta(s, args), args[1]
        res = particle_system_vjp(
            field, params, xs, zs, w, zeta, p, a, azeta, closed_form=closed_form, chunk_size=chunk_size
        )
        live = (start <= l).astype(dtype)
        vel = res.velocity
        dstate = (vel[:B], vel[B : B + n], live[:, None] * vel[B + n :])
        dp = -res.dx[:B]
        da = -(res.dx[B : B + n] / w[:, None] + res.dmu)
        if R:
            dazeta = -live[:, None] * (res.dx[B + n :] + res.dtargets)
            dphi = -live * res.phi
        else:
            dazeta, dphi = jnp.zeros_like(azeta), jnp.zeros_like(phi)
        if pc:
            dg = jax.tree.map(jnp.negative, res.dparams)
        else:
            _, pull = eqx.filter_vjp(lambda m: m.params_at(s), model)
            dg = jax.tree.map(jnp.negative, pull(res.dparams)[0])
        return dstate, (dp, da, dazeta, dphi, dg)

    adj_term = diffrax.ODETerm(adj_field)

    def bwd_layer(carry, inputs):
        state, adj = carry
        l, bound_end = inputs
        if not backsolve:
            state = bound_end
        p, a, azeta, phi, g = adj
        g_in = g_zero if pc else g
        t0, t1 = (l + 1).astype(dtype) / L, l.astype(dtype) / L
        args = (model.layer_params(l) if pc else None, l)
        (state, (p, a, azeta, phi, g_out)), nsteps = _solve(
            adj_term, solver, t0, t1, k, (state, (p, a, azeta, phi, g_in)), args, stepsize_controller, max_steps, dtype
        )
        out = (g_out if pc else None, (state[0], state[1], p, a) if trajectories else None, nsteps)
        return (state, (p, a, azeta, phi, g_out if not pc else g)), out

    # the state at the end of layer l is the stored start of layer l + 1 (or the final state)
    bound_ends = jax.tree.map(lambda b, f: jnp.concatenate([b[1:], f[None]], 0), bounds, final)
    adj1 = (p1, jnp.zeros_like(z), jnp.zeros_like(zeta0), jnp.zeros((R,), dtype), g_zero)
    (_, adj0), (g_layers, traj_bwd, bwd_steps) = jax.lax.scan(
        bwd_layer, (final, adj1), (jnp.arange(L), bound_ends), reverse=True
    )
    p0, a0, azeta, phi, g_total = adj0
    if pc:
        stacked, pull = eqx.filter_vjp(lambda m: m.stacked_params(), model)
        grads = pull(jax.tree.map(lambda g, p: g.astype(p.dtype), g_layers, stacked))[0]
    else:
        grads = g_total
    traj = None
    if trajectories:
        xs_b, zs_b, ps_b, as_b = traj_bwd  # values at the layer starts s = l/L
        ss = jnp.arange(L + 1, dtype=dtype) / L
        traj = (
            ss,
            jnp.concatenate([bounds[0], x1[None]], 0),
            jnp.concatenate([bounds[1], z1[None]], 0),
            jnp.concatenate([ps_b, p1[None]], 0),
            jnp.concatenate([as_b, jnp.zeros_like(z)[None]], 0),
        )
        del xs_b, zs_b
    probe_grads = probe_values = None
    if R:
        probe_grads = azeta.reshape(L + 1, -1, d)
        probe_values = phi.reshape(L + 1, -1)
    num_steps = fwd_steps.sum() + bwd_steps.sum()
    return ContinuousAdjoint(x1, z1, grads, p0, a0, traj, probe_grads, probe_values, num_steps)


__all__ = ["ContinuousAdjoint", "continuous_adjoint"]
