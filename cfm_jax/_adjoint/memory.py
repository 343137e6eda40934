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

Which policies a strategy takes, and what each stores, is decided by the strategy's own type
(``DiscreteAdjoint._segment_steps``, ``ContinuousAdjoint._segment_steps``), from the policy's type;
:func:`check_memory` is the one check that a policy is one.
"""

from __future__ import annotations

import equinox as eqx
import numpy as np

from .._arguments import python_scalar


class AbstractMemory(eqx.Module):
    """How a hand adjoint stores or recomputes the forward states (see the module table)."""


class StoreAll(AbstractMemory):
    """Store every Euler state (discrete adjoint)."""


class StoreEvery(AbstractMemory):
    """Store every ``layers``-th layer boundary and recompute the segments in between."""

    layers: int = eqx.field(static=True, converter=python_scalar, default=1)


class Recompute(AbstractMemory):
    """Store only the initial state; recompute each layer's start from s = 0 (discrete adjoint)."""


class Backsolve(AbstractMemory):
    """Store nothing; integrate the state backward together with the adjoint (continuous adjoint)."""


def check_memory(memory) -> AbstractMemory:
    """``memory`` if it is a memory policy; a ``ValueError`` naming ``memory`` otherwise."""
    if not isinstance(memory, AbstractMemory):
        raise ValueError(
            f"`memory` must be a cfm_jax memory policy (StoreAll(), StoreEvery(c), Recompute(), "
            f"Backsolve()), got {memory!r}."
        )
    return memory


def store_every_layers(memory: StoreEvery) -> int:
    """``StoreEvery``'s layers per stored state as an int (a numpy integer too), or ``ValueError``."""
    c = memory.layers
    c = int(c) if isinstance(c, np.integer) else c  # a numpy integer is an int to the user
    if not isinstance(c, int) or isinstance(c, bool) or c < 1:
        raise ValueError(f"`memory`=StoreEvery({c!r}): layers per stored state must be a positive int.")
    return c


__all__ = ["AbstractMemory", "Backsolve", "Recompute", "StoreAll", "StoreEvery", "check_memory", "store_every_layers"]
