"""The models of part ``rho`` (:mod:`.rho`): candidates drawn to fill every ρ bin, and their inputs.

Models are drawn to fill the ρ bins :data:`RHO_BINS` (:func:`select`): candidate i has
β_i = ‖Q‖‖K‖σ² log-uniform over ``--rho-beta-range`` and random fixed-norm Q, K, V (all from
``fold_in(model key, i)``, the model key from the run's seed: another ``--seed`` is an independent
draw); its ρ (the largest over layers and heads of :func:`cfm_jax.attention_regime`'s at the
context law) puts it in a bin, and the first ``--rho-per-bin`` candidates of each bin are kept.
The selection reads ρ alone, so a bin holds a random sample of the candidates whose ρ falls in it.

A row's inputs (:func:`inputs`) are its candidates drawn again with
their tokens and contexts, all from the candidate's own key: a candidate is the same model
whichever row draws it.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from cfm_jax import Transformer, attention_regime, compiled

from .sampling import DRAW_OPTIONS, fixed_norm_params, gaussian_law, sample_law

#: the dimension of the ρ sweep (ρ = 2‖A‖/d at σ = 1).
DIM = 4
#: σ of the context law N(0, σ²I/d) (and of the target tokens).
SCALE = 1.0
#: the ρ bins [lo, hi) of the line (the last one unbounded), each filled with ``--rho-per-bin`` models.
RHO_BINS = (0.0, 1.0, 2.0, 3.0, 4.0, math.inf)
#: candidates drawn per compiled call of :data:`candidates`.
BLOCK = 256
#: at most this many candidates per model kept (``× --rho-per-bin × bins``) before :func:`select` gives up.
TRIES = 32


def rho_of(params: dict, scale: float = 1.0) -> np.ndarray:
    """Per model: the largest over layers and heads of :func:`cfm_jax.attention_regime`'s
    ρ = 2‖Σ^½ Q_hᵀK_h Σ^½‖₂ at the part's context law N(0, σ²I/d) (:func:`~.sampling.gaussian_law`,
    σ = ``scale``), i.e. 2 max‖Q_hᵀK_h‖ σ²/d; stacked params ``Q, K: (B, L, H, d, d)`` (others ignored)."""
    Q, K = jnp.asarray(params["Q"]), jnp.asarray(params["K"])
    return np.asarray(_rhos(Q, K, gaussian_law(Q.shape[-1], scale, Q.dtype)), np.float64)


@compiled  # the regime's value checks as data: no host callback, so the persistent cache stores it
def _rhos(Q, K, law):
    def one(q, k):  # ρ reads Q and K only: the values are zero
        model = Transformer(Q=q, K=k, V=jnp.zeros_like(q))
        return jnp.max(attention_regime(model, law, jnp.zeros(q.shape[-1:], q.dtype)).rho)

    return jax.vmap(one)(Q, K)


def model_key(seed: int, draw: int = 0):
    """The key of draw ``draw``'s candidate models (from the run's base seed: another seed or
    another draw, independent models)."""
    return jax.random.fold_in(jax.random.fold_in(jax.random.key(int(seed)), 1), int(draw))


def _candidate(key, i, beta_range, layers):
    """Candidate ``i``: β log-uniform in ``beta_range``, its fixed-norm params, and the keys of its
    token and contexts, all from ``fold_in(key, i)`` (the same whatever the batch)."""
    k_beta, k_model, k_x, k_ctx = jax.random.split(jax.random.fold_in(key, i), 4)
    lo, hi = jnp.log(beta_range[0]), jnp.log(beta_range[1])
    # clipped: exp(log β) may round a hair outside the range in float32
    beta = jnp.clip(jnp.exp(jax.random.uniform(k_beta, (), minval=lo, maxval=hi)), beta_range[0], beta_range[1])
    params = fixed_norm_params(k_model, DIM, heads=1, width=0, layers=layers, qk=beta, v=1.0)
    return beta, params, k_x, k_ctx


def _candidates(key, index, beta_range, *, layers):
    return jax.vmap(lambda i: _candidate(key, i, beta_range, layers)[:2])(index)


#: ``candidates(key, index (B,), beta_range (2,), *, layers)``: ``(β (B,), params)`` of candidates
#: ``index``. Random numbers and small SVDs only.
candidates = jax.jit(_candidates, static_argnames=("layers",), compiler_options=DRAW_OPTIONS)


def _bin_of(rho) -> np.ndarray:
    """The bin of each ρ, −1 for a ρ that is not finite (in no bin)."""
    rho = np.asarray(rho, np.float64)
    b = np.searchsorted(np.asarray(RHO_BINS), np.nan_to_num(rho, nan=-1.0), side="right") - 1
    return np.where(np.isfinite(rho), b, -1)


#: the largest β of ``--rho-beta-range``: the logits e^{z'ᵀAz} of a larger one overflow float32.
BETA_MAX = 1e4


def check_beta_range(beta_range) -> tuple[float, float]:
    """``(low, high)`` of ``--rho-beta-range``: two values, 0 < low < high ≤ :data:`BETA_MAX` with low
    a positive float32, or a ValueError naming it."""
    values = [float(b) for b in beta_range]
    if len(values) != 2 or not 0 < values[0] < values[1]:
        raise ValueError(f"--rho-beta-range takes two values 0 < low < high, got {list(beta_range)}.")
    if not values[1] <= BETA_MAX or not np.float32(values[0]) > 0:
        raise ValueError(
            f"--rho-beta-range must lie in [{np.finfo(np.float32).tiny:.3g}, {BETA_MAX:g}] (float32 logits), "
            f"got {list(beta_range)}."
        )
    return values[0], values[1]


def select(seed: int, per_bin: int, beta_range, layers: int, draw: int = 0) -> list[list[int]]:
    """Per bin of :data:`RHO_BINS`, the indices of the first ``per_bin`` candidates of draw ``draw``
    (:data:`candidates`, in index order) whose ρ (:func:`rho_of`) lies in it; a ValueError naming
    ``--rho-per-bin`` and ``--rho-beta-range`` when :data:`TRIES` candidates per model cannot fill
    every bin."""
    if per_bin < 1:
        raise ValueError(f"--rho-per-bin must be >= 1, got {per_bin}.")
    lo, hi = check_beta_range(beta_range)
    key, span = model_key(seed, draw), jnp.asarray([lo, hi])
    chosen: list[list[int]] = [[] for _ in RHO_BINS[:-1]]
    limit = TRIES * per_bin * len(chosen)
    for start in range(0, limit, BLOCK):
        index = start + np.arange(BLOCK)
        _, params = candidates(key, jnp.asarray(index), span, layers=int(layers))
        for i, b in zip(index, _bin_of(rho_of(params, SCALE))):
            if b >= 0 and len(chosen[b]) < per_bin:
                chosen[b].append(int(i))
        if all(len(c) == per_bin for c in chosen):
            return chosen
    held = ", ".join(f"{label(b)}: {len(c)}" for b, c in enumerate(chosen))
    raise ValueError(
        f"--rho-per-bin {per_bin}: {limit} candidate models with β in --rho-beta-range [{lo:g}, {hi:g}] "
        f"fill only ({held}); widen --rho-beta-range or lower --rho-per-bin."
    )


def label(b: int) -> str:
    """The text of bin ``b`` of :data:`RHO_BINS`."""
    lo, hi = RHO_BINS[b], RHO_BINS[b + 1]
    return f"ρ ∈ [{lo:g}, {hi:g})" if math.isfinite(hi) else f"ρ ≥ {lo:g}"


def _draw(key, index, beta_range, *, contexts, layers, size):
    def one(i):
        beta, params, k_x, k_ctx = _candidate(key, i, beta_range, layers)
        x0 = sample_law("gaussian", k_x, 1, DIM, SCALE)
        z = jax.vmap(lambda k: sample_law("gaussian", k, size, DIM, SCALE))(jax.random.split(k_ctx, contexts))
        return beta, params, x0, z

    return jax.vmap(one)(index)


#: ``draw(key, index (S,), beta_range (2,), *, contexts, layers, size)``: candidates ``index``'s
#: ``(β (S,), params, x0 (S, 1, d), z (S, contexts, size, d))``. Random numbers only.
draw = jax.jit(_draw, static_argnames=("contexts", "layers", "size"), compiler_options=DRAW_OPTIONS)


def inputs(config: dict):
    """A row's ``(β, params, x0, z)`` as NumPy arrays (:data:`draw` of its models at its sizes)."""
    ns = [int(n) for n in config["rho_ns"]]
    out = draw(
        model_key(config["seed"], config.get("draw", 0)),
        jnp.asarray(config["models"]),
        jnp.asarray(check_beta_range(config["rho_beta_range"])),
        contexts=int(config["rho_contexts"]),
        layers=int(config["layers"]),
        size=max(ns),
    )
    return jax.tree.map(np.asarray, out)


__all__ = [
    "BETA_MAX",
    "BLOCK",
    "DIM",
    "RHO_BINS",
    "SCALE",
    "TRIES",
    "candidates",
    "check_beta_range",
    "draw",
    "inputs",
    "label",
    "model_key",
    "rho_of",
    "select",
]
