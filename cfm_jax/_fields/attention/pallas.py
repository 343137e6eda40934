"""The fused Pallas attention kernel (kernel.py's interface); the only module that imports Pallas.

:class:`PallasAttention` is a fused Pallas kernel pair (Triton lowering on a GPU, ``interpret``
mode elsewhere): the forward streams key blocks with a running log-sum-exp; the backward is a
key-block pass (dK + dV and the bias gradient, accumulated in the kernel) and a query-block pass
(dQ with the row sums of dS, for the centring). Accumulators are float32 (float64 for float64
inputs); the bias is added in that precision, never through a reduced-precision product; masked
entries (zero weights, padded keys) get a finite mask value, never −inf. It is wrapped in
``jax.custom_vjp``: reverse-mode autodiff runs the backward kernels; forward mode (``jax.jvp``,
``jax.hessian``) and second derivatives are refused with a TypeError naming the XLA kernel.

On a GPU the kernels are lowered by the Pallas Triton backend, which JAX supports before
``TRITON_BEFORE_JAX`` (0.11.0): JAX 0.11.0 deprecated it for removal (every Triton lowering
warns). On such a JAX, :class:`PallasAttention` on a GPU refuses with a NotImplementedError naming
the JAX version and ``XLAAttention`` (its successor, a Mosaic GPU kernel pair, is planned in
docs/scaling.md §5); interpret mode (off a GPU) runs on every JAX.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.sharding import PartitionSpec as P
from jaxtyping import Array

from ..._arguments import python_scalar
from .kernel import AbstractAttentionKernel
from .weights import MASK_VALUE

#: The first JAX release whose Pallas Triton backend the GPU kernels do not use: JAX 0.11.0 deprecated
#: that backend for removal (its Pallas changelog; from then on every Triton lowering warns). JAX
#: releases before it run the kernels on a GPU; from it on, PallasAttention on a GPU refuses.
TRITON_BEFORE_JAX = (0, 11, 0)

_PRESETS = {
    "3xTF32": jax.lax.DotAlgorithmPreset.TF32_TF32_F32_X3,
    "TF32": jax.lax.DotAlgorithmPreset.TF32_TF32_F32,
    "IEEE": jax.lax.DotAlgorithmPreset.F32_F32_F32,
}


@dataclasses.dataclass(frozen=True)
class _Config:
    """Static settings of one kernel call (hashable, no pytree: a ``custom_vjp`` non-differentiable argument)."""

    block_q: int
    block_k: int
    precision: str
    interpret: bool
    mesh: jax.sharding.Mesh | None


def _acc_dtype(dtype):
    return jnp.promote_types(dtype, jnp.float32)


def _dot(cfg, a, b, contract):
    """a·b over dims ``contract`` in the accumulator dtype; float32 products at ``cfg.precision`` on a GPU."""
    preset = None  # interpret mode: the CPU's own products (float32 or float64, exact)
    if not cfg.interpret:
        # float64: HIGHEST, since the Triton lowering reads DEFAULT as TF32 input precision
        preset = _PRESETS[cfg.precision] if a.dtype == jnp.float32 else jax.lax.Precision.HIGHEST
    return jax.lax.dot_general(a, b, (contract, ((), ())), precision=preset, preferred_element_type=_acc_dtype(a.dtype))


_NT = ((1,), (1,))  # a · bᵀ
_NN = ((1,), (0,))  # a · b
_TN = ((0,), (0,))  # aᵀ · b


def _forward_kernel(u_ref, z_ref, b_ref, m_ref, lse_ref, *, cfg, nk):
    acc_t = _acc_dtype(u_ref.dtype)
    u = u_ref[...]
    bq = u.shape[0]

    def body(j, carry):
        run_max, run_sum, acc = carry
        zb = z_ref[pl.ds(j * cfg.block_k, cfg.block_k), :]
        s = _dot(cfg, u, zb, _NT) + b_ref[pl.ds(j * cfg.block_k, cfg.block_k)].astype(acc_t)[None, :]
        new_max = jnp.maximum(run_max, jnp.max(s, axis=1))
        scale = jnp.exp(run_max - new_max)
        p = jnp.exp(s - new_max[:, None])
        acc = acc * scale[:, None] + _dot(cfg, p.astype(zb.dtype), zb, _NN)
        return new_max, run_sum * scale + jnp.sum(p, axis=1), acc

    init = (jnp.full((bq,), MASK_VALUE, acc_t), jnp.zeros((bq,), acc_t), jnp.zeros(u.shape, acc_t))
    run_max, run_sum, acc = jax.lax.fori_loop(0, nk, body, init)
    m_ref[...] = (acc / run_sum[:, None]).astype(m_ref.dtype)
    lse_ref[...] = (run_max + jnp.log(run_sum)).astype(lse_ref.dtype)


def _dkv_kernel(u_ref, z_ref, b_ref, lse_ref, do_ref, dl_ref, dz_ref, db_ref, *, cfg, nq):
    """Key-block pass: dz = Σ_i P_ij dO_i + dS_ij u_i, dbias_j = Σ_i dS_ij, dS = P (dO·z − δ)."""
    acc_t = _acc_dtype(u_ref.dtype)
    zb = z_ref[...]
    bias = b_ref[...].astype(acc_t)

    def body(i, carry):
        dz, db = carry
        rows = pl.ds(i * cfg.block_q, cfg.block_q)
        u, do = u_ref[rows, :], do_ref[rows, :]
        p = jnp.exp(_dot(cfg, u, zb, _NT) + bias[None, :] - lse_ref[rows].astype(acc_t)[:, None])
        ds = p * (_dot(cfg, do, zb, _NT) - dl_ref[rows].astype(acc_t)[:, None])
        dz = dz + _dot(cfg, p.astype(u.dtype), do, _TN) + _dot(cfg, ds.astype(u.dtype), u, _TN)
        return dz, db + jnp.sum(ds, axis=0)

    init = (jnp.zeros(zb.shape, acc_t), jnp.zeros(bias.shape, acc_t))
    dz, db = jax.lax.fori_loop(0, nq, body, init)
    dz_ref[...] = dz.astype(dz_ref.dtype)
    db_ref[...] = db.astype(db_ref.dtype)


def _dq_kernel(u_ref, z_ref, b_ref, m_ref, lse_ref, do_ref, dl_ref, dlse_ref, dq_ref, *, cfg, nk):
    """Query-block pass: g = Σ_j dS_ij z_j − (Σ_j dS_ij − dlse_i) m_i (the centred dQ)."""
    acc_t = _acc_dtype(u_ref.dtype)
    u, do = u_ref[...], do_ref[...]
    lse, delta = lse_ref[...].astype(acc_t), dl_ref[...].astype(acc_t)

    def body(j, carry):
        dq, rs = carry
        keys = pl.ds(j * cfg.block_k, cfg.block_k)
        zb = z_ref[keys, :]
        p = jnp.exp(_dot(cfg, u, zb, _NT) + b_ref[keys].astype(acc_t)[None, :] - lse[:, None])
        ds = p * (_dot(cfg, do, zb, _NT) - delta[:, None])
        return dq + _dot(cfg, ds.astype(zb.dtype), zb, _NN), rs + jnp.sum(ds, axis=1)

    init = (jnp.zeros(u.shape, acc_t), jnp.zeros(u.shape[:1], acc_t))
    dq, rs = jax.lax.fori_loop(0, nk, body, init)
    centre = rs - dlse_ref[...].astype(acc_t)
    dq_ref[...] = (dq - centre[:, None] * m_ref[...].astype(acc_t)).astype(dq_ref.dtype)


def _call(kernel, cfg, grid, in_specs, out_specs, out_shape, *args):
    params = None  # interpret mode needs no compiler, so it runs on a JAX without the Triton backend
    if not cfg.interpret:
        # the Triton lowering, named: float32 dots at TF32 / 3×TF32 / IEEE (Mosaic GPU's float32 products
        # are TF32 only, from shared memory: docs/scaling.md §5.1)
        from jax.experimental.pallas import triton

        params = triton.CompilerParams(num_warps=4, num_stages=2)
    return pl.pallas_call(
        kernel,
        grid=grid,
        in_specs=in_specs,
        out_specs=out_specs,
        out_shape=out_shape,
        interpret=cfg.interpret,
        compiler_params=params,
    )(*args)


def _tile(block, D):
    return pl.BlockSpec((block, D), lambda i: (i, 0))


def _vec(block):
    return pl.BlockSpec((block,), lambda i: (i,))


def _whole(shape):
    return pl.BlockSpec(shape, lambda i: (0,) * len(shape))


def _forward_local(cfg, u, z, bias):
    R, D = u.shape
    N = z.shape[0]
    kernel = functools.partial(_forward_kernel, cfg=cfg, nk=N // cfg.block_k)
    return _call(
        kernel,
        cfg,
        (R // cfg.block_q,),
        [_tile(cfg.block_q, D), _whole((N, D)), _whole((N,))],
        [_tile(cfg.block_q, D), _vec(cfg.block_q)],
        [jax.ShapeDtypeStruct((R, D), u.dtype), jax.ShapeDtypeStruct((R,), _acc_dtype(u.dtype))],
        u,
        z,
        bias,
    )


def _backward_local(cfg, u, z, bias, m, lse, do, dok, delta, delta_k, dlse):
    R, D = u.shape
    N = z.shape[0]
    dkv = functools.partial(_dkv_kernel, cfg=cfg, nq=R // cfg.block_q)
    dz, db = _call(
        dkv,
        cfg,
        (N // cfg.block_k,),
        [_whole((R, D)), _tile(cfg.block_k, D), _vec(cfg.block_k), _whole((R,)), _whole((R, D)), _whole((R,))],
        [_tile(cfg.block_k, D), _vec(cfg.block_k)],
        [jax.ShapeDtypeStruct((N, D), z.dtype), jax.ShapeDtypeStruct((N,), bias.dtype)],
        u,
        z,
        bias,
        lse,
        dok,
        delta_k,
    )
    dqk = functools.partial(_dq_kernel, cfg=cfg, nk=N // cfg.block_k)
    row = [_tile(cfg.block_q, D), _whole((N, D)), _whole((N,)), _tile(cfg.block_q, D), _vec(cfg.block_q)]
    dq = _call(
        dqk,
        cfg,
        (R // cfg.block_q,),
        row + [_tile(cfg.block_q, D), _vec(cfg.block_q), _vec(cfg.block_q)],
        _tile(cfg.block_q, D),
        jax.ShapeDtypeStruct((R, D), u.dtype),
        u,
        z,
        bias,
        m,
        lse,
        do,
        delta,
        dlse,
    )
    if cfg.mesh is not None:  # each device saw its own query rows: sum the key-side partials
        axis = cfg.mesh.axis_names[0]
        dz, db = jax.lax.psum(dz, axis), jax.lax.psum(db, axis)
    return dq, dz, db


def _padded(cfg, u, z, log_weights):
    """Rows padded to whole query blocks (per device), keys to whole key blocks (bias = the mask,
    z = 0), the head dimension to a power of two ≥ 16 (zeros: logits unchanged)."""
    R, d = u.shape
    n = z.shape[0]
    D = max(16, pl.next_power_of_2(d))
    rows = cfg.block_q * (1 if cfg.mesh is None else cfg.mesh.devices.size)
    Rp, Np = -(-R // rows) * rows, -(-n // cfg.block_k) * cfg.block_k
    up = jnp.pad(u, ((0, Rp - R), (0, D - d)))
    zp = jnp.pad(z, ((0, Np - n), (0, D - d)))
    bias = jnp.maximum(log_weights.astype(_acc_dtype(u.dtype)), MASK_VALUE)
    return up, zp, jnp.pad(bias, (0, Np - n), constant_values=MASK_VALUE)


def _sharded(cfg, fn, in_specs, out_specs):
    """``fn`` as it is (one device) or inside ``shard_map`` over query rows (the context gathered)."""
    if cfg.mesh is None:
        return fn
    return jax.shard_map(fn, mesh=cfg.mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)


def _forward(cfg, u, z, log_weights):
    R, d = u.shape
    up, zp, bias = _padded(cfg, u, z, log_weights)
    a = None if cfg.mesh is None else cfg.mesh.axis_names[0]
    fn = _sharded(cfg, functools.partial(_forward_local, cfg), (P(a), P(), P()), (P(a), P(a)))
    m, lse = fn(up, zp, bias)
    return m[:R, :d], lse[:R]


def _backward(cfg, u, z, log_weights, m, lse, do, dok, dlse):
    """(g, dz, dlogw) from the two passes; ``do`` for the query pass, ``dok`` for the key pass."""
    R, d = u.shape
    n = z.shape[0]
    acc_t = _acc_dtype(u.dtype)
    up, zp, bias = _padded(cfg, u, z, log_weights)
    pad_r, pad_d = up.shape[0] - R, up.shape[1] - d

    def rows(a):
        return jnp.pad(a, ((0, pad_r),) + ((0, pad_d),) * (a.ndim - 1))

    # δ_i = m_i·dO_i − dlse_i (the centring of dS), per cotangent; padded rows: dO = 0, so dS = 0
    delta = jnp.sum(m.astype(acc_t) * do, axis=-1) - dlse
    delta_k = jnp.sum(m.astype(acc_t) * dok, axis=-1) - dlse
    # padded rows need a finite lse: their logits are the biases, as in the forward
    lse_p = jnp.concatenate([lse, jnp.full((pad_r,), jnp.max(bias), acc_t)])
    a = None if cfg.mesh is None else cfg.mesh.axis_names[0]
    fn = _sharded(
        cfg,
        functools.partial(_backward_local, cfg),
        (P(a), P(), P(), P(a), P(a), P(a), P(a), P(a), P(a), P(a)),
        (P(a), P(), P()),
    )
    g, dz, db = fn(
        up,
        zp,
        bias,
        rows(m),
        lse_p,
        rows(do.astype(u.dtype)),
        rows(dok.astype(u.dtype)),
        jnp.pad(delta, (0, pad_r)),
        jnp.pad(delta_k, (0, pad_r)),
        jnp.pad(dlse.astype(acc_t), (0, pad_r)),
    )
    return g[:R, :d], dz[:n, :d], db[:n].astype(log_weights.dtype)


def _refuse_derivatives(cfg, primals, tangents):
    raise TypeError(
        "PallasAttention's kernels have no derivatives of their own: no forward-mode autodiff (jax.jvp, "
        "jax.jacfwd, jax.hessian) and no second derivatives through it; use the XLA path for them: "
        "kernel=cfm_jax.XLAAttention()."
    )


# The Pallas calls as operations whose derivative is refused with that TypeError (forward mode over
# a reverse pass, as in jax.hessian, and second derivatives), instead of failing deep inside JAX's
# differentiation of a pallas_call; reverse mode uses the custom_vjp below and never calls them.
_forward_op = jax.custom_jvp(_forward, nondiff_argnums=(0,))
_forward_op.defjvp(_refuse_derivatives)
_backward_op = jax.custom_jvp(_backward, nondiff_argnums=(0,))
_backward_op.defjvp(_refuse_derivatives)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _pallas_means(cfg, u, z, log_weights) -> tuple[Array, Array]:
    return _forward_op(cfg, u, z, log_weights)


def _pallas_means_fwd(cfg, u, z, log_weights):
    m, lse = _forward_op(cfg, u, z, log_weights)
    return (m, lse), (u, z, log_weights, m, lse)


def _pallas_means_bwd(cfg, res, cots):
    u, z, log_weights, m, lse = res
    dm, dlse = cots
    acc_t = _acc_dtype(u.dtype)
    dm, dlse = dm.astype(acc_t), dlse.astype(acc_t)
    return _backward_op(cfg, u, z, log_weights, m, lse, dm, dm, dlse)


_pallas_means.defvjp(_pallas_means_fwd, _pallas_means_bwd)


class PallasAttention(AbstractAttentionKernel):
    """The fused Pallas kernel pair (module docstring); float32 products at ``precision`` on a GPU.

    On a GPU it needs JAX < 0.11.0 (the Pallas Triton backend, deprecated from then on): on a later
    JAX its calls raise NotImplementedError naming ``XLAAttention``. Off a GPU (Pallas interpret
    mode, slow: for tests) it runs on every JAX.

    Attributes:
        precision: float32 products on a GPU: ``"3xTF32"`` (default; float32-class accuracy at three
            TF32 products), ``"TF32"`` (fastest, ~2⁻¹¹ relative rounding of u and z) or ``"IEEE"``.
            float64 inputs always use float64 products; off a GPU (interpret mode) the products are
            the CPU's own.
        block_q, block_k: query rows and keys per block (powers of two ≥ 16 on a GPU).
        mesh: a 1-D device mesh (:func:`cfm_jax.context_mesh`) to run the kernels inside
            ``shard_map`` over query rows with the context gathered on every device (the key-side
            gradients summed); None: one device.
    """

    precision: str = eqx.field(static=True, default="3xTF32")
    block_q: int = eqx.field(static=True, converter=python_scalar, default=64)
    block_k: int = eqx.field(static=True, converter=python_scalar, default=64)
    mesh: jax.sharding.Mesh | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if self.precision not in _PRESETS:
            raise ValueError(f"`precision` must be one of {sorted(_PRESETS)}, got {self.precision!r}.")
        for name, b in (("block_q", self.block_q), ("block_k", self.block_k)):
            if not (isinstance(b, (int, np.integer)) and not isinstance(b, bool) and b >= 1 and b & (b - 1) == 0):
                raise ValueError(f"`{name}` must be a power of two, got {b!r}.")
        if self.mesh is not None and not (isinstance(self.mesh, jax.sharding.Mesh) and len(self.mesh.axis_names) == 1):
            raise ValueError(
                f"`mesh` must be a 1-D jax.sharding.Mesh (cfm_jax.context_mesh()) or None, got {self.mesh!r}."
            )

    #: a custom_vjp: forward mode and second derivatives are refused (module docstring)
    forward_mode: ClassVar[bool] = False

    def unsupported(self) -> str | None:
        """On a GPU, a JAX from ``TRITON_BEFORE_JAX`` on (the Triton backend deprecated); else None."""
        # Refused, not a fallback to XLAAttention: whoever passes this kernel asks for the fused one
        # (its memory, its timings in bench_gpu.py --kernel); a quiet switch would measure the XLA
        # path under its name. Decided at trace time, before any lowering: the deprecation would
        # otherwise surface as a warning (an error under -W error) deep inside JAX's lowering.
        if jax.default_backend() == "gpu" and jax.__version_info__ >= TRITON_BEFORE_JAX:
            return (
                f"PallasAttention runs on a GPU through the Pallas Triton backend, which JAX {jax.__version__} "
                f"deprecates (supported: JAX < {'.'.join(map(str, TRITON_BEFORE_JAX))}): on this JAX use "
                "kernel=cfm_jax.XLAAttention() (model.with_kernel(cfm_jax.XLAAttention()))."
            )
        return None

    def checkify_rewrites(self) -> bool:
        """On a mesh the kernels run inside ``shard_map``, which checkify cannot rewrite: a compiled
        entry point given this kernel keeps its checks as host callbacks (``cfm_jax.compiled``)."""
        return self.mesh is None

    def _config(self) -> _Config:
        reason = self.unsupported()
        if reason is not None:
            raise NotImplementedError(reason)
        return _Config(self.block_q, self.block_k, self.precision, jax.default_backend() != "gpu", self.mesh)

    def _rows(self, queries, A):
        H = A.shape[0]
        return jnp.einsum("qd,hdf->hqf", queries, A).reshape(H * queries.shape[0], -1)

    def means(self, queries, keys, log_weights, A):
        H, q, d = A.shape[0], queries.shape[0], queries.shape[1]
        m, lse = cast(tuple, _pallas_means(self._config(), self._rows(queries, A), keys, log_weights))
        return m.reshape(H, q, d), lse.reshape(H, q)

    def means_vjp(self, queries, keys, log_weights, A, means, lse, cot, key_cot):
        H, q, d = A.shape[0], queries.shape[0], queries.shape[1]
        acc_t = _acc_dtype(queries.dtype)
        R = H * q
        g, dz, db = _backward_op(
            self._config(),
            self._rows(queries, A),
            keys,
            log_weights,
            means.reshape(R, d),
            lse.reshape(R).astype(acc_t),
            cot.reshape(R, d).astype(acc_t),
            key_cot.reshape(R, d).astype(acc_t),
            jnp.zeros((R,), acc_t),
        )
        return g.reshape(H, q, d), dz, db


__all__ = ["TRITON_BEFORE_JAX", "PallasAttention"]
