"""Worst-case parameters: projected gradient ascent of the deviation over a ball of operator norms.

The paper's constant is a supremum over parameters of given norms. For a Gaussian context
μ = N(0, Σ) with its exact infinite-context flow, one target token x0 = e₁ and M fixed n-point
contexts z_m ~ μ (common random numbers), we maximise

    J(θ) = √n · mean_m sup_s ‖x_s(θ; z_m) − x̂_s(θ)‖

over θ = (Q_lh, K_lh, V_lh) in the set Θ of every layer's ‖Q_lh‖ ≤ √b, ‖K_lh‖ ≤ √b (so
‖Q_lh‖‖K_lh‖ ≤ b) and ‖[V_l1 … V_lH]‖ ≤ v (the heads' concatenated value map) or Σ_h ‖V_lh‖ ≤ v.
Both systems are differentiated by the library itself (the n-point system's hand adjoint, the
Gaussian limit by autodiff). Each step is an Adam step followed by the projection onto Θ
(:func:`project`: singular values clipped, the Euclidean projection onto an operator-norm ball;
for the Σ_h‖V_lh‖ ball, a rescaling onto it); the best iterate is kept. Starts (:func:`starts`):
random fixed-norm models and two structured constructions,

- **aligned**: Q_lh = K_lh = √b e₁e₁ᵀ (every logit b (x·e₁)(z·e₁): the largest spread the norms
  allow along the context's main direction) and identical heads V_lh = v I/√H (concatenated norm
  v; Σ_h V_lh = √H v I) or v I/H (Σ_h ‖V_lh‖ = v);
- **identical heads**: one random fixed-norm head (Q_l, K_l, W_l) copied H times with V_lh = W_l/√H
  (the concatenated norm of one head of value √H W_l) or W_l/H.

The value found is a lower bound of the supremum over Θ, and an upward-biased estimate of
E_z √n·dev at the θ found (it was maximised on those M contexts): :data:`evaluate` measures the
θ found on independent contexts, at several n. :data:`ascend_each` maximises each context's own
deviation (one θ per context): E_z sup_θ, the uniform-in-θ quantity.

One compiled program serves several problems: a problem in dimension d with H heads can be
embedded in a larger D and H_max (tokens and contexts zero beyond d, parameters zero outside the
d × d block and beyond head H, kept so by the projection's masks; the law's covariance is the
identity there, where nothing reads it), which leaves its dynamics unchanged. The parts embed a
d-sweep's dimensions in groups spanning at most a factor 4, and keep each head count its own. The random starts
and contexts of these parts are NumPy draws (no old numbers to reproduce, and nothing to compile).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from cfm_jax import EmpiricalMeasure, GaussianMeasure, Transformer, linear
from cfm_jax.chaos import map_seeds, prefix_weights

from .deviation import sup_deviation, token_trajectory

#: the share of the context's second moment off the plane (e₁, e₂) in the low-dimensional law.
LOW_DIM_SPREAD = 0.05
#: the names of the structured starts, in the order of :func:`starts` (then the random ones).
STRUCTURED = ("aligned", "identical heads")


def law_cov(dim: int, low_dim: bool) -> np.ndarray:
    """``(d, d)`` covariance with trace 1 (E‖z‖² = 1): isotropic I/d, or low-dimensional
    (1 − η)(e₁e₁ᵀ + e₂e₂ᵀ)/2 + η I/d, η = :data:`LOW_DIM_SPREAD` (the energy in one plane, whatever
    d; the same as the isotropic law in d <= 2). Its largest variance σ₁² ≈ 1/2 keeps ρ = 2‖QᵀK‖σ₁²
    ≈ b out of the heavy-tail regime of the context's self-attention at b = 1 (the ``rho`` part)."""
    eye = np.eye(dim) / dim
    if not low_dim or dim <= 2:
        return eye
    plane = np.zeros((dim, dim))
    plane[0, 0] = plane[1, 1] = 0.5
    return (1 - LOW_DIM_SPREAD) * plane + LOW_DIM_SPREAD * eye


def _op(a):
    return np.linalg.norm(a, ord=2, axis=(-2, -1), keepdims=True)


def random_params(rng, dim: int, heads: int, layers: int, qk: float, v: float, v_sum: bool) -> dict:
    """A random model at fixed norms (as ``Transformer.init`` then rescaled, in NumPy): every layer's
    ‖Q_lh‖ = ‖K_lh‖ = √qk and ‖[V_l1 … V_lH]‖ = v (or Σ_h ‖V_lh‖ = v). Arrays ``(L, H, d, d)``."""
    Q, K, Vh = (rng.standard_normal((layers, heads, dim, dim)) for _ in range(3))
    concat = np.moveaxis(Vh, 1, 2).reshape(layers, dim, heads * dim)
    vn = _op(Vh)[..., 0, 0].sum(axis=1) if v_sum else _op(concat)[..., 0, 0]
    return {"Q": Q * np.sqrt(qk) / _op(Q), "K": K * np.sqrt(qk) / _op(K), "V": Vh * (v / vn)[:, None, None, None]}


