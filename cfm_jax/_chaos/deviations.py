"""Deviations between two coupled systems at the layer boundaries, and their exact special cases.

:func:`coupled_deviations` is the public, checked entry point (trajectories, not sups); the
sweeps (:mod:`cfm_jax._chaos.programs`) compose the same pieces, :func:`system` and the
distances, on inputs they generated themselves, without value checks (``forward(throw=False)`` and
the unchecked :func:`w1_to_normal_1d` and ``token_covectors``: a check inside a caller's program is
a host callback, and programs with host callbacks are never stored by the persistent compilation
cache).
"""

from __future__ import annotations

import math
import numbers

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr, ndtri
from jaxtyping import Array, ArrayLike, Float

from .._arguments import finite
from .._deprecations import warn_renamed_key
from .._flow import SaveAt
from .._gradients import adjoint_trajectories, token_covectors
from .._measures import EmpiricalMeasure, as_measure, weight_sum_tolerance
from .._paths import AbstractCFM, Transformer
from .._solve import forward
from .._validation import check, compiled, is_concrete
from .._wasserstein import sinkhorn_w1, sorted_w1


def prefix_weights(n, size: int, dtype=None) -> jax.Array:
    """``(size,)`` weights 1/n on the first ``n`` atoms and exactly 0 after, summing to 1.

    ``n``: an integer (Python, numpy or an integer array; a float is refused, not truncated). Its
    range is a value check (``equinox.EquinoxRuntimeError`` naming ``n``): at once for a concrete n,
    inside the program for a traced one. ``dtype``: a floating dtype, default the default float.
    """
    if isinstance(n, bool) or not jnp.issubdtype(jnp.result_type(n), jnp.integer):
        raise ValueError(f"`n` must be an integer (the number of atoms weighted), got {n!r}.")
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 1:
        raise ValueError(f"`size` must be a positive int, got {size!r}.")
    dtype = _float_dtype(dtype)
    message = f"`n` must be in [1, size = {size}]."
    if is_concrete(n):  # always checked (NumPy: inside a caller's jit a jnp comparison would be traced)
        n = check(n, not 1 <= int(n) <= int(size), message)
    else:
        n = check(n, (n < 1) | (n > size), message)
    return _prefix_weights(n, int(size), dtype)


def _float_dtype(dtype):
    """``dtype`` as a floating numpy dtype (None: the default float), or a ValueError naming it: the
    weights 1/n of an integer dtype would be all 0."""
    if dtype is None:
        return jnp.dtype(jnp.result_type(float))
    try:
        dt = jnp.dtype(dtype)
    except TypeError:
        raise ValueError(f"`dtype` must be a floating dtype, got {dtype!r}.") from None
    if not jnp.issubdtype(dt, jnp.floating):
        raise ValueError(f"`dtype` must be a floating dtype (the weights are 1/n), got {dt}.")
    return dt


def _prefix_weights(n, size: int, dtype=None) -> jax.Array:
    dtype = jnp.result_type(float) if dtype is None else dtype
    keep = jnp.arange(size) < n
    return jnp.where(keep, 1.0 / jnp.asarray(n, dtype), 0.0).astype(dtype)


def adjoint_states(model, x0, context, y, probes=None, *, throw: bool = True):
    """(ps (S, B, d), probe_grads (S, P, d) or None) at the layer boundaries, batch-mean loss.

    The discrete adjoint of :func:`cfm_jax.adjoint_trajectories` (the default; ``throw`` as there).
    """
    sol = adjoint_trajectories(model, x0, as_measure(context), y, probes=probes, throw=throw)
    return sol.ps, sol.probe_grads


