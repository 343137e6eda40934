"""One seed's inputs and reference: what every n-point system of the seed is compared with.

:func:`reference` draws one seed's model, target tokens x0, loss targets y, probes and the
points the n-point contexts are prefixes of, and solves the reference systems (trajectories at
the layer boundaries) and the floors (the same deviations between two independent references,
√2 × the reference's own error; 0 where the reference is exact). The two independent
references run through one body (``lax.map`` over the pair), not twice.

References (``ChaosSpec.reference``):

- ``"sample"``: the first ``n_ref`` i.i.d. draws; the n-point contexts are their prefixes
  (synchronous coupling), so ``passive`` is the reference's own particles.
- ``"qmc"``: ``n_ref`` scrambled-Sobol points; the n-point contexts are prefixes of an
  independent i.i.d. sample of M points, and ``passive`` moves its first N in the reference field.
- ``"gaussian"``: the exact infinite-context limit (:func:`cfm_jax.forward` on the Gaussian context moves x0, the
  N passive points and, for W1 in d >= 2, Sobol points of the Gaussian; the token adjoint is
  :func:`cfm_jax.token_adjoint`); $∇φ$ (no closed form) against a QMC reference of
  ``n_ref`` points; $W_1$ in d = 1 against the limit's law $N(m_s, Σ_s)$ itself.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from .._adjoint import ball_probes
from .._flow import SaveAt
from .._gradients import token_adjoint, token_covectors
from .._measures import EmpiricalMeasure, GaussianMeasure
from .._random import as_key
from .._regime import AttentionRegime, regime
from .._solve import forward
from .deviations import compare, sups, system, w1_path
from .spec import ChaosSpec, model_of


@dataclasses.dataclass(frozen=True)
class ReferenceKey:
    """What one seed's reference depends on: ``spec`` without its context sizes, and the sizes it
    needs from them (the static arguments of the compiled reference program).

    ``passive``: N, the n-point particles moved in the reference field (exact references);
    ``drawn``: M >= N, the i.i.d. points drawn for the n-point contexts (W1 sizes included);
    ``probes``: whether ∇φ is measured.
    """

    spec: ChaosSpec
    passive: int
    drawn: int
    probes: bool

    @classmethod
    def of(cls, spec: ChaosSpec) -> ReferenceKey:
        probes = "grad_phi" in spec.measured()
        bare = dataclasses.replace(spec, ns=(), w1_ns=None, grad_phi_max_n=None)
        if spec.reference == "sample":
            return cls(bare, 0, 0, probes)
        N = max(int(n) for n in spec.ns)
        w1_ns = spec.quantity_ns("w1") if spec.w1 else ()
        return cls(bare, N, max((N, *w1_ns)), probes)


def seed_inputs(spec: ChaosSpec, key):
    """(model key, reference, second reference, x0, y, probes) of one seed of a ``"sample"``
    reference (pure in ``key``)."""
    dtype = jnp.result_type(float)
    k_model, k_ref, k_ref2, k_x, k_y, k_probe = jax.random.split(as_key(key), 6)
    law = spec.population_law()
    ref = law(k_ref, spec.n_ref).astype(dtype)
    ref2 = law(k_ref2, spec.n_ref).astype(dtype)
    x0 = law(k_x, spec.batch).astype(dtype)
    y = law(k_y, spec.batch).astype(dtype)
    probes = ball_probes(k_probe, spec.num_probes, spec.dim, spec.radius, dtype)
    return k_model, ref, ref2, x0, y, probes


def _pair(fn, first, second):
    """``fn`` on two inputs of the same shape through one body (``lax.map``): its two results."""
    both = jax.lax.map(fn, jnp.stack([first, second]))
    return tuple(jax.tree.map(lambda v, i=i: v[i], both) for i in (0, 1))


def reference(key: ReferenceKey, seed_key) -> tuple[dict, dict, dict]:
    """(inputs, reference, floors) of one seed (pure in ``seed_key``; module docstring).

    ``inputs``: ``model``, ``x0 (B, d)``, ``y (B, d)``, ``probes (P, d)``, ``points`` (the n-point
    contexts are their prefixes). ``reference``: ``xs (S, B, d)``, ``passive (S, N, d)`` (the
    coupled particles), and where measured ``ps (S, B, d)``, ``pg (S, P, d)``, ``w1_points
    (S, W, d)`` (the reference measure of W1) or ``means``, ``stds`` ``(S,)`` (its exact law in
    d = 1). ``floors``: quantity -> scalar.
    """
    if key.spec.reference == "sample":
        return _sample(key, seed_key)
    if key.spec.reference == "qmc":
        return _qmc(key, seed_key)
    return _gaussian(key, seed_key)


def _w1_size(spec: ChaosSpec) -> int | None:
    return min(spec.w1_size, spec.n_ref) if spec.w1 else None


def _sample(key: ReferenceKey, seed_key):
    spec = key.spec
    k_model, ref, ref2, x0, y, probes = seed_inputs(spec, seed_key)
    model = model_of(spec, k_model, ref, checked=False)
    w1_size = _w1_size(spec)
    a, b = _pair(lambda r: system(model, x0, EmpiricalMeasure(r), y, probes, spec.uses_adjoint), ref, ref2)
    floors = sups(compare(b, a, coupled=False, w1_size=w1_size, relative_epsilon=spec.relative_epsilon))
    out = {"xs": a["xs"], "passive": a["zs"], "ps": a.get("ps"), "pg": a.get("pg")}
    out["w1_points"] = None if w1_size is None else a["zs"][:, :w1_size]
    return dict(model=model, x0=x0, y=y, probes=probes, points=ref), out, floors


def _exact_keys(seed_key):
    """(model, context, reference, second reference, x0, y, probes) keys of one seed (exact references)."""
    return jax.random.split(seed_key, 7)


def _gaussian_context(spec: ChaosSpec, dtype) -> GaussianMeasure:
    """The Gaussian population N(m, s²I) as the context law of the exact limit."""
    law = spec.population_law()
    mean, scale = law.mean, law.scale  # pyright: ignore[reportAttributeAccessIssue]  (a Gaussian population)
    return GaussianMeasure.unchecked(mean.astype(dtype), scale**2 * jnp.eye(spec.dim, dtype=dtype))


def seed_regime(spec: ChaosSpec, seed_key) -> AttentionRegime:
    """The attention regime (:func:`cfm_jax.attention_regime`) of one seed's model of a ``"gaussian"``
    reference at the population law N(m, s²I), queries the seed's target tokens x0 ``(B, d)``: the
    model and tokens :func:`reference` draws from ``seed_key``."""
    dtype = jnp.result_type(float)
    k_model, _, _, _, k_x, _, _ = _exact_keys(seed_key)
    x0 = spec.population_law()(k_x, spec.batch).astype(dtype)
    return regime(model_of(spec, k_model), _gaussian_context(spec, dtype), x0, checked=False)


def _exact_inputs(key: ReferenceKey, seed_key):
    spec = key.spec
    dtype = jnp.result_type(float)
    k_model, k_ctx, k_ref, k_ref2, k_x, k_y, k_probe = _exact_keys(seed_key)
    law = spec.population_law()
    z = law(k_ctx, key.drawn).astype(dtype)
    x0 = law(k_x, spec.batch).astype(dtype)
    y = law(k_y, spec.batch).astype(dtype)
    probes = ball_probes(k_probe, spec.num_probes, spec.dim, spec.radius, dtype)
    return law, (k_model, k_ref, k_ref2), dict(x0=x0, y=y, probes=probes, points=z)


def _qmc(key: ReferenceKey, seed_key):
    spec = key.spec
    law, (k_model, k_ref, k_ref2), inputs = _exact_inputs(key, seed_key)
    x0, y, probes, z = inputs["x0"], inputs["y"], inputs["probes"], inputs["points"]
    dtype = z.dtype
    r1 = law(k_ref, spec.n_ref, qmc=True).astype(dtype)
    r2 = law(k_ref2, spec.n_ref, qmc=True).astype(dtype)
    model = model_of(spec, k_model, r1, checked=False)

    def one(r):  # the particle adjoints only where ∇φ is wanted, else the token adjoint alone
        s = system(model, x0, EmpiricalMeasure(r), y, probes, key.probes)
        if spec.uses_adjoint and not key.probes:
            s["ps"] = token_covectors(model, s["xs"], s["zs"], s["w"], y)
        return s

    a, b = _pair(one, r1, r2)
    passive = forward(model, z[: key.passive], EmpiricalMeasure(r1), saveat=SaveAt(layers=True), throw=False).xs
    w1_size = _w1_size(spec)
    floors = sups(compare(b, a, coupled=False, w1_size=w1_size, relative_epsilon=spec.relative_epsilon))
    out = {"xs": a["xs"], "passive": passive, "ps": a.get("ps"), "pg": a.get("pg")}
    out["w1_points"] = None if w1_size is None else a["zs"][:, :w1_size]
    return dict(model=model, **inputs), out, floors


def _gaussian(key: ReferenceKey, seed_key):
    spec = key.spec
    law, (k_model, k_ref, k_ref2), inputs = _exact_inputs(key, seed_key)
    x0, y, probes, z = inputs["x0"], inputs["y"], inputs["probes"], inputs["points"]
    dtype, B, N = z.dtype, spec.batch, key.passive
    model = model_of(spec, k_model)
    mu = _gaussian_context(spec, dtype)
    w1_size = _w1_size(spec)
    W = 0 if (w1_size is None or spec.dim == 1) else w1_size  # d = 1: the exact law, no sample
    q = [mu.sample(k, W, qmc=True) for k in (k_ref, k_ref2)] if W else []
    sol = forward(model, jnp.concatenate([x0, z[:N], *q]), mu, saveat=SaveAt(layers=True), throw=False)
    xs = sol.xs
    assert xs is not None and sol.contexts is not None
    zero = jnp.zeros((), dtype)
    out: dict = {"xs": xs[:, :B], "passive": xs[:, B : B + N]}
    floors = {"token": zero, "context": zero}
    if W:
        out["w1_points"] = xs[:, B + N : B + N + W]
        wq = jnp.full((W,), 1.0 / W, dtype)
        floors["w1"] = jnp.max(w1_path(xs[:, B + N + W :], wq, out["w1_points"], wq, spec.relative_epsilon))
    elif w1_size is not None:
        out["means"], out["stds"] = sol.contexts.mean[:, 0], jnp.sqrt(sol.contexts.cov[:, 0, 0])
        floors["w1"] = zero
    if spec.uses_adjoint:
        out["ps"] = token_adjoint(model, x0, mu, y, throw=False)[1]
        floors["adjoint"] = zero
    if key.probes:  # ∇φ̂ has no closed form: a QMC reference of n_ref points (two, for its floor)
        r1 = law(jax.random.fold_in(k_ref, 1), spec.n_ref, qmc=True).astype(dtype)
        r2 = law(jax.random.fold_in(k_ref2, 1), spec.n_ref, qmc=True).astype(dtype)
        g1, g2 = _pair(lambda r: system(model, x0, EmpiricalMeasure(r), y, probes, True), r1, r2)
        out["pg"] = g1["pg"]
        floors["grad_phi"] = sups(compare(g2, g1, coupled=False, w1_size=None, relative_epsilon=spec.relative_epsilon))[
            "grad_phi"
        ]
    return dict(model=model, **inputs), out, floors


__all__ = ["ReferenceKey", "reference", "seed_inputs", "seed_regime"]
