"""How a sweep maps a computation over its seeds (or any leading axis): vmapped in blocks, the
blocks one after another (``jax.lax.map``), with a default per backend (:func:`seed_batch_size`).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

#: platform names (``jax.default_backend()``, lower case) of accelerators: their batches are vmapped
_ACCELERATORS = frozenset({"gpu", "cuda", "rocm", "tpu", "metal"})


def seed_batch_size(backend: str | None = None) -> int:
    """How many seeds a sweep's programs vmap together (:func:`map_seeds`' default): 0 (all at once,
    a ``vmap``) on accelerators, which need the batch to fill them; 1 (one after another, a
    ``lax.map``) on CPUs, where a vmapped n-point system's score matrices (seeds × H(n + B) × n
    entries) leave the caches and run memory-bound: one seed at a time is 3.3–4.9× faster from n =
    10³ and 1.5× slower only on systems of a few atoms (``benchmarks/results/chaos.md``).
    ``backend``: a platform name, in any case (``"cpu"``, ``"gpu"``, ``"cuda"``, ``"rocm"``,
    ``"tpu"``, ``"metal"``; another is refused); default ``jax.default_backend()``, where any
    platform but the CPU counts as an accelerator."""
    if backend is None:
        return 1 if jax.default_backend().lower() == "cpu" else 0
    if not isinstance(backend, str) or backend.lower() not in _ACCELERATORS | {"cpu"}:
        raise ValueError(
            f"`backend` must be None or a platform name ('cpu', {', '.join(map(repr, sorted(_ACCELERATORS)))}), "
            f"got {backend!r}."
        )
    return 1 if backend.lower() == "cpu" else 0


def _check_batch_size(batch_size) -> int | None:
    """``batch_size`` as an int (None kept), or a ValueError naming it."""
    if batch_size is None:
        return None
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 0:
        raise ValueError(f"`batch_size` must be an integer >= 0, got {batch_size!r}.")
    return int(batch_size)


def _check_seed_axis(per_seed) -> None:
    """A ValueError naming ``per_seed`` unless its arrays share a leading (seed) axis: with none, no
    number of seeds is given (``lax.map`` and ``vmap`` would say so in their own terms, or not at all)."""
    shapes = [jnp.shape(a) for a in jax.tree.leaves(eqx.filter(per_seed, eqx.is_array))]
    if not shapes:
        raise ValueError(
            "`per_seed` must hold at least one array, whose leading axis is the seeds; got no array in "
            f"{type(per_seed).__name__} {per_seed!r:.200}."
        )
    if any(len(s) == 0 for s in shapes) or len({s[0] for s in shapes}) > 1:
        raise ValueError(
            f"every array of `per_seed` must have the same leading (seed) axis, got shapes {sorted(set(shapes))}."
        )


def map_seeds(fn: Callable, per_seed, *, batch_size: int | None = None):
    """``fn(one seed's per_seed)`` for every seed on the leading axis of ``per_seed`` (a pytree; its
    non-array leaves are shared by every seed, as are the arrays ``fn`` closes over).

    ``batch_size`` seeds are vmapped together and the batches run one after another
    (``jax.lax.map``); 0 vmaps all seeds at once. Default: :func:`seed_batch_size` of the backend.
    Every seed's numbers equal a lone seed's to round-off, whatever the batching.
    """
    size = _check_batch_size(batch_size)
    size = seed_batch_size() if size is None else size
    _check_seed_axis(per_seed)
    if size == 0:
        return eqx.filter_vmap(fn)(per_seed)
    dyn, static = eqx.partition(per_seed, eqx.is_array)
    out_static = []

    def body(d):
        arrays, rest = eqx.partition(fn(eqx.combine(d, static)), eqx.is_array)
        out_static.append(rest)
        return arrays

    arrays = jax.lax.map(body, dyn, batch_size=None if size == 1 else size)
    return eqx.combine(arrays, out_static[-1])


__all__ = ["map_seeds", "seed_batch_size"]