@compiled
def token_adjoint_states(model, xs, zs, weights, y) -> jax.Array:
    r"""``(L + 1, B, d)`` token covectors $p_l$ of the batch-mean loss $½ \operatorname{mean}_b ‖x_1 − y_b‖^2$,
    one Euler step per layer, with the context held on its own trajectory (it does not depend on the
    tokens):

    $$
    p_L = (x_1 − y)/B, \qquad p_l = p_{l+1} + h\, D_xV(x_l, μ_l)^⊤ p_{l+1}, \qquad h = 1/L,
    $$

    from the saved layer states ``xs (L + 1, B, d)``, ``zs (L + 1, n, d)`` and the context
    ``weights (n,)``. O(B·n) a layer, against O(n²) for the particle adjoints of
    :func:`cfm_jax.adjoint_trajectories`, whose ``ps`` it equals (``tests/test_chaos_deviations.py``).
    ``y`` and ``weights`` are checked to be finite.
    """
    L = model.num_layers
    if xs.ndim != 3 or zs.ndim != 3 or xs.shape[0] != L + 1 or zs.shape[0] != L + 1:
        raise ValueError(
            f"`xs` and `zs` must be (L + 1, B, d) and (L + 1, n, d) layer states, L = {L}; got {xs.shape}, {zs.shape}."
        )
    if weights.shape != zs.shape[1:2] or y.shape != xs.shape[1:]:
        raise ValueError(f"`weights` must be {zs.shape[1:2]} and `y` {xs.shape[1:]}; got {weights.shape}, {y.shape}.")
    y, weights = finite("y", y), finite("weights", weights)
    # the token rows of the discrete adjoint's sweep: one recursion for every token covector
    return token_covectors(model, xs, zs, weights, y)


def system(model, x0, context: EmpiricalMeasure, y=None, probes=None, adjoint: bool = False, throw: bool = False):
    """Trajectories of one system at the layer boundaries: xs, zs, the weights (and ps, pg).

    ``throw``: value checks (``cfm_jax.forward``); off by default, for the sweeps' own inputs.
    """
    sol = forward(model, x0, context, saveat=SaveAt(layers=True), throw=throw)
    assert sol.contexts is not None
    out = {"xs": sol.xs, "zs": sol.contexts.points, "w": context.weights}
    if adjoint and y is not None:
        out["ps"], out["pg"] = adjoint_states(model, x0, context, y, probes, throw=throw)
    return out


def w1(za, wa, zb, wb, relative_epsilon) -> jax.Array:
    """W1 between two weighted point sets: the sorted formula in d = 1, else the Sinkhorn divergence
    at ε = ``relative_epsilon`` × the cost scale (as :func:`cfm_jax.wasserstein1`; the ε may be traced)."""
    if za.shape[-1] == 1:
        return sorted_w1(za, wa, zb, wb)
    return sinkhorn_w1(za, wa, zb, wb, relative_epsilon=relative_epsilon)


def w1_path(zs_a, wa, zs_b, wb, relative_epsilon) -> jax.Array:
    """W1 between two weighted context trajectories (S, n, d) and (S, m, d) at every depth."""
    return jax.vmap(lambda za, zb: w1(za, wa, zb, wb, relative_epsilon))(zs_a, zs_b)


def compare(a: dict, b: dict, *, coupled: bool, w1_size, relative_epsilon) -> dict:
    """Deviation trajectories between two systems from :func:`system` (``b`` the reference)."""
    out = {"token": jnp.linalg.norm(a["xs"] - b["xs"], axis=-1)}
    n = a["zs"].shape[1]
    if coupled:
        out["context"] = jnp.linalg.norm(a["zs"] - b["zs"][:, :n], axis=-1) @ a["w"]
    if w1_size is not None:
        wb = jnp.full((w1_size,), 1.0 / w1_size, b["zs"].dtype)
        if coupled:  # the whole n-point measure
            za, wa = a["zs"], a["w"]
        else:  # two references, both truncated alike
            za, wa = a["zs"][:, :w1_size], wb
        out["w1"] = w1_path(za, wa, b["zs"][:, :w1_size], wb, relative_epsilon)
    if "ps" in a and "ps" in b:
        B = a["xs"].shape[1]
        out["adjoint"] = B * jnp.linalg.norm(a["ps"] - b["ps"], axis=-1)
        if a.get("pg") is not None and b.get("pg") is not None:
            out["grad_phi"] = jnp.max(jnp.linalg.norm(a["pg"] - b["pg"], axis=-1), axis=-1)
    return out


