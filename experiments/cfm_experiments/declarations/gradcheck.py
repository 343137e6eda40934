"""The options of ``cfm-jax gradcheck`` (:mod:`cfm_experiments.gradcheck`)."""

from __future__ import annotations

from ..protocol import Declaration, Option

GRADCHECK = Declaration(
    "gradcheck",
    (
        Option("dim", 4, "token dimension d", low=1),
        Option("context", 32, "context size n", low=1, quick=16),
        Option("batch", 3, "target tokens B", low=1),
        Option("layers", 6, "layers L", low=1, quick=4),
        Option("heads", 2, "attention heads H", low=1),
        Option("mlp_width", 8, "MLP width m", low=0, why="0: no MLP"),
        Option("fd_directions", 4, "random directions of the finite differences", low=1),
        Option("repeats", 5, "timed repetitions of each gradient (median)", low=1, quick=3),
    ),
)

PARTS = (GRADCHECK,)

__all__ = ["GRADCHECK", "PARTS"]
