"""The sampling regime of softmax attention at a context law: how well can n sampled context points
stand in for the infinite context?

A sampled context μ_n approaches the exact infinite-context flow (e.g. the Gaussian limit) as
n^{-1/2} only once n is large against two properties of the attention at the context law μ. For one
head, with A_h = Q_hᵀK_h, the logit of query x against a context point z is
⟨Q_h x, K_h z⟩ = aᵀz with a = A_hᵀx, and the head's output is the softmax mean, the self-normalised
importance-sampling estimate over the n points of the tilted mean ∫ w z dμ / ∫ w dμ, w = e^{aᵀz}.

**Logit spread.** s² = Var_{z∼μ}(aᵀz) = aᵀΣa for a context of covariance Σ.

**Effective sample size.** Kish's ESS of the weights, (Σ_j w_j)² / Σ_j w_j², is n·(E w)²/E w² for
large n. For μ = N(m, Σ), E e^{bᵀz} = e^{bᵀm + bᵀΣb/2}, so

    ESS/n = (E w)² / E w² = e^{2aᵀm + aᵀΣa} / e^{2aᵀm + 2aᵀΣa} = e^{−s²},

whatever the mean m. For an empirical measure Σ_j π_j δ_{z_j} the plug-in value
(Σ_j π_j w_j)² / Σ_j π_j w_j² is reported (with uniform weights: Kish's ESS of the softmax over those
n points, divided by n). With unit-variance tokens (Σ = I) the default ``Transformer.init`` (Q, K
entries of variance 1/d) has E A_hA_hᵀ = I, so E s² = ‖x‖² per head: ESS ≈ n·e^{−9} at ‖x‖ = 3 and
n·e^{−16} at ‖x‖ = 4. A sampled deviation that stays flat from n = 10² to 10³ is this regime, not a bug.

**Heavy tails.** The context points are queries too. The self-attention weight between two context
points, W = e^{zᵀA_h z'} with z, z' independent ∼ N(m, Σ), has a Pareto tail. With z = m + Σ^{1/2}g
and B = Σ^{1/2}A_hΣ^{1/2}: conditionally on g, E e^{t gᵀBg'} = e^{t²‖Bᵀg‖²/2} over g', and
E e^{t² gᵀBBᵀg/2} < ∞ iff t²‖B‖₂² < 1 (the terms linear in g, from m, do not change this). So
E W^t < ∞ iff t < 1/‖B‖₂: the tail index of W is 1/‖B‖₂ (‖·‖₂ the spectral norm), and W has a finite
variance iff ‖B‖₂ < ½. This module reports

    ρ_h = 2 ‖Σ^{1/2} A_h Σ^{1/2}‖₂,     tail index 2/ρ_h,

so that ρ_h ≥ 1 exactly when the weights have infinite variance: sums of n such weights then
fluctuate at the stable rate n^{1/α − 1} (α = 2/ρ the tail index), slower than n^{−1/2}, and for
α ≤ 1 their mean is infinite. ρ is invariant under any change of basis of the tokens that leaves
the logits unchanged. For an empirical context, Σ is its weighted covariance (ρ then describes the
Gaussian with the sample's first two moments).

:func:`attention_regime` evaluates every layer and head of a model at one context law and one set of
queries (the state entering the model; the states further down the flow are the ones saved by
``forward`` or ``gaussian_flow``, and can be passed in the same way). :func:`warn_if_heavy_tailed`
turns the result into a warning, once per process, for code that compares sampled contexts with the
exact limit.
"""

from __future__ import annotations

import math
import numbers
import sys
import warnings
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from ._arguments import finite, finite_params
from ._fields import AbstractSumField, AttentionField
from ._measures import EmpiricalMeasure, GaussianMeasure, as_measure
from ._paths import AbstractCFM
from ._validation import compiled, is_concrete, notice