class Deviations(dict):
    """:func:`coupled_deviations`' result: a dict of arrays, and a pytree like a dict (it crosses
    ``jit`` and ``vmap``). The depths were under ``"ss"``; that key is read for one release with a
    ``DeprecationWarning`` (it is not among the keys)."""

    def __missing__(self, key):
        if key == "ss":
            warn_renamed_key("cfm_jax.chaos.coupled_deviations", "ss", "ts")
            return self["ts"]
        raise KeyError(key)

    def get(self, key, default=None):
        return self[key] if key in self or key == "ss" else default


jax.tree_util.register_pytree_with_keys(
    Deviations,
    lambda d: ([(jax.tree_util.DictKey(k), d[k]) for k in sorted(d)], tuple(sorted(d))),
    lambda keys, values: Deviations(zip(keys, values)),
    lambda d: ([d[k] for k in sorted(d)], tuple(sorted(d))),
)


def sups(dev: dict) -> dict:
    """sup over depth (then mean over target tokens) of every deviation trajectory."""
    res = {}
    for k, v in dev.items():
        if k == "ts":
            continue
        s = jnp.max(v, axis=0)
        res[k] = jnp.mean(s) if s.ndim else s
    return res


def coupled_deviations(
    model: AbstractCFM,
    x0: Float[Array, "B d"],
    context: EmpiricalMeasure | Float[ArrayLike, "n d"],
    reference: EmpiricalMeasure | Float[ArrayLike, "n_ref d"],
    *,
    y: Float[Array, "B d"] | None = None,
    probes: Float[Array, "P d"] | None = None,
    coupled: bool = True,
    w1_size: int | None = None,
    relative_epsilon: float | Array = 0.01,
    adjoint: bool = True,
    throw: bool = True,
) -> dict:
    r"""Deviations between two systems at every layer boundary (trajectories, not sups); compiled.

    Args:
        model: the CFM (one step per layer, explicit Euler: the residual network).
        x0: ``(B, d)`` target tokens shared by both systems.
        context: ``(n, d)`` points (uniform weights) or an :class:`~cfm_jax.EmpiricalMeasure`, whose
            atoms may carry weight exactly 0 (padding; see :func:`prefix_weights`).
        reference: ``(n_ref, d)`` reference points (uniform weights).
        y: ``(B, d)`` loss targets; with ``adjoint`` the adjoints are compared too.
        probes: ``(P, d)`` fixed points for $∇φ$ (with ``y`` and ``adjoint``).
        coupled: ``context`` is the prefix of ``reference`` (synchronous coupling), so the
            particles can be compared one by one.
        w1_size: when set, $W_1(μ_s, \hat μ_s)$ with $\hat μ_s$ the first ``w1_size`` reference
            particles (and, when not ``coupled``, $μ_s$ truncated to its first ``w1_size`` particles too).
        relative_epsilon: the Sinkhorn ε of $W_1$ in d >= 2, as a fraction of the cost scale (may be
            traced).
        adjoint: compare the token adjoints (and the probe gradients) too, when ``y`` is given.
        throw: check the values of the inputs inside compiled code (``cfm_jax.forward``), and
            ``relative_epsilon``.

    Returns:
        dict with ``ts (S,)`` (the depths l/L), ``token (S, B)``, and where applicable ``context (S,)``,
        ``w1 (S,)``, ``adjoint (S, B)`` (per-token adjoint, i.e. $B·p$ for the batch-mean loss),
        ``grad_phi (S,)`` (max over probes).
    """
    context, reference = as_measure(context), as_measure(reference)
    if context.dim != reference.dim:
        raise ValueError(
            f"`context` and `reference` must have the same token dimension, got {context.dim} and {reference.dim}."
        )
    if coupled and context.size > reference.size:
        raise ValueError(
            f"`context` has n = {context.size} points, more than `reference` (n_ref = "
            f"{reference.size}): a coupled context is a prefix of the reference; were `context` "
            "and `reference` swapped?"
        )
    # W1 takes the first w1_size reference particles (and, uncoupled, as many of the context's)
    w1_max = reference.size if coupled else min(reference.size, context.size)
    if w1_size is not None:  # the value used is the value checked: 2.5 is refused, not truncated to 2
        if isinstance(w1_size, bool) or not isinstance(w1_size, numbers.Integral) or not 1 <= w1_size <= w1_max:
            raise ValueError(f"`w1_size` must be an integer in [1, {w1_max}], got {w1_size!r}.")
        w1_size = int(w1_size)
    message = "`relative_epsilon` must be finite and > 0."
    if is_concrete(relative_epsilon):  # a given value: checked now, whatever `throw` (a traced one in _coupled)
        v = np.asarray(relative_epsilon, np.float64)
        relative_epsilon = check(relative_epsilon, not (np.isfinite(v) and v > 0), message)
    eps = jnp.asarray(relative_epsilon, jnp.result_type(context.points, float))
    run = _coupled_sinkhorn if w1_size is not None and context.dim > 1 else _coupled
    return Deviations(run(model, x0, context, reference, y, probes, coupled, w1_size, eps, adjoint, throw))


