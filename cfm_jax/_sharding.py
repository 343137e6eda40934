"""Scale-out with JAX's own sharding: context points (and target tokens) split across devices.

``shard_inputs`` places the context support along a 1-D device mesh (axis ``"data"``) and the
batch of target tokens likewise when it divides evenly (replicated otherwise); ``forward`` and
the gradients under ``jax.jit`` then run SPMD-partitioned by XLA: each device evaluates the
velocity of its own query rows against the all-gathered keys.

Multi-process (several hosts, or one process per GPU): call :func:`cfm_jax.distributed.initialize`
first; ``jax.devices()`` then spans every process and the same code applies. Every process must
pass the same host values; each one only copies the rows its own devices hold. Arrays that span
processes are not readable with ``np.asarray``: use :func:`gather` (see ``docs/scaling.md``).
"""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from ._measures import as_measure

AXIS = "data"


def context_mesh(devices=None) -> Mesh:
    """A 1-D mesh over ``devices`` (default: all of ``jax.devices()``, every process) with axis ``"data"``."""
    devices = jax.devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("`devices` must name at least one device (got an empty list); None means all of them.")
    if not all(isinstance(d, jax.Device) for d in devices):
        raise ValueError(f"`devices` must be JAX devices (e.g. from jax.devices()), got {devices!r}.")
    return Mesh(np.asarray(devices), (AXIS,))


def _place(host: np.ndarray, sharding: NamedSharding) -> jax.Array:
    """A global array from a host value every process holds; each process fills its own shards."""
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def replicate(tree, mesh: Mesh | None = None):
    """Every array leaf of ``tree`` (e.g. a model) replicated on all devices of ``mesh``."""
    mesh = context_mesh() if mesh is None else mesh
    full = NamedSharding(mesh, P())
    arrays, static = eqx.partition(tree, eqx.is_array)
    arrays = jax.tree.map(lambda a: _place(np.asarray(a), full), arrays)
    return eqx.combine(arrays, static)


def shard_inputs(x0, context, mesh: Mesh | None = None):
    """Return ``(x0, context)`` placed on ``mesh``: context points/weights split along n.

    ``x0: (B, d)`` is split along B when B is divisible by the device count, replicated
    otherwise (and always for ``(d,)``). Raises ``ValueError`` when n is not divisible by the
    number of devices (pad the context or choose n accordingly; zero-weight padding is not a
    valid probability measure).
    """
    mesh = context_mesh() if mesh is None else mesh
    context = as_measure(context)
    ndev = mesh.devices.size
    n = context.size
    if n % ndev:
        raise ValueError(f"`context` has n = {n} points, not divisible by the {ndev} devices of the mesh.")
    points = _place(np.asarray(context.points), NamedSharding(mesh, P(AXIS, None)))
    weights = _place(np.asarray(context.weights), NamedSharding(mesh, P(AXIS)))
    x0 = np.asarray(x0 if isinstance(x0, jax.Array) else jax.numpy.asarray(x0))
    split = x0.ndim == 2 and x0.shape[0] % ndev == 0
    x0 = _place(x0, NamedSharding(mesh, P(AXIS, None) if split else P()))
    # The measure was validated on the host; a global array cannot be read back to re-check it.
    return x0, eqx.tree_at(lambda m: (m.points, m.weights), context, (points, weights))


def gather(tree):
    """Every array leaf of ``tree`` as a host NumPy array holding the full global value.

    In one process this is ``np.asarray``; across processes it all-gathers the shards first
    (a collective: every process must call it).
    """
    if jax.process_count() == 1:
        return jax.tree.map(np.asarray, tree)
    return jax.tree.map(lambda a: np.asarray(multihost_utils.process_allgather(a, tiled=True)), tree)


__all__ = ["AXIS", "context_mesh", "gather", "replicate", "shard_inputs"]