class AttentionRegime(eqx.Module):
    r"""The sampling regime of a model's attention at a context law (module docstring).

    Attributes:
        logit_variance: ``(L, H, B)`` $\operatorname{Var}_{z∼μ}⟨Q_h x_b, K_h z⟩$ for layer l, head h, query b.
        ess_fraction: ``(L, H, B)`` $(E w)^2/E w^2$ for $w = e^{⟨Q_h x_b, K_h z⟩}$, z ∼ μ: the softmax's
            effective sample size per context point ($e^{−v}$, v = ``logit_variance``, for a Gaussian context).
        rho: ``(L, H)`` $ρ = 2‖Σ^{1/2} Q_h^⊤K_h Σ^{1/2}‖_2$ (spectral norm, Σ the context covariance).
        tail_index: ``(L, H)`` 2/ρ, the Pareto tail index of the self-attention weights (inf at ρ = 0).
        heavy_tailed: ``()`` bool, whether some head has ρ ≥ 1 (weights of infinite variance).
    """

    logit_variance: Float[Array, "L H B"]
    ess_fraction: Float[Array, "L H B"]
    rho: Float[Array, "L H"]
    tail_index: Float[Array, "L H"]
    heavy_tailed: Bool[Array, ""]

    def effective_size(self, n: int) -> Array:
        """The smallest effective sample size, over layers, heads and queries, of an n-point sample."""
        return n * jnp.min(self.ess_fraction)


def _has_attention(field) -> bool:
    if isinstance(field, AttentionField):
        return True
    # any sum (a SumField, or a GaussianSumField: attention beside a linear MLP)
    return isinstance(field, AbstractSumField) and any(isinstance(f, AttentionField) for f in field.fields)


def _query_keys(model: AbstractCFM):
    """Every layer's ``Q, K: (L, H, d, d)`` (every node's, for a piecewise-linear path)."""
    if not isinstance(model, AbstractCFM):
        raise ValueError(f"`model` must be a cfm_jax model (AbstractCFM), got {type(model).__name__}.")
    params = model.stacked_params()
    if not _has_attention(model.field) or "Q" not in params or "K" not in params:
        raise ValueError(
            "`model` has no softmax attention (an AttentionField reading `Q` and `K`), so it has no attention "
            f"regime; got a {type(model).__name__} with field {type(model.field).__name__}."
        )
    Q, K = params["Q"], params["K"]
    if Q.ndim != 4 or Q.shape != K.shape:
        raise ValueError(f"`model`: `Q` and `K` must have shape (L, H, d, d), got {Q.shape} and {K.shape}.")
    return Q, K


def _sqrtm(cov: Float[Array, "d d"]) -> Float[Array, "d d"]:
    """Symmetric square root of a covariance (eigenvalues clipped at 0)."""
    lam, U = jnp.linalg.eigh(0.5 * (cov + cov.T))
    return (U * jnp.sqrt(jnp.maximum(lam, 0.0))) @ U.T


def has_regime(model) -> bool:
    """Whether :func:`attention_regime` applies to ``model``: a cfm_jax model whose field has softmax
    attention reading ``Q``, ``K: (L, H, d, d)``."""
    if not isinstance(model, AbstractCFM) or not _has_attention(model.field):
        return False
    params = model.stacked_params()
    return "Q" in params and "K" in params and params["Q"].ndim == 4 and params["Q"].shape == params["K"].shape


@compiled
def attention_regime(
    model: AbstractCFM,
    context: GaussianMeasure | EmpiricalMeasure | Float[Array, "n d"],
    queries: Float[Array, "B d"] | Float[Array, " d"],
) -> AttentionRegime:
    """Logit spread, effective sample size and heavy-tail indicator of every layer and head.

    Args:
        model: a cfm_jax model with softmax attention (``Transformer``, or ``CFM`` with an
            ``AttentionField``, alone or in a sum), ``Q, K: (L, H, d, d)``.
        context: the context law: a ``GaussianMeasure`` (closed forms) or an ``EmpiricalMeasure``
            (or ``(n, d)`` points; plug-in values, memory O(L·H·B·n)).
        queries: the target tokens ``(B, d)`` or ``(d,)`` at which the softmax is evaluated (pass
            context points to see the context's own attention).

    Returns:
        An :class:`AttentionRegime`; see the module docstring for the definitions. Compiled: a
        repeated call with the same shapes reuses the program. The values of the queries, the model
        and an empirical context are checked, a failed check naming the argument.
    """
    return regime(model, context, queries)


