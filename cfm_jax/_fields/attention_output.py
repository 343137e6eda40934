"""One attention layer's output at a context, and its exact infinite-context value at a Gaussian one.

A layer of H heads, ``Q_h, K_h, V_h: (d, d)``, with the logits scaled by s (standard attention:
s = 1/√d), maps a target token x through the context μ = Σ_j w_j δ_{z_j} to

    T_μ(x) = Σ_h V_h Σ_j α^h_j(x) z_j,     α^h_j(x) = w_j e^{s⟨Q_h x, K_h z_j⟩} / Σ_k w_k e^{s⟨Q_h x, K_h z_k⟩}.

The library's attention field (:class:`~cfm_jax.AttentionField`) has unscaled logits (its models
scale Q and K instead, ``Transformer.init``); since s⟨Q_h x, K_h z⟩ = ⟨(sQ_h) x, K_h z⟩, the scaled layer
is that field at Q_h → sQ_h, which is how it is computed here. It is the residual layer's update:
a one-layer ``Transformer`` with ``Q = sQ_h`` moves x by exactly ``forward(...).x1 − x0 = T_μ(x0)``.

At a Gaussian context μ = N(m, Σ) the softmax mean is the mean of the exponentially tilted Gaussian,
∫ e^{u·z} z dμ / ∫ e^{u·z} dμ = m + Σu with u = s A_hᵀ x (A_h = Q_hᵀK_h), so the layer is affine
(:meth:`~cfm_jax.AttentionField.gaussian_affine`):

    T_μ(x) = c + M x,     c = Σ_h V_h m,     M = s Σ_h V_h Σ A_hᵀ,

the n → ∞ limit of T_{μ_n}(x) for μ_n the empirical measure of n i.i.d. draws from μ.

**The output law** (self-attention): the context's own tokens as targets, each with its weight,
T_μ#μ. For an empirical context its mean and covariance are ȳ = Σ_j w_j y_j and Σ_j w_j (y_j − ȳ)(y_j
− ȳ)ᵀ, y_j = T_μ(z_j) (with uniform weights: the mean and the population covariance of the n output
tokens). At μ = N(m, Σ) the law is the image of a Gaussian under an affine map, exactly

    T_μ#μ = N(c + M m, M Σ Mᵀ):

the infinite-context values that the moments at μ_n approach as n grows, with no reference sample
and no sampling error of its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._arguments import finite
from .._measures import EmpiricalMeasure, GaussianMeasure, as_measure
from .._validation import check, compiled
from .attention import AttentionField

Context = EmpiricalMeasure | GaussianMeasure


def _layer(params) -> dict[str, Array]:
    """``params`` as ``{"Q", "K", "V"}: (H, d, d)`` (a ``(d, d)`` entry is one head); ValueError naming ``params``."""
    if not isinstance(params, Mapping) or not {"Q", "K", "V"} <= set(params):
        got = sorted(params) if isinstance(params, Mapping) else type(params).__name__
        raise ValueError(f'`params` must be a mapping with "Q", "K" and "V" (one attention layer), got {got}.')
    layer = {k: jnp.asarray(params[k]) for k in ("Q", "K", "V")}
    shape = layer["Q"].shape
    if len(shape) not in (2, 3) or shape[-1] != shape[-2] or shape[-1] == 0 or 0 in shape:
        raise ValueError(f'`params`: "Q" must have shape (H, d, d) or (d, d) (one head), got {shape}.')
    for k, a in layer.items():
        if a.shape != shape:
            raise ValueError(f'`params`: "{k}" must have the shape of "Q" {shape}, got {a.shape}.')
        if not jnp.issubdtype(a.dtype, jnp.floating):
            raise ValueError(f'`params`: "{k}" must be a floating array, got dtype {a.dtype}.')
    return {k: a if a.ndim == 3 else a[None] for k, a in layer.items()}


def _context(context, d: int) -> Context:
    if not isinstance(context, (EmpiricalMeasure, GaussianMeasure)):
        try:
            context = as_measure(context)
        except (TypeError, ValueError) as e:
            raise ValueError(
                f"`context` must be an EmpiricalMeasure, an (n, d) array or a GaussianMeasure: {e}"
            ) from None
    if context.dim != d:
        raise ValueError(f"`context` has dimension {context.dim} but the layer has d = {d}.")
    return context


def _scale(scale, d: int) -> Array:
    """The logits' factor as a scalar array: 1/√d for ``None``; ValueError naming ``scale`` for what is
    not a real scalar (its value is checked in the compiled program, :func:`_prepared`)."""
    if scale is None:
        return jnp.asarray(1.0 / math.sqrt(d))
    bad = f"`scale` must be None (1/√d) or a real number > 0, got {scale!r:.60}."
    if isinstance(scale, (bool, np.bool_, str, bytes)):  # jnp.asarray would take a string for a dtype
        raise ValueError(bad)
    try:
        s = jnp.asarray(scale)
    except (TypeError, ValueError):
        raise ValueError(bad) from None
    if s.ndim != 0 or s.dtype.kind not in "iuf":
        raise ValueError(bad)
    return s


def _prepared(params, context, scale):
    """The layer with s folded into Q (one dtype: the widest of the layer and the context) and the context."""
    layer = _layer(params)
    d = layer["Q"].shape[-1]
    context = _context(context, d)
    s = _scale(scale, d)
    layer = {k: finite(f'params["{k}"]', a) for k, a in layer.items()}
    context = context.checked("context")
    s = check(s, ~(jnp.isfinite(s) & (s > 0)), "`scale` must be None (1/√d) or a finite real number > 0.")
    dtype = jnp.result_type(*layer.values(), *jax.tree.leaves(context), float)
    layer = {k: a.astype(dtype) for k, a in layer.items()}
    layer["Q"] = s.astype(dtype) * layer["Q"]  # s⟨Q x, K z⟩ = ⟨(sQ) x, K z⟩
    return layer, context, dtype


def _affine(layer, context: GaussianMeasure, dtype):
    return AttentionField().gaussian_affine(layer, context.mean.astype(dtype), context.cov.astype(dtype))


def _empirical(context: EmpiricalMeasure, dtype) -> EmpiricalMeasure:
    return EmpiricalMeasure.unchecked(context.points.astype(dtype), context.weights.astype(dtype))


@compiled
def _output(params, x, context, scale):
    layer, context, dtype = _prepared(params, context, scale)
    x = jnp.asarray(x)
    d = layer["Q"].shape[-1]
    if x.ndim not in (1, 2) or x.shape[-1] != d:
        raise ValueError(f"`x` must have shape (d,) or (B, d) with d = {d}, got {x.shape}.")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise ValueError(f"`x` must be a floating array, got dtype {x.dtype}.")
    x = finite("x", x)
    xs = jnp.atleast_2d(x).astype(jnp.result_type(x, dtype))
    layer = {k: a.astype(xs.dtype) for k, a in layer.items()}
    if isinstance(context, GaussianMeasure):
        c, M = _affine(layer, context, xs.dtype)
        out = c + xs @ M.T
    else:
        out = AttentionField()(xs, _empirical(context, xs.dtype), layer)
    return out[0] if x.ndim == 1 else out


def attention_output(
    params: Mapping[str, ArrayLike],
    x: Float[ArrayLike, "*B d"],
    context: Context | Float[ArrayLike, "n d"],
    *,
    scale: float | Float[ArrayLike, ""] | None = None,
) -> Float[Array, "*B d"]:
    r"""One attention layer's output $T_μ(x)$ at target tokens x; at a Gaussian context, its exact
    infinite-context value $c + Mx$ (module docstring).

    Args:
        params: one layer, a mapping with ``"Q"``, ``"K"``, ``"V"`` of shape ``(H, d, d)`` (or ``(d, d)``:
            one head), as ``Transformer.layer_params(l)`` gives; the query of x is $Q_h x$, its key
            $K_h x$, its value $V_h x$ (PyTorch's ``x @ W_q.T``: ``W_q`` is ``Q_h``). Other entries are
            ignored.
        x: the target tokens, ``(d,)`` or ``(B, d)``.
        context: an [`EmpiricalMeasure`][cfm_jax.EmpiricalMeasure] (or an ``(n, d)`` array, uniform
            weights): the softmax over its atoms; or a [`GaussianMeasure`][cfm_jax.GaussianMeasure]: the
            exact $n → ∞$ limit.
        scale: the factor s of the logits $s⟨Q_h x, K_h z⟩$: ``None`` (default) is standard
            attention's $1/\sqrt{d}$; ``1.0`` is the library's own [`AttentionField`][cfm_jax.AttentionField]
            (whose models fold the scale into Q and K). A real number > 0, or a traced scalar.

    Returns:
        ``(B, d)`` or ``(d,)``, shaped like ``x``. Compiled; ``jax.jit``, ``vmap`` and ``grad`` (in the
        parameters, the tokens, the context and ``scale``) go through it. The values are checked
        (finite parameters and tokens, a finite ``scale`` > 0, the context's rule), a failed check
        naming the argument.
    """
    d = _layer(params)["Q"].shape[-1]
    return _output(params, x, context, _scale(scale, d))


@compiled
def _moments(params, context, scale):
    layer, context, dtype = _prepared(params, context, scale)
    if isinstance(context, GaussianMeasure):
        c, M = _affine(layer, context, dtype)
        m, cov = context.mean.astype(dtype), context.cov.astype(dtype)
        return c + M @ m, M @ cov @ M.T
    mu = _empirical(context, dtype)
    y = AttentionField()(mu.points, mu, layer)  # the context's own tokens as targets
    mean = mu.weights @ y
    centred = y - mean  # centred first: the spread of the outputs can be small against their mean
    return mean, jnp.einsum("n,nd,ne->de", mu.weights, centred, centred)


def attention_output_moments(
    params: Mapping[str, ArrayLike],
    context: Context | Float[ArrayLike, "n d"],
    *,
    scale: float | Float[ArrayLike, ""] | None = None,
) -> tuple[Float[Array, " d"], Float[Array, "d d"]]:
    r"""Mean and covariance of the self-attention output law $T_μ\#μ$: the layer applied to the
    context's own tokens, each with its weight; at a Gaussian context, the exact infinite-context
    values $(c + Mm,\ MΣM^⊤)$ (module docstring).

    For an empirical context of uniform weights these are the mean and the population covariance
    (divided by n) of the n output tokens of one self-attention layer, the moments whose convergence
    in n measures the layer's token sample complexity; at ``GaussianMeasure(m, Σ)`` they are their
    limit, exact (no reference sample).

    Args:
        params: one layer, ``"Q"``, ``"K"``, ``"V"``: ``(H, d, d)`` or ``(d, d)``, as for
            [`attention_output`][cfm_jax.attention_output].
        context: an [`EmpiricalMeasure`][cfm_jax.EmpiricalMeasure] (or an ``(n, d)`` array) or a
            [`GaussianMeasure`][cfm_jax.GaussianMeasure].
        scale: the logits' factor, ``None`` (default) for $1/\sqrt{d}$, as for
            [`attention_output`][cfm_jax.attention_output].

    Returns:
        ``(mean (d,), cov (d, d))``. Compiled, the values checked as by
        [`attention_output`][cfm_jax.attention_output]; ``jax.jit``, ``vmap`` and ``grad`` go through it.
    """
    d = _layer(params)["Q"].shape[-1]
    return _moments(params, context, _scale(scale, d))


__all__ = ["attention_output", "attention_output_moments"]
