"""Weights in the attention: w = f·e^ℓ differentiates to the identity at zero weights too, and the
completion of a kernel's ∂/∂log w at the zero weights is the one-sided derivative of the means."""

import jax
import jax.numpy as jnp
import numpy as np

from cfm_jax import PallasAttention, XLAAttention
from cfm_jax._fields.attention.field import attention_matrix
from cfm_jax._fields.attention.weights import kernel_means, split_weights, zero_weight_terms

W = jnp.array([0.0, 0.4, 0.0, 0.35, 0.25, 0.0])


def test_split_weights_rebuild_the_weights_with_derivative_one():
    """f·e^ℓ = w, and its Jacobian in w is the identity, at the zero weights included (a constant f
    there would give 0, a log of 0 would give NaN); from log-weights a zero weight is f = 0."""

    def rebuilt(w):
        ell, f = split_weights(weights=w)
        return f * jnp.exp(ell)

    np.testing.assert_allclose(rebuilt(W), W, rtol=1e-15)
    # the identity to round-off (exp(log w)·e^{-log w} may differ from 1 by an ulp on another JAX)
    np.testing.assert_allclose(jax.jacfwd(rebuilt)(W), np.eye(W.shape[0]), rtol=0, atol=4e-16)
    np.testing.assert_allclose(jax.jacrev(rebuilt)(W), np.eye(W.shape[0]), rtol=0, atol=4e-16)
    ell, f = split_weights(log_weights=jnp.log(W))
    np.testing.assert_array_equal(f, (W > 0).astype(W.dtype))
    assert np.isfinite(np.asarray(ell)).all()


def _problem():
    k = jax.random.split(jax.random.key(3), 4)
    q = jax.random.normal(k[0], (5, 3))
    z = jax.random.normal(k[1], (W.shape[0], 3))
    A = attention_matrix(jax.random.normal(k[2], (2, 3, 3)) / 2, jax.random.normal(k[3], (2, 3, 3)) / 2)
    return q, z, A


def test_the_zero_weight_terms_are_the_one_sided_derivative_of_the_means():
    """For the fused kernel (its VJP: ∂/∂log w, 0 at a zero weight) the completion gives, at the zero
    weights, the derivative of c·m in w that autodiff of the XLA path's f·e^ℓ form gives, and 0 at the
    others; with no zero weight it is skipped (zeros); kernel_means' VJP in w is that derivative."""
    q, z, A = _problem()
    c = jax.random.normal(jax.random.key(9), (2, 5, 3))
    xla, fused = XLAAttention(chunk_size=None), PallasAttention(block_q=16, block_k=16)
    want = jax.grad(lambda w: jnp.sum(c * xla.weighted_means(q, z, w, A)))(W)
    got = zero_weight_terms(fused, q, z, W, A, c)
    np.testing.assert_allclose(got[W == 0], want[W == 0], rtol=1e-10)
    assert not np.any(np.asarray(got)[W > 0]) and np.abs(np.asarray(want)[W == 0]).min() > 1e-3
    positive = jnp.full_like(W, 1.0 / W.shape[0])
    assert not np.any(np.asarray(zero_weight_terms(fused, q, z, positive, A, c)))
    through = jax.grad(lambda w: jnp.sum(c * kernel_means(fused, q, z, w, A)))(W)
    np.testing.assert_allclose(through, want, rtol=1e-10, atol=1e-12)