def regime(model: AbstractCFM, context, queries, *, checked: bool = True) -> AttentionRegime:
    """:func:`attention_regime`'s body, uncompiled: for a compiled function that evaluates the regime
    as one step of its own program; ``checked=False`` for values checked (or generated) there."""
    Q, K = _query_keys(model)
    d = Q.shape[-1]
    if not isinstance(context, (GaussianMeasure, EmpiricalMeasure)):
        try:
            context = as_measure(context)
        except (TypeError, ValueError) as e:
            raise ValueError(f"`context` must be a GaussianMeasure or an EmpiricalMeasure: {e}") from None
    if context.dim != d:
        raise ValueError(f"`context` has dimension {context.dim} but the model has d = {d}.")
    x = jnp.asarray(queries)
    if x.ndim not in (1, 2) or x.shape[-1] != d:
        raise ValueError(f"`queries` must have shape (d,) or (B, d) with d = {d}, got {x.shape}.")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise ValueError(f"`queries` must be a floating array, got dtype {x.dtype}.")
    x = jnp.atleast_2d(x)
    if checked:
        x = finite("queries", x)
        Q, K = finite_params((Q, K))
        context = context.checked("context")
    dtype = jnp.result_type(x, Q, *jax.tree.leaves(context))
    x, Q, K = x.astype(dtype), Q.astype(dtype), K.astype(dtype)
    A = jnp.einsum("lhed,lhef->lhdf", Q, K)  # A_h = Q_hᵀK_h: logit of (x, z) is xᵀA_h z
    u = jnp.einsum("bd,lhdf->lhbf", x, A)  # a = A_hᵀx
    if isinstance(context, GaussianMeasure):
        cov = context.cov.astype(dtype)
        var = jnp.einsum("lhbf,fg,lhbg->lhb", u, cov, u)
        ess = jnp.exp(-var)
    else:
        var, ess, cov = _plug_in(u, context.points.astype(dtype), context.weights.astype(dtype))
    root = _sqrtm(cov)
    B = jnp.einsum("de,lhef,fg->lhdg", root, A, root)
    rho = 2 * jnp.linalg.svd(B, compute_uv=False)[..., 0]
    tail = jnp.where(rho > 0, 2 / jnp.where(rho > 0, rho, 1.0), jnp.inf)
    return AttentionRegime(var, ess, rho, tail, jnp.any(rho >= 1))


def _plug_in(u: Float[Array, "L H B d"], z: Float[Array, "n d"], w: Float[Array, " n"]):
    """Logit variance and ESS fraction ``(L, H, B)`` and the covariance ``(d, d)`` of Σ_j w_j δ_{z_j}."""
    logits = jnp.einsum("lhbf,nf->lhbn", u, z)
    centred = logits - jnp.einsum("lhbn,n->lhb", logits, w)[..., None]
    var = jnp.einsum("lhbn,n->lhb", centred**2, w)
    # in log space: the weights e^{ℓ} overflow long before the ratio does
    logw, lse = jnp.log(w), jax.nn.logsumexp
    ess = jnp.exp(2 * lse(logw + centred, axis=-1) - lse(logw + 2 * centred, axis=-1))
    zc = z - w @ z
    return var, ess, jnp.einsum("n,nd,ne->de", w, zc, zc)


class HeavyTailWarning(UserWarning):
    """A sampled context will approach the infinite-context limit slowly (see :func:`warn_if_heavy_tailed`)."""


_WARNED = False


