"""Wasserstein-1 distance W1(μ, ν) with the Euclidean cost ‖x − y‖ between weighted point clouds.

Three methods:

- ``"sorted"`` (d = 1 only): the exact formula W1 = ∫ |F_μ(t) − F_ν(t)| dt, computed by merging
  the two sorted supports; O((n + m) log(n + m)), jit/vmap-able, differentiable.
- ``"exact"``: the transport linear program (HiGHS through :func:`scipy.optimize.linprog`, or
  :func:`scipy.optimize.linear_sum_assignment` for two uniform clouds of equal size). Ground truth
  for small problems (n·m up to a few 10⁵); NumPy, not traceable.
- ``"sinkhorn"``: the debiased Sinkhorn divergence of ott-jax with the p = 1 cost
  (``costs.Euclidean()``, *not* ott's default squared cost),

      S_ε(μ, ν) = OT_ε(μ, ν) − ½ OT_ε(μ, μ) − ½ OT_ε(ν, ν),

  with ε = ``relative_epsilon`` · c, c = (E_{μ⊗ν}‖x − y‖²)^{1/2} the scale of the cost (an O((n+m)d)
  bound on the mean cost). jit/vmap/grad-able; ``batch_size`` recomputes the cost matrix in row
  blocks so memory stays O(batch_size·m).

Entropic bias (measured against ``"exact"``, Gaussian clouds, d ∈ {2, 4, 8}, n = m = 64, solved
to a 1e-5 marginal error): S_ε *underestimates* W1 (entropic blurring shortens long moves).
Relative error −0.3 … −2.8 % at ``relative_epsilon = 0.01`` (bias ≈ −(0.2…1.3)·ε),
−3 … −11 % at 0.03, −28 … −37 % at 0.1; it shrinks monotonically with ε (``tests/test_wasserstein.py``
checks this). When W1 ≲ ε the divergence turns quadratic in the displacement (an MMD-like
regime), so keep ε = ``relative_epsilon``·c well below the distances being measured. Smaller ε
needs more iterations (~1/ε for this cost): raise ``max_iterations`` and lower ``threshold``.

:func:`wasserstein1` compiles its traceable methods (``"sorted"``, ``"sinkhorn"``) once per shape and
option set (``eqx.filter_jit``). Values — the measures' points and weights, ``epsilon`` and
``relative_epsilon`` — are checked by ``cfm_jax._validation.check``: a bad one raises
``equinox.EquinoxRuntimeError`` naming the argument, eagerly and under a caller's ``jax.jit`` alike.
"""

from __future__ import annotations

import types
import typing
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from ._arguments import check_positive, static_int
from ._measures import EmpiricalMeasure, as_measure
from ._validation import check, compiled, is_concrete

W1Method = Literal["auto", "sinkhorn", "exact", "sorted"]
"""How :func:`wasserstein1` computes W1 (see its docstring)."""
METHODS: tuple[W1Method, ...] = typing.get_args(W1Method)


def require(x, ok, message: str):
    """``x``, checked by :func:`~cfm_jax._validation.check` that ``ok`` holds: a failed check raises
    ``equinox.EquinoxRuntimeError`` with ``message``, at once when ``ok`` is concrete, inside the
    compiled program otherwise."""
    # a concrete outcome stays NumPy: inside a caller's jit a jnp operation would make it a tracer
    return check(x, np.logical_not(ok) if is_concrete(ok) else ~ok, message)


def positive_finite(name: str, value):
    """``value`` (a number or a scalar array) checked finite and > 0 (:func:`require`)."""
    if is_concrete(value):
        v = np.asarray(value, dtype=np.float64)
        return require(value, np.isfinite(v).all() and (v > 0).all(), f"`{name}` must be finite and > 0.")
    return require(value, jnp.isfinite(value) & (value > 0), f"`{name}` must be finite and > 0.")


def _check_pair(mu, nu) -> tuple[EmpiricalMeasure, EmpiricalMeasure]:
    for name, m in (("mu", mu), ("nu", nu)):
        if not isinstance(m, EmpiricalMeasure):
            try:
                m = as_measure(m)
            except ValueError as e:
                raise ValueError(f"`{name}`: {e}") from None
        if name == "mu":
            mu = m
        else:
            nu = m
    if mu.dim != nu.dim:
        raise ValueError(f"`mu` and `nu` must live in the same dimension, got d = {mu.dim} and {nu.dim}.")
    return mu.checked("mu"), nu.checked("nu")


