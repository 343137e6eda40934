"""Checkpoints of the OGD state (and its stream) as equinox-serialised leaves, written atomically."""

from __future__ import annotations

import os
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp

from .._streams import AbstractStream
from ._state import OGDState


def _is_key(x):
    return isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def _keys_to_data(tree):
    return jax.tree.map(lambda x: jax.random.key_data(x) if _is_key(x) else x, tree)


def save_checkpoint(path, state: OGDState, stream: AbstractStream | None = None) -> Path:
    """Write ``state`` (and optionally the stream, PRNG keys included) to ``path`` atomically."""
    if not isinstance(state, OGDState):
        # checked before anything is written: a bad call leaves no file behind
        raise ValueError(f"`state` must be an OGDState, got {type(state).__name__}.")
    if stream is not None and not isinstance(stream, AbstractStream):
        raise ValueError(f"`stream` must be None or a stream (AbstractStream), got {type(stream).__name__}.")
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


__all__ = ["load_checkpoint", "save_checkpoint"]
