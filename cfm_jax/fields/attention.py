"""Multi-head softmax attention as a velocity field, dense or chunked.

For head h, with u_h(q) = K_hᵀ Q_h q (so <Q_h q, K_h z> = u_h(q)·z),

    α^h_j(q) = w_j exp(u_h(q)·z_j) / Σ_k w_k exp(u_h(q)·z_k),   V(q, μ) = Σ_h V_h Σ_j α^h_j(q) z_j.

The score matrix is always evaluated as logits + log w_j minus its row maximum (log-sum-exp),
so logits of size 1e4 do not overflow in float32. Folding Q_hᵀK_h into one d×d matrix per head
means keys and values are the raw context points: only one (H·q, d) × (d, n) product is needed.

The chunked path never forms the full (H·q, n) score matrix: queries are processed in blocks of
``chunk_size`` rows (``jax.lax.map``) and, when ``key_chunk_size`` is set, keys are streamed in
blocks with a running log-sum-exp, so memory is O(H·chunk·n) or O(H·chunk·key_chunk).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .base import AbstractField

#: Score-matrix entries (H·q·n) above which the automatic mode switches to query chunking (CPU).
AUTO_DENSE_LIMIT = 1 << 22
#: Query-block rows used by the automatic chunked mode (CPU).
AUTO_CHUNK_SIZE = 256
#: GPU/TPU: dense up to the first many score entries (512 MiB in float32); above, equal query
#: blocks of at most AUTO_BLOCK_ENTRIES_ACCELERATOR / (H·n) rows, that bound clipped to the
#: (low, high) row bounds.
AUTO_DENSE_LIMIT_ACCELERATOR = 1 << 27
AUTO_BLOCK_ENTRIES_ACCELERATOR = 1 << 27
AUTO_CHUNK_BOUNDS_ACCELERATOR = (32, 4096)


def attention_matrix(Q: Float[Array, "H d d"], K: Float[Array, "H d d"]) -> Float[Array, "H d d"]:
    """A_h = Q_hᵀ K_h, so that the logit of query q against key z is q·A_h z."""
    return jnp.einsum("hed,hef->hdf", Q, K)


def _dense_means(u, keys, log_weights):
    """Attention means Σ_j α_j z_j for rows u: (r, d) → (r, d)."""
    logits = u @ keys.T + log_weights
    logits = logits - jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
    p = jnp.exp(logits)
    return (p @ keys) / jnp.sum(p, axis=-1, keepdims=True)


def _streamed_means(u, keys, log_weights, key_chunk):
    """Same as `_dense_means`, keys streamed in blocks with a running log-sum-exp."""
    n, d = keys.shape
    blocks = -(-n // key_chunk)
    pad = blocks * key_chunk - n
    keys_p = jnp.pad(keys, ((0, pad), (0, 0))).reshape(blocks, key_chunk, d)
    logw_p = jnp.pad(log_weights, (0, pad)).reshape(blocks, key_chunk)
    valid = (jnp.arange(blocks * key_chunk) < n).reshape(blocks, key_chunk)
    r = u.shape[0]

    def step(carry, blk):
        run_max, run_sum, run_acc = carry
        kb, lwb, vb = blk
        logits = jnp.where(vb, u @ kb.T + lwb, -jnp.inf)
        new_max = jnp.maximum(run_max, jax.lax.stop_gradient(jnp.max(logits, axis=-1)))
        scale = jnp.exp(run_max - new_max)
        p = jnp.exp(logits - new_max[:, None])
        return (new_max, run_sum * scale + p.sum(-1), run_acc * scale[:, None] + p @ kb), None

    init = (
        jnp.full((r,), -jnp.inf, u.dtype),
        jnp.zeros((r,), u.dtype),
        jnp.zeros((r, d), u.dtype),
    )
    (_, total, acc), _ = jax.lax.scan(step, init, (keys_p, logw_p, valid))
    return acc / total[:, None]


def _map_rows(fn, rows, chunk):
    """Apply `fn: (chunk, ...) -> (chunk, ...)` to row blocks (zero-padded), return (r, ...)."""
    r = rows.shape[0]
    blocks = -(-r // chunk)
    pad = blocks * chunk - r
    padded = jnp.pad(rows, ((0, pad),) + ((0, 0),) * (rows.ndim - 1))
    out = jax.lax.map(fn, padded.reshape((blocks, chunk) + rows.shape[1:]))
    return out.reshape((blocks * chunk,) + out.shape[2:])[:r]


def attention_means(
    queries: Float[Array, "q d"],
    keys: Float[Array, "n d"],
    log_weights: Float[Array, " n"],
    A: Float[Array, "H d d"],
    *,
    chunk_size: int | None = None,
    key_chunk_size: int | None = None,
) -> Float[Array, "H q d"]:
    """Per-head attention means m_h(q) = Σ_j α^h_j(q) z_j, shape ``(H, q, d)``.

    ``chunk_size=None`` is the dense path; an int processes query rows in blocks of that size
    (and ``key_chunk_size`` additionally streams the keys). Results agree to round-off.
    """
    H = A.shape[0]
    q, d = queries.shape
    # (q, H, d): row (i, h) is u_h(q_i); heads folded into rows for one large matmul.
    u = jnp.einsum("qd,hdf->qhf", queries, A).reshape(q * H, d)
    if chunk_size is None:
        if key_chunk_size is None:
            means = _dense_means(u, keys, log_weights)
        else:
            means = _streamed_means(u, keys, log_weights, key_chunk_size)
    else:
        rows = max(1, chunk_size) * H
        if key_chunk_size is None:
            block = lambda ub: _dense_means(ub, keys, log_weights)  # noqa: E731
        else:
            block = lambda ub: _streamed_means(ub, keys, log_weights, key_chunk_size)  # noqa: E731
        means = _map_rows(block, u, rows)
    return means.reshape(q, H, d).transpose(1, 0, 2)


def resolve_chunk_size(chunk_size, heads: int, queries: int, keys: int) -> int | None:
    """Turn ``"auto"`` into None (dense) or a query block size, from the score-matrix size.

    The rule depends on ``jax.default_backend()``: CPU caches favour small fixed blocks, GPUs
    and TPUs large ones (see ``docs/scaling.md``).
    """
    if chunk_size != "auto":
        return chunk_size
    if jax.default_backend() == "cpu":
        if heads * queries * keys <= AUTO_DENSE_LIMIT:
            return None
        # Blocks of 256 query rows keep a (256·H, n) score block in cache-friendly pieces;
        # memory is O(H·256·n), linear in n.
        return AUTO_CHUNK_SIZE
    if heads * queries * keys <= AUTO_DENSE_LIMIT_ACCELERATOR:
        return None
    # The blocked loop runs its blocks one after another, so each block must be large enough
    # to fill the device and amortise the launches (~2^27 scores ≈ 10^8 exponentials), yet a
    # bounded size (512 MiB in float32, the adjoint holding ~4 such buffers) keeps memory
    # O(n) and small next to the device's. The q rows are split into equal blocks (a multiple
    # of 8 rows, for the matrix units) so that the zero-padded tail is at most 8 rows a block:
    # q = n + B is just above a power of two when n is one.
    lo, hi = AUTO_CHUNK_BOUNDS_ACCELERATOR
    most = 8 * (min(hi, max(lo, AUTO_BLOCK_ENTRIES_ACCELERATOR // (heads * keys))) // 8)
    blocks = -(-queries // most)
    return 8 * -(-queries // (8 * blocks))


class AttentionField(AbstractField):
    """Multi-head softmax attention; reads ``Q, K, V: (H, d, d)`` from the layer parameters.

    Attributes:
        chunk_size: ``"auto"`` (dense below ``AUTO_DENSE_LIMIT`` score entries, row blocks
            above), ``None`` (always dense) or an int query-block size.
        key_chunk_size: optional key-block size for a running log-sum-exp (memory
            O(chunk·key_chunk) per head instead of O(chunk·n)).
    """

    chunk_size: int | str | None = eqx.field(static=True, default="auto")
    key_chunk_size: int | None = eqx.field(static=True, default=None)

    def __call__(self, x, measure, params):
        A = attention_matrix(params["Q"], params["K"])
        chunk = resolve_chunk_size(self.chunk_size, A.shape[0], x.shape[0], measure.points.shape[0])
        means = attention_means(
            x,
            measure.points,
            jnp.log(measure.weights),
            A,
            chunk_size=chunk,
            key_chunk_size=self.key_chunk_size,
        )
        return jnp.einsum("hed,hqd->qe", params["V"], means)
