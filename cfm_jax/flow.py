"""The primal solve of the contextual flow map (docs/theory.md §1) with diffrax.

    dx/ds = V(x, μ_s; θ(s)),   dz_i/ds = V(z_i, μ_s; θ(s)),   μ_s = Σ_i w_i δ_{z_i(s)}.

The state is the pytree ``(x, z)``: ``x: (B, d)`` passive target tokens and ``z: (n, d)`` the
context support (the weights are carried along unchanged). Both are evaluated in one call of the
field on the stacked queries ``[x; z]``.

:func:`integrate` is the diffrax solve used when the flow is differentiated by autodiff (a
diffrax adjoint); the public entry point :func:`cfm_jax.forward` chooses between it and the hand
adjoints. For piecewise-constant paths the solve is a ``lax.scan`` over layers with one diffrax solve per
layer, so no step ever straddles a parameter jump and higher-order solvers keep their order.
With the default ``diffrax.Euler()`` and one step per layer this is exactly the L-layer
residual transformer x_{l+1} = x_l + (1/L) V(x_l, μ_l; θ_l).
"""

from __future__ import annotations

import numbers

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._validation import check_finite
from .measures import EmpiricalMeasure, as_measure
from .paths import AbstractCFM


class SaveAt(eqx.Module):
    """What :func:`forward` returns besides the final state.

    ``SaveAt()`` – only ``x1, z1``; ``SaveAt(layers=True)`` – the states at every layer
    boundary s = l/L (L + 1 depths); ``SaveAt(steps=True)`` – the states after every solver step
    (fixed-step solves only; ``L·k + 1`` depths).
    """

    layers: bool = eqx.field(static=True, default=False)
    steps: bool = eqx.field(static=True, default=False)


