"""The kernel interface: the local products, the means in the weights and the weight terms it composes
from a kernel's ``means`` and ``means_vjp`` equal the XLA kernel's fused closed forms (zero weights, the
active mask, targets); a kernel must say whether forward mode runs through it."""

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cfm_jax import AbstractAttentionKernel, PallasAttention, XLAAttention
from cfm_jax._fields.attention.field import attention_matrix

XLA = XLAAttention(chunk_size=None)


class _Composed(AbstractAttentionKernel):
    """Two operations alone (the XLA kernel's means, a dense VJP): every other method is the default."""

    forward_mode: ClassVar[bool] = True

    def means(self, queries, keys, log_weights, A):
        return XLA.means(queries, keys, log_weights, A)

    def means_vjp(self, queries, keys, log_weights, A, means, lse, cot, key_cot):
        """The interface's formulas (kernel.py's docstring), dense, from the means and lse given."""
        u = jnp.einsum("qd,hdf->hqf", queries, A)
        P = jnp.exp(jnp.einsum("hqf,nf->hqn", u, keys) + log_weights - lse[..., None])  # α, 0 at a zero weight

        def s(v):  # s_j = (z_j − m)·v
            return jnp.einsum("hqd,nd->hqn", v, keys) - jnp.sum(means * v, axis=-1, keepdims=True)

        S, Sk = P * s(cot), P * s(key_cot)
        g = jnp.einsum("hqn,nd->hqd", S, keys) - jnp.sum(S, axis=-1, keepdims=True) * means
        dz = jnp.einsum("hqn,hqd->nd", P, key_cot) + jnp.einsum("hqn,hqd->nd", Sk, u)
        return g, dz, jnp.sum(Sk, axis=(0, 1))


def _problem(d=3, H=2, q=6, n=7):
    k = jax.random.split(jax.random.key(5), 6)
    x = jax.random.normal(k[0], (q, d))
    z = jax.random.normal(k[1], (n, d))
    A = attention_matrix(jax.random.normal(k[2], (H, d, d)) / 2, jax.random.normal(k[3], (H, d, d)) / 2)
    w = jax.random.uniform(k[4], (n,), minval=0.5, maxval=1.5)
    w = (w * (jnp.arange(n) % 3 != 1)) / jnp.sum(w)  # zero weights among positive ones
    Vh = jax.random.normal(k[5], (H, d, d))
    return x, z, w, A, Vh


@pytest.mark.parametrize("active,targets", [(False, False), (True, True)])
def test_the_composed_products_are_the_closed_forms(active, targets):
    """velocity, dx, dz, ∂/∂w (finite at the zero weights), dA, dV, dtargets and φ from the default
    composition equal XLAAttention's closed forms; so does the gradient of the means in the weights."""
    x, z, w, A, Vh = _problem()
    c = jax.random.normal(jax.random.key(7), x.shape)
    act = (jnp.arange(x.shape[0]) % 2).astype(x.dtype) if active else None
    tar = jax.random.normal(jax.random.key(8), (4, x.shape[1])) if targets else None
    got = _Composed().weighted_local_products(x, c, act, z, w, A, Vh, tar)
    want = XLA.weighted_local_products(x, c, act, z, w, A, Vh, tar)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    dw = got[1][1]
    assert np.abs(np.asarray(dw)[np.asarray(w) == 0]).min() > 1e-4  # the zero weights' terms are there
    cot = jax.random.normal(jax.random.key(9), (A.shape[0], x.shape[0], x.shape[1]))
    grads = [jax.grad(lambda w, k=k: jnp.sum(cot * k.weighted_means(x, z, w, A)))(w) for k in (_Composed(), XLA)]
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10, atol=1e-12)


def test_a_kernel_says_whether_forward_mode_runs_through_it():
    assert XLAAttention.forward_mode and not PallasAttention.forward_mode
    assert XLAAttention().unsupported() is None

    class Silent(AbstractAttentionKernel):  # says nothing about forward mode
        def means(self, queries, keys, log_weights, A):
            return XLA.means(queries, keys, log_weights, A)

        def means_vjp(self, queries, keys, log_weights, A, means, lse, cot, key_cot):
            return XLA.means_vjp(queries, keys, log_weights, A, means, lse, cot, key_cot)

    with pytest.raises(TypeError, match="abstract class attributes.*forward_mode"):
        Silent()  # pyright: ignore[reportAbstractUsage]
    assert isinstance(_Composed(), eqx.Module)
