"""The velocity-field interface V(query points, context measure, one layer's parameters) and its
local products, the building blocks of the Eulerian adjoint (docs/theory.md §2).

For query rows q_r with cotangents c_r, a context μ = Σ_j w_j δ_{z_j} and one layer's θ,
:meth:`AbstractField.local_vjp` returns in one pass

- ``velocity``  V(q_r, μ; θ)                                               ``(Q, d)``
- ``dx``        D_xV(q_r, μ)ᵀ c_r, row by row                              ``(Q, d)``
- ``dz``        ∂/∂z_j Σ_r a_r c_r·V(q_r, μ)  (the support points)         ``(n, d)``
- ``dw``        ∂/∂w_j Σ_r a_r c_r·V(q_r, μ)  (finite at w_j = 0)          ``(n,)``
- ``dparams``   Σ_r a_r D_θV(q_r, μ)ᵀ c_r                                  (mapping like θ)
- ``dtargets``  Σ_r a_r G(q_r; y_t)ᵀ c_r at extra zero-mass points y_t     ``(T, d)``
- ``phi``       Σ_r a_r c_r·(δV/δμ)(q_r, μ)(y_t)                           ``(T,)``

where a_r ∈ {0, 1} marks the *active* rows (targets and context particles, whose covectors act
on μ and θ; passive probe rows only get ``velocity`` and ``dx``) and
G(q; y) = ∇_y (δV/δμ)(q, μ)(y). ``dz`` and ``dw`` are plain partial derivatives (the
autodiff convention); the test-field gradient of docs/theory.md is dz_j / w_j, and
dw_j = Σ_r a_r c_r·(δV/δμ)(q_r, μ)(z_j) is the first variation at the atom. At a weight of zero
``dw`` is the one-sided derivative, finite (for softmax attention e^{u·z_j − lse} s_j: the limit of
α_j s_j / w_j, computed without dividing), so gradients in the weights of a padded context
(:meth:`~cfm_jax.EmpiricalMeasure.pad_to`) are never NaN.

The default implementation is ``jax.vjp`` of the field itself (:func:`generic_local_vjp`), so
any user field gets the hand adjoint for free; fields override :meth:`AbstractField.local_vjp`
with closed forms for speed (attention, MLP), and :class:`SumField` adds its summands' products.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import NamedTuple, cast

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._measures import EmpiricalMeasure

LayerParams = Mapping[str, Array]
"""One layer's parameters θ(s) as a mapping name -> array (e.g. ``{"Q": (H, d, d), ...}``)."""

#: mass given to the atoms that carry zero-mass targets in the generic path (by itemsize).
_GENERIC_TARGET_MASS = {4: 1e-18, 8: 1e-150}


class LocalVJP(NamedTuple):
    """Local products of a field at query rows (see the module docstring for the maths)."""

    velocity: Array
    dx: Array
    dz: Array
    dw: Array
    dparams: dict
    dtargets: Array | None = None
    phi: Array | None = None


def complete_params(dparams: Mapping, params: Mapping) -> dict:
    """Zero cotangents for the parameters a field does not read (keeps θ's pytree shape)."""
    return {k: dparams[k] if k in dparams else jnp.zeros_like(v) for k, v in params.items()}


