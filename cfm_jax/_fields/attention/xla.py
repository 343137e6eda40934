"""The blockwise XLA attention kernel (:class:`XLAAttention`), dense or chunked: the reference.

For head h, with u_h(q) = K_hᵀ Q_h q (so <Q_h q, K_h z> = u_h(q)·z),

    α^h_j(q) = w_j exp(u_h(q)·z_j) / Σ_k w_k exp(u_h(q)·z_k),   V(q, μ) = Σ_h V_h Σ_j α^h_j(q) z_j.

The score matrix is always evaluated as logits + log w_j minus its row maximum (log-sum-exp),
so logits of size 1e4 do not overflow in float32. Folding Q_hᵀK_h into one d×d matrix per head
means keys and values are the raw context points: only one (H·q, d) × (d, n) product is needed.

Local products (:meth:`~cfm_jax.AttentionField.local_vjp`, docs/theory.md §2), one head, with
u = A_hᵀ q (A_h = Q_hᵀ K_h), E_j = e^{u·z_j}/Z, α_j = w_j E_j, m = Σ_j α_j z_j, v = V_hᵀ c and
s_j = (z_j − m)·v:

    D_xVᵀ c          = A_h g,            g = Cov_α v = Σ_j α_j s_j (z_j − m)
    ∂/∂z_j (c·V)     = α_j [v + s_j u]   (= w_j G(q; z_j)ᵀ c)
    ∂/∂log w_j (c·V) = α_j s_j           (= w_j c·(δV/δμ)(q)(z_j))
    ∂/∂V_h = c mᵀ,   ∂/∂A_h = q gᵀ       (→ ∂/∂Q_h = K_h (∂/∂A_h)ᵀ, ∂/∂K_h = Q_h ∂/∂A_h)

Every product is O(n·d) per query row; query rows are processed in blocks with running sums
of the measure and parameter terms (the forward's dense/blocked switch), so no (Q, n) matrix
is formed above the dense limit.

The chunked path never forms the full (H·q, n) score matrix: queries are processed in blocks of
``chunk_size`` rows (``jax.lax.map``) and, when ``key_chunk_size`` is set, keys are streamed in
blocks with a running log-sum-exp, so memory is O(H·chunk·n) or O(H·chunk·key_chunk).

That blockwise code is :class:`XLAAttention`, one attention kernel (kernel.py): the field's
``kernel`` chooses how the means and their VJP are computed, e.g. the fused ``PallasAttention`` (pallas.py).
"""

from __future__ import annotations

import functools
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero
from jaxtyping import Array, Float

from ..._arguments import python_scalar
from .kernel import AbstractAttentionKernel
from .weights import MASK_VALUE, clip_exponent, split_weights

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


def _dense_means(u, keys, lw):
    """Attention means Σ_j α_j z_j and log-sum-exp for rows u: (r, d) → ((r, d), (r,)); ``lw`` the
    log-weights with the finite mask at a zero weight (:func:`_masked`), so the largest logit is a
    positive weight's and no exponent is positive."""
    logits = u @ keys.T + lw[None, :]
    top = jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
    p = jnp.exp(logits - top)
    total = jnp.sum(p, axis=-1, keepdims=True)
    return (p @ keys) / total, (top + jnp.log(total))[:, 0]


