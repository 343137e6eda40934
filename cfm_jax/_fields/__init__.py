"""Velocity fields V(x, μ; θ): attention, MLP, their sums, and user-defined fields."""

from .attention import AttentionField, attention_matrix, attention_means
from .base import AbstractField, LayerParams, LocalVJP, SumField, complete_params, generic_local_vjp
from .mlp import MLPField, linear

__all__ = [
    "AbstractField",
    "AttentionField",
    "LayerParams",
    "LocalVJP",
    "MLPField",
    "SumField",
    "attention_matrix",
    "attention_means",
    "complete_params",
    "generic_local_vjp",
    "linear",
]
