"""Ridge-regularised online gradient descent (OGD) on contextual flow maps (SPEC §3).

Update, in the L²([0, 1]) geometry of the parameter path (functional gradient, SPEC §2):

    θ_{k+1} = (1 − ηλ) θ_k − η δℓ/δθ(θ_k; x_0^k, μ^k, y^k),

realised as ``optax.chain(optax.add_decayed_weights(λ), optax.sgd(η))`` (:func:`ridge_sgd`)
applied to the functional gradient L·∂ℓ/∂θ_l (so step sizes do not depend on L). Any optax
``GradientTransformation`` can replace it; the gradient source is any callable
``(model, x0, context, y) -> (loss, grads)`` (default ``cfm_jax.value_and_grad`` when present,
else autodiff through the residual network).

The loop (:func:`run_ogd`) is one jit-compiled ``jax.lax.scan`` over the stream and advances
several *trajectories* at once, all fed by the same samples (x_0^k, y^k): trajectory t uses the
first ``context_sizes[t]`` points of the sample's context (None: all of them). The last
trajectory is the reference; the deviation of every other one from it,

    ‖θ_k − θ̂_k‖_{L∞} = sup_s ‖θ(s) − θ̂(s)‖ = max_l ( Σ_{arrays a} ‖a_l − â_l‖_F² )^{1/2},

(the Euclidean norm of *all* parameters of layer l, maximised over layers; for a
piecewise-linear path the max over nodes, which is the sup over s by convexity) is recorded at
every step. :func:`coupled_run` is the finite- vs population-context coupling of SPEC §3–4.

State (:class:`OGDState`: parameters, optimiser states, step) is a pytree; checkpoints are
:func:`save_checkpoint`/:func:`load_checkpoint` (the stream is a pure function of the step, so
the step is the stream position).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array

from ._validation import is_concrete
from .flow import residual_forward
from .gradients import functional_gradient, value_and_grad
from .measures import EmpiricalMeasure
from .paths import AbstractCFM
from .streams import AbstractStream, Sample, as_stream, check_stream

GradFn = Callable  # (model, x0 (B, d), context EmpiricalMeasure, y (B, d)) -> (loss, grads)


# --- step sizes and the optimiser ---------------------------------------------------------------


def check_step_sizes(learning_rate, weight_decay) -> None:
    """η > 0, λ >= 0, η·λ < 1 (so that the ridge factor 1 − ηλ stays in (0, 1])."""
    try:
        eta, lam = float(learning_rate), float(weight_decay)
    except (TypeError, ValueError):
        raise ValueError(
            f"`learning_rate` and `weight_decay` must be numbers, got {learning_rate!r}, {weight_decay!r}."
        ) from None
    if not np.isfinite(eta) or eta <= 0:
        raise ValueError(f"`learning_rate` η must be finite and > 0, got {learning_rate!r}.")
    if not np.isfinite(lam) or lam < 0:
        raise ValueError(f"`weight_decay` λ must be finite and >= 0, got {weight_decay!r}.")
    if eta * lam >= 1:
        raise ValueError(
            f"η·λ = {eta}·{lam} = {eta * lam:.4g} must be < 1: the ridge factor 1 − ηλ would not be positive."
        )


def ridge_sgd(learning_rate: float, weight_decay: float = 0.0) -> optax.GradientTransformation:
    """``optax.chain(optax.add_decayed_weights(λ), optax.sgd(η))``: θ ← (1 − ηλ)θ − η g.

    Cached on (η, λ): the same values give the same object, so jit-compiled loops are reused.
    """
    check_step_sizes(learning_rate, weight_decay)
    return _ridge_sgd(float(learning_rate), float(weight_decay))


@functools.lru_cache(maxsize=64)
def _ridge_sgd(eta: float, lam: float) -> optax.GradientTransformation:
    return optax.chain(optax.add_decayed_weights(lam), optax.sgd(eta))


# --- gradients ------------------------------------------------------------------------------------


def _loss(x1, y):
    return 0.5 * jnp.mean(jnp.sum((x1 - y) ** 2, axis=-1))


def autodiff_value_and_grad(model, x0, context, y):
    """ℓ = ½‖x_1 − y‖² (batch mean) and its plain per-layer gradient, by autodiff through the
    L-layer residual network (:func:`cfm_jax.residual_forward`, the same maths as
    ``forward`` with Euler and one step per layer, cheaper to compile). Fallback gradient source."""

    def f(m):
        return _loss(residual_forward(m, x0, context)[0], y)

    return eqx.filter_value_and_grad(f)(model)


def default_grad_fn() -> GradFn:
    """:func:`cfm_jax.value_and_grad`: ``jax.grad`` through ``forward`` with the default (hand) adjoint."""
    return value_and_grad


def functional_scale(model: AbstractCFM, grads):
    """δℓ/δθ on layer l = L · ∂ℓ/∂θ_l (docs/theory.md §2)."""
    return functional_gradient(model, grads)


# --- norms ----------------------------------------------------------------------------------------


def _layer_sq_norms(model: AbstractCFM):
    """(L,) squared Euclidean norm of all the parameters of each layer (node)."""
    leaves = jax.tree.leaves(model.stacked_params())
    return sum(jnp.sum(jnp.reshape(a, (a.shape[0], -1)) ** 2, axis=1) for a in leaves)


def sup_norm(model: AbstractCFM) -> Array:
    """‖θ‖_{L∞} = max over layers of the Euclidean norm of the layer's parameters."""
    return jnp.sqrt(jnp.max(_layer_sq_norms(model)))


