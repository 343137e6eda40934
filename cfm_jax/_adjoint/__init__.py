"""Hand-written adjoints of the flow (docs/theory.md §2) as strategies for ``forward(adjoint=...)``.

Every strategy implements one hook (:class:`AbstractStrategy`, ``solve``); a diffrax adjoint is the
``Autodiff`` strategy. The hand adjoints:

- :class:`DiscreteAdjoint`: the exact adjoint of explicit Euler (the residual network);
- :class:`ContinuousAdjoint`: the adjoint ODE integrated backward with diffrax;
- memory policies (:mod:`.memory`): ``StoreAll``, ``StoreEvery(c)``, ``Recompute``, ``Backsolve``;
- probe sets (:mod:`.probes`) for ∇φ_s at fixed points.

The local products each strategy needs come from the fields (``AbstractField.local_vjp``).
"""

from .base import (
    AbstractHandAdjoint,
    AbstractStrategy,
    AdjointResult,
    Autodiff,
    Cotangents,
    as_strategy,
    probe_rows,
    system_vjp,
)
from .continuous import ContinuousAdjoint
from .discrete import DiscreteAdjoint
from .memory import AbstractMemory, Backsolve, Recompute, StoreAll, StoreEvery
from .probes import ball_probes, grid_probes

__all__ = [
    "AbstractHandAdjoint",
    "AbstractMemory",
    "AbstractStrategy",
    "AdjointResult",
    "Autodiff",
    "Cotangents",
    "as_strategy",
    "Backsolve",
    "ContinuousAdjoint",
    "DiscreteAdjoint",
    "Recompute",
    "StoreAll",
    "StoreEvery",
    "ball_probes",
    "grid_probes",
    "probe_rows",
    "system_vjp",
]