def aligned(dim: int, heads: int, layers: int, qk: float, v: float, v_sum: bool) -> dict:
    """Q_lh = K_lh = √qk e₁e₁ᵀ; identical heads V_lh = v I/√H (or v I/H)."""
    e = np.zeros((dim, dim))
    e[0, 0] = np.sqrt(qk)
    div = heads if v_sum else np.sqrt(heads)
    return {
        "Q": np.broadcast_to(e, (layers, heads, dim, dim)).copy(),
        "K": np.broadcast_to(e, (layers, heads, dim, dim)).copy(),
        "V": np.broadcast_to(v / div * np.eye(dim), (layers, heads, dim, dim)).copy(),
    }


def identical(one: dict, heads: int, v_sum: bool) -> dict:
    """One head (H = 1 parameters) copied ``heads`` times, values W/√H (concatenated norm kept) or W/H."""
    div = heads if v_sum else np.sqrt(heads)
    return {
        "Q": np.repeat(one["Q"], heads, 1),
        "K": np.repeat(one["K"], heads, 1),
        "V": np.repeat(one["V"], heads, 1) / div,
    }


def starts(rng, dim: int, heads: int, layers: int, restarts: int, v_sum: bool, qk: float = 1.0, v: float = 1.0) -> dict:
    """The ascent's starts, stacked ``(2 + restarts, L, H, d, d)``: aligned, identical heads, random."""
    chosen = [
        aligned(dim, heads, layers, qk, v, v_sum),
        identical(random_params(rng, dim, 1, layers, qk, v, False), heads, v_sum),
        *(random_params(rng, dim, heads, layers, qk, v, v_sum) for _ in range(restarts)),
    ]
    return stack(chosen)


def stack(params: list[dict]) -> dict:
    return {k: np.stack([p[k] for p in params]) for k in ("Q", "K", "V")}


def contexts(rng, count: int, n: int, cov) -> np.ndarray:
    """``(count, n, d)`` i.i.d. points of N(0, cov)."""
    return rng.standard_normal((count, n, cov.shape[0])) @ np.linalg.cholesky(cov).T


def token(dim: int) -> np.ndarray:
    """The target token x0 = e₁, ``(1, d)``."""
    x = np.zeros((1, dim))
    x[0, 0] = 1.0
    return x


def embed(a, size: int, axes) -> np.ndarray:
    """``a`` zero-padded to ``size`` along each of ``axes``."""
    a = np.asarray(a)
    pad = [(0, 0)] * a.ndim
    for ax in axes:
        pad[ax] = (0, size - a.shape[ax])
    return np.pad(a, pad)


class Problem:
    """A problem of dimension ``dim`` with ``heads`` heads embedded in ``D`` and ``H_max`` (module
    docstring): the embedded token, covariance (identity beyond d) and masks, and embedders."""

    def __init__(self, dim: int, heads: int, D: int, H_max: int, cov):
        self.dim, self.heads, self.D, self.H_max = dim, heads, D, H_max
        self.x0 = embed(token(dim), D, (1,))
        full = np.eye(D)
        full[:dim, :dim] = cov
        self.cov = full
        self.mask_d = (np.arange(D) < dim).astype(float)
        self.mask_h = (np.arange(H_max) < heads).astype(float)

    def theta(self, params: dict) -> dict:
        """Stacked parameters ``(..., L, H, d, d)`` embedded as ``(..., L, H_max, D, D)``."""
        nd = params["Q"].ndim
        return {k: embed(embed(a, self.D, (nd - 2, nd - 1)), self.H_max, (nd - 3,)) for k, a in params.items()}

    def points(self, z) -> np.ndarray:
        return embed(z, self.D, (np.ndim(z) - 1,))

    @property
    def masks(self):
        return self.mask_d, self.mask_h


def _clip(a, c):
    """``a``'s singular values clipped at ``c``: the Frobenius projection onto {‖a‖₂ ≤ c} (last two axes)."""
    u, s, vt = jnp.linalg.svd(a, full_matrices=False)
    return jnp.einsum("...ij,...j,...jk->...ik", u, jnp.minimum(s, c), vt)


def project(theta: dict, qk, v, v_sum, mask_d, mask_h) -> dict:
    """θ onto Θ (module docstring): zero outside the problem's block and heads, then every layer's
    Q_lh, K_lh clipped at √qk, and its values [V_l1 … V_lH] clipped at v or (``v_sum``) rescaled
    so that Σ_h ‖V_lh‖ ≤ v."""
    block = mask_h[:, None, None] * mask_d[:, None] * mask_d[None, :]
    Qm, Km, Vh = (theta[k] * block for k in ("Q", "K", "V"))
    L, H, d, _ = Vh.shape
    concat = jnp.moveaxis(Vh, 1, 2).reshape(L, d, H * d)
    clipped = jnp.moveaxis(_clip(concat, v).reshape(L, d, H, d), 2, 1)
    total = jnp.linalg.norm(Vh, ord=2, axis=(-2, -1)).sum(axis=1)[:, None, None, None]
    rescaled = Vh * jnp.minimum(1.0, v / jnp.maximum(total, 1e-30))
    root = jnp.sqrt(qk)
    return {"Q": _clip(Qm, root), "K": _clip(Km, root), "V": jnp.where(v_sum, rescaled, clipped)}


