"""Memory policies of the hand adjoints: how the backward sweep gets the forward states back.

=====================  ===========================================  ==========================
policy                 discrete adjoint (Euler, N = L·k steps)      continuous adjoint
=====================  ===========================================  ==========================
``StoreAll()``         every step's state: one forward, one          —
                       backward, O(N) states (default)
``StoreEvery(c)``      every c-th layer boundary; each c-layer       c = 1 only: the state is
                       segment is recomputed, O(L/c + c·k) states    restarted from every layer
                                                                     boundary (default)
``Recompute()``        the initial state only; each layer's start    —
                       is recomputed from s = 0: memory independent
                       of L, O(L²) layer evaluations
``Backsolve()``        —                                             nothing stored: the state
                                                                     is integrated backward with
                                                                     the adjoint (memory
                                                                     independent of L)
=====================  ===========================================  ==========================

:func:`segment_steps` is the one validation of a policy against a strategy and a model.
"""

from __future__ import annotations

from typing import Literal

import equinox as eqx
import numpy as np


class AbstractMemory(eqx.Module):
    """How a hand adjoint stores or recomputes the forward states (see the module table)."""


class StoreAll(AbstractMemory):
    """Store every Euler state (discrete adjoint)."""


class StoreEvery(AbstractMemory):
    """Store every ``layers``-th layer boundary and recompute the segments in between."""

    layers: int = eqx.field(static=True, default=1)


class Recompute(AbstractMemory):
    """Store only the initial state; recompute each layer's start from s = 0 (discrete adjoint)."""


class Backsolve(AbstractMemory):
    """Store nothing; integrate the state backward together with the adjoint (continuous adjoint)."""


def segment_steps(
    memory: AbstractMemory,
    strategy: Literal["discrete", "continuous"],
    *,
    layers: int,
    steps: int,
    steps_per_layer: int,
) -> int | None:
    """Steps per stored segment for ``memory`` (None: every state stored, or nothing: backsolve).

    Raises a ``ValueError`` naming ``memory`` when the policy does not apply to the strategy, or
    ``StoreEvery(c)`` does not divide the number of layers.
    """
    if not isinstance(memory, AbstractMemory):
        raise ValueError(
            f"`memory` must be a cfm_jax memory policy (StoreAll(), StoreEvery(c), Recompute(), "
            f"Backsolve()), got {memory!r}."
        )
    if strategy == "discrete":
        if isinstance(memory, StoreAll):
            return None
        if isinstance(memory, Recompute):
            return steps_per_layer
        if isinstance(memory, StoreEvery):
            c = memory.layers
            c = int(c) if isinstance(c, np.integer) else c  # a numpy integer is an int to the user
            if not isinstance(c, int) or isinstance(c, bool) or c < 1 or layers % c or steps % (c * steps_per_layer):
                raise ValueError(
                    f"`memory`=StoreEvery({c!r}): layers per stored state must be a positive int dividing L={layers}."
                )
            return c * steps_per_layer
        raise ValueError(
            f"`memory`={type(memory).__name__}() does not apply to DiscreteAdjoint (explicit Euler is not "
            "exactly reversible); use StoreAll(), StoreEvery(c) or Recompute()."
        )
    if isinstance(memory, Backsolve):
        return None
    if isinstance(memory, StoreEvery):
        if memory.layers != 1:
            raise ValueError(
                f"`memory`=StoreEvery({memory.layers!r}): ContinuousAdjoint restarts the state from every "
                "layer boundary; use StoreEvery(1) or Backsolve()."
            )
        return steps_per_layer
    raise ValueError(
        f"`memory`={type(memory).__name__}() does not apply to ContinuousAdjoint; use StoreEvery(1) "
        "(restart from layer boundaries) or Backsolve()."
    )


__all__ = ["AbstractMemory", "Backsolve", "Recompute", "StoreAll", "StoreEvery", "segment_steps"]