def sup_distance(a: AbstractCFM, b: AbstractCFM) -> Array:
    """‖θ_a − θ_b‖_{L∞} (same structure required)."""
    diff = eqx.combine(
        jax.tree.map(lambda u, v: u - v, eqx.filter(a, eqx.is_inexact_array), eqx.filter(b, eqx.is_inexact_array)),
        eqx.filter(a, eqx.is_inexact_array, inverse=True),
    )
    return sup_norm(diff)


# --- state ---------------------------------------------------------------------------------------


class OGDState(eqx.Module):
    """Trainable parameters and optimiser state of each trajectory, and the step k.

    ``params[t]`` is ``eqx.filter(model_t, eqx.is_inexact_array)``; ``context_sizes[t]`` the
    number of context points trajectory t uses (None: the whole sample context). The last
    trajectory is the reference of the recorded deviations.
    """

    params: tuple
    opt_states: tuple
    step: Array
    context_sizes: tuple = eqx.field(static=True)

    def model(self, like: AbstractCFM, t: int = -1) -> AbstractCFM:
        """Trajectory ``t`` as a model (static parts taken from ``like``)."""
        return eqx.combine(self.params[t], eqx.filter(like, eqx.is_inexact_array, inverse=True))


class OGDResult(eqx.Module):
    """Output of :func:`run_ogd`.

    Attributes:
        state: the final :class:`OGDState`.
        losses: ``(K, T)`` loss of every trajectory at every step (before its update).
        deviations: ``(K, T − 1)`` ‖θ_{k+1}^{(t)} − θ̂_{k+1}‖_{L∞} after every update.
        ref_norms: ``(K,)`` ‖θ̂_{k+1}‖_{L∞} (the size of the region visited).
        ref_params: ``(K, ...)`` reference parameters after every update, or None.
    """

    state: OGDState
    losses: Array
    deviations: Array
    ref_norms: Array
    ref_params: object = None

    @property
    def sup_deviation(self) -> Array:
        """(T − 1,) sup_k of the deviations over this run."""
        return jnp.max(self.deviations, axis=0)


def _check_model(model):
    if not isinstance(model, AbstractCFM):
        raise ValueError(f"`model` must be a cfm_jax model (AbstractCFM), got {type(model).__name__}.")


def _check_optimizer(optimizer):
    if not isinstance(optimizer, optax.GradientTransformation):
        raise ValueError(
            "`optimizer` must be an optax GradientTransformation (e.g. `ridge_sgd(eta, lam)`), "
            f"got {type(optimizer).__name__}."
        )


def _check_sizes(context_sizes):
    sizes = tuple(context_sizes)
    if not sizes:
        raise ValueError("`context_sizes` must name at least one trajectory.")
    for n in sizes:
        if n is not None and (not isinstance(n, (int, np.integer)) or n < 1):
            raise ValueError(f"`context_sizes` entries must be positive ints or None, got {n!r}.")
    return tuple(None if n is None else int(n) for n in sizes)


def init_state(model: AbstractCFM, optimizer: optax.GradientTransformation, context_sizes=(None,)) -> OGDState:
    """All trajectories start at ``model``'s parameters with a fresh optimiser state."""
    _check_model(model)
    _check_optimizer(optimizer)
    sizes = _check_sizes(context_sizes)
    params = eqx.filter(model, eqx.is_inexact_array)
    opt = optimizer.init(params)
    T = len(sizes)
    return OGDState((params,) * T, (opt,) * T, jnp.asarray(0, jnp.int32), sizes)


