"""Attention kernels: how the softmax means and their VJP are computed, chosen like a solver.

In flash-attention terms one head is a single-key-head attention: queries u = A_hᵀ q (heads
folded into rows), keys = values = the context points z, and the weights a per-key bias log w_j.
A kernel provides two operations, per head h and query row q:

    means:      m = Σ_j α_j z_j,  lse = log Σ_j w_j e^{u·z_j}        (α_j = w_j e^{u·z_j − lse})
    means_vjp:  for cotangents v of m (and v' for the key-side terms),
                du_j-side  g = Σ_j α_j s_j z_j − (Σ_j α_j s_j) m,      s_j = (z_j − m)·v
                dz_j       = Σ_rows α_j [v' + s'_j u]                  (dK + dV: keys are values)
                dlog w_j   = Σ_rows α_j s'_j                           (the per-key bias gradient)

g is dQ with the centring kept (Σ_j α_j s_j = 0 exactly; subtracting its round-off keeps the
covariance Cov_α v centred when it is tiny). The two cotangents let the hand adjoint use every row
for dQ and only the active rows for the key-side terms. :class:`AbstractAttentionKernel` composes
from these two operations what :class:`~cfm_jax.AttentionField` asks of a kernel: the means
differentiable in the weights (:meth:`~AbstractAttentionKernel.weighted_means`) and all local
products (:meth:`~AbstractAttentionKernel.weighted_local_products`), the weight term the finite
one-sided derivative at a zero weight (weights.py). A kernel says what it supports through
``forward_mode`` (forward-mode autodiff through it) and :meth:`~AbstractAttentionKernel.unsupported`
(why it cannot run here), so that callers ask the kernel instead of testing its type.

The kernels: :class:`~cfm_jax.XLAAttention` (xla.py, the blockwise XLA reference) and
:class:`~cfm_jax.PallasAttention` (pallas.py, a fused Pallas kernel pair).
"""

import abc
from typing import TYPE_CHECKING

import jax.numpy as jnp
from jaxtyping import Array, Float

from ..._validation import AbstractRewritable
from .weights import kernel_means, zero_weight_terms

if TYPE_CHECKING:  # type checkers read equinox's AbstractClassVar as the ClassVar it becomes (as diffrax does)
    from typing import ClassVar as AbstractClassVar
else:
    from equinox import AbstractClassVar


class AbstractAttentionKernel(AbstractRewritable):
    """How attention means and their VJP are computed (module docstring).

    Subclasses implement :meth:`means` and :meth:`means_vjp` and set ``forward_mode``;
    :meth:`local_products`, :meth:`weighted_means` and :meth:`weighted_local_products` are composed
    from them (a kernel may override them with fused closed forms, as :class:`~cfm_jax.XLAAttention` does).

    Attributes:
        forward_mode: whether forward-mode autodiff (``jax.jvp``, ``jax.jacfwd``, ``jax.hessian``)
            runs through the kernel; a reverse-only kernel (a ``custom_vjp``) refuses it.
    """

    forward_mode: AbstractClassVar[bool]

    @abc.abstractmethod
    def means(
        self, queries: Float[Array, "q d"], keys: Float[Array, "n d"], log_weights: Float[Array, " n"], A
    ) -> tuple[Float[Array, "H q d"], Float[Array, "H q"]]:
        """Per-head means $m_h(q)$ and their log-sum-exp, for the rows $u_h(q) = A_h^⊤ q$, ``A: (H, d, d)``."""

    @abc.abstractmethod
    def means_vjp(
        self, queries, keys, log_weights, A, means, lse, cot: Float[Array, "H q d"], key_cot: Float[Array, "H q d"]
    ) -> tuple[Float[Array, "H q d"], Float[Array, "n d"], Float[Array, " n"]]:
        """``(g, dkeys, dlog_weights)``: $g$ the gradient of cot·m in the rows $u_h$ (centred), and
        the gradients in the keys and log-weights for ``key_cot``; computed from the ``means`` and
        ``lse`` given (``zero_weight_terms`` relies on it)."""

    def unsupported(self) -> str | None:
        """Why this kernel cannot run on this backend and JAX (one sentence naming the alternative), or
        None where it runs; a kernel that cannot run raises NotImplementedError with it when called."""
        return None

    def weighted_means(
        self, queries: Float[Array, "q d"], keys: Float[Array, "n d"], weights: Float[Array, " n"], A
    ) -> Float[Array, "H q d"]:
        """:meth:`means` from the weights themselves: autodiff in ``weights`` gives the finite one-sided
        derivative at a zero weight (weights.py), never 0·∞."""
        return kernel_means(self, queries, keys, weights, A)

    def local_products(self, q, c, act, z, logw, A, Vh, targets) -> tuple[tuple[Array, Array], tuple]:
        """Local products of multi-head attention at rows ``q (r, d)`` with cotangents ``c (r, d)``.

        ``act (r,)`` or None (all active), ``targets (T, d)`` or None. Returns ((velocity, dx) per row,
        (dz, dlogw, dA, dV, dtargets, phi) summed over the active rows), as xla.py's docstring.
        """
        m, lse = self.means(q, z, logw, A)  # (H, r, d), (H, r)
        velocity = jnp.einsum("hed,hrd->re", Vh, m)
        v = jnp.einsum("re,hed->hrd", c, Vh)  # V_hᵀ c
        mask = 1.0 if act is None else act[None, :, None]
        vk = v * mask
        g, dz, dlogw = self.means_vjp(q, z, logw, A, m, lse, v, vk)
        dx = jnp.einsum("hrf,hdf->rd", g, A)  # Σ_h A_h g_h
        dA = jnp.einsum("rd,hrf->hdf", q, g * mask)
        ca = c if act is None else c * act[:, None]
        dV = jnp.einsum("re,hrd->hed", ca, m)
        if targets is None:
            return (velocity, dx), (dz, dlogw, dA, dV, None, None)
        u = jnp.einsum("rd,hdf->hrf", q, A)
        mv = jnp.sum(m * v, axis=-1, keepdims=True)
        Ey = jnp.exp(jnp.einsum("hrf,tf->hrt", u, targets) - lse[..., None])
        Sy = (jnp.einsum("hrd,td->hrt", v, targets) - mv) * mask
        ES = Ey * Sy
        dtar = jnp.einsum("hrt,hrd->td", Ey, vk) + jnp.einsum("hrt,hrd->td", ES, u)
        return (velocity, dx), (dz, dlogw, dA, dV, dtar, jnp.sum(ES, axis=(0, 1)))

    def weighted_local_products(self, q, c, act, z, w, A, Vh, targets) -> tuple[tuple[Array, Array], tuple]:
        """:meth:`local_products` from the weights ``w (n,)``, with ∂/∂w in place of ∂/∂log w: the finite
        one-sided derivative at a zero weight, completed there by ``zero_weight_terms``."""
        (velocity, dx), (dz, dlogw, dA, dV, dtar, phi) = self.local_products(q, c, act, z, jnp.log(w), A, Vh, targets)
        pos = w > 0
        vk = jnp.einsum("re,hed->hrd", c if act is None else c * act[:, None], Vh)
        dw = jnp.where(pos, dlogw / jnp.where(pos, w, 1), zero_weight_terms(self, q, z, w, A, vk))
        return (velocity, dx), (dz, dw, dA, dV, dtar, phi)


__all__ = ["AbstractAttentionKernel"]