def sorted_w1(x, a, y, b):
    """Exact 1-D W1 on raw arrays ``x (n, 1), a (n,), y (m, 1), b (m,)``.

    W1 = Σ_k |F_μ − F_ν|(t_k) (t_{k+1} − t_k) over the merged sorted support.
    """
    t = jnp.concatenate([x[:, 0], y[:, 0]])
    mass = jnp.concatenate([a, -b])
    order = jnp.argsort(t)
    t, mass = t[order], mass[order]
    cdf_diff = jnp.cumsum(mass)[:-1]
    return jnp.sum(jnp.abs(cdf_diff) * jnp.diff(t))


def _exact_w1(x, a, y, b) -> float:
    """Transport LP with cost ‖x_i − y_j‖ (assignment when both clouds are uniform of equal size)."""
    from scipy.optimize import linear_sum_assignment, linprog
    from scipy.spatial.distance import cdist

    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    C = cdist(x, y)
    n, m = C.shape
    if n == m and np.allclose(a, 1.0 / n) and np.allclose(b, 1.0 / m):
        rows, cols = linear_sum_assignment(C)
        return float(C[rows, cols].mean())
    if n * m > 2_000_000:
        raise ValueError(
            f"method='exact' builds an LP with n·m = {n * m} variables; use method='sinkhorn' for clouds this large."
        )
    from scipy.sparse import coo_matrix, vstack

    # Row sums Σ_j P_ij = a_i and column sums Σ_i P_ij = b_j (one redundant equation dropped).
    idx = np.arange(n * m)
    rows = coo_matrix((np.ones(n * m), (idx // m, idx)), shape=(n, n * m))
    cols = coo_matrix((np.ones(n * m), (idx % m, idx)), shape=(m, n * m))
    A_eq = vstack([rows, cols.tocsr()[:-1]]).tocsr()
    b_eq = np.concatenate([a, b[:-1] * (a.sum() / b.sum())])
    res = linprog(C.ravel(), A_eq=A_eq, b_eq=b_eq, bounds=(0, None), method="highs")
    if res.status != 0:
        raise RuntimeError(f"exact W1: the transport LP failed ({res.message}).")
    return float(res.fun)


def cost_scale(x, a, y, b):
    """c = (E_{μ⊗ν}‖x − y‖²)^{1/2} = (Var_μ + Var_ν + ‖m_μ − m_ν‖²)^{1/2}; O((n+m)d)."""
    mx, my = a @ x, b @ y
    var = a @ jnp.sum((x - mx) ** 2, -1) + b @ jnp.sum((y - my) ** 2, -1)
    return jnp.sqrt(var + jnp.sum((mx - my) ** 2))


def _ott_batching_shim():
    """Let ott-jax 0.6's ``batch_size`` path run on the JAX releases this package admits.

    ott-jax 0.6 (``ott.utils``) flattens its batched arguments with
    ``is_leaf=jax.interpreters.batching.is_vmappable``, a JAX internal that JAX 0.10 (the lowest
    admitted) removed; for the plain arrays ott passes it always returned False. Only ``ott.utils``'s
    own reference is replaced (by a namespace of JAX's module's names plus that one function), only on
    ott-jax 0.6.x: JAX itself is never modified.
    """
    from importlib.metadata import version

    from jax.interpreters import batching
    from ott import utils

    if version("ott-jax").startswith("0.6.") and utils.batching is batching:  # pyright: ignore[reportPrivateImportUsage]
        view = types.SimpleNamespace(**vars(batching), is_vmappable=_never_vmappable)
        utils.batching = view  # pyright: ignore[reportPrivateImportUsage]


def _never_vmappable(x) -> bool:
    """JAX's removed ``batching.is_vmappable`` on what ott-jax 0.6 passes it: never a vmappable leaf."""
    return False


def sinkhorn_w1(
    x,
    a,
    y,
    b,
    *,
    relative_epsilon: float = 0.01,
    epsilon: float | Array | None = None,
    batch_size: int | None = None,
    max_iterations: int = 2000,
    threshold: float = 1e-3,
    offset_yy=None,
):
    """Debiased Sinkhorn divergence with cost ‖x − y‖ on raw arrays (see the module docstring).

    ``offset_yy``: precomputed OT_ε(ν, ν) (regularised cost) when ν is fixed, skipping the (m, m)
    self-transport solve; it must have been computed with the same ε.
    """
    from ott.geometry import costs, pointcloud
    from ott.tools import sinkhorn_divergence as sd

    if epsilon is None:
        epsilon = relative_epsilon * jax.lax.stop_gradient(cost_scale(x, a, y, b))
    static_b = offset_yy is not None
    if batch_size is not None:
        _ott_batching_shim()
    val, _ = sd.sinkhorn_divergence(
        pointcloud.PointCloud,
        x,
        y,
        a=a,
        b=b,
        cost_fn=costs.Euclidean(),
        epsilon=epsilon,
        batch_size=batch_size,
        static_b=static_b,
        offset_static_b=offset_yy,
        solve_kwargs=dict(max_iterations=max_iterations, threshold=threshold),
    )
    # The divergence is >= 0 up to solver tolerance; clip the round-off.
    return jnp.maximum(val, 0.0)


def self_transport_cost(
    y, b, epsilon, *, batch_size=None, max_iterations: int = 2000, threshold: float = 1e-3
) -> Array:
    """OT_ε(ν, ν) with cost ‖x − y‖ (the ``offset_yy`` of :func:`sinkhorn_w1` for a fixed ν)."""
    from ott.geometry import costs, pointcloud
    from ott.solvers import linear

    if batch_size is not None:
        _ott_batching_shim()
    geom = pointcloud.PointCloud(y, y, cost_fn=costs.Euclidean(), epsilon=epsilon, batch_size=batch_size)
    out = linear.solve(geom, a=b, b=b, max_iterations=max_iterations, threshold=threshold)
    return jnp.asarray(out.reg_ot_cost)


def wasserstein1(
    mu: EmpiricalMeasure | ArrayLike,
    nu: EmpiricalMeasure | ArrayLike,
    *,
    method: W1Method = "auto",
    relative_epsilon: float = 0.01,
    epsilon: float | None = None,
    batch_size: int | None = None,
    max_iterations: int = 2000,
    threshold: float = 1e-3,
):
    r"""$W_1(μ, ν) = \min_π ∫‖x − y‖ dπ$ over the couplings π of μ and ν, for two :class:`EmpiricalMeasure` s.

    Args:
        mu: a measure (or an ``(n, d)`` array, uniform weights) in $R^d$.
        nu: a measure (or an ``(m, d)`` array, uniform weights) in the same $R^d$.
        method: ``"auto"`` (``"sorted"`` in d = 1, else ``"sinkhorn"``), ``"sinkhorn"``,
            ``"exact"`` (LP; NumPy, not traceable) or ``"sorted"`` (d = 1 only, exact).
        relative_epsilon: Sinkhorn ε as a fraction of the cost scale (ignored if ``epsilon``).
        epsilon: absolute Sinkhorn ε.
        batch_size: Sinkhorn row-block size for large clouds (memory ∝ ``batch_size`` × m).
        max_iterations: Sinkhorn's iteration cap.
        threshold: Sinkhorn's stopping rule (the marginal error).

    Returns:
        A scalar array, in the points' dtype, for every method. The traceable methods are compiled;
        bad values raise an error naming the argument eagerly and under ``jax.jit`` (module docstring).
    """
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {METHODS}, got {method!r}.")
    mu, nu = _check_pair(mu, nu)
    d = mu.dim
    if method == "auto":
        method = "sorted" if d == 1 else "sinkhorn"
    x, a, y, b = mu.points, mu.weights, nu.points, nu.weights
    if method == "sorted" and d != 1:
        raise ValueError(f"method='sorted' is the exact formula for d = 1 only; got d = {d}.")
    if method == "exact":
        if not all(is_concrete(t) for t in (x, a, y, b)):
            raise ValueError("method='exact' runs a NumPy LP and cannot be traced (jit/vmap/grad).")
        return jnp.asarray(_exact_w1(x, a, y, b), jnp.result_type(x, y))
    if method == "sinkhorn":
        if epsilon is None:
            relative_epsilon = positive_finite("relative_epsilon", relative_epsilon)
        else:
            epsilon = positive_finite("epsilon", epsilon)
        max_iterations = static_int("max_iterations", max_iterations)
        check_positive("threshold", threshold)
        if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
            raise ValueError(f"`batch_size` must be None or a positive int, got {batch_size!r}.")
        threshold = float(threshold)
    return _traceable_w1(x, a, y, b, method, relative_epsilon, epsilon, batch_size, max_iterations, threshold)


@compiled
def _traceable_w1(x, a, y, b, method, relative_epsilon, epsilon, batch_size, max_iterations, threshold):
    """The sorted or Sinkhorn W1 of checked arrays in their common dtype (compiled once per shape)."""
    dtype = jnp.result_type(x, y)
    x, a, y, b = (t.astype(dtype) for t in (x, a, y, b))
    if method == "sorted":
        return sorted_w1(x, a, y, b)
    return sinkhorn_w1(
        x,
        a,
        y,
        b,
        relative_epsilon=relative_epsilon,
        epsilon=epsilon,
        batch_size=batch_size,
        max_iterations=max_iterations,
        threshold=threshold,
    )


__all__ = ["cost_scale", "self_transport_cost", "sinkhorn_w1", "sorted_w1", "wasserstein1"]
