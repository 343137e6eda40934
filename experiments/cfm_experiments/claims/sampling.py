"""Random inputs of the claims experiments: fixed-norm transformers, context laws, and one compiled
program that draws a batch of seeds' inputs.

Every random model is rescaled to fixed operator norms in every layer (:func:`fixed_norm_params`):
‖Q_h‖ = ‖K_h‖ = √b (so ‖Q_h‖‖K_h‖ = b), the values to ‖[V_1 … V_H]‖ = v (the heads' concatenated
d × Hd value map) or to Σ_h ‖V_h‖ = v, and ‖W1‖ = ‖W2‖ = 1 for a linear MLP. Contexts are
Gaussian N(0, σ²I/d) (E‖z‖² = σ²; its infinite-context flow is exact) or uniform in the ball of
radius R (the paper's compact support), i.i.d. or scrambled Sobol (:func:`sample_law`).

The draw program (:data:`draw`) holds only random-number generation and a few small SVDs. XLA's
optimising backend passes take ~25 s on the threefry hash for no measurable gain in run time, so
it is compiled with ``xla_backend_optimization_level = 0`` (~4 s); the random bits are integers,
so the draws are the same, and the Gaussian transform differs by float round-off at most.
"""

from __future__ import annotations

import math
from typing import Literal

import jax
import jax.numpy as jnp
from jax.nn import identity as linear

from cfm_jax import GaussianMeasure, Transformer, sobol

Law = Literal["gaussian", "ball"]

#: compiler options of the programs that only draw random numbers (module docstring).
DRAW_OPTIONS = {"xla_backend_optimization_level": 0}


def _to_norm(a, target):
    """``a`` rescaled to operator norm ``target`` over its last two axes."""
    return a * (target / jnp.linalg.norm(a, ord=2, axis=(-2, -1), keepdims=True))


def fixed_norm_params(key, dim: int, *, heads: int, width: int, layers: int, qk, v, v_sum=False, dtype=None) -> dict:
    """The parameters of a random transformer (``Transformer.init``, linear MLP of width ``width``,
    0: none) rescaled to fixed operator norms in every layer (module docstring): a dict of stacked
    arrays ``Q, K, V (L, H, d, d)`` (and ``W1 (L, m, d)``, ``b1 (L, m)``, ``W2 (L, d, m)``,
    ``b2 (L, d)``). ``qk``, ``v`` and ``v_sum`` (the Σ_h‖V_h‖ norm instead of the concatenated
    one) may be traced."""
    m = Transformer.init(key, dim, heads=heads, mlp_width=width, layers=layers, activation=linear, dtype=dtype)
    dt = m.Q.dtype
    root = jnp.sqrt(jnp.asarray(qk, dt))
    L, H, d = m.V.shape[:3]
    concat = jnp.moveaxis(m.V, 1, 2).reshape(L, d, H * d)  # [V_1 … V_H] per layer
    per_head = jnp.linalg.norm(m.V, ord=2, axis=(-2, -1)).sum(axis=1)  # (L,)
    vnorm = jnp.where(v_sum, per_head, jnp.linalg.norm(concat, ord=2, axis=(-2, -1)))[:, None, None, None]
    out = {"Q": _to_norm(m.Q, root), "K": _to_norm(m.K, root), "V": m.V * (jnp.asarray(v, dt) / vnorm)}
    if width:
        assert m.W1 is not None and m.W2 is not None and m.b1 is not None and m.b2 is not None
        out.update(W1=_to_norm(m.W1, 1.0), b1=m.b1, W2=_to_norm(m.W2, 1.0), b2=m.b2)
    return out


def collapse_mlp(params: dict) -> dict:
    """The same model with its linear MLP x ↦ W₂(W₁x + b₁) + b₂ written through W₂W₁ only:
    W₁' = [W₂W₁; 0], b₁' = [W₂b₁; 0], W₂' = [I 0] (the width m >= d is kept, so the shapes are too).
    A linear MLP acts through W₂W₁ and W₂b₁ alone, so the flow is unchanged: a code check."""
    W1, W2, b1 = params["W1"], params["W2"], params["b1"]
    L, m, d = W1.shape
    if m < d:
        raise ValueError(f"collapse_mlp needs the MLP width m >= d, got m = {m}, d = {d}.")
    eye = jnp.broadcast_to(jnp.eye(d, m, dtype=W1.dtype), (L, d, m))
    return {
        **params,
        "W1": jnp.zeros_like(W1).at[:, :d, :].set(W2 @ W1),
        "b1": jnp.zeros_like(b1).at[:, :d].set(jnp.einsum("ldm,lm->ld", W2, b1)),
        "W2": eye,
    }


def transformer(params: dict) -> Transformer:
    """The :class:`~cfm_jax.Transformer` (linear MLP when ``params`` has ``W1``) of a parameter dict."""
    return Transformer(**params, activation=linear)


