"""The options of ``cfm-jax sync`` (:mod:`cfm_experiments.sync`)."""

from __future__ import annotations

from ..protocol import Declaration, Option

REALISATIONS = Option(
    "realisations",
    None,
    "noise realisations per configuration of the sync, lyapunov, weak_L, weak_m and paper parts "
    "(unset: each part's own count)",
    low=2,
    why="a confidence interval needs two",
    optional=True,
)

PAPER = Declaration(
    "paper",
    (
        REALISATIONS,
        Option("width", 256, "paper: MLP width m of the grid's cells (the paper does not state it)", low=1),
        Option("full_grid", False, "paper: 64 realisations per cell (else 16, or 4 with --quick)", kind="flag"),
    ),
    optional=True,
)

SYNC = Declaration("sync", (REALISATIONS,))
LYAPUNOV = Declaration("lyapunov", (REALISATIONS,))
STRONG = Declaration("strong")
CHAOS = Declaration("chaos")
WEAK_L = Declaration("weak_L", (REALISATIONS,))
WEAK_M = Declaration("weak_m", (REALISATIONS,))
FIGURE1 = Declaration("figure1", optional=True)
CHAOS_W2 = Declaration("chaos_w2", optional=True)

#: the parts of ``cfm-jax sync``, in order.
PARTS = (SYNC, LYAPUNOV, STRONG, CHAOS, WEAK_L, WEAK_M, PAPER, FIGURE1, CHAOS_W2)

__all__ = [
    "CHAOS",
    "CHAOS_W2",
    "FIGURE1",
    "LYAPUNOV",
    "PAPER",
    "PARTS",
    "REALISATIONS",
    "STRONG",
    "SYNC",
    "WEAK_L",
    "WEAK_M",
]
