"""Velocity fields V(x, μ; θ): attention, MLP, their sums, and user-defined fields."""

from .attention import (
    AbstractAttentionKernel,
    AttentionField,
    PallasAttention,
    XLAAttention,
    attention_kernels,
    attention_matrix,
    attention_means,
)
from .base import (
    AbstractField,
    AbstractGaussianField,
    AbstractSumField,
    GaussianSumField,
    LayerParams,
    LocalVJP,
    SumField,
    complete_params,
    generic_local_vjp,
    sum_fields,
)
from .mlp import LinearMLPField, MLPField, mlp_field

__all__ = [
    "AbstractAttentionKernel",
    "AbstractField",
    "AbstractGaussianField",
    "AbstractSumField",
    "AttentionField",
    "GaussianSumField",
    "LayerParams",
    "LinearMLPField",
    "LocalVJP",
    "MLPField",
    "PallasAttention",
    "SumField",
    "XLAAttention",
    "attention_kernels",
    "attention_matrix",
    "attention_means",
    "complete_params",
    "generic_local_vjp",
    "mlp_field",
    "sum_fields",
]
