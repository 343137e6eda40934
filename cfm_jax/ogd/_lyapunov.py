"""Finite-time Lyapunov exponent of the OGD map along a trajectory.

Step k of OGD is the map T_k(θ) = θ + u(g_k(θ), θ), with g_k the (functional) gradient on sample
k and u the optimiser's update; for ridge SGD, T_k(θ) = (1 − ηλ)θ − η g_k(θ), whose Jacobian is
J_k = (1 − ηλ) I − η ∇g_k(θ_k) (∇g_k = L·∇²ℓ_k, the Hessian in the functional geometry). A
perturbation of θ_0 is carried to step k by P_k = J_{k−1} ⋯ J_0, so

    log σ_max(P_k)      and the finite-time Lyapunov exponent   Λ_k = log σ_max(P_k) / k

say how much two nearby trajectories can separate in k steps: Λ_k ≈ log(1 + ηc) when the path sits
where the curvature is −c, Λ_k < 0 where the map contracts. The product is formed column by
column with Jacobian-vector products of T_k (forward-over-reverse through the gradient: Hessian-
vector products), renormalised at every step; its top singular value is exact on the tangent
subspace tracked (all trained coordinates by default, or ``num_directions`` random ones, which
gives a lower bound).
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, PRNGKeyArray, PyTree

from .. import _random
from .._gaussian_limit import GaussianMeasure
from .._paths import AbstractCFM
from .._streams import AbstractStream, as_stream, check_stream
from ._state import check_model, check_optimizer, check_population
from ._updates import GradFn, default_grad_fn, functional_scale, trajectory_context


def finite_time_lyapunov(
    model: AbstractCFM,
    path: PyTree,
    stream: AbstractStream | Callable | tuple,
    optimizer: optax.GradientTransformation,
    *,
    first_step: int = 0,
    context_size: int | None = None,
    population: GaussianMeasure | None = None,
    grad_fn: GradFn | None = None,
    functional: bool = True,
    mask: PyTree | Callable | None = None,
    num_directions: int | None = None,
    key: PRNGKeyArray | None = None,
) -> Array:
    r"""$\log σ_{\max}(J_k ⋯ J_0)$ for k = 0 … K − 1: the log-growth of perturbations along a path.

    Args:
        model: the trajectory's starting point $θ_0$ (and the static structure).
        path: trainable parameters with a leading axis K: $θ_1 … θ_K$, the points after every step
            (``OGDResult.ref_params`` of a run started at ``model``). Step k is linearised at $θ_k$.
        stream: the run's stream; step k uses ``stream(first_step + k)``.
        optimizer: the run's update, stateless (e.g. :func:`ridge_sgd`, or a chain of
            ``add_decayed_weights``, ``masked`` and ``sgd``): its state is re-initialised at
            every point, which is exact only when it holds no arrays (a ValueError otherwise).
        first_step: the stream position of step 0.
        context_size: the context size the gradient sees, as in :func:`run_ogd` (None: all of the
            sample's context, or ``population``).
        population: as in :func:`run_ogd`: with ``context_size=None``, a
            [`GaussianMeasure`][cfm_jax.GaussianMeasure] gives the exact infinite-context loss.
        grad_fn: the gradient source, as in :func:`run_ogd`.
        functional: apply the functional scaling $L ∂ℓ/∂θ_l$, as in :func:`run_ogd`.
        mask: a pytree of booleans shaped like the trainable parameters (or a callable of them)
            choosing the coordinates perturbed; the others stay fixed (e.g. parameters the
            optimiser never changes). None: all.
        num_directions: track a random subspace of that many directions (needs ``key``): a lower
            bound of $σ_{\max}$, for models too large to track every coordinate. None: every masked
            coordinate (exact).
        key: PRNG key of the random subspace.

    Returns:
        ``(K,)``: entry k is $\log σ_{\max}$ of the product of the first k + 1 Jacobians; divide by
        k + 1 for the finite-time Lyapunov exponent.
    """
    check_model(model)
    check_optimizer(optimizer)
    check_population(population, model)
    stream = as_stream(stream)
    if not isinstance(first_step, (int, np.integer)) or first_step < 0:
        raise ValueError(f"`first_step` must be an int >= 0, got {first_step!r}.")
    params, static = eqx.partition(model, eqx.is_inexact_array)
    if jax.tree.structure(path) != jax.tree.structure(params):
        raise ValueError("`path` must have the structure of the model's trainable parameters (e.g. `ref_params`).")
    shapes = [(a.shape[1:], b.shape) for a, b in zip(jax.tree.leaves(path), jax.tree.leaves(params))]
    if any(a != b for a, b in shapes) or len({a.shape[0] for a in jax.tree.leaves(path)}) != 1:
        raise ValueError("`path` leaves must be the model's parameter shapes with one shared leading axis K.")
    K = jax.tree.leaves(path)[0].shape[0]
    if K < 1:
        raise ValueError("`path` must hold at least one point.")
    if jax.tree.leaves(jax.eval_shape(optimizer.init, params)):
        raise ValueError(
            "`optimizer` must be stateless (its state holds arrays, e.g. momentum): the map θ ↦ θ + update "
            "is only defined by θ without a state."
        )
    check_stream(stream, model.dim, min_context=context_size or 1, start=int(first_step), num_steps=K)
    flat, unravel = ravel_pytree(params)
    chosen = np.ones(flat.shape[0], bool) if mask is None else _mask_vector(mask, params)
    idx = np.flatnonzero(chosen)
    if idx.size == 0:
        raise ValueError("`mask` selects no coordinate.")
    if num_directions is None:
        basis = np.zeros((flat.shape[0], idx.size), flat.dtype)
        basis[idx, np.arange(idx.size)] = 1.0
        basis = jnp.asarray(basis)
    else:
        if not isinstance(num_directions, (int, np.integer)) or not 1 <= num_directions <= idx.size:
            raise ValueError(
                f"`num_directions` must be an int in [1, {idx.size}] (the coordinates), got {num_directions!r}."
            )
        if key is None:
            raise ValueError("`num_directions` needs a `key` for the random subspace.")
        g = jax.random.normal(_random.as_key(key), (idx.size, int(num_directions)), flat.dtype)
        basis = jnp.zeros((flat.shape[0], int(num_directions)), flat.dtype).at[idx].set(jnp.linalg.qr(g)[0])
    grad_fn = default_grad_fn() if grad_fn is None else grad_fn
    if not callable(grad_fn):
        raise ValueError("`grad_fn` must be callable (model, x0, context, y) -> (loss, grads).")
    step0 = jnp.asarray(int(first_step))
    keep = jnp.asarray(chosen, flat.dtype)
    return _log_growth(
        static, params, path, stream, optimizer, step0, context_size, population, grad_fn, bool(functional), basis, keep
    )


def _mask_vector(mask, params) -> np.ndarray:
    """The boolean mask as a vector over the raveled parameters."""
    tree = mask(params) if callable(mask) else mask
    try:
        full = jax.tree.map(lambda m, a: np.broadcast_to(np.asarray(m, bool), a.shape), tree, params)
    except (ValueError, TypeError) as e:
        raise ValueError(f"`mask` must be booleans shaped like the trainable parameters: {e}") from None
    return np.concatenate([np.ravel(m) for m in jax.tree.leaves(full)])


@eqx.filter_jit
def _log_growth(static, params, path, stream, optimizer, first_step, n, population, grad_fn, functional, basis, keep):
    _, unravel = ravel_pytree(params)

    def step_map(flat, k):
        p = unravel(flat)
        model = eqx.combine(p, static)
        sample = stream(first_step + k)
        _, g = grad_fn(model, sample.x0, trajectory_context(sample.context, n, population), sample.y)
        g = functional_scale(model, g) if functional else g
        g = eqx.filter(g, eqx.is_inexact_array)
        updates, _ = optimizer.update(g, optimizer.init(p), p)
        return ravel_pytree(eqx.apply_updates(p, updates))[0]

    starts = jax.tree.map(lambda a0, a: jnp.concatenate([a0[None], a[:-1]]), params, path)
    flats = jax.vmap(lambda p: ravel_pytree(p)[0])(starts)

    def body(carry, inputs):
        m, log_scale = carry
        flat, k = inputs
        tangent = lambda v: jax.jvp(lambda f: step_map(f, k), (flat,), (v,))[1]  # noqa: E731
        m = jax.vmap(tangent, in_axes=1, out_axes=1)(m) * keep[:, None]  # fixed coordinates stay fixed
        top = jnp.linalg.svd(m, compute_uv=False)[0]
        log_scale = log_scale + jnp.log(top)
        return (m / top, log_scale), log_scale

    zero = jnp.zeros((), basis.dtype)
    _, out = jax.lax.scan(body, (basis, zero), (flats, jnp.arange(flats.shape[0])))
    return out


__all__ = ["finite_time_lyapunov"]