def _blocks(rows, chunk: int):
    """``rows (r, ...)`` zero-padded (``False`` for booleans) to a multiple of ``chunk`` and split into
    ``(⌈r/chunk⌉, chunk, ...)`` blocks."""
    blocks = -(-rows.shape[0] // chunk)
    padded = jnp.pad(rows, ((0, blocks * chunk - rows.shape[0]),) + ((0, 0),) * (rows.ndim - 1))
    return padded.reshape((blocks, chunk) + rows.shape[1:])


def _streamed_means(u, keys, lw, key_chunk):
    """Same as `_dense_means`, keys streamed in blocks with a running log-sum-exp."""
    d = keys.shape[1]
    n = keys.shape[0]
    # padded keys get the mask: atoms of weight zero
    keys_p, lw_p = (
        _blocks(keys, key_chunk),
        jnp.pad(lw, (0, -(-n // key_chunk) * key_chunk - n), constant_values=MASK_VALUE),
    )
    lw_p = lw_p.reshape(keys_p.shape[:2])
    r = u.shape[0]
    # the running maximum starts at the logit of the heaviest atom: a real logit of a positive weight
    # (a start at the mask would count a leading block of zero weights at e^0)
    heaviest = jnp.argmax(lw)
    start = jax.lax.stop_gradient(u @ keys[heaviest] + lw[heaviest])

    def step(carry, blk):
        run_max, run_sum, run_acc = carry
        kb, lb = blk
        logits = u @ kb.T + lb[None, :]
        new_max = jnp.maximum(run_max, jax.lax.stop_gradient(jnp.max(logits, axis=-1)))
        scale = jnp.exp(run_max - new_max)
        p = jnp.exp(logits - new_max[:, None])
        return (new_max, run_sum * scale + p.sum(-1), run_acc * scale[:, None] + p @ kb), None

    init = (start, jnp.zeros((r,), u.dtype), jnp.zeros((r, d), u.dtype))
    (top, total, acc), _ = jax.lax.scan(step, init, (keys_p, lw_p))
    return acc / total[:, None], top + jnp.log(total)


def _map_rows(fn, rows, chunk):
    """Apply `fn: (chunk, ...) -> pytree of (chunk, ...)` to row blocks (zero-padded), return (r, ...).
    ``rows`` is an array or a tuple of arrays with the same leading size."""
    first = rows[0] if isinstance(rows, tuple) else rows
    r = first.shape[0]
    out = jax.lax.map(fn, jax.tree.map(lambda a: _blocks(a, chunk), rows))
    return jax.tree.map(lambda a: a.reshape((a.shape[0] * chunk,) + a.shape[2:])[:r], out)


def _masked(log_weights):
    """Log-weights with the finite mask for a zero weight (−inf, or anything below the mask)."""
    return jnp.maximum(log_weights, MASK_VALUE)


def _row_means(u, keys, lw, rows: int | None, key_chunk_size: int | None):
    """Means and log-sum-exp of rows u (r, d): dense, or in blocks of ``rows`` rows, keys streamed
    in blocks of ``key_chunk_size`` when set; ``lw`` masked log-weights (:func:`_masked`)."""
    if key_chunk_size is None:
        block = lambda ub: _dense_means(ub, keys, lw)  # noqa: E731
    else:
        block = lambda ub: _streamed_means(ub, keys, lw, key_chunk_size)  # noqa: E731
    return block(u) if rows is None else _map_rows(block, u, rows)


def _weight_tangent(u, keys, lse, m, dw, rows: int | None, key_chunk_size: int | None):
    """The means' and log-sum-exp's tangents for a tangent ``dw (n,)`` of the weights:
    $Σ_j dw_j e^{u·z_j − lse}(z_j − m)$ and $Σ_j dw_j e^{u·z_j − lse}$ per row, the same formula at a
    positive weight (α_j / w_j) and at a zero one (the one-sided derivative), no log of a weight
    taken. The exponent is clipped (:func:`clip_exponent`) so a zero weight's stays finite."""
    clip = clip_exponent(u.dtype)
    both = jnp.concatenate([keys * dw[:, None], dw[:, None]], axis=1)  # (n, d + 1): Σ dw E z and Σ dw E

    def block(args):
        ub, lb, mb = args
        if key_chunk_size is None:
            t = jnp.exp(jnp.minimum(ub @ keys.T - lb[:, None], clip)) @ both
        else:  # keys in blocks: no (rows, n) array
            kp, bp = _blocks(keys, key_chunk_size), _blocks(both, key_chunk_size)
            t = jax.lax.scan(
                lambda acc, kb: (acc + jnp.exp(jnp.minimum(ub @ kb[0].T - lb[:, None], clip)) @ kb[1], None),
                jnp.zeros((ub.shape[0], both.shape[1]), u.dtype),
                (kp, bp),
            )[0]
        return t[:, :-1] - t[:, -1:] * mb, t[:, -1]

    args = (u, lse, m)
    return block(args) if rows is None else _map_rows(block, args, rows)


@functools.partial(jax.custom_jvp, nondiff_argnums=(3, 4))
def _weighted_row_means(u, keys, w, rows, key_chunk_size):
    """:func:`_row_means` of the weights ``w (n,)`` themselves, differentiable in ``w`` without its log
    (:func:`_weight_tangent`): the finite one-sided derivative at a zero weight, never 0·∞."""
    return _row_means(u, keys, _masked(jnp.log(w)), rows, key_chunk_size)


@functools.partial(_weighted_row_means.defjvp, symbolic_zeros=True)
def _weighted_row_means_jvp(rows, key_chunk_size, primals, tangents):
    u, keys, w = primals
    du, dkeys, dw = tangents
    lw = _masked(jnp.log(w))  # the rows and keys differentiated at fixed weights
    means = lambda u, keys: _row_means(u, keys, lw, rows, key_chunk_size)  # noqa: E731
    if isinstance(du, SymbolicZero) and isinstance(dkeys, SymbolicZero):
        (m, lse), (dm, dlse) = means(u, keys), (jnp.zeros(u.shape, u.dtype), jnp.zeros(u.shape[:1], u.dtype))
    else:
        zero = lambda t, x: jnp.zeros(x.shape, x.dtype) if isinstance(t, SymbolicZero) else t  # noqa: E731
        (m, lse), (dm, dlse) = jax.jvp(means, (u, keys), (zero(du, u), zero(dkeys, keys)))
    if not isinstance(dw, SymbolicZero):
        tm, tl = _weight_tangent(u, keys, lse, m, dw.astype(u.dtype), rows, key_chunk_size)
        dm, dlse = dm + tm, dlse + tl
    return (m, lse), (dm, dlse)


def _folded(queries, A):
    """(q·H, d) rows: row (i, h) is u_h(q_i) = A_hᵀ q_i (heads folded into rows for one large matmul)."""
    q, d = queries.shape
    return jnp.einsum("qd,hdf->qhf", queries, A).reshape(q * A.shape[0], d)


def _means_lse(queries, keys, A, chunk_size, key_chunk_size, *, log_weights=None, weights=None):
    """``(means (H, q, d), lse (H, q))`` of :func:`attention_means`, from the log-weights or from the
    weights themselves (then differentiable in them at a zero weight too)."""
    H = A.shape[0]
    q, d = queries.shape
    rows = None if chunk_size is None else max(1, chunk_size) * H
    u = _folded(queries, A)
    if weights is None:
        means, lse = _row_means(u, keys, _masked(log_weights), rows, key_chunk_size)
    else:
        means, lse = _weighted_row_means(u, keys, weights, rows, key_chunk_size)
    return means.reshape(q, H, d).transpose(1, 0, 2), lse.reshape(q, H).T


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
    return _means_lse(queries, keys, A, chunk_size, key_chunk_size, log_weights=log_weights)[0]


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


def _scan_row_blocks(block_fn, rows: tuple, chunk: int):
    """Run ``block_fn(*row_blocks) -> (per_row, sums)`` over zero-padded row blocks.

    ``per_row`` outputs are concatenated back to ``(Q, ...)``; ``sums`` are accumulated. Padded
    rows must contribute zero to the sums (callers pad cotangents with zeros).
    """
    Q = rows[0].shape[0]
    padded = tuple(_blocks(r, chunk) for r in rows)
    _, sums_shape = jax.eval_shape(block_fn, *(p[0] for p in padded))
    init = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), sums_shape)

    def step(acc, blk):
        per_row, sums = block_fn(*blk)
        return jax.tree.map(jnp.add, acc, sums), per_row

    sums, per_row = jax.lax.scan(step, init, padded)
    per_row = jax.tree.map(lambda a: a.reshape((a.shape[0] * chunk,) + a.shape[2:])[:Q], per_row)
    return per_row, sums


def _local_block(q, c, act, z, ell, f, A, Vh, targets):
    """Closed-form local products of multi-head attention for one block of query rows.

    Shapes: q, c (r, d), act (r,) or None (all active), z (n, d), weights w = f e^ℓ as ``ell, f (n,)``
    (``split_weights``), A, Vh (H, d, d), targets (T, d) or None. Returns ((velocity, dx) per row,
    (dz, D, dA, dV, dtargets, phi) summed over the active rows), where
    $D_j = Σ_r e^{u_r·z_j + ℓ_j − lse_r} s_{rj}$: $∂/∂log w_j$ at a positive weight
    ($ℓ_j = log w_j$), $∂/∂w_j$ at a zero weight ($ℓ_j = 0$; the first variation at the atom).
    """
    u = jnp.einsum("rd,hdf->hrf", q, A)  # u_h(q) = A_hᵀ q
    scores = jnp.einsum("hrf,nf->hrn", u, z)
    # the maximum over positive weights (_dense_means); P̃ = e^{logit − top} is finite at zero weights too
    top = jnp.max(scores + jnp.where(f > 0, ell, MASK_VALUE)[None, None, :], axis=-1, keepdims=True)
    P = jnp.exp(
        jnp.minimum(scores + ell[None, None, :] - top, clip_exponent(q.dtype))
    )  # α Z e^{−top} / f; 1/Z folded in later
    # sums over μ (f_j z_j, f_j: the zero weights' atoms out) as products with the (n, d) and (n,)
    # operands; on XLA:CPU one product with [f z, f] (d + 1 columns) is slower, and a sum of P·f
    # (not fused into P's producer) three times slower
    zf = z * f[:, None]
    iZ = 1.0 / jnp.einsum("hrn,n->hr", P, f)[..., None]
    m = jnp.einsum("hrn,nd->hrd", P, zf) * iZ
    velocity = jnp.einsum("hrd,hed->re", m, Vh)
    v = jnp.einsum("re,hed->hrd", c, Vh)  # V_hᵀ c
    mv = jnp.sum(m * v, axis=-1, keepdims=True)
    S = jnp.einsum("hrd,nd->hrn", v, z) - mv  # s_j = (z_j − m)·v
    R = P * S
    # Σ_j α_j s_j = 0 exactly; subtracting its round-off keeps g = Cov_α v centred when Cov is tiny.
    g = (jnp.einsum("hrn,nd->hrd", R, zf) - jnp.einsum("hrn,n->hr", R, f)[..., None] * m) * iZ
    dx = jnp.einsum("hrf,hdf->rd", g, A)  # Σ_h A_h g_h
    # measure and parameter terms use the active rows only (act None: all rows active)
    mask = 1.0 if act is None else act[None, :, None]  # (H, r, 1)
    ca = c if act is None else c * act[:, None]
    scale = iZ * mask
    # Σ_r α_rj [v_r + s_rj u_r] and Σ_r α_rj s_rj as (d+1, r)·(r, n) products (one extra column
    # of u for the log-weight term). XLA:CPU is ~2x slower on the transposed (r, n)ᵀ·(r, d) form.
    us = jnp.concatenate([u * scale, jnp.broadcast_to(scale, scale.shape[:-1] + (1,))], axis=-1)
    uR = jnp.einsum("hrd,hrn->dn", us, R)
    dzw = (jnp.einsum("hrd,hrn->dn", v * scale, P) + uR[:-1]) * f[None, :]  # a zero weight's atom: no force
    dlogw = uR[-1]
    dA = jnp.einsum("rd,hrf->hdf", q, g * mask)
    dV = jnp.einsum("re,hrd->hed", ca, m)
    if targets is None:
        dtar = phi = None
    else:
        lse = top - jnp.log(iZ)
        Ey = jnp.exp(jnp.einsum("hrf,tf->hrt", u, targets) - lse)
        Sy = (jnp.einsum("hrd,td->hrt", v, targets) - mv) * mask
        ES = Ey * Sy
        dtar = jnp.einsum("hrt,hrd->td", Ey, v * mask) + jnp.einsum("hrt,hrd->td", ES, u)
        phi = jnp.sum(ES, axis=(0, 1))
    return (velocity, dx), (dzw.T, dlogw, dA, dV, dtar, phi)


def _check_chunks(c, k):
    if not (c is None or c == "auto" or (isinstance(c, (int, np.integer)) and not isinstance(c, bool) and c >= 1)):
        raise ValueError(f'`chunk_size` must be "auto", None or an int >= 1, got {c!r}.')
    if not (k is None or (isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k >= 1)):
        raise ValueError(f"`key_chunk_size` must be None or an int >= 1, got {k!r}.")


class XLAAttention(AbstractAttentionKernel):
    """The blockwise XLA attention: dense, or query rows in blocks with the keys optionally streamed
    (module docstring); the reference every other kernel is tested against, and the only one with
    forward-mode autodiff.

    Attributes:
        chunk_size: ``"auto"`` (dense below ``AUTO_DENSE_LIMIT`` score entries, row blocks
            above), ``None`` (always dense) or an int query-block size.
        key_chunk_size: optional key-block size for a running log-sum-exp (memory
            O(chunk·key_chunk) per head instead of O(chunk·n)).
    """

    chunk_size: int | str | None = eqx.field(static=True, converter=python_scalar, default="auto")
    key_chunk_size: int | None = eqx.field(static=True, converter=python_scalar, default=None)
    #: plain JAX code: every autodiff mode runs through it
    forward_mode: ClassVar[bool] = True

    def __check_init__(self):
        _check_chunks(self.chunk_size, self.key_chunk_size)

    def _chunk(self, H, q, n):
        return resolve_chunk_size(self.chunk_size, H, q, n)

    def means(self, queries, keys, log_weights, A):
        chunk = self._chunk(A.shape[0], queries.shape[0], keys.shape[0])
        return _means_lse(queries, keys, A, chunk, self.key_chunk_size, log_weights=log_weights)

    def weighted_means(self, queries, keys, weights, A):
        """``means`` from the weights themselves: the values by the log-weights' formula, the derivative
        in ``weights`` by its own closed form (``_weighted_row_means``), finite at a zero weight."""
        chunk = self._chunk(A.shape[0], queries.shape[0], keys.shape[0])
        return _means_lse(queries, keys, A, chunk, self.key_chunk_size, weights=weights)[0]

    def means_vjp(self, queries, keys, log_weights, A, means, lse, cot, key_cot):
        """Autodiff of the blockwise means (its own code path: no closed form), the reference other
        kernels' VJPs are tested against. It recomputes the means from ``log_weights`` (``means`` and
        ``lse`` unused), so it cannot serve ``zero_weight_terms``' swapped log-weights: the field
        uses the closed forms of :meth:`weighted_local_products` and :meth:`weighted_means` instead."""
        H, q, d = A.shape[0], queries.shape[0], queries.shape[1]
        chunk = self._chunk(H, q, keys.shape[0])
        rows = None if chunk is None else max(1, chunk) * H

        def fn(u, z, lw):
            return _row_means(u, z, _masked(lw), rows, self.key_chunk_size)[0]

        _, pull = jax.vjp(fn, _folded(queries, A), keys, log_weights)
        fold = lambda a: a.transpose(1, 0, 2).reshape(q * H, d)  # noqa: E731
        g = pull(fold(cot).astype(queries.dtype))[0].reshape(q, H, d).transpose(1, 0, 2)
        _, dz, dlogw = pull(fold(key_cot).astype(queries.dtype))
        return g, dz, dlogw

    def local_products(self, q, c, act, z, logw, A, Vh, targets) -> tuple[tuple[Array, Array], tuple]:
        """The closed forms of the module docstring, fused, in query blocks above the dense limit."""
        ell, f = split_weights(log_weights=logw)
        per_row, (dz, D, *rest) = self.split_local_products(q, c, act, z, ell, f, A, Vh, targets)
        return per_row, (dz, D * f, *rest)  # ∂/∂log w: 0 at a zero weight

    def weighted_local_products(self, q, c, act, z, w, A, Vh, targets) -> tuple[tuple[Array, Array], tuple]:
        """The closed forms computed with the weights $w = f e^{ℓ}$ (``split_weights``): $∂/∂w$ at a zero
        weight from the same pass, no completion needed."""
        ell, f = split_weights(weights=w)
        per_row, (dz, D, *rest) = self.split_local_products(q, c, act, z, ell, f, A, Vh, targets)
        dw = D / jnp.where(w > 0, w, 1)  # ∂/∂log w over w at a positive weight; ∂/∂w itself at a zero one
        return per_row, (dz, dw, *rest)

    def split_local_products(self, q, c, act, z, ell, f, A, Vh, targets) -> tuple[tuple[Array, Array], tuple]:
        """:meth:`local_products` for weights $f e^{ℓ}$ (``split_weights``), with $D$ of
        ``_local_block`` (∂/∂log w at a positive weight, ∂/∂w at a zero one) in place of ∂/∂log w."""
        nq = q.shape[0]
        # The forward's switch: the adjoint holds ~4 (H, rows, n) buffers where the forward holds
        # one, but dense stays faster up to that size (2-core CPU, n = 1024, d = 16: one backward
        # step 3.2 ms dense vs 5.0 ms in blocks of 256 rows).
        chunk = self._chunk(A.shape[0], nq, z.shape[0])
        # padded rows of the blocked path have zero cotangents, hence contribute nothing
        rows = (q, c) if act is None else (q, c, act)

        def block(qb, cb, ab=None):
            return _local_block(qb, cb, ab, z, ell, f, A, Vh, targets)

        if chunk is None or chunk >= nq:
            return block(*rows)
        return _scan_row_blocks(block, rows, int(chunk))


__all__ = ["XLAAttention", "attention_means", "resolve_chunk_size"]
