"""The attention field and its kernels, chosen like a solver: the interface (kernel.py), the XLA
reference (xla.py), the fused Pallas pair (pallas.py, the only module importing Pallas), the weights'
derivative at zero (weights.py) and the field (field.py)."""

from .field import AttentionField, attention_kernels, attention_matrix
from .kernel import AbstractAttentionKernel
from .pallas import TRITON_BEFORE_JAX, PallasAttention
from .weights import MASK_VALUE
from .xla import XLAAttention, attention_means, resolve_chunk_size

__all__ = [
    "MASK_VALUE",
    "TRITON_BEFORE_JAX",
    "AbstractAttentionKernel",
    "AttentionField",
    "PallasAttention",
    "XLAAttention",
    "attention_kernels",
    "attention_matrix",
    "attention_means",
    "resolve_chunk_size",
]
