"""The starts of the worst-case ascent (:mod:`.ascent`): parameter constructions and law starts.

Starts (:func:`starts`) pair a parameter start with a law start. Parameters: random fixed-norm
models and three constructions,

- **aligned**: Q_lh = K_lh = √b e₁e₁ᵀ (every logit b (x·e₁)(z·e₁): the largest spread the norms
  allow along e₁) and identical heads V_lh = v I/√H (concatenated norm v) or v I/H (Σ_h ‖V_lh‖ = v);
- **identical heads**: one random fixed-norm head (Q_l, K_l, W_l) copied H times with V_lh = W_l/√H
  (the concatenated norm of one head of value √H W_l) or W_l/H;
- **trivial**: Q = K = 0 (uniform attention: the token moves by the context's mean) with the
  aligned construction's values, the largest ‖Σ_h V_lh‖ the norm allows.

Laws (:func:`law_start`, energy B): isotropic N(0, B I/d), or low- or one-dimensional with its
energy in the plane (e₁, e₂) or on the line e₁ (its variances clipped at the direction bound).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .ascent import DIRECTION_BOUND, JITTER

#: the share of the context's second moment off the plane (e₁, e₂) in the low-dimensional law.
LOW_DIM_SPREAD = 0.05
#: the parameter starts built by hand, and the law starts.
CONSTRUCTIONS = ("aligned", "identity", "identical heads", "trivial")
LAWS = ("isotropic", "low-dimensional", "one-dimensional", "line")
#: the starts (parameters, law) of the supremum's ascent besides the random ones.
STRUCTURED: tuple[tuple[str, str], ...] = (
    ("aligned", "line"),
    ("aligned", "one-dimensional"),
    ("identity", "isotropic"),
    ("aligned", "isotropic"),
    ("identical heads", "low-dimensional"),
    ("trivial", "isotropic"),
)


def law_cov(dim: int, name: str, energy: float = 1.0) -> np.ndarray:
    """``(d, d)`` covariance of the law ``name`` (:data:`LAWS`) with trace ``energy`` (E‖z‖² = B):
    isotropic B I/d, or B[(1 − η)P + η I/d] with η = :data:`LOW_DIM_SPREAD` and P the projection
    onto the plane (e₁, e₂) halved (low-dimensional) or onto e₁ (one-dimensional), or the same
    with η = :data:`JITTER` (line: the corner of the law set with the whole energy on e₁): the
    energy in a plane or on a line, whatever d. In d <= 2 the low-dimensional law is the isotropic one."""
    if name not in LAWS:
        raise ValueError(f"law_cov: `name` must be one of {LAWS}, got {name!r}.")
    eye = np.eye(dim) / dim
    rank = {"isotropic": dim, "low-dimensional": 2, "one-dimensional": 1, "line": 1}[name]
    if rank >= dim:
        return energy * eye
    plane = np.diag((np.arange(dim) < rank) / rank)
    spread = JITTER if name == "line" else LOW_DIM_SPREAD  # line: all but the floor τ on e₁
    return energy * ((1 - spread) * plane + spread * eye)


def law_start(dim: int, name: str, energy: float) -> dict:
    """The law ``name`` (:data:`LAWS`) of energy B as the ascent's variables, inside the law set:
    m = 0 ``(d,)`` and F ``(d, d)`` with FFᵀ + τI the covariance of :func:`law_cov`, its variances
    clipped at the direction bound (the low-dimensional law at B > 2)."""
    tau = JITTER * energy / dim
    lam, vecs = np.linalg.eigh(law_cov(dim, name, energy))
    lam = np.clip(lam - tau, 0.0, DIRECTION_BOUND - tau)
    return {"m": np.zeros(dim), "F": vecs * np.sqrt(lam)}


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


def identity(dim: int, heads: int, layers: int, qk: float, v: float, v_sum: bool) -> dict:
    """The full-rank corner Q_lh = K_lh = √qk I (‖Q‖‖K‖ = qk) with the aligned construction's values
    (Q = K = V = I at one head and unit norms)."""
    out = aligned(dim, heads, layers, qk, v, v_sum)
    eye = np.broadcast_to(np.sqrt(qk) * np.eye(dim), out["Q"].shape).copy()
    return out | {"Q": eye, "K": eye.copy()}


def trivial(dim: int, heads: int, layers: int, v: float, v_sum: bool) -> dict:
    """Q = K = 0 with the aligned construction's values (uniform attention)."""
    out = aligned(dim, heads, layers, 0.0, v, v_sum)
    return out | {"Q": np.zeros_like(out["Q"]), "K": np.zeros_like(out["K"])}


def identical(one: dict, heads: int, v_sum: bool) -> dict:
    """One head (H = 1 parameters) copied ``heads`` times, values W/√H (concatenated norm kept) or W/H."""
    div = heads if v_sum else np.sqrt(heads)
    return {
        "Q": np.repeat(one["Q"], heads, 1),
        "K": np.repeat(one["K"], heads, 1),
        "V": np.repeat(one["V"], heads, 1) / div,
    }


def construction(rng, name: str, dim: int, heads: int, layers: int, qk: float, v: float, v_sum: bool) -> dict:
    """The parameter start ``name``: one of :data:`CONSTRUCTIONS`, or ``"random"``."""
    if name == "aligned":
        return aligned(dim, heads, layers, qk, v, v_sum)
    if name == "identity":
        return identity(dim, heads, layers, qk, v, v_sum)
    if name == "identical heads":
        return identical(random_params(rng, dim, 1, layers, qk, v, False), heads, v_sum)
    if name == "trivial":
        return trivial(dim, heads, layers, v, v_sum)
    if name == "random":
        return random_params(rng, dim, heads, layers, qk, v, v_sum)
    raise ValueError(f"construction: `name` must be one of {(*CONSTRUCTIONS, 'random')}, got {name!r}.")


def starts(
    rng,
    dim: int,
    heads: int,
    layers: int,
    energy: float,
    pairs: Sequence[tuple[str, str]],
    restarts: int,
    v_sum: bool,
    qk: float = 1.0,
    v: float = 1.0,
) -> tuple[dict, dict, list[str]]:
    """The ascent's starts: ``pairs`` (parameter start, law start), then ``restarts`` random models
    on the isotropic and low-dimensional laws in turn. Returns θ ``(S, L, H, d, d)``, the laws
    ``m (S, d)``, ``F (S, d, d)`` and the names ``"<parameters> · <law>"``."""
    chosen = [*pairs, *(("random", LAWS[i % 2]) for i in range(restarts))]
    thetas = [construction(rng, p, dim, heads, layers, qk, v, v_sum) for p, _ in chosen]
    laws = [law_start(dim, law, energy) for _, law in chosen]
    names = [f"{p}{f' {i + 1 - len(pairs)}' if p == 'random' else ''} · {law}" for i, (p, law) in enumerate(chosen)]
    return stack(thetas), stack(laws), names


def stack(params: list[dict]) -> dict:
    return {k: np.stack([p[k] for p in params]) for k in params[0]}


__all__ = [
    "CONSTRUCTIONS",
    "LAWS",
    "LOW_DIM_SPREAD",
    "STRUCTURED",
    "aligned",
    "construction",
    "identical",
    "identity",
    "law_cov",
    "law_start",
    "random_params",
    "stack",
    "starts",
    "trivial",
]
