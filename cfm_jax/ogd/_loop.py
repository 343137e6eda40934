"""The OGD loop: one jit-compiled lax.scan advancing every trajectory on the same samples."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._gaussian_limit import GaussianMeasure
from .._paths import AbstractCFM
from .._streams import AbstractStream, as_stream, check_stream
from .._validation import is_concrete
from ._norms import sup_distance, sup_norm
from ._state import OGDResult, OGDState, check_model, check_optimizer, check_population, check_state, init_state
from ._updates import GradFn, default_grad_fn, ogd_update


@eqx.filter_jit
def _scan(static, state, stream, optimizer, num_steps, grad_fn, functional, record_params, population):
    sizes = state.context_sizes

    def body(carry, _):
        params, opts, k = carry
        sample = stream(k)
        new = [
            ogd_update(static, p, o, sample, n, optimizer, grad_fn, functional, population)
            for p, o, n in zip(params, opts, sizes)  # a few trajectories, unrolled on purpose
        ]
        params = tuple(u[0] for u in new)
        opts = tuple(u[1] for u in new)
        losses = jnp.stack([u[2] for u in new])
        *_, reference = params  # the last trajectory is the reference
        ref = eqx.combine(reference, static)
        devs = (
            jnp.stack([sup_distance(eqx.combine(p, static), ref) for p in params[:-1]])
            if len(params) > 1
            else (jnp.zeros((0,), losses.dtype))
        )
        out = (losses, devs, sup_norm(ref), reference if record_params else None)
        return (params, opts, k + 1), out

    (params, opts, step), (losses, devs, norms, traj) = jax.lax.scan(
        body, (state.params, state.opt_states, state.step), None, length=num_steps
    )
    return OGDState(params, opts, step, sizes), losses, devs, norms, traj


def run_ogd(
    model: AbstractCFM,
    stream: AbstractStream | Callable | tuple,
    optimizer: optax.GradientTransformation,
    num_steps: int,
    *,
    state: OGDState | None = None,
    context_sizes: Sequence[int | None] = (None,),
    grad_fn: GradFn | None = None,
    functional: bool = True,
    record_params: bool = False,
    population: GaussianMeasure | None = None,
) -> OGDResult:
    """Run ``num_steps`` OGD steps from ``state`` (default: a fresh :func:`init_state`).

    Args:
        model: supplies the initial parameters (when ``state`` is None) and the static structure.
        stream: a stream (``AbstractStream``, e.g. [`TeacherStudentStream`][cfm_jax.TeacherStudentStream];
            or see ``as_stream``); sample k is
            ``stream(k)`` with k = ``state.step``, ``state.step + 1``, …
        optimizer: optax transformation, e.g. :func:`ridge_sgd`.
        num_steps: K >= 1.
        context_sizes: per trajectory, the number of leading context points it sees (ignored
            when ``state`` is given: the state carries them).
        grad_fn: ``(model, x0, context, y) -> (loss, grads)`` with plain per-layer grads.
        functional: multiply the grads by L (the $L^2([0, 1])$ functional gradient).
        record_params: also return the reference parameters after every step.
        population: the population law as a [`GaussianMeasure`][cfm_jax.GaussianMeasure]: the
            trajectories whose context size is None see it instead of the sample's context, i.e.
            the exact infinite-context loss (``grad_fn`` is called with the measure; the default
            differentiates ``forward``'s Gaussian limit). None: they see the whole sample context.
    """
    check_model(model)
    check_optimizer(optimizer)
    check_population(population, model)
    stream = as_stream(stream)
    if not isinstance(num_steps, (int, np.integer)) or num_steps < 1:
        raise ValueError(f"`num_steps` must be a positive int, got {num_steps!r}.")
    if state is None:
        state = init_state(model, optimizer, context_sizes)
    else:
        check_state(state, model, optimizer)
    sizes = state.context_sizes
    need = max([n for n in sizes if n is not None], default=1)
    start = int(state.step) if is_concrete(state.step) else 0  # under an outer jit/vmap: shapes only
    check_stream(stream, model.dim, min_context=need, start=start, num_steps=int(num_steps))
    grad_fn = default_grad_fn() if grad_fn is None else grad_fn
    if not callable(grad_fn):
        raise ValueError("`grad_fn` must be callable (model, x0, context, y) -> (loss, grads).")
    static = eqx.filter(model, eqx.is_inexact_array, inverse=True)
    new_state, losses, devs, norms, traj = _scan(
        static, state, stream, optimizer, int(num_steps), grad_fn, bool(functional), bool(record_params), population
    )
    return OGDResult(new_state, losses, devs, norms, traj)


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
    population=None,
) -> OGDResult:
    r"""n-context trajectories $θ^{(n)}_k$ coupled with the population trajectory $\hat θ_k$ (docs/theory.md §3).

    All see the same $(x_0^k, y^k)$; $θ^{(n)}$ uses the first n points of the sample context; $\hat θ$ uses
    the whole sample context (the reference sample, $n_{ref}$ points), or, with ``population`` (a
    [`GaussianMeasure`][cfm_jax.GaussianMeasure], the law the sample contexts are drawn from), the
    exact infinite-context loss of the population itself. ``result.deviations[:, i]`` is
    $‖θ^{(n_i)}_k − \hat θ_k‖_{L^∞}$, k = 1..K.
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
        population=population,
    )


__all__ = ["coupled_run", "run_ogd"]