def _check_state(state, model, optimizer):
    if not isinstance(state, OGDState):
        raise ValueError(f"`state` must be an OGDState, got {type(state).__name__}.")
    ref = eqx.filter(model, eqx.is_inexact_array)
    ref_struct = jax.tree.structure(ref)
    ref_shapes = [a.shape for a in jax.tree.leaves(ref)]
    opt_struct = jax.tree.structure(jax.eval_shape(optimizer.init, ref))
    for t, (p, o) in enumerate(zip(state.params, state.opt_states)):
        if jax.tree.structure(p) != ref_struct or [a.shape for a in jax.tree.leaves(p)] != ref_shapes:
            raise ValueError(f"`state.params[{t}]` does not match the model's parameter structure/shapes.")
        if jax.tree.structure(o) != opt_struct:
            raise ValueError(f"`state.opt_states[{t}]` does not match the optimiser's state structure.")


# --- the loop ------------------------------------------------------------------------------------


def _head(points, n):
    """First ``n`` points of the reference sample as a uniform measure (all of them for None)."""
    return EmpiricalMeasure(points if n is None else points[:n])


def _update(static, params, opt_state, sample: Sample, n, optimizer, grad_fn, functional):
    model = eqx.combine(params, static)
    loss, grads = grad_fn(model, sample.x0, _head(sample.context, n), sample.y)
    if functional:
        grads = functional_scale(model, grads)
    grads = eqx.filter(grads, eqx.is_inexact_array)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return eqx.apply_updates(params, updates), opt_state, loss


@eqx.filter_jit
def _scan(static, state, stream, optimizer, num_steps, grad_fn, functional, record_params):
    sizes = state.context_sizes

    def body(carry, _):
        params, opts, k = carry
        sample = stream(k)
        new = [
            _update(static, p, o, sample, n, optimizer, grad_fn, functional)
            for p, o, n in zip(params, opts, sizes)  # a few trajectories, unrolled on purpose
        ]
        params = tuple(u[0] for u in new)
        opts = tuple(u[1] for u in new)
        losses = jnp.stack([u[2] for u in new])
        ref = eqx.combine(params[-1], static)
        devs = jnp.stack([sup_distance(eqx.combine(p, static), ref) for p in params[:-1]]) if len(params) > 1 else (
            jnp.zeros((0,), losses.dtype)
        )
        out = (losses, devs, sup_norm(ref), params[-1] if record_params else None)
        return (params, opts, k + 1), out

    (params, opts, step), (losses, devs, norms, traj) = jax.lax.scan(
        body, (state.params, state.opt_states, state.step), None, length=num_steps
    )
    return OGDState(params, opts, step, sizes), losses, devs, norms, traj


def run_ogd(
    model: AbstractCFM,
    stream,
    optimizer: optax.GradientTransformation,
    num_steps: int,
    *,
    state: OGDState | None = None,
    context_sizes: Sequence[int | None] = (None,),
    grad_fn: GradFn | None = None,
    functional: bool = True,
    record_params: bool = False,
) -> OGDResult:
    """Run ``num_steps`` OGD steps from ``state`` (default: a fresh :func:`init_state`).

    Args:
        model: supplies the initial parameters (when ``state`` is None) and the static structure.
        stream: an :class:`~cfm_jax.streams.AbstractStream` (or see ``as_stream``); sample k is
            ``stream(k)`` with k = state.step, state.step + 1, …
        optimizer: optax transformation, e.g. :func:`ridge_sgd`.
        num_steps: K >= 1.
        context_sizes: per trajectory, the number of leading context points it sees (ignored
            when ``state`` is given: the state carries them).
        grad_fn: ``(model, x0, context, y) -> (loss, grads)`` with plain per-layer grads.
        functional: multiply the grads by L (the L²([0, 1]) functional gradient).
        record_params: also return the reference parameters after every step.
    """
    _check_model(model)
    _check_optimizer(optimizer)
    stream = as_stream(stream)
    if not isinstance(num_steps, (int, np.integer)) or num_steps < 1:
        raise ValueError(f"`num_steps` must be a positive int, got {num_steps!r}.")
    if state is None:
        state = init_state(model, optimizer, context_sizes)
    else:
        _check_state(state, model, optimizer)
    sizes = state.context_sizes
    need = max([n for n in sizes if n is not None], default=1)
    start = int(state.step) if is_concrete(state.step) else 0  # under an outer jit/vmap: shapes only
    check_stream(stream, model.dim, min_context=need, start=start, num_steps=int(num_steps))
    grad_fn = default_grad_fn() if grad_fn is None else grad_fn
    if not callable(grad_fn):
        raise ValueError("`grad_fn` must be callable (model, x0, context, y) -> (loss, grads).")
    static = eqx.filter(model, eqx.is_inexact_array, inverse=True)
    new_state, losses, devs, norms, traj = _scan(
        static, state, stream, optimizer, int(num_steps), grad_fn, bool(functional), bool(record_params)
    )
    return OGDResult(new_state, losses, devs, norms, traj)