def _coupled_body(model, x0, context, reference, y, probes, coupled, w1_size, eps, adjoint, throw) -> dict:
    if throw:
        eps = check(eps, ~(jnp.isfinite(eps) & (eps > 0)), "`relative_epsilon` must be finite and > 0.")  # traced
    a = system(model, x0, context, y, probes, adjoint, throw)
    b = system(model, x0, reference, y, probes, adjoint, throw)
    out = compare(a, b, coupled=coupled, w1_size=w1_size, relative_epsilon=eps)
    out["ts"] = jnp.arange(a["xs"].shape[0], dtype=a["xs"].dtype) / model.num_layers
    return out


_coupled = compiled(_coupled_body)
#: with Sinkhorn's W1 over the depths (a vmap of a while loop, which checkify cannot rewrite)
_coupled_sinkhorn = compiled(_coupled_body, checkify=False)


def wasserstein1_to_normal_1d(points, weights, mean, std) -> jax.Array:
    r"""Exact $W_1$ between a weighted 1-D point measure and N(mean, std²), with no sample of the law; compiled.

    $W_1 = ∫_0^1 |F_μ^{-1}(u) − Q(u)|\, du$ with $Q(u) = \mathrm{mean} + \mathrm{std}·Φ^{-1}(u)$: atom k
    (sorted) holds $u ∈ [c_{k−1}, c_k]$ (cumulative weights), split where Q crosses it, at
    $u^* = Φ((x_k − \mathrm{mean})/\mathrm{std})$, and
    $∫_a^b Q\, du = \mathrm{mean}·(b − a) + \mathrm{std}·(g(a) − g(b))$ with $g = φ∘Φ^{-1}$ ($g(0) = g(1) = 0$).
    ``points``: ``(n, 1)`` or ``(n,)``; ``weights``: ``(n,)`` summing to 1 (zero-weight atoms
    allowed: they add nothing). The weights are checked to be finite, non-negative and to sum to
    1, and ``std`` to be finite and > 0. O(n log n).
    """
    x = jnp.reshape(jnp.asarray(points), (-1,))
    w = jnp.asarray(weights)
    if w.shape != x.shape:
        raise ValueError(f"`weights` must have shape ({x.shape[0]},) to match `points`, got {w.shape}.")
    dtype = jnp.result_type(x, float)
    return _w1_normal_checked(x.astype(dtype), w.astype(dtype), jnp.asarray(mean, dtype), jnp.asarray(std, dtype))