def model_of(theta: dict) -> Transformer:
    return Transformer(Q=theta["Q"], K=theta["K"], V=theta["V"], activation=linear)


def objective(theta, x0, contexts, cov):
    """J(θ) = √n · mean over ``contexts (M, n, d)`` of the sup deviation from the exact limit N(0, cov)."""
    model = model_of(theta)
    law = GaussianMeasure.unchecked(jnp.zeros(cov.shape[:1], cov.dtype), cov)
    ref = token_trajectory(model, x0, law)
    devs = map_seeds(lambda z: sup_deviation(token_trajectory(model, x0, EmpiricalMeasure(z)), ref), contexts)
    return jnp.sqrt(jnp.asarray(contexts.shape[1], cov.dtype)) * jnp.mean(devs)


def _ascend(theta0, x0, contexts, cov, qk, v, v_sum, lr, mask_d, mask_h, steps: int):
    """(best θ, best J, J at every step ``(steps,)``) of projected Adam ascent from ``theta0``."""
    opt = optax.adam(lr)
    grad = jax.value_and_grad(objective)
    proj = lambda t: project(t, qk, v, v_sum, mask_d, mask_h)  # noqa: E731

    def step(carry, _):
        theta, state, best, best_theta = carry
        value, g = grad(theta, x0, contexts, cov)
        better = value > best
        best_theta = jax.tree.map(lambda a, b: jnp.where(better, a, b), theta, best_theta)
        best = jnp.maximum(value, best)
        updates, state = opt.update(jax.tree.map(jnp.negative, g), state, theta)
        return (proj(optax.apply_updates(theta, updates)), state, best, best_theta), value

    theta0 = proj(theta0)
    init = (theta0, opt.init(theta0), jnp.asarray(-jnp.inf, cov.dtype), theta0)
    (_, _, best, best_theta), history = jax.lax.scan(step, init, None, length=steps)
    return best_theta, best, history


def _ascend_shared(theta0, x0, contexts, cov, qk, v, v_sum, lr, mask_d, mask_h, *, steps: int):
    one = lambda t: _ascend(t, x0, contexts, cov, qk, v, v_sum, lr, mask_d, mask_h, steps)  # noqa: E731
    return map_seeds(one, theta0)


def _ascend_each(theta0, x0, contexts, cov, qk, v, v_sum, lr, mask_d, mask_h, *, steps: int):
    one = lambda t, z: _ascend(t, x0, z, cov, qk, v, v_sum, lr, mask_d, mask_h, steps)  # noqa: E731
    return map_seeds(lambda a: one(*a), (theta0, contexts))


#: ``ascend(theta0 (S, …), x0, contexts (M, n, D), cov, qk, v, v_sum, lr, mask_d, mask_h, *, steps)``:
#: the ascent from each of S starts on the same M contexts (common random numbers): best θ, best
#: J ``(S,)``, J at every step ``(S, steps)``.
ascend = jax.jit(_ascend_shared, static_argnames="steps")

#: ``ascend_each(theta0 (P, …), x0, contexts (P, 1, n, D), …, *, steps)``: one ascent per context
#: (each its own θ): the supremum over θ of each context's deviation.
ascend_each = jax.jit(_ascend_each, static_argnames="steps")


def _evaluate(theta, x0, contexts, cov, ns):
    model = model_of(theta)
    law = GaussianMeasure.unchecked(jnp.zeros(cov.shape[:1], cov.dtype), cov)
    ref = token_trajectory(model, x0, law)
    size = contexts.shape[1]

    def one(z):
        def at(n):
            context = EmpiricalMeasure.unchecked(z, prefix_weights(n, size, z.dtype, throw=False))
            return jnp.sqrt(n.astype(z.dtype)) * sup_deviation(token_trajectory(model, x0, context), ref)

        return jax.lax.map(at, ns)

    return map_seeds(one, contexts)


def _evaluate_all(thetas, x0, contexts, cov, ns):
    return map_seeds(lambda t: _evaluate(t, x0, contexts, cov, ns), thetas)


#: ``evaluate(thetas (P, …), x0, contexts (M, N, D), cov, ns (K,))``: √n · sup deviation of each θ
#: on each context's first n points, ``(P, M, K)``.
evaluate = jax.jit(_evaluate_all)

__all__ = [
    "LOW_DIM_SPREAD",
    "STRUCTURED",
    "Problem",
    "aligned",
    "ascend",
    "ascend_each",
    "contexts",
    "embed",
    "evaluate",
    "identical",
    "law_cov",
    "model_of",
    "objective",
    "project",
    "random_params",
    "stack",
    "starts",
    "token",
]
