"""Empirical Lipschitz constant C of the OGD map on the visited region (λ_c = 2C)."""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PRNGKeyArray, PyTree

from .. import _random
from .._gaussian_limit import GaussianMeasure
from .._paths import AbstractCFM
from .._streams import AbstractStream, as_stream, check_stream
from ._norms import sup_distance, sup_norm
from ._state import check_model, check_population
from ._updates import GradFn, default_grad_fn, functional_scale, trajectory_context


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
    visited: PyTree,
    stream: AbstractStream | Callable | tuple,
    key: PRNGKeyArray,
    *,
    num_pairs: int = 8,
    rel_perturbation: float = 1e-2,
    context_size: int | None = None,
    grad_fn: GradFn | None = None,
    functional: bool = True,
    first_step: int = 0,
    population: GaussianMeasure | None = None,
) -> LipschitzEstimate:
    """Estimate C on the visited region.

    Args:
        model: static structure.
        visited: trainable parameters with a leading axis S of visited points (e.g.
            ``OGDResult.ref_params``, possibly subsampled).
        stream: samples $(x_0$, context, $y)$; pair i uses ``stream(first_step + i)`` for both points.
        key: PRNG key choosing the pairs and perturbation directions.
        num_pairs: number of pairs of each kind: two distinct visited points (global ratio on the
            region) and a visited point with a random perturbation of relative size
            ``rel_perturbation`` (local ratio, the linearised contraction).
        context_size: context points used (None: all of the sample's, or ``population``).
        population: a [`GaussianMeasure`][cfm_jax.GaussianMeasure]: with ``context_size=None``
            the gradient is the exact infinite-context one of this law (as in ``run_ogd``).
    """
    check_model(model)
    check_population(population, model)
    stream = as_stream(stream)
    if int(num_pairs) < 1:
        raise ValueError(f"`num_pairs` must be >= 1, got {num_pairs}.")
    if not (np.isfinite(rel_perturbation) and rel_perturbation > 0):
        raise ValueError(f"`rel_perturbation` must be finite and > 0, got {rel_perturbation!r}.")
    S = jax.tree.leaves(visited)[0].shape[0]
    check_stream(stream, model.dim, min_context=context_size or 1, start=first_step, num_steps=int(num_pairs))
    grad_fn = default_grad_fn() if grad_fn is None else grad_fn
    static = eqx.filter(model, eqx.is_inexact_array, inverse=True)
    return _lipschitz(
        static,
        visited,
        stream,
        _random.as_key(key),
        S,
        int(num_pairs),
        float(rel_perturbation),
        context_size,
        grad_fn,
        bool(functional),
        int(first_step),
        population,
    )


@eqx.filter_jit
def _lipschitz(static, visited, stream, key, S, num_pairs, rel, n, grad_fn, functional, first_step, population):
    def grad_at(params, sample):
        model = eqx.combine(params, static)
        _, g = grad_fn(model, sample.x0, trajectory_context(sample.context, n, population), sample.y)
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
        u = jax.tree.unflatten(tree, [_random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves)])
        scale = rel * jnp.maximum(sup_norm(eqx.combine(pa, static)), 1.0) / sup_norm(eqx.combine(u, static))
        pc = jax.tree.map(lambda x, v: x + scale * v, pa, u)
        gc = grad_at(pc, sample)
        r_loc = sup_distance(ga, gc) / dist(pa, pc)
        return jnp.where(S > 1, r_pair, 0.0), r_loc

    rp, rl = jax.lax.map(one, jnp.arange(num_pairs))
    cp, cl = jnp.max(rp), jnp.max(rl)
    return LipschitzEstimate(jnp.maximum(cp, cl), cp, cl, rp, rl)


__all__ = ["LipschitzEstimate", "estimate_lipschitz"]
