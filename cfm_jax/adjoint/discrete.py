"""Exact (discrete) adjoint of the explicit Euler scheme, i.e. of the L-layer residual network.

Forward, N = L·k steps of size h = 1/N (k steps per layer), state (x, z) and optional passive
probe characteristics ζ:

    x_{i+1} = x_i + h V(x_i, μ_i; θ_i),  z_{i+1} = z_i + h V(z_i, μ_i; θ_i),  μ_i = Σ_j w_j δ_{z_j,i}.

Backward (p_N = ∇ℓ(x_N), a_N = 0; a_i is the test-field gradient, ∂L/∂z_{j,i} = w_j a_{j,i}):

    p_i = p_{i+1} + h D_xV(x_i)ᵀ p_{i+1}
    a_i = a_{i+1} + h [D_xV(z_i)ᵀ a_{i+1} + Σ_b G(x_b; z_i)ᵀ p_{b,i+1} + Σ_k w_k G(z_k; z_i)ᵀ a_{k,i+1}]
    ∂L/∂θ_i = h [Σ_b D_θV(x_b)ᵀ p_{b,i+1} + Σ_k w_k D_θV(z_k)ᵀ a_{k,i+1}]

which is the chain rule of the scheme, so it equals reverse-mode autodiff through the same
scheme to round-off. A probe started at step i₀ at point y follows the same a-recursion with
zero mass (it moves in the field but does not act on it) and gives ∇φ_{s_{i₀}}(y); its value
φ accumulates h Σ_q c_q·(δV/δμ)(q, μ_i)(ζ_i).

Memory (``checkpoint``): ``None`` stores every Euler state (one forward, one backward);
``"layers"`` stores layer boundaries and recomputes the k states inside a layer; an int c stores
every c-th layer boundary and recomputes c-layer segments (O(L/c + c·k) states);
``"recompute"`` stores nothing but the initial state and recomputes each layer's start from s = 0
(memory independent of L, time O(L²) layer evaluations).
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from ..measures import EmpiricalMeasure
from ..paths import AbstractCFM
from .local import particle_system_vjp

CHECKPOINT_MODES = (None, "steps", "layers", "recompute")


class DiscreteAdjoint(NamedTuple):
    """Raw output of :func:`euler_adjoint` (2-D token arrays, stacked per-step θ-cotangents).

    ``grads`` is model-shaped (∂L/∂θ of the stacked parameters); ``traj`` is None unless
    requested: ``(ss (N+1,), xs (N+1,B,d), zs (N+1,n,d), ps (N+1,B,d), a (N+1,n,d))``.
    ``probe_grads``/``probe_values``: ``(N+1, P, d)``/``(N+1, P)`` or None.
    """

    x1: jax.Array
    z1: jax.Array
    grads: AbstractCFM
    p0: jax.Array
    a0: jax.Array
    traj: tuple | None
    probe_grads: jax.Array | None
    probe_values: jax.Array | None


def step_params(model: AbstractCFM, i, k: int, N: int, dtype):
    """θ used by Euler step ``i``: layer ⌊i/k⌋ for piecewise-constant paths, else θ(i/N)."""
    if model.piecewise_constant:
        return model.layer_params(i // k)
    return model.params_at(i.astype(dtype) / N)


def segment_length(checkpoint, L: int, k: int) -> int | None:
    """Steps per recomputed segment (None: store every state). Raises on a bad ``checkpoint``."""
    if checkpoint is None or checkpoint == "steps":
        return None
    if checkpoint in ("layers", "recompute"):
        return k
    if isinstance(checkpoint, int) and not isinstance(checkpoint, bool) and checkpoint >= 1:
        if L % checkpoint:
            raise ValueError(f"`checkpoint`={checkpoint} (layers per stored state) must divide L={L}.")
        return checkpoint * k
    raise ValueError(
        f"`checkpoint` must be None, 'steps', 'layers', 'recompute' or a positive int dividing L, got {checkpoint!r}."
    )


def _model_grads(model: AbstractCFM, per_step: dict, k: int, N: int, dtype) -> AbstractCFM:
    """Map per-step cotangents of θ_i to a model-shaped gradient (the path's own chain rule)."""
    if model.piecewise_constant:
        per_layer = jax.tree.map(lambda g: g.reshape((N // k, k) + g.shape[1:]).sum(1), per_step)
        stacked, pull = eqx.filter_vjp(lambda m: m.stacked_params(), model)
        # the solve may run in a wider dtype than the parameters (e.g. float64 tokens)
        return pull(jax.tree.map(lambda g, p: g.astype(p.dtype), per_layer, stacked))[0]
    idx = jnp.arange(N)
    path, pull = eqx.filter_vjp(lambda m: jax.vmap(lambda i: m.params_at(i.astype(dtype) / N))(idx), model)
    return pull(jax.tree.map(lambda g, p: g.astype(p.dtype), per_step, path))[0]


def euler_adjoint(
    model: AbstractCFM,
    x,
    z,
    w,
    cot_fn,
    *,
    steps: int,
    checkpoint=None,
    probes=None,
    trajectories: bool = False,
    closed_form: bool = True,
    chunk_size="field",
) -> DiscreteAdjoint:
    """Forward Euler solve plus its exact adjoint.

    Args:
        model: any model; its field's local products come from :func:`~.local.local_vjp`.
        x: ``(B, d)`` target tokens; z: ``(n, d)`` context points; w: ``(n,)`` weights.
        cot_fn: ``x1 (B, d) -> p_N (B, d)``, the loss gradient at the final tokens.
        steps: N, a multiple of L for piecewise-constant paths.
        checkpoint: memory mode (see the module docstring).
        probes: ``(P, d)`` fixed points; a probe characteristic starts at each of them at every
            saved depth s_i = i/N, i = 0..N.
        trajectories: also return the states and adjoints at every step.
    """
    dtype = x.dtype
    L, N = model.num_layers, steps
    k = N // L if model.piecewise_constant else 1
    h = jnp.asarray(1.0 / N, dtype)
    B, n = x.shape[0], z.shape[0]
    field = model.field
    if probes is not None:
        P = probes.shape[0]
        zeta0 = jnp.tile(probes.astype(dtype), (N + 1, 1))  # row r = i·P + j starts at step i
        start = jnp.repeat(jnp.arange(N + 1), P)
    else:
        zeta0 = jnp.zeros((0, x.shape[1]), dtype)
        start = jnp.zeros((0,), jnp.int32)
    R = zeta0.shape[0]

    def forward_step(state, i):
        xs, zs, zeta = state
        params = step_params(model, i, k, N, dtype)
        vel = model.velocity(jnp.concatenate([xs, zs, zeta], 0), EmpiricalMeasure(zs, w), params)
        moving = (start <= i)[:, None].astype(dtype)
        return (xs + h * vel[:B], zs + h * vel[B : B + n], zeta + h * moving * vel[B + n :])

    def backward_step(adj, inputs):
        state, i = inputs
        xs, zs, zeta = state
        p, a, azeta, phi = adj
        params = step_params(model, i, k, N, dtype)
        res = particle_system_vjp(
            field, params, xs, zs, w, zeta, p, a, azeta, closed_form=closed_form, chunk_size=chunk_size
        )
        p_new = p + h * res.dx[:B]
        a_new = a + h * (res.dx[B : B + n] / w[:, None] + res.dmu)
        if R:
            live = start <= i
            azeta = jnp.where(live[:, None], azeta + h * (res.dx[B + n :] + res.dtargets), azeta)
            phi = jnp.where(live, phi + h * res.phi, phi)
        gtheta = jax.tree.map(lambda g: h * g, res.dparams)
        out = (gtheta, (p_new, a_new) if trajectories else None)
        return (p_new, a_new, azeta, phi), out

    def run_steps(state, first, count):
        """``count`` forward steps from global step ``first``; returns final and step-start states."""

        def body(st, i):
            return forward_step(st, i), st

        return jax.lax.scan(body, state, first + jnp.arange(count))

    state0 = (x, z, zeta0)
    seg = segment_length(checkpoint, L, k)
    if trajectories and seg is not None:
        seg = None  # the trajectories are stored anyway
    stored_all = seg is None
    if stored_all:
        final, states = run_steps(state0, 0, N)
        states = jax.tree.map(lambda s: s[None], states)
        nseg, seg = 1, N
    elif checkpoint == "recompute":
        nseg = N // seg
        final = jax.lax.fori_loop(0, N, lambda i, st: forward_step(st, i), state0)
        states = None
    else:
        nseg = N // seg

        def seg_body(st, iseg):
            out, _ = run_steps(st, iseg * seg, seg)
            return out, st

        final, states = jax.lax.scan(seg_body, state0, jnp.arange(nseg))

    x1, z1, _ = final
    p1 = cot_fn(x1)
    adj1 = (p1, jnp.zeros_like(z), jnp.zeros_like(zeta0), jnp.zeros((R,), dtype))

    def backward_segment(adj, inputs):
        seg_states, iseg = inputs
        first = iseg * seg
        if seg_states is None:  # "recompute": replay from s = 0 to this segment's start
            start_state = jax.lax.fori_loop(0, first, lambda i, st: forward_step(st, i), state0)
            _, seg_states = run_steps(start_state, first, seg)
        elif not stored_all:  # a segment boundary only: recompute the segment's states
            _, seg_states = run_steps(seg_states, first, seg)
        return jax.lax.scan(backward_step, adj, (seg_states, first + jnp.arange(seg)), reverse=True)

    seg_inputs = (states, jnp.arange(nseg))
    if states is None:
        adj0, outs = jax.lax.scan(lambda c, i: backward_segment(c, (None, i)), adj1, jnp.arange(nseg), reverse=True)
    else:
        adj0, outs = jax.lax.scan(backward_segment, adj1, seg_inputs, reverse=True)
    flat = lambda t: t.reshape((N,) + t.shape[2:])  # noqa: E731
    gtheta, traj_adj = jax.tree.map(flat, outs)
    grads = _model_grads(model, gtheta, k, N, dtype)
    p0, a0, azeta, phi = adj0
    traj = None
    if trajectories:
        xs_all, zs_all, _ = jax.tree.map(flat, states)
        ss = jnp.arange(N + 1, dtype=dtype) / N
        ps, as_ = traj_adj
        traj = (
            ss,
            jnp.concatenate([xs_all, x1[None]], 0),
            jnp.concatenate([zs_all, z1[None]], 0),
            jnp.concatenate([ps, p1[None]], 0),
            jnp.concatenate([as_, jnp.zeros_like(z)[None]], 0),
        )
    probe_grads = probe_values = None
    if R:
        probe_grads = azeta.reshape(N + 1, -1, x.shape[1])
        probe_values = phi.reshape(N + 1, -1)
    return DiscreteAdjoint(x1, z1, grads, p0, a0, traj, probe_grads, probe_values)


__all__ = ["CHECKPOINT_MODES", "DiscreteAdjoint", "euler_adjoint", "segment_length", "step_params"]
