"""Scale-out with JAX's own sharding: context points (and target tokens) split across devices.

``shard_inputs`` places the context support along a 1-D device mesh (axis ``"data"``) and the
batch of target tokens likewise when it divides evenly (replicated otherwise); ``forward``
under ``jax.jit`` then runs SPMD-partitioned by XLA: each device evaluates the velocity of its
own query rows against the all-gathered keys. Multi-host: call ``jax.distributed.initialize()``
first; ``jax.devices()`` then spans every process and the same code applies.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from .measures import EmpiricalMeasure, as_measure

AXIS = "data"


def context_mesh(devices=None) -> Mesh:
    """A 1-D mesh over ``devices`` (default: all of ``jax.devices()``) with axis ``"data"``."""
    devices = jax.devices() if devices is None else list(devices)
    return Mesh(np.asarray(devices), (AXIS,))


def shard_inputs(x0, context, mesh: Mesh | None = None):
    """Return ``(x0, context)`` placed on ``mesh``: context points/weights split along n.

    Raises ``ValueError`` when n is not divisible by the number of devices (pad the context
    or choose n accordingly; zero-weight padding is not a valid probability measure).
    """
    mesh = context_mesh() if mesh is None else mesh
    context = as_measure(context)
    ndev = mesh.devices.size
    n = context.size
    if n % ndev:
        raise ValueError(f"`context` has n = {n} points, not divisible by the {ndev} devices of the mesh.")
    row = NamedSharding(mesh, P(AXIS))
    points = jax.device_put(context.points, NamedSharding(mesh, P(AXIS, None)))
    weights = jax.device_put(context.weights, row)
    x0 = jax.numpy.asarray(x0)
    if x0.ndim == 2 and x0.shape[0] % ndev == 0:
        x0 = jax.device_put(x0, NamedSharding(mesh, P(AXIS, None)))
    else:
        x0 = jax.device_put(x0, NamedSharding(mesh, P()))
    return x0, EmpiricalMeasure(points, weights)
