"""Samplers of the common Gaussian-field noise at the token positions (docs/theory.md).

Exact: for each coordinate a, (ΔW_i^a)_i ~ N(0, Δt C) with C_ij = κ(<x_i, x_j>). C loses rank as
tokens synchronise, so a plain Cholesky fails. We factor C = F Fᵀ by anchoring at token 0 and
taking the *symmetric* square root (eigendecomposition, clipped eigenvalues) of the Schur
complement of the differences (see :func:`field_factor`): exact in law, continuous in x (the
strong coupling of two schemes through one Brownian matrix ΔB, ΔW = F(x) ΔB, needs that) and
accurate relative to the cluster diameter. ρ_ij is never formed as <x_i, x_j>: everything goes
through r_ij = ½‖x_i − x_j‖² and κ(1) − κ(1 − r). Cost O(N³) per step.

Random features: the random MLP itself, ξ(x) = m^{-1/2} A σ(B x + c) + b (b the output bias, zero
unless ``kernel.s_w > 0``) — covariance κ exactly for
every m, Gaussian as m → ∞, cost O(N m d) per step and trivially shared by any set of points.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from .. import _random
from .._random import as_key
from .._validation import check, is_concrete
from ._kernels import Activation, NoiseKernel, _get_activation


def _check_points(x) -> None:
    """``x`` must be ``(N, d)`` with N >= 1 (a shape check, also at trace time)."""
    if jnp.ndim(x) != 2 or jnp.shape(x)[0] < 1:
        raise ValueError(f"`x` must have shape (N, d) with N >= 1, got {jnp.shape(x)}.")


def _check_dt(dt):
    """``dt`` checked finite and >= 0 by :func:`~cfm_jax._validation.check` (a traced one too: the
    check travels with the returned value)."""
    message = "`dt` must be finite and >= 0."
    if is_concrete(dt):  # NumPy: inside a caller's jit a jnp comparison of a constant would be traced
        v = np.asarray(dt)
        return check(dt, not (np.all(np.isfinite(v)) and np.all(v >= 0)), message)
    return check(dt, ~(jnp.all(jnp.isfinite(dt)) & jnp.all(dt >= 0)), message)


def kernel_matrix(x: Float[Array, "N d"], kernel: NoiseKernel) -> Float[Array, "N N"]:
    """$C_{ij} = κ(⟨x_i, x_j⟩)$ for unit vectors $x_i$, with $ρ = 1 − ½‖x_i − x_j‖^2$."""
    _check_points(x)
    diff = x[:, None, :] - x[None, :, :]
    rho = 1.0 - 0.5 * jnp.sum(diff * diff, axis=-1)
    return kernel(jnp.clip(rho, -1.0, 1.0))


def _psd_sqrt(C: Float[Array, "N N"]) -> Float[Array, "N N"]:
    """Symmetric square root of a (numerically) PSD matrix; negative eigenvalues clipped to 0."""
    lam, U = jnp.linalg.eigh(0.5 * (C + C.T))
    return (U * jnp.sqrt(jnp.maximum(lam, 0.0))) @ U.T


def field_factor(x: Float[Array, "N d"], kernel: NoiseKernel) -> Float[Array, "N N"]:
    r"""$F(x)$ with $F F^⊤ = C(x)$, so that $ΔW = F(x) ΔB$ with $ΔB ∼ N(0, Δt)^{N×d}$ is the exact increment.

    Anchored construction, stable for nearly synchronised tokens: with token 0 as anchor,
    $W_0 = \sqrt{κ(1)}\, z_0$ and the differences $W_i − W_0$ (covariance $G_{ij} = D_{i0} + D_{0j} − D_{ij}$, where
    $D_{ij} = κ(1) − κ(ρ_{ij})$ is computed without cancellation by ``kernel.deficit``) are sampled
    conditionally on $W_0$ through the symmetric square root of the Schur complement
    $S = G − d d^⊤/κ(1)$, $d_i = D_{i0}$. Eigenvalue round-off is then relative to the *cluster size*
    ($‖S‖ ∼ \mathrm{diameter}^2$) instead of κ(1): a plain eigendecomposition of C injects spurious
    independent noise of size √(eps·κ(1)) ≈ 1e-8 that stops synchronisation at distances ~1e-8,
    this one resolves distances down to ~1e-8 × diameter, i.e. the cluster keeps contracting.
    F is continuous in x (no eigenvector sign ambiguity), as the strong coupling needs.
    """
    _check_points(x)
    N = x.shape[0]
    if kernel.kappa1 == 0.0:  # s_a = 0: no noise at all
        return jnp.zeros((N, N), x.dtype)
    k1 = jnp.asarray(kernel.kappa1, x.dtype)
    if N == 1:
        return jnp.sqrt(k1).reshape(1, 1)
    diff = x[:, None, :] - x[None, :, :]
    D = kernel.deficit(0.5 * jnp.sum(diff * diff, axis=-1))  # (N, N), D_ii = 0
    d = D[1:, 0]
    G = d[:, None] + d[None, :] - D[1:, 1:]
    S = G - jnp.outer(d, d) / k1
    sk = jnp.sqrt(k1)
    top = jnp.zeros((1, N), x.dtype).at[0, 0].set(sk)
    bottom = jnp.concatenate([(sk - d / sk)[:, None], _psd_sqrt(S)], axis=1)
    return jnp.concatenate([top, bottom], axis=0)


def exact_increment(key: PRNGKeyArray, x: Float[Array, "N d"], kernel: NoiseKernel, dt) -> Float[Array, "N d"]:
    """One exact increment ΔW of the common field at the N positions: Cov = Δt κ(<x_i,x_j>) δ_ab."""
    key = as_key(key, "key")
    dt = _check_dt(dt)
    dB = jnp.sqrt(dt) * _random.normal(key, x.shape, x.dtype)
    return field_factor(x, kernel) @ dB


def _sample_mlp(key: PRNGKeyArray, kernel: NoiseKernel, d: int, width: int, dtype=None):
    """Fresh MLP weights ``(A (d, m), B (m, d), c (m,), b (d,))`` with the kernel's scales.

    ``b`` is the output bias (all zeros when ``kernel.s_w == 0``; the key split is the same
    either way, so adding an output bias does not change A, B, c for a given key).
    """
    dtype = dtype or jnp.result_type(float)
    # four draws, not one _random.normals kernel: that compiles ~1 s faster per program, but the
    # layer step runs ~9 % slower inside the scan (the gathered keys and the split of one output)
    ka, kb, kc, kw = jax.random.split(key, 4)
    A = kernel.s_a * jax.random.normal(ka, (d, width), dtype)
    B = kernel.s_b * jax.random.normal(kb, (width, d), dtype)
    c = kernel.s_c * jax.random.normal(kc, (width,), dtype)
    b = kernel.s_w * jax.random.normal(kw, (d,), dtype)
    return A, B, c, b


def _mlp_noise(weights, x: Float[Array, "... d"], activation: Activation) -> Float[Array, "... d"]:
    """ξ(x) = m^{-1/2} A σ(B x + c) + b for a batch of points (shared weights)."""
    A, B, c, b = weights
    h = _get_activation(activation)(x @ B.T + c)
    return (h @ A.T) / math.sqrt(A.shape[1]) + b


def feature_increment(
    key: PRNGKeyArray, x: Float[Array, "N d"], kernel: NoiseKernel, dt, width: int
) -> Float[Array, "N d"]:
    """Random-feature increment √Δt ξ(x) (covariance exact, Gaussian only as width → ∞)."""
    key = as_key(key, "key")
    if isinstance(width, bool) or int(width) != width or int(width) < 1:
        raise ValueError(f"`width` must be an integer >= 1, got {width!r}.")
    dt = _check_dt(dt)
    w = _sample_mlp(key, kernel, x.shape[-1], int(width), x.dtype)
    return jnp.sqrt(dt) * _mlp_noise(w, x, kernel.activation)