@compiled
def _w1_normal_checked(x, w, mean, std):
    x, mean = finite("points", x), finite("mean", mean)
    w = check(w, ~jnp.all(jnp.isfinite(w) & (w >= 0)), "`weights` must be finite and non-negative.")
    tol = weight_sum_tolerance(w.dtype)
    w = check(w, jnp.abs(jnp.sum(w) - 1) > tol, f"`weights` must sum to 1 (within {tol:g}).")
    std = check(std, ~(jnp.isfinite(std) & (std > 0)), "`std` must be finite and > 0.")
    return w1_to_normal_1d(x, w, mean, std)


def w1_to_normal_1d(points, weights, mean, std) -> jax.Array:
    """:func:`wasserstein1_to_normal_1d` without checks (jit/vmap-able; the sweeps' form)."""
    x = jnp.reshape(points, (-1,))
    order = jnp.argsort(x)
    x, w = x[order], jnp.asarray(weights, x.dtype)[order]
    c = jnp.clip(jnp.cumsum(w), 0.0, 1.0)
    b = c
    a = jnp.concatenate([jnp.zeros((1,), x.dtype), c[:-1]])

    def g(u):  # φ(Φ^{-1}(u)), 0 at u ∈ {0, 1}
        q = ndtri(jnp.clip(u, 0.0, 1.0))
        return jnp.where((u <= 0) | (u >= 1), 0.0, jnp.exp(-0.5 * q * q) / math.sqrt(2 * math.pi))

    def integral_q(lo, hi):
        return mean * (hi - lo) + std * (g(lo) - g(hi))

    us = jnp.clip(ndtr((x - mean) / std), a, b)
    below = x * (us - a) - integral_q(a, us)  # Q < x_k on [a, u*]
    above = integral_q(us, b) - x * (b - us)  # Q > x_k on [u*, b]
    return jnp.sum(below + above)


@eqx.filter_jit
def uniform_attention_deviation(model: Transformer, mean_difference) -> jax.Array:
    r"""Closed-form token deviation $x_l − \hat x_l$ for K = 0 (uniform attention) and no MLP; compiled.

    Then $V(x, μ) = M_l · \operatorname{mean}(μ)$ with $M_l = Σ_h V_{l,h}$; the context mean obeys
    $m_{l+1} = (I + M_l/L)\, m_l$ and $x_{l+1} = x_l + M_l m_l / L$, so for the Euler scheme

    $$
    x_l − \hat x_l = \Big(\prod_{k<l} (I + M_k/L) − I\Big)(m_0 − \hat m_0),
    $$

    independent of $x_0$. Returns ``(L + 1, d)``.
    """
    if jnp.shape(mean_difference) != (model.dim,):
        raise ValueError(f"`mean_difference` must have shape ({model.dim},) (d), got {jnp.shape(mean_difference)}.")
    L = model.num_layers
    M = jnp.sum(model.V, axis=1)  # (L, d, d)
    eye = jnp.eye(model.dim, dtype=M.dtype)

    def step(G, Ml):
        G = (eye + Ml / L) @ G
        return G, G

    _, Gs = jax.lax.scan(step, eye, M)
    Gs = jnp.concatenate([eye[None], Gs], axis=0)
    return jnp.einsum("lde,e->ld", Gs - eye, jnp.asarray(mean_difference, M.dtype))


__all__ = [
    "adjoint_states",
    "compare",
    "coupled_deviations",
    "prefix_weights",
    "sups",
    "system",
    "token_adjoint_states",
    "uniform_attention_deviation",
    "w1",
    "w1_path",
    "w1_to_normal_1d",
    "wasserstein1_to_normal_1d",
]