def generic_local_vjp(field, queries, measure, params, cot, *, active=None, targets=None) -> LocalVJP:
    """:class:`LocalVJP` of any field from ``jax.vjp`` of the field itself.

    The query rows are independent inputs of the vjp, so ``dx`` is $D_xV(q)^⊤c$ row by row.
    Targets $y_t$ are added as extra atoms of negligible mass $ε_t$: $φ_t = ∂/∂ε_t Σ_r c_r·V(q_r,
    μ + Σ_t ε_t δ_{y_t})$ (the first variation), and its gradient in $y_t$ is taken by
    reverse-over-reverse.
    """
    if jnp.shape(cot) != jnp.shape(queries):
        raise ValueError(f"`cot` must have the shape of `queries` {jnp.shape(queries)}, got {jnp.shape(cot)}.")
    z, w = measure.points, measure.weights
    act = jnp.ones(queries.shape[:1], queries.dtype) if active is None else jnp.asarray(active, queries.dtype)
    ca = cot * act[:, None]

    def f(q, pts, wts, th):
        return field(q, measure.with_points(pts).with_weights(wts), th)

    velocity, pull = jax.vjp(f, queries, z, w, params)
    dx = pull(cot)[0]
    _, dz, dw, dparams = pull(ca)
    dtar = phi = None
    if targets is not None:
        eps0 = _GENERIC_TARGET_MASS.get(jnp.dtype(queries.dtype).itemsize, 1e-18)

        def phi_fn(y):
            def lagrangian(eps):
                aug = measure.with_points(jnp.concatenate([z, y], axis=0)).with_weights(jnp.concatenate([w, eps]))
                return jnp.sum(ca * field(queries, aug, params))

            return jax.grad(lagrangian)(jnp.full(y.shape[:1], eps0, y.dtype))

        phi, pull_y = jax.vjp(phi_fn, targets)
        (dtar,) = pull_y(jnp.ones_like(phi))
    # ∂/∂w by autodiff of the field, finite at a zero weight where the field's own derivative is (the
    # library's fields never take the log of a zero weight); a field that does gets 0 there, not NaN
    dw = jnp.where((w > 0) | jnp.isfinite(dw), dw, 0.0)
    return LocalVJP(velocity, dx, dz, dw, complete_params(dparams, params), dtar, phi)


class AbstractField(eqx.Module):
    """A velocity field V(x, μ; θ).

    Subclasses implement ``__call__(x, measure, params) -> velocities`` with ``x: (q, d)``
    query points, ``measure`` an :class:`EmpiricalMeasure` with points ``(n, d)`` and
    ``params`` one layer's parameters (a mapping); the result has shape ``(q, d)``. Any such
    module plugs into :func:`cfm_jax.forward` through :class:`cfm_jax.PiecewiseConstantCFM`, and gets the hand
    adjoint through the ``jax.vjp`` default of :meth:`local_vjp`. Atoms of weight 0 must
    contribute nothing (padding).
    """

    @abc.abstractmethod
    def __call__(self, x: Float[Array, "q d"], measure: EmpiricalMeasure, params: LayerParams) -> Float[Array, "q d"]:
        raise NotImplementedError

    def local_vjp(
        self,
        queries: Float[Array, "q d"],
        measure: EmpiricalMeasure,
        params: LayerParams,
        cot: Float[Array, "q d"],
        *,
        active: Float[Array, " q"] | None = None,
        targets: Float[Array, "t d"] | None = None,
    ) -> LocalVJP:
        """All local products at ``queries`` with cotangents ``cot`` (module docstring).

        ``active``: ``(q,)`` 0/1 mask of the rows whose covector acts on μ and θ (default all);
        ``targets``: ``(t, d)`` zero-mass points where the measure term and φ are wanted.
        Override with closed forms for speed; the default is :func:`generic_local_vjp`.
        """
        return generic_local_vjp(self, queries, measure, params, cot, active=active, targets=targets)

    def dx_transpose(self, queries, measure, params, cot) -> Array:
        """$D_xV(q_r, μ)^⊤ c_r$, ``(q, d)``."""
        return self.local_vjp(queries, measure, params, cot).dx

    def measure_term(self, queries, measure, params, cot) -> Array:
        """$∂/∂z_j Σ_r c_r·V(q_r, μ)$ at the support points, ``(n, d)``."""
        return self.local_vjp(queries, measure, params, cot).dz

    def dtheta_transpose(self, queries, measure, params, cot) -> dict:
        """$Σ_r D_θV(q_r, μ)^⊤ c_r$, a mapping shaped like ``params``."""
        return self.local_vjp(queries, measure, params, cot).dparams

    def __add__(self, other: AbstractField) -> AbstractField:
        """The sum field V + V' (a :class:`GaussianSumField` when both summands have a Gaussian closed form)."""
        return sum_fields((self, other))


