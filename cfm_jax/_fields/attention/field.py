"""Multi-head softmax attention as a velocity field; its means computed by an attention kernel.

For head h, with u_h(q) = K_hᵀ Q_h q (so <Q_h q, K_h z> = u_h(q)·z),

    α^h_j(q) = w_j exp(u_h(q)·z_j) / Σ_k w_k exp(u_h(q)·z_k),   V(q, μ) = Σ_h V_h Σ_j α^h_j(q) z_j.

Folding Q_hᵀK_h into one d×d matrix A_h per head means keys and values are the raw context points.
The field holds one :class:`~cfm_jax.AbstractAttentionKernel` (kernel.py), chosen like a solver: the
means, their VJP and the local products (closed forms: xla.py's docstring) are the kernel's, so
the field asks its kernel, never tests its type; blocks and precision are the kernel's settings.
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

from ..base import AbstractField, AbstractGaussianField, AbstractSumField, LocalVJP, complete_params
from .kernel import AbstractAttentionKernel
from .xla import XLAAttention


def attention_matrix(Q: Float[Array, "H d d"], K: Float[Array, "H d d"]) -> Float[Array, "H d d"]:
    """A_h = Q_hᵀ K_h, so that the logit of query q against key z is q·A_h z."""
    return jnp.einsum("hed,hef->hdf", Q, K)


class AttentionField(AbstractGaussianField):
    """Multi-head softmax attention; reads ``Q, K, V: (H, d, d)`` from the layer parameters.

    ``AttentionField(chunk_size, key_chunk_size)`` is short for
    ``AttentionField(kernel=XLAAttention(chunk_size, key_chunk_size))``: the blocks live in the kernel
    alone, and giving them with another ``kernel`` is refused.

    Attributes:
        kernel: how the means and their VJP are computed (:class:`AbstractAttentionKernel`); by default
            ``XLAAttention(chunk_size, key_chunk_size)`` on every backend: the fused
            :class:`PallasAttention` is chosen by passing it (``PallasAttention(mesh=...)`` on several
            devices) until its GPU timings and errors are measured (``docs/scaling.md`` §5).
    """

    kernel: AbstractAttentionKernel

    def __init__(
        self,
        chunk_size: int | str | None = "auto",
        key_chunk_size: int | None = None,
        kernel: AbstractAttentionKernel | None = None,
    ):
        if kernel is None:
            kernel = XLAAttention(chunk_size, key_chunk_size)
        elif not isinstance(kernel, AbstractAttentionKernel):
            raise ValueError(
                f"`kernel` must be an attention kernel (XLAAttention(), PallasAttention()) or None, got {kernel!r}."
            )
        elif not (isinstance(chunk_size, str) and chunk_size == "auto") or key_chunk_size is not None:
            raise ValueError(
                "`chunk_size` and `key_chunk_size` configure the default kernel; with `kernel` set, "
                "give them to XLAAttention(chunk_size, key_chunk_size) instead."
            )
        self.kernel = kernel

    def attention_kernel(self) -> AbstractAttentionKernel:
        """The kernel used (``kernel``)."""
        return self.kernel

    def __call__(self, x, measure, params):
        A = attention_matrix(params["Q"], params["K"])
        means = self.kernel.weighted_means(x, measure.points, measure.weights, A)
        return jnp.einsum("hed,hqd->qe", params["V"], means)

    def local_vjp(self, queries, measure, params, cot, *, active=None, targets=None) -> LocalVJP:
        """Closed-form local products (xla.py's docstring) from the kernel; the weight term $∂/∂w_j$ is
        the finite one-sided derivative at a zero weight too."""
        Qm, Km, Vh = params["Q"], params["K"], params["V"]
        A = attention_matrix(Qm, Km)
        act = None if active is None else jnp.asarray(active, queries.dtype)
        (velocity, dx), (dz, dw, dA, dV, dtar, phi) = self.kernel.weighted_local_products(
            queries, cot, act, measure.points, measure.weights, A, Vh, targets
        )
        dQ = jnp.einsum("hef,hdf->hed", Km, dA)  # K_h (∂/∂A_h)ᵀ
        dK = jnp.einsum("hed,hdf->hef", Qm, dA)  # Q_h ∂/∂A_h
        dparams = complete_params({"Q": dQ, "K": dK, "V": dV}, params)
        return LocalVJP(velocity, dx, dz, dw, dparams, dtar, phi)

    def gaussian_affine(self, params, mean, cov):
        """Closed form at $μ = N(m, Σ)$: $c = Σ_h V_h m$, $M = Σ_h V_h Σ A_h^⊤$ ($A_h = Q_h^⊤ K_h$).

        The softmax mean under a Gaussian is the mean of the exponentially tilted Gaussian,
        $∫ e^{u·z} z dμ / ∫ e^{u·z} dμ = m + Σ u$, and the logit of query x is $u_h·z$ with
        $u_h = A_h^⊤ x$, so the head's mean is $m + Σ A_h^⊤ x$.
        """
        A = attention_matrix(params["Q"], params["K"])
        Vh = params["V"]
        c = jnp.einsum("hed,d->e", Vh, mean)
        M = jnp.einsum("hed,df,hgf->eg", Vh, cov, A)
        return c, M


def attention_kernels(field: AbstractField) -> tuple[AbstractAttentionKernel, ...]:
    """The attention kernels of ``field`` and of its summands, for callers to ask what they support
    (``forward_mode``, :meth:`~AbstractAttentionKernel.unsupported`)."""
    fields = field.fields if isinstance(field, AbstractSumField) else (field,)  # sums are flat
    return tuple(f.kernel for f in fields if isinstance(f, AttentionField))


__all__ = ["AttentionField", "attention_kernels", "attention_matrix"]
