"""The options of ``cfm-jax demo`` (:mod:`cfm_experiments.demo`)."""

from __future__ import annotations

from ..protocol import Option

OPTIONS = (
    Option("dim", 8, "token dimension d", low=1),
    Option("context", 512, "context size n", low=1),
    Option("batch", 4, "number of target tokens B", low=1),
    Option("layers", 12, "layers L", low=1),
    Option("heads", 2, "attention heads H", low=1),
    Option("mlp_width", 32, "MLP width m", low=0, why="0: no MLP"),
    Option("seed", 0, "PRNG seed of the model and the inputs", low=0, high=2**62),
)

__all__ = ["OPTIONS"]
