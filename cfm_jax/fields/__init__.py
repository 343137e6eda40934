"""Velocity fields V(x, μ; θ): attention, MLP, their sums, and user-defined fields."""

from .attention import AttentionField, attention_matrix, attention_means
from .base import AbstractField, LayerParams, SumField
from .mlp import MLPField

__all__ = [
    "AbstractField",
    "AttentionField",
    "LayerParams",
    "MLPField",
    "SumField",
    "attention_matrix",
    "attention_means",
]