def train(model, stream, optimizer, num_steps, *, state=None, context_size=None, grad_fn=None, functional=True):
    """Single-trajectory OGD. Returns ``(trained model, OGDResult)``."""
    res = run_ogd(
        model,
        stream,
        optimizer,
        num_steps,
        state=state,
        context_sizes=(context_size,),
        grad_fn=grad_fn,
        functional=functional,
    )
    return res.state.model(model), res


def coupled_run(
    model,
    stream,
    context_sizes: int | Sequence[int],
    optimizer,
    num_steps,
    *,
    state=None,
    grad_fn=None,
    functional=True,
    record_params=False,
) -> OGDResult:
    """n-context trajectories θ^{(n)}_k coupled with the population trajectory θ̂_k (SPEC §3).

    All see the same (x_0^k, y^k); θ̂ uses the whole sample context (the reference sample,
    n_ref points), θ^{(n)} its first n points. ``result.deviations[:, i]`` is
    ‖θ^{(n_i)}_k − θ̂_k‖_{L∞}, k = 1..K.
    """
    ns = (context_sizes,) if isinstance(context_sizes, (int, np.integer)) else tuple(context_sizes)
    if any(n is None for n in ns):
        raise ValueError("`context_sizes` must be ints in a coupled run (the reference uses all points).")
    return run_ogd(
        model,
        stream,
        optimizer,
        num_steps,
        state=state,
        context_sizes=ns + (None,),
        grad_fn=grad_fn,
        functional=functional,
        record_params=record_params,
    )


# --- checkpoints ----------------------------------------------------------------------------------


def _is_key(x):
    return isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def _keys_to_data(tree):
    return jax.tree.map(lambda x: jax.random.key_data(x) if _is_key(x) else x, tree)


def save_checkpoint(path, state: OGDState, stream: AbstractStream | None = None) -> Path:
    """Write ``state`` (and optionally the stream, PRNG keys included) to ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    eqx.tree_serialise_leaves(tmp, (_keys_to_data(state), _keys_to_data(stream)))
    os.replace(tmp, path)
    return path


def load_checkpoint(path, like: OGDState, stream_like: AbstractStream | None = None):
    """Read a checkpoint into the structure of ``like`` (e.g. ``init_state(model, opt, sizes)``).

    Returns the state, or ``(state, stream)`` when ``stream_like`` is given.
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"checkpoint `{path}` does not exist.")
    template = (_keys_to_data(like), _keys_to_data(stream_like))
    try:
        state, stream = eqx.tree_deserialise_leaves(path, template)
    except Exception as e:
        raise ValueError(f"checkpoint `{path}` does not match the given structure: {e}") from e
    if stream_like is None:
        return state
    stream = jax.tree.map(
        lambda d, k: jax.random.wrap_key_data(d, impl=jax.random.key_impl(k)) if _is_key(k) else d,
        stream,
        stream_like,
    )
    return state, stream


# --- stability: empirical Lipschitz constant ----------------------------------------------------


class LipschitzEstimate(eqx.Module):
    """Empirical Lipschitz constant of θ ↦ δℓ/δθ(θ; sample) in the L∞ norm.

    ``C = max(C_pairs, C_local)``; ``lambda_c = 2 C``. ``ratios_pairs``/``ratios_local`` hold
    every ratio ‖g(θ) − g(θ')‖_{L∞}/‖θ − θ'‖_{L∞} measured.
    """

    C: Array
    C_pairs: Array
    C_local: Array
    ratios_pairs: Array
    ratios_local: Array

    @property
    def lambda_c(self) -> Array:
        return 2 * self.C


