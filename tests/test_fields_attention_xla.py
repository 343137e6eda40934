"""Softmax attention: dense, query-blocked and key-streamed paths, automatic blocks, float32 stability,
closed-form local products."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax import Transformer, forward


@pytest.mark.parametrize("dtype,tol", [(jnp.float32, 1e-6), (jnp.float64, 1e-12)])
def test_chunked_attention_matches_dense(dtype, tol):
    d, n = 4, 37  # n not divisible by any chunk below
    model = Transformer.init(jax.random.key(3), d, heads=2, mlp_width=0, layers=2, dtype=dtype, chunk_size=None)
    z = jax.random.normal(jax.random.key(4), (n, d), dtype)
    x0 = jax.random.normal(jax.random.key(6), (3, d), dtype)
    dense = forward(model, x0, z)
    scale = float(jnp.abs(dense.context.points).max())
    for chunk, key_chunk in [(8, None), (5, 16), (None, 7), (64, 64)]:
        sol = forward(model.with_chunking(chunk, key_chunk), x0, z)
        np.testing.assert_allclose(sol.context.points, dense.context.points, atol=tol * scale, rtol=0)
        np.testing.assert_allclose(sol.x1, dense.x1, atol=tol * scale, rtol=0)


def test_auto_chunking_switches_on_large_contexts():
    from cfm_jax._fields.attention.xla import resolve_chunk_size

    assert resolve_chunk_size("auto", 1, 100, 100) is None
    chunk = resolve_chunk_size("auto", 4, 70000, 70000)
    assert chunk == cfm_jax._fields.attention.xla.AUTO_CHUNK_SIZE


def test_huge_logits_do_not_overflow_float32():
    d, n = 3, 9
    key = jax.random.split(jax.random.key(7), 3)
    Q = 100.0 * jnp.eye(d)[None, None]
    z64 = jax.random.normal(key[0], (n, d), jnp.float64) * 10
    x64 = jax.random.normal(key[1], (2, d), jnp.float64) * 10
    kw = dict(K=Q, V=0.1 * jnp.eye(d)[None, None])
    m64 = Transformer(
        Q=Q.astype(jnp.float64), K=kw["K"].astype(jnp.float64), V=kw["V"].astype(jnp.float64), chunk_size=None
    )
    m32 = m64.astype(jnp.float32)
    logits = (x64 @ (Q[0, 0] @ Q[0, 0])) @ z64.T
    assert float(jnp.abs(logits).max()) > 1e4
    ref = forward(m64, x64, z64)
    for chunk in (None, 4):
        sol = forward(m32.with_chunking(chunk, 4 if chunk else None), x64.astype(jnp.float32), z64.astype(jnp.float32))
        assert bool(jnp.isfinite(sol.x1).all() and jnp.isfinite(sol.context.points).all())
        np.testing.assert_allclose(sol.x1, ref.x1, rtol=1e-4, atol=1e-3)


def test_backend_aware_block_sizes(monkeypatch):
    """``resolve_chunk_size("auto", ...)``: the CPU rule is the historical one. On GPU/TPU the q
    rows are split into equal blocks of a multiple of 8 rows, so the zero-padded tail is under 8
    rows per block; a block holds at most ``most`` rows (AUTO_BLOCK_ENTRIES_ACCELERATOR scores,
    clipped to the row bounds) and more than half of them; dense stays dense up to its limit."""
    from cfm_jax._fields.attention import xla as att

    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    assert att.resolve_chunk_size("auto", 1, 2048, 2048) is None  # exactly 2^22 entries
    assert att.resolve_chunk_size("auto", 1, 2049, 2048) == 256
    assert att.resolve_chunk_size("auto", 2, 1 << 20, 1 << 20) == 256
    assert att.resolve_chunk_size(64, 1, 1 << 20, 1 << 20) == 64
    assert att.resolve_chunk_size(None, 1, 1 << 20, 1 << 20) is None

    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    limit, entries = att.AUTO_DENSE_LIMIT_ACCELERATOR, att.AUTO_BLOCK_ENTRIES_ACCELERATOR
    lo, hi = att.AUTO_CHUNK_BOUNDS_ACCELERATOR
    assert att.resolve_chunk_size("auto", 1, 1 << 13, 1 << 14) is None  # exactly the limit
    assert att.resolve_chunk_size("auto", 1, (1 << 13) + 1, 1 << 14) is not None
    for heads in (1, 3):
        for logn in range(10, 31, 2):
            n = 1 << logn
            for q in (n + 4, 3 * n // 2, 2 * n):
                chunk = att.resolve_chunk_size("auto", heads, q, n)
                if heads * q * n <= limit:
                    assert chunk is None
                    continue
                assert chunk is not None
                most = 8 * (min(hi, max(lo, entries // (heads * n))) // 8)
                blocks = -(-q // chunk)
                assert chunk % 8 == 0 and blocks * chunk - q < 8 * blocks, (heads, n, q, chunk)
                assert most / 2 < chunk <= most, (heads, n, q, chunk, most)
    # the 4 target rows past 2^14 do not cost a nearly empty fifth block of 4096 rows
    assert att.resolve_chunk_size("auto", 1, (1 << 14) + 4, 1 << 14) == 3280


def _zero_weight_patterns(n):
    """Masks of the positive weights: leading zeros, trailing zeros, all but one zero."""
    keep = np.ones((3, n), bool)
    keep[0, : 5 * n // 8] = False
    keep[1, 3 * n // 8 :] = False
    keep[2] = False
    keep[2, 37 % n] = True
    return keep


@pytest.mark.parametrize("dtype,tol", [(jnp.float32, 1e-6), (jnp.float64, 1e-13)])
def test_streamed_means_with_zero_weight_key_blocks(dtype, tol):
    """Zero weights (log w = −inf, the documented padding) anywhere, at every key-block size: the
    streamed means and their gradient equal the dense means over the positive-weight keys alone
    (the zero-weight keys get a zero gradient). A −inf start of the running maximum makes NaN as
    soon as a whole leading key block has zero weight."""
    from cfm_jax._fields.attention.xla import attention_means

    n, d, q, H = 64, 3, 5, 2
    k = jax.random.split(jax.random.key(11), 4)
    x = jax.random.normal(k[0], (q, d), dtype)
    z = jax.random.normal(k[1], (n, d), dtype)
    A = jax.random.normal(k[2], (H, d, d), dtype)
    w = jax.random.uniform(k[3], (n,), dtype, 0.5, 1.5)

    def loss(x, z, logw, A, key_chunk):
        m = attention_means(x, z, logw, A, chunk_size=None, key_chunk_size=key_chunk)
        return jnp.sum(jnp.sin(m)), m

    grads = {
        c: jax.jit(jax.value_and_grad(functools.partial(loss, key_chunk=c), argnums=(0, 1, 2, 3), has_aux=True))
        for c in (1, 2, 3, 4, 5, 7, 8, 10, 16, 24, 32, 63, 64)
    }
    for keep in _zero_weight_patterns(n):
        logw = jnp.where(keep, jnp.log(w), -jnp.inf)
        (_, ref), (gx, gz, gw, gA) = jax.value_and_grad(loss, argnums=(0, 1, 2, 3), has_aux=True)(
            x, z[keep], jnp.log(w[keep]), A, None
        )
        for c, fn in grads.items():
            (_, m), (sx, sz, sw, sA) = fn(x, z, logw, A)
            scale = float(jnp.abs(ref).max())
            np.testing.assert_allclose(m, ref, rtol=0, atol=tol * scale, err_msg=f"key_chunk_size={c}")
            for got, want in ((sx, gx), (sz[keep], gz), (sw[keep], gw), (sA, gA)):
                np.testing.assert_allclose(got, want, rtol=0, atol=10 * tol * max(1.0, float(jnp.abs(want).max())))
            assert not np.any(sz[~keep]) and not np.any(sw[~keep]), c


@pytest.mark.parametrize("dtype,far", [(jnp.float32, 200.0), (jnp.float64, 1000.0)])
def test_a_massless_atom_with_the_largest_logit_is_masked_out_of_the_maximum(dtype, far):
    """A key block of zero weights whose logits exceed every positive weight's by more than the
    exponent range: the log-sum-exp's maximum is taken over the positive weights only (the finite
    mask at a zero weight), so the means, dense and streamed in blocks smaller than n, and their
    gradients equal those over the positive keys alone; taken over every key, all the positive terms
    underflow to 0 and the means are NaN."""
    from cfm_jax._fields.attention.xla import attention_means

    n, d, kc = 12, 2, 4
    k = jax.random.split(jax.random.key(12), 3)
    x = jnp.array([[1.0, 0.0], [0.8, 0.3]], dtype)
    z = jax.random.normal(k[0], (n, d), dtype).at[:kc].set(jnp.array([far, 0.0], dtype))  # the first block
    keep = np.arange(n) >= kc
    w = jnp.where(keep, jax.random.uniform(k[1], (n,), dtype, 0.5, 1.5), 0.0)
    A = jnp.eye(d, dtype=dtype)[None]

    def loss(x, z, logw, key_chunk):
        return jnp.sum(jnp.sin(attention_means(x, z, logw, A, chunk_size=None, key_chunk_size=key_chunk)))

    ref, (rx, rz) = jax.value_and_grad(loss, argnums=(0, 1))(x, z[keep], jnp.log(w[keep]), None)
    for key_chunk in (None, kc, 3):
        value, (gx, gz) = jax.value_and_grad(loss, argnums=(0, 1))(x, z, jnp.log(w), key_chunk)
        tol = 1e-5 if dtype == jnp.float32 else 1e-12
        np.testing.assert_allclose(value, ref, rtol=tol, err_msg=f"key_chunk_size={key_chunk}")
        np.testing.assert_allclose(gx, rx, rtol=tol, atol=tol, err_msg=f"key_chunk_size={key_chunk}")
        np.testing.assert_allclose(gz[keep], rz, rtol=tol, atol=tol, err_msg=f"key_chunk_size={key_chunk}")
        assert not np.any(np.asarray(gz)[~keep])
    # the closed-form local products (the hand adjoints') mask it the same way
    field = cfm_jax.AttentionField(chunk_size=None)
    params = {"Q": A[None, 0], "K": A[None, 0], "V": 0.5 * A[None, 0]}
    cot = jnp.ones_like(x)
    got = field.local_vjp(x, cfm_jax.EmpiricalMeasure.unchecked(z, w / w.sum()), params, cot)
    want = field.local_vjp(x, cfm_jax.EmpiricalMeasure.unchecked(z[keep], w[keep] / w.sum()), params, cot)
    tol = 1e-5 if dtype == jnp.float32 else 1e-12
    for name, a, b in (
        ("velocity", got.velocity, want.velocity),
        ("dx", got.dx, want.dx),
        ("dz", got.dz[keep], want.dz),
    ):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=name)
    np.testing.assert_allclose(got.dw[keep], want.dw, rtol=tol, atol=tol)
    assert np.isfinite(np.asarray(got.dw)).all()