def sample_law(law: Law, key, n: int, dim: int, scale, *, qmc: bool = False, dtype=None):
    """``(n, dim)`` points: ``"gaussian"`` N(0, scale²I/d) (E‖z‖² = scale²) or ``"ball"`` uniform in
    the ball of radius ``scale``; i.i.d., or (``qmc``) scrambled Sobol through the inverse CDFs
    (the ball: a normal direction from d coordinates, the radius U^{1/d} from one more)."""
    dtype = dtype or jnp.result_type(float)
    u = sobol(key, n, dim + 1, dtype) if qmc else jax.random.uniform(key, (n, dim + 1), dtype, 1e-7, 1 - 1e-7)
    g = jax.scipy.special.ndtri(u[:, :dim])
    if law == "gaussian":
        return jnp.asarray(scale, dtype) / math.sqrt(dim) * g
    r = u[:, dim] ** (1.0 / dim)
    return jnp.asarray(scale, dtype) * (r / jnp.linalg.norm(g, axis=-1))[:, None] * g


def gaussian_law(dim: int, scale, dtype=None) -> GaussianMeasure:
    """The :class:`~cfm_jax.GaussianMeasure` N(0, scale²I/d) that ``sample_law("gaussian", …)`` draws
    from (built unchecked: ``scale`` may be traced)."""
    dtype = dtype or jnp.result_type(float)
    cov = jnp.asarray(scale, dtype) ** 2 / dim * jnp.eye(dim, dtype=dtype)
    return GaussianMeasure.unchecked(jnp.zeros((dim,), dtype), cov)


def param_count(config: dict) -> int:
    """Parameters of the model of a configuration: L·(3Hd² + m(2d + 1) + d·[m > 0])."""
    d, H, m, L = (int(config[k]) for k in ("dim", "heads", "width", "layers"))
    return L * (3 * H * d * d + m * (2 * d + 1) + (d if m else 0))


def seed_keys(seed: int):
    """``(fixed key, seeds key)`` of a base seed: seed i's key is ``fold_in(seeds key, i)`` (the same
    whatever the batching); ``fixed key`` gives the model and token of a fixed-model run."""
    return tuple(jax.random.split(jax.random.key(int(seed))))


def _draw_one(key, fixed_key, scale, qk, v, v_sum, fixed, collapse, *, law, dim, heads, width, layers, size, n_ref):
    """One seed's inputs: model parameters, token x0 ``(1, d)``, context ``(size, d)`` and, for the
    ball, two scrambled-Sobol references ``(2, n_ref, d)``. ``fixed``: the model and token of
    ``fixed_key`` (only the context varies with the seed); ``collapse``: the linear MLP written
    through W₂W₁ (:func:`collapse_mlp`; width >= d only)."""
    dtype = jnp.result_type(float)
    k_seed, k_own = jax.random.split(key)
    model_key = jax.random.wrap_key_data(jnp.where(fixed, jax.random.key_data(fixed_key), jax.random.key_data(k_own)))
    k_model, k_x = jax.random.split(model_key)
    k_ctx, k_r1, k_r2 = jax.random.split(k_seed, 3)
    params = fixed_norm_params(
        k_model, dim, heads=heads, width=width, layers=layers, qk=qk, v=v, v_sum=v_sum, dtype=dtype
    )
    if width >= dim:
        params = jax.tree.map(lambda a, b: jnp.where(collapse, a, b), collapse_mlp(params), params)
    out = {
        "params": params,
        "x0": sample_law(law, k_x, 1, dim, scale, dtype=dtype),
        "z": sample_law(law, k_ctx, size, dim, scale, dtype=dtype),
    }
    if law == "ball":
        out["refs"] = jnp.stack([sample_law(law, k, n_ref, dim, scale, qmc=True, dtype=dtype) for k in (k_r1, k_r2)])
    return out


def _draw(
    seeds_key,
    start,
    fixed_key,
    scale,
    qk,
    v,
    v_sum,
    fixed,
    collapse,
    *,
    batch,
    law,
    dim,
    heads,
    width,
    layers,
    size,
    n_ref,
):
    keys = jax.vmap(lambda i: jax.random.fold_in(seeds_key, i))(start + jnp.arange(batch))
    one = lambda k: _draw_one(  # noqa: E731
        k,
        fixed_key,
        scale,
        qk,
        v,
        v_sum,
        fixed,
        collapse,
        law=law,
        dim=dim,
        heads=heads,
        width=width,
        layers=layers,
        size=size,
        n_ref=n_ref,
    )
    return jax.vmap(one)(keys)


#: ``draw(seeds_key, start, fixed_key, scale, qk, v, v_sum, fixed, collapse, *, batch, law, dim, heads,
#: width, layers, size, n_ref)``: the inputs of seeds start … start + batch − 1 (:func:`_draw_one`,
#: vmapped); one program per shape, whatever the norms, scales and seeds.
draw = jax.jit(
    _draw,
    static_argnames=("batch", "law", "dim", "heads", "width", "layers", "size", "n_ref"),
    compiler_options=DRAW_OPTIONS,
)

__all__ = [
    "DRAW_OPTIONS",
    "collapse_mlp",
    "Law",
    "draw",
    "fixed_norm_params",
    "gaussian_law",
    "param_count",
    "sample_law",
    "seed_keys",
    "transformer",
]