class AbstractGaussianField(AbstractField):
    """A field with a Gaussian closed form: at a Gaussian context its velocity is affine in the query,
    V(x, N(mean, cov); θ) = c + M x, so the infinite-context flow keeps the context Gaussian
    (docs/theory.md, the Gaussian limit). The exact Gaussian path is typed against this interface:
    attention, the affine MLP and their sums implement it; a field that does not is refused by type.
    """

    @abc.abstractmethod
    def gaussian_affine(
        self, params: LayerParams, mean: Float[Array, " d"], cov: Float[Array, "d d"]
    ) -> tuple[Float[Array, " d"], Float[Array, "d d"]]:
        """``(c (d,), M (d, d))`` with V(x, N(mean, cov); θ) = c + M x."""


def _add(a, b):
    return None if a is None else a + b


class AbstractSumField(AbstractField):
    """$V = Σ_k V_k$; each summand reads the parameters it needs from the same layer mapping."""

    fields: eqx.AbstractVar[tuple[AbstractField, ...]]

    def __call__(self, x, measure, params):
        out = self.fields[0](x, measure, params)
        for f in self.fields[1:]:
            out = out + f(x, measure, params)
        return out

    def local_vjp(self, queries, measure, params, cot, *, active=None, targets=None) -> LocalVJP:
        """The summands' products, added (each summand uses its own closed form or the default)."""
        parts = [f.local_vjp(queries, measure, params, cot, active=active, targets=targets) for f in self.fields]
        out = parts[0]
        for p in parts[1:]:
            out = LocalVJP(
                out.velocity + p.velocity,
                out.dx + p.dx,
                out.dz + p.dz,
                out.dw + p.dw,
                {k: out.dparams[k] + p.dparams[k] for k in out.dparams},
                _add(out.dtargets, p.dtargets),
                _add(out.phi, p.phi),
            )
        return out


def _flatten(fields) -> tuple[AbstractField, ...]:
    flat = []
    for f in fields:
        if not isinstance(f, AbstractField):
            raise TypeError(f"`fields` must hold cfm_jax fields (AbstractField), got {type(f).__name__}.")
        flat.extend(f.fields if isinstance(f, AbstractSumField) else (f,))
    if not flat:
        raise ValueError("`fields` must hold at least one field.")
    return tuple(flat)


class SumField(AbstractSumField):
    """$V = Σ_k V_k$ (nested sums are flattened). ``a + b`` builds one; it is a
    [`GaussianSumField`][cfm_jax.GaussianSumField] when every summand has a Gaussian closed form."""

    fields: tuple[AbstractField, ...]

    def __init__(self, fields):
        self.fields = _flatten(fields)


class GaussianSumField(AbstractSumField, AbstractGaussianField):
    """A sum of fields that all have a Gaussian closed form; its (c, M) is the sum of theirs."""

    fields: tuple[AbstractField, ...]

    def __init__(self, fields):
        flat = _flatten(fields)
        bad = [type(f).__name__ for f in flat if not isinstance(f, AbstractGaussianField)]
        if bad:
            raise TypeError(f"GaussianSumField: {', '.join(bad)} has no Gaussian closed form; use SumField.")
        self.fields = flat

    def gaussian_affine(self, params, mean, cov):
        """The summands' affine maps (c, M), added."""
        parts = [cast(AbstractGaussianField, f).gaussian_affine(params, mean, cov) for f in self.fields]
        c, M = parts[0]
        for cp, Mp in parts[1:]:
            c, M = c + cp, M + Mp
        return c, M


def sum_fields(fields) -> AbstractField:
    """The sum of ``fields``: a :class:`GaussianSumField` if every summand has a Gaussian closed form,
    else a :class:`SumField`."""
    flat = _flatten(fields)
    if all(isinstance(f, AbstractGaussianField) for f in flat):
        return GaussianSumField(flat)
    return SumField(flat)


__all__ = [
    "AbstractField",
    "AbstractGaussianField",
    "AbstractSumField",
    "GaussianSumField",
    "LayerParams",
    "LocalVJP",
    "SumField",
    "complete_params",
    "generic_local_vjp",
    "sum_fields",
]
