"""Local products of a velocity field, the building blocks of the Eulerian adjoint (SPEC §2).

For query points q_r with cotangents c_r, a context measure μ = Σ_j w_j δ_{z_j} and one layer's
parameters θ, :func:`local_vjp` returns in one pass

- ``velocity``  V(q_r, μ; θ)                                         ``(Q, d)``
- ``dx``        D_xV(q_r, μ)ᵀ c_r                                    ``(Q, d)``
- ``dmu``       Σ_{r active} G(q_r; z_i)ᵀ c_r                        ``(n, d)``
- ``dtargets``  Σ_{r active} G(q_r; y_t)ᵀ c_r at extra points y_t    ``(T, d)``
- ``phi``       Σ_{r active} c_r · (δV/δμ)(q_r, μ)(y_t)              ``(T,)``
- ``dparams``   Σ_{r active} D_θV(q_r, μ)ᵀ c_r                       (dict like θ)

with G(q; y) = ∇_y (δV/δμ)(q, μ)(y). "Active" rows are the ones whose covector enters the
measure and parameter terms (targets and context particles); passive rows (probe
characteristics, which move in the field but do not act on it) only get ``velocity`` and ``dx``.
Note ``dmu`` is in the *test-field* convention: ∂/∂z_i Σ_r c_r·V(q_r, μ) = w_i · dmu_i.

Closed forms (one softmax head, u = A_hᵀ q with A_h = Q_hᵀ K_h, E_j = e^{u·z_j}/Z, α_j = w_j E_j,
m = Σ_j α_j z_j, v = V_hᵀ c, s_j = (z_j − m)·v):

    D_xVᵀ c      = A_h g,            g = Cov_α v = Σ_j α_j s_j (z_j − m)
    G(q; y)ᵀ c   = E(y) [v + s(y) u]
    ∂/∂V_h       = c mᵀ,             ∂/∂A_h = q gᵀ  (→ ∂/∂Q_h = K_h (∂/∂A_h)ᵀ, ∂/∂K_h = Q_h ∂/∂A_h)
    c·δV/δμ(y)   = E(y) s(y)

MLP (V = W2 σ(W1 q + b1) + b2, no measure dependence): with k = σ'(h) ⊙ W2ᵀc, D_xVᵀc = W1ᵀk,
∂/∂W2 = c σ(h)ᵀ, ∂/∂b2 = c, ∂/∂b1 = k, ∂/∂W1 = k qᵀ.

Every product is O(n·d) per query. The attention path processes query rows in blocks
(``chunk_size``) with a running sum of the measure terms, so no (Q, n) matrix is formed.
Fields without closed forms use :func:`generic_local_vjp` (``jax.vjp`` of the field).
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from ..fields import AbstractField, AttentionField, MLPField, SumField
from ..fields.attention import attention_matrix, resolve_chunk_size
from ..measures import EmpiricalMeasure

#: weight given to the zero-mass atoms that carry probe targets in the generic path.
_GENERIC_PROBE_EPS = {4: 1e-18, 8: 1e-150}


class LocalVJP(NamedTuple):
    """Result of :func:`local_vjp` (see the module docstring for the maths)."""

    velocity: jax.Array
    dx: jax.Array
    dmu: jax.Array
    dtargets: jax.Array | None
    phi: jax.Array | None
    dparams: dict


# ----------------------------------------------------------------------------------- helpers


def _add_dicts(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = out[k] + v if k in out else v
    return out


def _complete(dparams: dict, params) -> dict:
    """Zero cotangents for parameters the field does not read (keeps the θ pytree shape)."""
    return {k: dparams[k] if k in dparams else jnp.zeros_like(v) for k, v in params.items()}


def _row_mask(active, Q, dtype):
    return jnp.ones((Q,), dtype) if active is None else jnp.asarray(active, dtype)


def _scan_row_blocks(block_fn, rows: tuple, chunk: int):
    """Run ``block_fn(*row_blocks) -> (per_row, sums)`` over zero-padded row blocks.

    ``per_row`` outputs are concatenated back to ``(Q, ...)``; ``sums`` are accumulated. Padded
    rows must contribute zero to the sums (callers pad cotangents with zeros).
    """
    Q = rows[0].shape[0]
    blocks = -(-Q // chunk)
    pad = blocks * chunk - Q
    padded = tuple(
        jnp.pad(r, ((0, pad),) + ((0, 0),) * (r.ndim - 1)).reshape((blocks, chunk) + r.shape[1:]) for r in rows
    )
    _, sums_shape = jax.eval_shape(block_fn, *(p[0] for p in padded))
    init = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), sums_shape)

    def step(acc, blk):
        per_row, sums = block_fn(*blk)
        return jax.tree.map(jnp.add, acc, sums), per_row

    sums, per_row = jax.lax.scan(step, init, padded)
    per_row = jax.tree.map(lambda a: a.reshape((blocks * chunk,) + a.shape[2:])[:Q], per_row)
    return per_row, sums


# --------------------------------------------------------------------------------- attention


def _attention_block(q, c, act, z, logw, A, Vh, targets):
    """Closed-form products of multi-head attention for one block of query rows.

    Shapes: q, c (r, d), act (r,) or None (all active), z (n, d), logw (n,), A, Vh (H, d, d), targets (T, d) or None.
    Returns ((velocity, dx) per row, (dmu, dtargets, phi, dA, dV) summed over rows).
    """
    u = jnp.einsum("rd,hdf->hrf", q, A)  # u_h(q) = A_hᵀ q
    logits = jnp.einsum("hrf,nf->hrn", u, z) + logw
    top = jnp.max(logits, axis=-1, keepdims=True)
    P = jnp.exp(logits - top)  # unnormalised α (log-sum-exp shift); 1/Z is folded into (r, d) arrays
    iZ = 1.0 / jnp.sum(P, axis=-1, keepdims=True)
    m = jnp.einsum("hrn,nd->hrd", P, z) * iZ
    velocity = jnp.einsum("hrd,hed->re", m, Vh)
    v = jnp.einsum("re,hed->hrd", c, Vh)  # V_hᵀ c
    mv = jnp.sum(m * v, axis=-1, keepdims=True)
    S = jnp.einsum("hrd,nd->hrn", v, z) - mv  # s_j = (z_j − m)·v
    R = P * S
    # Σ_j α_j s_j = 0 exactly; subtracting its round-off keeps g = Cov_α v centred when Cov is tiny.
    g = (jnp.einsum("hrn,nd->hrd", R, z) - jnp.sum(R, axis=-1, keepdims=True) * m) * iZ
    dx = jnp.einsum("hrf,hdf->rd", g, A)  # Σ_h A_h g_h
    # measure and parameter terms use the active rows only (act None: all rows active)
    mask = 1.0 if act is None else act[None, :, None]  # (H, r, 1)
    ca = c if act is None else c * act[:, None]
    # Σ_r E_r(z_i)[v_r + s_r(z_i) u_r] with E = α/w. Written as (d, r)·(r, n) products: XLA:CPU
    # is ~2x slower on the transposed (r, n)ᵀ·(r, d) form.
    scale = iZ * mask
    dmu_t = jnp.einsum("hrd,hrn->dn", v * scale, P) + jnp.einsum("hrd,hrn->dn", u * scale, R)
    dmu = dmu_t.T * jnp.exp(-logw)[:, None]
    dA = jnp.einsum("rd,hrf->hdf", q, g * mask)
    dV = jnp.einsum("re,hrd->hed", ca, m)
    lse = top - jnp.log(iZ)
    va = v * mask
    if targets is None:
        dtar = phi = None
    else:
        Ey = jnp.exp(jnp.einsum("hrf,tf->hrt", u, targets) - lse)
        Sy = (jnp.einsum("hrd,td->hrt", v, targets) - mv) * mask
        ES = Ey * Sy
        dtar = jnp.einsum("hrt,hrd->td", Ey, va) + jnp.einsum("hrt,hrd->td", ES, u)
        phi = jnp.sum(ES, axis=(0, 1))
    return (velocity, dx), (dmu, dtar, phi, dA, dV)


def attention_local_vjp(
    field: AttentionField, params, measure: EmpiricalMeasure, queries, cot, *, active=None, targets=None, chunk_size="field"
) -> LocalVJP:
    """Closed-form :class:`LocalVJP` of multi-head softmax attention (reads Q, K, V).

    ``chunk_size``: ``"field"`` (use the field's setting), None (dense) or an int number of
    query rows per block.
    """
    Qm, Km, Vh = params["Q"], params["K"], params["V"]
    A = attention_matrix(Qm, Km)
    z, w = measure.points, measure.weights
    logw = jnp.log(w)
    nq = queries.shape[0]
    chunk = field.chunk_size if chunk_size == "field" else chunk_size
    # The forward's switch: the adjoint holds ~4 (H, rows, n) buffers where the forward holds
    # one, but dense stays faster up to that size (2-core CPU, n = 1024, d = 16: one backward
    # step 3.2 ms dense vs 5.0 ms in blocks of 256 rows).
    chunk = resolve_chunk_size(chunk, A.shape[0], nq, z.shape[0])

    # padded rows of the chunked path have zero cotangents, hence contribute nothing
    rows = (queries, cot) if active is None else (queries, cot, jnp.asarray(active, queries.dtype))

    def block(qb, cb, ab=None):
        return _attention_block(qb, cb, ab, z, logw, A, Vh, targets)

    if chunk is None or chunk >= nq:
        (velocity, dx), (dmu, dtar, phi, dA, dV) = block(*rows)
    else:
        (velocity, dx), (dmu, dtar, phi, dA, dV) = _scan_row_blocks(block, rows, int(chunk))
    dQ = jnp.einsum("hef,hdf->hed", Km, dA)  # K_h (∂/∂A_h)ᵀ
    dK = jnp.einsum("hed,hdf->hef", Qm, dA)  # Q_h ∂/∂A_h
    return LocalVJP(velocity, dx, dmu, dtar, phi, {"Q": dQ, "K": dK, "V": dV})


# --------------------------------------------------------------------------------------- MLP


def _activation_and_derivative(activation, h):
    """σ(h) and σ'(h) for an elementwise σ (one forward-mode pass of the scalar function)."""
    return jax.jvp(activation, (h,), (jnp.ones_like(h),))


def mlp_local_vjp(field: MLPField, params, measure, queries, cot, *, active=None, targets=None) -> LocalVJP:
    """Closed-form :class:`LocalVJP` of the token-wise MLP (no measure dependence)."""
    W1, b1, W2, b2 = params["W1"], params["b1"], params["W2"], params["b2"]
    hidden = queries @ W1.T + b1
    sig, dsig = _activation_and_derivative(field.activation, hidden)
    velocity = sig @ W2.T + b2
    k = dsig * (cot @ W2)
    dx = k @ W1
    act = _row_mask(active, queries.shape[0], queries.dtype)[:, None]
    ca, ka = cot * act, k * act
    dparams = {"W1": ka.T @ queries, "b1": ka.sum(0), "W2": ca.T @ sig, "b2": ca.sum(0)}
    zeros_t = None if targets is None else jnp.zeros_like(targets)
    phi = None if targets is None else jnp.zeros(targets.shape[:1], targets.dtype)
    return LocalVJP(velocity, dx, jnp.zeros_like(measure.points), zeros_t, phi, dparams)


# ----------------------------------------------------------------------------------- generic


def generic_local_vjp(field: AbstractField, params, measure, queries, cot, *, active=None, targets=None) -> LocalVJP:
    """:class:`LocalVJP` of any field from ``jax.vjp`` of the field itself.

    The query rows are independent inputs of the vjp, so ``dx`` is D_xV(q)ᵀc row by row, and the
    derivative in the support points is divided by w_i (test-field convention). Targets y_t are
    added as extra atoms of negligible mass ε_t: φ_t = ∂/∂ε_t Σ_r c_r·V(q_r, μ + Σ ε_t δ_{y_t})
    (the first variation) and its gradient in y_t is taken by reverse-over-reverse.
    """
    z, w = measure.points, measure.weights
    act = _row_mask(active, queries.shape[0], queries.dtype)[:, None]

    def f(q, pts, th):
        return field(q, measure.with_points(pts), th)

    velocity, pull = jax.vjp(f, queries, z, params)
    dx, _, _ = pull(cot)
    _, dz, dparams = pull(cot * act)
    dmu = dz / w[:, None]
    dtar = phi = None
    if targets is not None:
        eps0 = _GENERIC_PROBE_EPS.get(jnp.dtype(queries.dtype).itemsize, 1e-18)
        ca = cot * act

        def phi_fn(y):
            def lagrangian(eps):
                pts = jnp.concatenate([z, y], axis=0)
                wts = jnp.concatenate([w, eps])
                aug = eqx.tree_at(lambda m: (m.points, m.weights), measure, (pts, wts))
                return jnp.sum(ca * field(queries, aug, params))

            return jax.grad(lagrangian)(jnp.full(y.shape[:1], eps0, y.dtype))

        phi, pull_y = jax.vjp(phi_fn, targets)
        (dtar,) = pull_y(jnp.ones_like(phi))
    return LocalVJP(velocity, dx, dmu, dtar, phi, _complete(dparams, params))


# -------------------------------------------------------------------------------- dispatcher


def local_vjp(
    field: AbstractField,
    params,
    measure: EmpiricalMeasure,
    queries,
    cot,
    *,
    active=None,
    targets=None,
    closed_form: bool = True,
    chunk_size="field",
) -> LocalVJP:
    """All local products of ``field`` at ``queries: (Q, d)`` with cotangents ``cot: (Q, d)``.

    Args:
        field: any :class:`~cfm_jax.fields.AbstractField`; the built-in attention and MLP fields
            (also inside a :class:`~cfm_jax.fields.SumField`) use closed forms, every other
            field (or all of them with ``closed_form=False``) the ``jax.vjp`` fallback.
        params: one layer's parameters (mapping).
        measure: the context μ.
        active: ``(Q,)`` 0/1 mask of the rows whose covector acts on μ and θ (default all).
        targets: ``(T, d)`` extra points where the measure term (and φ increment) is wanted.
        chunk_size: attention query-block size (see :func:`attention_local_vjp`).
    """
    if isinstance(field, SumField):
        parts = [
            local_vjp(f, params, measure, queries, cot, active=active, targets=targets, closed_form=closed_form, chunk_size=chunk_size)
            for f in field.fields
        ]
        out = parts[0]
        dparams = out.dparams
        for p in parts[1:]:
            dparams = _add_dicts(dparams, p.dparams)
            out = LocalVJP(
                out.velocity + p.velocity,
                out.dx + p.dx,
                out.dmu + p.dmu,
                None if targets is None else out.dtargets + p.dtargets,
                None if targets is None else out.phi + p.phi,
                dparams,
            )
        return out._replace(dparams=_complete(out.dparams, params))
    if closed_form and type(field) is AttentionField:
        res = attention_local_vjp(field, params, measure, queries, cot, active=active, targets=targets, chunk_size=chunk_size)
    elif closed_form and type(field) is MLPField:
        res = mlp_local_vjp(field, params, measure, queries, cot, active=active, targets=targets)
    else:
        return generic_local_vjp(field, params, measure, queries, cot, active=active, targets=targets)
    return res._replace(dparams=_complete(res.dparams, params))


def has_closed_form(field: AbstractField) -> bool:
    """Whether every part of ``field`` has hand-written local products."""
    if isinstance(field, SumField):
        return all(has_closed_form(f) for f in field.fields)
    return type(field) in (AttentionField, MLPField)


# ------------------------------------------------------------- the three products, separately


def dx_transpose(field, params, measure, queries, cot, **kw):
    """D_xV(q_r, μ)ᵀ c_r, ``(Q, d)``."""
    return local_vjp(field, params, measure, queries, cot, **kw).dx


def measure_term(field, params, measure, queries, cot, **kw):
    """Σ_r G(q_r; z_i)ᵀ c_r at the support points, ``(n, d)`` (test-field convention)."""
    return local_vjp(field, params, measure, queries, cot, **kw).dmu


def dtheta_transpose(field, params, measure, queries, cot, **kw):
    """Σ_r D_θV(q_r, μ)ᵀ c_r, a dict shaped like ``params``."""
    return local_vjp(field, params, measure, queries, cot, **kw).dparams


__all__ = [
    "LocalVJP",
    "attention_local_vjp",
    "dtheta_transpose",
    "dx_transpose",
    "generic_local_vjp",
    "has_closed_form",
    "local_vjp",
    "measure_term",
    "mlp_local_vjp",
]


def particle_system_vjp(
    field: AbstractField, params, x, z, w, probes, p, a, a_probes, *, closed_form: bool = True, chunk_size="field"
) -> LocalVJP:
    """:func:`local_vjp` of the stacked rows ``[x; z; probes]`` used by both adjoints.

    Shapes: ``x, p: (B, d)`` target tokens and their covectors, ``z: (n, d)``, ``w: (n,)``,
    ``a: (n, d)`` particle adjoints, ``probes, a_probes: (R, d)`` passive probe characteristics
    and their adjoints. Context rows carry the cotangent w_i·a_i (a is the test-field gradient);
    targets and context act on μ and θ, probes do not but receive the measure term and the φ
    increment at their own positions (``targets``). Rows of the result follow the same stacking.
    """
    R = probes.shape[0]
    active = None
    if R:
        active = jnp.concatenate([jnp.ones((x.shape[0] + z.shape[0],), z.dtype), jnp.zeros((R,), z.dtype)])
    return local_vjp(
        field,
        params,
        EmpiricalMeasure(z, w),
        jnp.concatenate([x, z, probes], 0),
        jnp.concatenate([p, w[:, None] * a, a_probes], 0),
        active=active,
        targets=probes if R else None,
        closed_form=closed_form,
        chunk_size=chunk_size,
    )