class FlowSolution(eqx.Module):
    """Result of :func:`forward`.

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
        return EmpiricalMeasure(self.z1, self.weights)


def stacked_velocity(model: AbstractCFM, weights, params, state):
    """V at the stacked queries ``[x; z]`` of the state ``(x, z)``, split back into ``(vx, vz)``."""
    x, z = state
    B = x.shape[0]
    v = model.velocity(jnp.concatenate([x, z], axis=0), EmpiricalMeasure.unchecked(z, weights), params)
    return v[:B], v[B:]


def check_inputs(model, x0, context, steps):
    """Validate the arguments of a solve; returns ``(x0, context, steps)`` (steps defaulted to L).

    Raises ``ValueError`` naming the argument: a model that is not an AbstractCFM, ``x0`` of
    the wrong shape, dtype or with non-finite entries, a context of another dimension, or
    ``steps`` that is not a positive multiple of L for piecewise-constant paths.
    """
    if not isinstance(model, AbstractCFM):
        raise ValueError(f"`model` must be a cfm_jax model (AbstractCFM), got {type(model).__name__}.")
    context = as_measure(context)
    x0 = jnp.asarray(x0)
    if x0.ndim not in (1, 2):
        raise ValueError(f"`x0` must have shape (d,) or (B, d), got {x0.shape}.")
    d = model.dim
    if x0.shape[-1] != d:
        raise ValueError(f"`x0` has dimension {x0.shape[-1]} but the model has d = {d}.")
    if context.dim != d:
        raise ValueError(f"`context` has dimension {context.dim} but the model has d = {d}.")
    if not jnp.issubdtype(x0.dtype, jnp.floating):
        raise ValueError(f"`x0` must be a floating array, got dtype {x0.dtype}.")
    check_finite("x0", x0)
    L = model.num_layers
    if steps is None:
        steps = L
    if isinstance(steps, numbers.Integral) and not isinstance(steps, bool):
        steps = int(steps)
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"`steps` must be a positive int, got {steps!r}.")
    if model.piecewise_constant and steps % L:
        raise ValueError(
            f"`steps`={steps} must be a multiple of the number of layers L={L} so that no step "
            "straddles a parameter jump."
        )
    return x0, context, steps


def solve_segment(term, solver, t0, t1, k: int, y0, args, *, stepsize_controller=None, max_steps: int = 4096,
                  save_steps: bool = False, adjoint: diffrax.AbstractAdjoint | None = None):
    """One diffrax solve over [t0, t1] (one layer): ``k`` fixed steps, or adaptive from dt0 = (t1 − t0)/k.

    Fixed steps go through ``StepTo`` on a grid whose end points are pinned exactly (t0 + (t1 − t0)
    need not round to t1, and StepTo checks them). Returns ``(ys, ts, accepted steps)`` with the
    states after every step (``save_steps``) or at t1 only.
    """
    fixed = stepsize_controller is None or isinstance(stepsize_controller, (diffrax.ConstantStepSize, diffrax.StepTo))
    if fixed:
        grid = t0 + (t1 - t0) * jnp.arange(k + 1, dtype=jnp.result_type(t0)) / k
        controller, dt0, cap = diffrax.StepTo(ts=grid.at[0].set(t0).at[-1].set(t1)), None, k
    else:
        controller, dt0, cap = stepsize_controller, (t1 - t0) / k, max_steps
    sol = diffrax.diffeqsolve(
        term, solver, t0=t0, t1=t1, dt0=dt0, y0=y0, args=args, stepsize_controller=controller,
        saveat=diffrax.SaveAt(steps=True) if save_steps else diffrax.SaveAt(t1=True),
        adjoint=diffrax.RecursiveCheckpointAdjoint() if adjoint is None else adjoint, max_steps=cap,
    )
    return sol.ys, sol.ts, sol.stats["num_accepted_steps"]


def integrate(model: AbstractCFM, x, z, w, *, solver, steps: int, stepsize_controller, saveat: SaveAt,
              adjoint: diffrax.AbstractAdjoint, max_steps: int = 4096) -> FlowSolution:
    """The diffrax solve behind :func:`cfm_jax.forward` for 2-D tokens ``x: (B, d)`` (no validation).

    Differentiated by ``adjoint``, a diffrax adjoint (autodiff through the solver).
    """
    dtype = x.dtype
    L = model.num_layers

    def term_fn(s, state, args):
        return stacked_velocity(model, w, model.params_at(s) if args is None else args, state)

    term = diffrax.ODETerm(term_fn)

    def solve(t0, t1, k, y0, args):
        ys, ts, nsteps = solve_segment(term, solver, t0, t1, k, y0, args, stepsize_controller=stepsize_controller,
                                       max_steps=max_steps, save_steps=saveat.steps, adjoint=adjoint)
        return jax.tree.map(lambda a: a[-1], ys), ys, ts, nsteps

    if model.piecewise_constant:
        k = steps // L

        def layer(state, l):
            t0 = l.astype(dtype) / L
            t1 = (l + 1).astype(dtype) / L
            final, ys, ts, nsteps = solve(t0, t1, k, state, model.layer_params(l))
            return final, (ys, ts, nsteps)

        (x1, z1), (ys, ts, nsteps) = jax.lax.scan(layer, (x, z), jnp.arange(L))
        num_steps = nsteps.sum()
        ys = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), ys)
        ts = ts.reshape(-1)
    else:
        (x1, z1), ys, ts, num_steps = solve(jnp.asarray(0.0, dtype), jnp.asarray(1.0, dtype), steps, (x, z), None)

    ss = xs = zs = None
    if saveat.steps or saveat.layers:
        xs_, zs_ = ys
        if saveat.layers and not saveat.steps and not model.piecewise_constant:
            raise ValueError("`SaveAt(layers=True)` needs a piecewise-constant path; use steps=True.")
        ss = jnp.concatenate([jnp.zeros((1,), dtype), ts])
        xs = jnp.concatenate([x[None], xs_], axis=0)
        zs = jnp.concatenate([z[None], zs_], axis=0)
    return FlowSolution(
        x1=x1,
        z1=z1,
        weights=w,
        ss=ss,
        xs=xs,
        zs=zs,
        num_steps=num_steps,
    )


def residual_forward(model: AbstractCFM, x0, context) -> tuple[Array, Array]:
    """Reference L-layer residual network x_{l+1} = x_l + V(x_l, μ_l; θ_l)/L as a bare ``lax.scan``.

    Returns ``(x1, z1)``. Same maths as ``forward(model, x0, context)`` with Euler; kept as an
    independent code path for tests, for the diffrax-overhead benchmark and for the OGD
    teacher streams.
    """
    x0, context, _ = check_inputs(model, x0, context, None)
    x = jnp.atleast_2d(x0)
    w = context.weights
    L = model.num_layers

    def layer(state, l):
        vx, vz = stacked_velocity(model, w, model.layer_params(l), state)
        return (state[0] + vx / L, state[1] + vz / L), None

    (x1, z1), _ = jax.lax.scan(layer, (x, context.points), jnp.arange(L))
    return (x1[0] if x0.ndim == 1 else x1), z1


__all__ = ["FlowSolution", "SaveAt", "check_inputs", "integrate", "residual_forward", "solve_segment", "stacked_velocity"]
