"""The attention field: its one kernel (the blocks live there alone), the shorthand for the XLA kernel's
blocks, bad settings refused, and the kernels of a field and of its summands listed for callers."""

import jax
import pytest

from cfm_jax import AttentionField, MLPField, PallasAttention, Transformer, XLAAttention
from cfm_jax._fields.attention.field import attention_kernels

SMALL = PallasAttention(block_q=16, block_k=16)


def test_the_default_kernel_and_its_blocks(monkeypatch):
    """The XLA kernel on every backend, with the blocks given to the field (the fused kernel is passed
    explicitly until it is measured on a GPU); the blocks are the kernel's alone; bad settings refused."""
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    for devices in (1, 2):
        monkeypatch.setattr(jax, "device_count", lambda devices=devices: devices)
        assert AttentionField().attention_kernel() == XLAAttention()
    assert AttentionField(chunk_size=None).kernel == XLAAttention(chunk_size=None)
    assert AttentionField(key_chunk_size=8).kernel == XLAAttention(key_chunk_size=8)
    assert AttentionField(4, 6) == AttentionField(kernel=XLAAttention(4, 6))  # one place for the blocks
    # PallasAttention on a GPU: test_gpu_kernels_need_a_jax_with_the_triton_backend (it depends on JAX)
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    assert AttentionField().attention_kernel() == XLAAttention()
    field = Transformer.init(jax.random.key(0), 2, layers=1, kernel=SMALL).field
    assert isinstance(field, AttentionField) and field.attention_kernel() is SMALL
    with pytest.raises(ValueError, match="`kernel`"):
        AttentionField(kernel="pallas")  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="XLAAttention"):
        AttentionField(chunk_size=8, kernel=SMALL)
    with pytest.raises(ValueError, match="XLAAttention"):
        AttentionField(key_chunk_size=8, kernel=XLAAttention())
    with pytest.raises(ValueError, match="`chunk_size`"):
        AttentionField(chunk_size=0)


def test_the_kernels_of_a_field_and_its_summands():
    assert attention_kernels(AttentionField()) == (XLAAttention(),)
    assert attention_kernels(MLPField()) == ()
    both = AttentionField(kernel=SMALL) + MLPField() + AttentionField(chunk_size=4)
    assert attention_kernels(both) == (SMALL, XLAAttention(4))
