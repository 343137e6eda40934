"""Weights in the attention: the one-sided derivative in a weight at zero, never 0·∞.

A zero weight carries no mass, but the loss still depends on it to first order: for one softmax head
∂(c·V)/∂w_j = e^{u·z_j − lse} s_j (s_j = (z_j − m)·V_hᵀc), the limit of α_j s_j / w_j and the first
variation of the field at the atom. Autodiff through log w would form 0·(1/0). The XLA path's means
take their values from the log-weights (masked) and their derivative in w from that closed form (a
custom JVP, so every autodiff mode runs through it); its local products compute with w = f·e^ℓ
(:func:`split_weights`), which gives the weight term at a zero weight in the same pass; a kernel
whose VJP gives ∂/∂log w only (0 at a zero weight, e.g. the fused Pallas kernel) is completed at the zero
weights by :func:`zero_weight_terms`, in the field's local products and, through :func:`kernel_means`,
under autodiff.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

if TYPE_CHECKING:  # kernel.py composes its defaults from these helpers
    from .kernel import AbstractAttentionKernel

#: Finite stand-in for log 0 (zero weights, padded keys): exp(mask − max) underflows to exactly 0 next
#: to any logit of a positive weight, and it stays finite after adding a logit u·z in float32.
MASK_VALUE = -0.7 * float(np.finfo(np.float32).max)


def clip_exponent(dtype) -> float:
    """The largest exponent taken for an atom of weight zero: half the overflow threshold, so that its
    ``exp`` times the factors the local products multiply it by stays finite. Past it the derivative
    in that weight, $e^{u·z − top}(…)$, is clipped to $e^{clip}(…)$: exact only while a zero-weight
    atom's logit exceeds the positive ones' by less than the clip (44 in float32, 354 in float64)."""
    return 0.5 * float(np.log(np.finfo(dtype).max))


def split_weights(*, weights=None, log_weights=None):
    """``(ell (n,), f (n,))`` with $w_j = f_j e^{ℓ_j}$, the form the XLA path computes with.

    Positive atoms: ``ell = log w``, ``f = 1`` (held constant); zero-weight atoms: ``ell = 0``,
    ``f = w = 0`` whose derivative is 1, so that autodiff gives the finite one-sided derivative
    $∂/∂w_j = e^{u·z_j − lse}(…)$ at a zero weight with no division (the log of a zero
    weight is never taken). From ``log_weights`` (the kernel interface) a zero weight is a log
    weight at or below the mask (−inf), and ``f`` is a constant 0/1.
    """
    if weights is not None:
        pos = weights > 0
        ell = jnp.where(pos, jnp.log(jnp.where(pos, weights, 1)), 0)
        return ell, jnp.where(pos, jnp.ones_like(weights), weights)
    assert log_weights is not None
    pos = log_weights > MASK_VALUE
    return jnp.where(pos, log_weights, 0), pos.astype(log_weights.dtype)


def zero_weight_terms(kernel: AbstractAttentionKernel, q, z, w, A, key_cot, means_lse=None):
    """``(n,)`` $Σ_{h,r} e^{u_{hr}·z_j − lse_{hr}} (z_j − m_{hr})·c_{hr}$ at the zero weights (0 at
    the others): $∂/∂w_j$ there, for a kernel whose VJP gives ∂/∂log w only (0 at a zero weight). One more
    forward and key pass of the kernel, with the log-weights swapped so that only the zero weights count;
    the kernel's VJP must use the means and log-sum-exp it is given (the interface's contract). Skipped
    (a ``lax.cond``) when no weight is zero. ``means_lse``: the kernel's means, when known."""

    def terms():
        m, lse = kernel.means(q, z, jnp.log(w), A) if means_lse is None else means_lse
        swapped = jnp.where(w > 0, -jnp.inf, 0.0).astype(w.dtype)
        return kernel.means_vjp(q, z, swapped, A, m, lse, jnp.zeros_like(key_cot), key_cot)[2].astype(w.dtype)

    return jax.lax.cond(jnp.any(w == 0), terms, lambda: jnp.zeros_like(w))


def kernel_means(kernel: AbstractAttentionKernel, x, z, w, A):
    """``kernel.means`` differentiable in the weights with the finite one-sided derivative at a zero
    weight (:func:`zero_weight_terms`): a custom VJP over the kernel's own (reverse-only kernels)."""

    @jax.custom_vjp
    def means(x, z, w, A):
        return kernel.means(x, z, jnp.log(w), A)[0]

    def fwd(x, z, w, A):
        m, lse = kernel.means(x, z, jnp.log(w), A)
        return m, (x, z, w, A, m, lse)

    def bwd(res, cot):
        x, z, w, A, m, lse = res
        g, dz, dlogw = kernel.means_vjp(x, z, jnp.log(w), A, m, lse, cot, cot)
        pos = w > 0
        dw = jnp.where(pos, dlogw / jnp.where(pos, w, 1), zero_weight_terms(kernel, x, z, w, A, cot, (m, lse)))
        dx = jnp.einsum("hrf,hdf->rd", g, A)  # u_h = A_hᵀ x
        dA = jnp.einsum("rd,hrf->hdf", x, g)
        return dx.astype(x.dtype), dz.astype(z.dtype), dw.astype(w.dtype), dA.astype(A.dtype)

    means.defvjp(fwd, bwd)
    return means(x, z, w, A)


__all__ = ["MASK_VALUE", "clip_exponent", "kernel_means", "split_weights", "zero_weight_terms"]