def estimate_lipschitz(
    model: AbstractCFM,
    visited,
    stream,
    key,
    *,
    num_pairs: int = 8,
    rel_perturbation: float = 1e-2,
    context_size: int | None = None,
    grad_fn: GradFn | None = None,
    functional: bool = True,
    first_step: int = 0,
) -> LipschitzEstimate:
    """Estimate C on the visited region.

    Args:
        model: static structure.
        visited: trainable parameters with a leading axis S of visited points (e.g.
            ``OGDResult.ref_params``, possibly subsampled).
        stream: samples (x_0, context, y); pair i uses ``stream(first_step + i)`` for both points.
        key: PRNG key choosing the pairs and perturbation directions.
        num_pairs: number of pairs of each kind: two distinct visited points (global ratio on the
            region) and a visited point with a random perturbation of relative size
            ``rel_perturbation`` (local ratio, the linearised contraction).
        context_size: context points used (None: all of the sample's).
    """
    _check_model(model)
    stream = as_stream(stream)
    if int(num_pairs) < 1:
        raise ValueError(f"`num_pairs` must be >= 1, got {num_pairs}.")
    if not (np.isfinite(rel_perturbation) and rel_perturbation > 0):
        raise ValueError(f"`rel_perturbation` must be finite and > 0, got {rel_perturbation!r}.")
    S = jax.tree.leaves(visited)[0].shape[0]
    check_stream(stream, model.dim, min_context=context_size or 1, start=first_step, num_steps=int(num_pairs))
    grad_fn = default_grad_fn() if grad_fn is None else grad_fn
    static = eqx.filter(model, eqx.is_inexact_array, inverse=True)
    return _lipschitz(static, visited, stream, key, S, int(num_pairs), float(rel_perturbation), context_size,
                      grad_fn, bool(functional), int(first_step))


@eqx.filter_jit
def _lipschitz(static, visited, stream, key, S, num_pairs, rel, n, grad_fn, functional, first_step):
    def grad_at(params, sample):
        model = eqx.combine(params, static)
        _, g = grad_fn(model, sample.x0, _head(sample.context, n), sample.y)
        g = functional_scale(model, g) if functional else g
        return eqx.combine(eqx.filter(g, eqx.is_inexact_array), static)

    def dist(a, b):
        return sup_distance(eqx.combine(a, static), eqx.combine(b, static))

    take = lambda i: jax.tree.map(lambda a: a[i], visited)  # noqa: E731

    def one(i):
        ki = jax.random.fold_in(key, i)
        ka, kb, ku = jax.random.split(ki, 3)
        a = jax.random.randint(ka, (), 0, S)
        b = (a + jax.random.randint(kb, (), 1, max(S, 2))) % S  # a different point when S > 1
        sample = stream(first_step + i)
        pa, pb = take(a), take(b)
        ga, gb = grad_at(pa, sample), grad_at(pb, sample)
        r_pair = sup_distance(ga, gb) / jnp.maximum(dist(pa, pb), jnp.finfo(jax.tree.leaves(pa)[0].dtype).tiny)
        leaves, tree = jax.tree.flatten(pa)
        keys = jax.random.split(ku, len(leaves))
        u = jax.tree.unflatten(tree, [jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves)])
        scale = rel * jnp.maximum(sup_norm(eqx.combine(pa, static)), 1.0) / sup_norm(eqx.combine(u, static))
        pc = jax.tree.map(lambda x, v: x + scale * v, pa, u)
        gc = grad_at(pc, sample)
        r_loc = sup_distance(ga, gc) / dist(pa, pc)
        return jnp.where(S > 1, r_pair, 0.0), r_loc

    rp, rl = jax.lax.map(one, jnp.arange(num_pairs))
    cp, cl = jnp.max(rp), jnp.max(rl)
    return LipschitzEstimate(jnp.maximum(cp, cl), cp, cl, rp, rl)


__all__ = [
    "LipschitzEstimate",
    "OGDResult",
    "OGDState",
    "autodiff_value_and_grad",
    "check_step_sizes",
    "coupled_run",
    "default_grad_fn",
    "estimate_lipschitz",
    "functional_scale",
    "init_state",
    "load_checkpoint",
    "ridge_sgd",
    "run_ogd",
    "save_checkpoint",
    "sup_distance",
    "sup_norm",
    "train",
]