def warn_if_heavy_tailed(
    regime: AttentionRegime,
    n: int | np.integer | None = None,
    *,
    min_effective_size: float | np.integer | np.floating = 100.0,
) -> bool:
    """Warn, once per process, when sampled contexts are in the regime of :func:`attention_regime`
    where they approach the exact limit slowly or visibly not at all.

    Flagged when some head has ρ ≥ 1 (``regime.heavy_tailed``) or, given the sample size ``n``, when
    the smallest effective sample size ``n · min ess_fraction`` is below ``min_effective_size``.
    ``regime`` may carry leading batch axes (e.g. from ``jax.vmap(attention_regime)``: ``rho``
    ``(..., L, H)``); it is flagged when any of its entries is, and the warning names the entry,
    layer and head of the largest ρ. Returns whether the regime is flagged (also after the one
    warning has been shown). Runs on the host (not inside ``jit``).
    """
    global _WARNED
    if not isinstance(regime, AttentionRegime):
        raise ValueError(f"`regime` must be an AttentionRegime (from attention_regime), got {type(regime).__name__}.")
    if not all(is_concrete(a) for a in jax.tree.leaves(regime)):
        raise ValueError("`regime` must hold values: warn_if_heavy_tailed runs on the host, outside jit.")
    rhos, ess_fraction = np.asarray(regime.rho), np.asarray(regime.ess_fraction)
    if rhos.ndim < 2 or rhos.size == 0 or ess_fraction.ndim != rhos.ndim + 1:
        raise ValueError(
            "`regime` must have `rho` (..., L, H) and `ess_fraction` (..., L, H, B) (from attention_regime), "
            f"got {rhos.shape} and {ess_fraction.shape}."
        )
    if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1):
        raise ValueError(f"`n` must be None or a positive int (the number of context points), got {n!r}.")
    n = None if n is None else int(n)
    if isinstance(min_effective_size, bool) or not isinstance(min_effective_size, numbers.Real):
        raise ValueError(f"`min_effective_size` must be a finite number > 0, got {min_effective_size!r}.")
    if not (math.isfinite(min_effective_size) and min_effective_size > 0):
        raise ValueError(f"`min_effective_size` must be finite and > 0, got {min_effective_size!r}.")
    min_effective_size = float(min_effective_size)
    ess = float(ess_fraction.min()) if ess_fraction.size else math.inf  # no queries: no softmax to sample
    heavy = bool(np.any(regime.heavy_tailed))
    few = n is not None and n * ess < min_effective_size
    if not (heavy or few) or _WARNED:
        return heavy or few
    _WARNED = True
    # the flat argmax unravelled over the whole shape: (batch entry…, layer, head)
    *entry, layer, head = (int(i) for i in np.unravel_index(int(np.argmax(rhos)), rhos.shape))
    rho = float(rhos.max())
    where = f"layer {layer}, head {head}" + (f", regime entry {tuple(entry)}" if entry else "")
    parts = []
    if heavy:
        parts.append(
            f"ρ = 2‖Σ^½ QᵀK Σ^½‖ reaches {rho:.3g} ({where}): the attention weights "
            f"between context points have a Pareto tail of index {2 / rho:.3g} ≤ 2, hence infinite variance"
        )
    if math.isfinite(ess):
        sizes = f" ({n * ess:.3g} of n = {n} points)" if n is not None else ""
        parts.append(f"the softmax's effective sample size at these queries is as small as {ess:.3g}·n{sizes}")
    scale = f"; scaling both by a factor below {1 / math.sqrt(rho):.2g} brings ρ under 1" if heavy else ""
    warnings.warn(
        "Sampled contexts will approach the infinite-context limit slowly or seem not to: "
        + "; ".join(parts)
        + f". Scale Q and K down (e.g. Transformer.init(qk_scale=...){scale}), shrink the context's "
        "spread, or use many more points. (Shown once; see cfm_jax.attention_regime.)",
        HeavyTailWarning,
        stacklevel=_caller_level(),
    )
    return True


#: this package's folder: a warning is attributed to the first frame outside it
_PACKAGE = str(Path(__file__).resolve().parent)


def _caller_level() -> int:
    """The ``stacklevel`` that attributes a warning raised by the calling function to the first frame
    outside this package (the user's line, however deep in the library the warning was decided)."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def notice_heavy_tail(model, context, queries) -> None:
    """Warn after the compiled call being traced (:func:`~cfm_jax._validation.notice`) when ``model``
    is in the heavy-tail regime at the Gaussian ``context`` (:func:`warn_if_heavy_tailed`, without a
    sample size: ρ ≥ 1). Nothing for other contexts or models without softmax attention."""
    if isinstance(context, GaussianMeasure) and has_regime(model):
        notice(regime(model, context, queries, checked=False), _warn_heavy_tailed)


def _warn_heavy_tailed(found: AttentionRegime) -> None:
    warn_if_heavy_tailed(found)


__all__ = ["AttentionRegime", "HeavyTailWarning", "attention_regime", "warn_if_heavy_tailed"]
