"""The options of ``cfm-jax sync`` (:mod:`cfm_experiments.sync`)."""

from __future__ import annotations

from ..protocol import Option
from . import Declaration

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

PARTS = (
    Declaration("sync", (REALISATIONS,)),
    Declaration("lyapunov", (REALISATIONS,)),
    Declaration("strong"),
    Declaration("chaos"),
    Declaration("weak_L", (REALISATIONS,)),
    Declaration("weak_m", (REALISATIONS,)),
    PAPER,
    Declaration("figure1", optional=True),
    Declaration("chaos_w2", optional=True),
)

__all__ = ["PAPER", "PARTS", "REALISATIONS"]
