"""Finite vs infinite context: synchronously coupled deviations (propagation of chaos, ``docs/chaos.md``).

The infinite-context system is approximated by a reference sample of ``n_ref`` points drawn from
the population P; the n-point system is coupled synchronously to it: its context is the first n
points of the reference sample, and both carry the same target tokens x0 (and loss targets y).
At every layer boundary s = l/L we measure

- ``token``    ‖x_s − x̂_s‖ for each target token (then sup over s, mean over tokens);
- ``context``  Σ_i w_i ‖z_i(s) − ẑ_i(s)‖ = (1/n) Σ_{i<n} ‖z_i(s) − ẑ_i(s)‖, the coupled context
  particles; it bounds W1(μ_s, Φ̂_s#μ_0), the transport of the *same* initial sample by the
  population flow;
- ``w1``       W1(μ_s, μ̂_s) between the n-point measure and the reference measure (its first
  ``w1_size`` particles), which contains the initial sampling error W1(μ_0, P) ~ n^{-1/d'};
- ``adjoint``  ‖p_s − p̂_s‖ per target token (p for the per-token loss ½‖x_1 − y‖²);
- ``grad_phi`` sup_{z ∈ probes} ‖∇φ_s(z) − ∇φ̂_s(z)‖ on fixed probe points in the ball of radius R
  (φ for the batch-mean loss).

Every quantity is reported as a sup over s. The reference's own error ("floor") is measured by
the same code between two independent references.

One compilation per structure: every n-point context of a sweep is the first N = max(ns) reference
points with weights 1/n on the first n and exactly 0 on the rest (zero-weight atoms move with the
flow but act on nothing), so one compiled n-system serves every n through ``lax.map``; the
deviations equal those of the unpadded n-point system to round-off. The seeds are vmapped and,
with several local devices, split across them (:func:`run_seeds`).

Exact references (``ChaosSpec.reference``, the default of ``cfm-jax rates``): ``"gaussian"``
(attention fields with no MLP or a linear one, Gaussian population) compares with the exact
infinite-context flow (:func:`cfm_jax.gaussian_flow`): tokens, the passive motion
of the n context particles in the population field (``context``) and the token adjoint
(:func:`cfm_jax.token_adjoint`: the limit's token map is a product of affine maps, so its
Jacobian is too) are exact (floor 0); W1 in d = 1 is the exact quantile formula against the
limit's law N(m_s, Σ_s) (:func:`wasserstein1_to_normal_1d`, floor 0), in d >= 2 Sinkhorn against
``w1_size`` scrambled-Sobol points of the Gaussian pushed by the exact flow (floor: two such
samples); ``grad_phi`` has no closed form (∇φ̂_s involves the particle adjoints over the whole
Gaussian) and is compared with a QMC reference of ``n_ref`` points (floor: two of them), so it
keeps n_ref solves: only up to ``grad_phi_max_n``. :func:`quantity_reference` names the reference of
every quantity. ``"qmc"`` compares with a scrambled-Sobol reference of ``n_ref`` points. In both,
the n-point contexts are i.i.d. draws independent of the reference (prefixes of one sample of
max(ns) points), coupled by moving them passively in the reference field, so max(ns) may exceed
n_ref and no nested-sample correction is needed. Each quantity has its own sizes
(:meth:`ChaosSpec.quantity_ns`: ``w1_ns`` for W1, n <= ``grad_phi_max_n`` for ∇φ). The token adjoint
of every n-point system is the token-only discrete adjoint (:func:`token_adjoint_states`, O(B·n)
a layer); the particle adjoints (O(n²) a layer) run only where ∇φ is measured.

Expected (paper's table): transformer token quantities ~ n^{-1/2} whatever d; W1 between
measures ~ n^{-1/d'} (d' the intrinsic dimension of P; n^{-1/2} up to a log at d' ≤ 2); the
general W1-Lipschitz control field (:class:`~cfm_jax._control.W1ControlField`) drives its
tokens at the slower n^{-1/d'}.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

from ._adjoint import ball_probes
from ._control import W1ControlField
from ._fields import linear
from ._flow import SaveAt
from ._gaussian_limit import GaussianMeasure
from ._gradients import adjoint_trajectories, token_adjoint, token_covectors
from ._measures import EmpiricalMeasure, as_measure
from ._paths import CFM, AbstractCFM, Transformer
from ._populations import PopulationName, make_population
from ._solve import forward, gaussian_flow
from ._validation import is_concrete
from ._wasserstein import wasserstein1

#: quantity -> definition
QUANTITIES = {
    "token": "sup_s ‖x_s − x̂_s‖",
    "context": "sup_s mean_i ‖z_i(s) − ẑ_i(s)‖ (coupled context)",
    "w1": "sup_s W1(μ_s, μ̂_s)",
    "adjoint": "sup_s ‖p_s − p̂_s‖",
    "grad_phi": "sup_{s,|z|≤R} ‖∇φ_s(z) − ∇φ̂_s(z)‖",
}

Field = Literal["attention", "control"]
Reference = Literal["sample", "qmc", "gaussian"]


def wasserstein_slope(intrinsic_dim: int) -> float:
    """Empirical W1 rate exponent: −1/d' for d' ≥ 2 (with a log at d' = 2), −1/2 for d' = 1."""
    return -1.0 / max(2, intrinsic_dim)


def expected_slope(field: Field, quantity: str, intrinsic_dim: int) -> float:
    """The paper's rate: −1/2 for attention's token-level quantities, −1/d' for W1 and the control."""
    if quantity == "w1" or field == "control":
        return wasserstein_slope(intrinsic_dim)
    return -0.5


@dataclasses.dataclass(frozen=True)
class ChaosSpec:
    """One (field, population, d, ns) experiment; hashable, so it keys the jit cache.

    ``field``: ``"attention"`` (a random :class:`Transformer`) or ``"control"``
    (:class:`W1ControlField` with ν = the reference sample). Populations are scaled to unit
    second moment (E‖z‖² = 1) so that constants can be compared across d.
    """

    field: Field = "attention"
    population: PopulationName = "gaussian"
    dim: int = 2
    intrinsic_dim: int | None = None
    ns: tuple = (16, 32, 64, 128)
    n_ref: int = 4096
    layers: int = 4
    heads: int = 2
    mlp_width: int = 16
    batch: int = 4
    num_probes: int = 16
    radius: float = 1.0
    qk_scale: float = 1.0
    v_scale: float = 1.0
    w1: bool = True
    w1_size: int = 1024
    relative_epsilon: float = 0.01
    adjoint: bool = True
    control_strength: float = 1.0
    reference: Reference = "sample"
    mlp_activation: Literal["gelu", "linear"] = "gelu"
    w1_ns: tuple | None = None
    grad_phi_max_n: int | None = None

    def quantity_ns(self, quantity: str) -> tuple:
        """The context sizes at which ``quantity`` is measured (module docstring, W1 policy):
        ``w1_ns`` for W1 (default ``ns``), the ns <= ``grad_phi_max_n`` for ∇φ, else ``ns``."""
        if quantity == "w1" and self.w1_ns is not None:
            return tuple(int(n) for n in self.w1_ns)
        if quantity == "grad_phi" and self.grad_phi_max_n is not None:
            return tuple(int(n) for n in self.ns if int(n) <= int(self.grad_phi_max_n))
        return tuple(int(n) for n in self.ns)

    def population_law(self):
        d = self.dim
        k = self.intrinsic_dim
        if self.population in ("gaussian", "gaussian_mixture"):
            scale = 1.0 / math.sqrt(d) if self.population == "gaussian" else 0.5
            return make_population(self.population, d, scale=scale)
        if self.population == "subspace_gaussian":
            return make_population(self.population, d, k, scale=1.0 / math.sqrt(k or 2))
        return make_population(self.population, d, k)

    @property
    def d_intrinsic(self) -> int:
        return self.population_law().intrinsic_dim


def validate_spec(spec: ChaosSpec) -> ChaosSpec:
    """ValueError naming the field of ``spec`` that is out of range."""
    if spec.field not in ("attention", "control"):
        raise ValueError(f"`field` must be 'attention' or 'control', got {spec.field!r}.")
    sizes = {
        "dim": spec.dim,
        "n_ref": spec.n_ref,
        "layers": spec.layers,
        "batch": spec.batch,
        "num_probes": spec.num_probes,
        "w1_size": spec.w1_size,
    }
    for name, value in sizes.items():
        if int(value) < 1:
            raise ValueError(f"`{name}` must be >= 1, got {value!r}.")
    if not isinstance(spec.ns, tuple) or not spec.ns or any(int(n) < 1 for n in spec.ns):
        raise ValueError(f"`ns` must be a non-empty tuple of positive context sizes, got {spec.ns!r}.")
    if spec.reference == "sample" and max(spec.ns) > spec.n_ref:
        raise ValueError(
            f"`ns` ({spec.ns}) must be <= `n_ref` ({spec.n_ref}): each n-point context is a prefix of the reference."
        )
    if not (math.isfinite(float(spec.relative_epsilon)) and spec.relative_epsilon > 0):
        raise ValueError(f"`relative_epsilon` must be finite and > 0, got {spec.relative_epsilon!r}.")
    spec.population_law()  # raises a ValueError for unknown populations
    if spec.reference not in ("sample", "qmc", "gaussian"):
        raise ValueError(f"`reference` must be 'sample', 'qmc' or 'gaussian', got {spec.reference!r}.")
    if spec.mlp_activation not in ("gelu", "linear"):
        raise ValueError(f"`mlp_activation` must be 'gelu' or 'linear', got {spec.mlp_activation!r}.")
    if spec.reference == "sample" and (spec.w1_ns is not None or spec.grad_phi_max_n is not None):
        raise ValueError(
            "`w1_ns` and `grad_phi_max_n` need an exact reference ('gaussian' or 'qmc'): with "
            "reference='sample' every quantity is measured at every n of `ns`."
        )
    if spec.w1_ns is not None and (
        not isinstance(spec.w1_ns, tuple) or not spec.w1_ns or any(int(n) < 1 for n in spec.w1_ns)
    ):
        raise ValueError(f"`w1_ns` must be None or a non-empty tuple of positive context sizes, got {spec.w1_ns!r}.")
    if spec.grad_phi_max_n is not None and int(spec.grad_phi_max_n) < 1:
        raise ValueError(f"`grad_phi_max_n` must be None or >= 1, got {spec.grad_phi_max_n!r}.")
    if spec.reference == "gaussian" and (
        spec.field != "attention"
        or spec.population != "gaussian"
        or (spec.mlp_width and spec.mlp_activation != "linear")
    ):
        raise ValueError(
            "`reference`='gaussian' needs field='attention', population='gaussian' and no MLP or "
            "mlp_activation='linear' (only then is the infinite-context flow Gaussian)."
        )
    return spec


def prefix_weights(n, size: int, dtype=None) -> jax.Array:
    """``(size,)`` weights 1/n on the first ``n`` atoms and exactly 0 after (``n`` may be traced)."""
    if is_concrete(n) and not 1 <= int(n) <= int(size):
        raise ValueError(f"`n` must be in [1, size = {size}], got {n!r}.")
    dtype = dtype or jnp.result_type(float)
    keep = jnp.arange(size) < n
    return jnp.where(keep, 1.0 / jnp.asarray(n, dtype), 0.0).astype(dtype)


def build_model(spec: ChaosSpec, key, reference=None) -> AbstractCFM:
    """The model of ``spec``: a random transformer, or the control field around ``reference``."""
    dtype = jnp.result_type(float)
    if spec.field == "attention":
        return Transformer.init(
            key,
            spec.dim,
            heads=spec.heads,
            mlp_width=spec.mlp_width,
            layers=spec.layers,
            qk_scale=spec.qk_scale,
            v_scale=spec.v_scale,
            activation=linear if spec.mlp_activation == "linear" else jax.nn.gelu,
            dtype=dtype,
        )
    field = W1ControlField.create(EmpiricalMeasure(reference), relative_epsilon=spec.relative_epsilon)
    return CFM(field, {"c": jnp.full((spec.layers,), spec.control_strength, dtype)}, spec.dim)


def adjoint_states(model, x0, context, y, probes=None, *, throw: bool = True):
    """(ps (S, B, d), probe_grads (S, P, d) or None) at the layer boundaries, batch-mean loss.

    The discrete adjoint of :func:`cfm_jax.adjoint_trajectories` (the default; ``throw`` as there).
    """
    sol = adjoint_trajectories(model, x0, as_measure(context), y, probes=probes, throw=throw)
    return sol.ps, sol.probe_grads


def token_adjoint_states(model, xs, zs, weights, y) -> jax.Array:
    """``(L + 1, B, d)`` token covectors p_l of the batch-mean loss ½ mean_b ‖x_1 − y_b‖², one Euler
    step per layer, with the context held on its own trajectory (it does not depend on the tokens):

        p_L = (x_1 − y)/B,   p_l = p_{l+1} + h D_xV(x_l, μ_l)ᵀ p_{l+1},   h = 1/L,

    from the saved layer states ``xs (L + 1, B, d)``, ``zs (L + 1, n, d)`` and the context
    ``weights (n,)``. O(B·n) a layer, against O(n²) for the particle adjoints of
    :func:`cfm_jax.adjoint_trajectories`, whose ``ps`` it equals (``tests/test_chaos.py``).
    """
    return token_covectors(model, xs, zs, weights, y)


def _system(
    model, x0, context: EmpiricalMeasure, y=None, probes=None, adjoint: bool = False, throw: bool = False
) -> dict:
    """Trajectories of one system at the layer boundaries: xs, zs, the weights (and ps, pg).

    ``throw``: value checks (``cfm_jax.forward``); off by default, for the sweeps' own inputs, so
    that their programs can be stored by the persistent compilation cache.
    """
    sol = forward(model, x0, context, saveat=SaveAt(layers=True), throw=throw)
    assert sol.contexts is not None
    out = {"xs": sol.xs, "zs": sol.contexts.points, "w": context.weights}
    if adjoint and y is not None:
        out["ps"], out["pg"] = adjoint_states(model, x0, context, y, probes, throw=throw)
    return out


def _w1_path(zs_a, wa, zs_b, wb, relative_epsilon):
    """W1 between two weighted context trajectories (S, n, d) and (S, m, d) at every depth."""

    def one(za, zb):
        return wasserstein1(EmpiricalMeasure(za, wa), EmpiricalMeasure(zb, wb), relative_epsilon=relative_epsilon)

    return jax.vmap(one)(zs_a, zs_b)


def _compare(a: dict, b: dict, *, coupled: bool, w1_size, relative_epsilon) -> dict:
    """Deviation trajectories between two systems from :func:`_system` (``b`` the reference)."""
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
        out["w1"] = _w1_path(za, wa, b["zs"][:, :w1_size], wb, relative_epsilon)
    if "ps" in a and "ps" in b:
        B = a["xs"].shape[1]
        out["adjoint"] = B * jnp.linalg.norm(a["ps"] - b["ps"], axis=-1)
        if a.get("pg") is not None and b.get("pg") is not None:
            out["grad_phi"] = jnp.max(jnp.linalg.norm(a["pg"] - b["pg"], axis=-1), axis=-1)
    return out


def coupled_deviations(
    model: AbstractCFM,
    x0,
    context,
    reference,
    *,
    y=None,
    probes=None,
    coupled: bool = True,
    w1_size: int | None = None,
    relative_epsilon: float = 0.01,
    adjoint: bool = True,
    throw: bool = True,
) -> dict:
    """Deviations between two systems at every layer boundary (trajectories, not sups).

    Args:
        model: the CFM (one step per layer, explicit Euler: the residual network).
        x0: ``(B, d)`` target tokens shared by both systems.
        context: ``(n, d)`` points (uniform weights) or an :class:`EmpiricalMeasure`, whose atoms
            may carry weight exactly 0 (padding; see :func:`prefix_weights`).
        reference: ``(n_ref, d)`` reference points (uniform weights).
        y: ``(B, d)`` loss targets; with ``adjoint`` the adjoints are compared too.
        probes: ``(P, d)`` fixed points for ∇φ.
        coupled: ``context`` is the prefix of ``reference`` (synchronous coupling), so the
            particles can be compared one by one.
        w1_size: when set, W1(μ_s, μ̂_s) with μ̂_s the first ``w1_size`` reference particles
            (and, when not ``coupled``, μ_s truncated to its first ``w1_size`` particles too).
        throw: check the values of the inputs inside compiled code (``cfm_jax.forward``).

    Returns:
        dict with ``ss (S,)``, ``token (S, B)``, and where applicable ``context (S,)``,
        ``w1 (S,)``, ``adjoint (S, B)`` (per-token adjoint, i.e. B·p for the batch-mean loss),
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
    if w1_size is not None and not 1 <= int(w1_size) <= w1_max:
        raise ValueError(f"`w1_size` must be in [1, {w1_max}], got {w1_size!r}.")
    a = _system(model, x0, context, y, probes, adjoint, throw)
    b = _system(model, x0, reference, y, probes, adjoint, throw)
    out = _compare(a, b, coupled=coupled, w1_size=w1_size, relative_epsilon=relative_epsilon)
    out["ss"] = jnp.arange(a["xs"].shape[0], dtype=a["xs"].dtype) / model.num_layers
    return out


def _sups(dev: dict) -> dict:
    """sup over depth (then mean over target tokens) of every deviation trajectory."""
    res = {}
    for k, v in dev.items():
        if k == "ss":
            continue
        s = jnp.max(v, axis=0)
        res[k] = jnp.mean(s) if s.ndim else s
    return res


def seed_inputs(spec: ChaosSpec, key):
    """(model key, reference, second reference, x0, y, probes) of one seed (pure in ``key``)."""
    dtype = jnp.result_type(float)
    k_model, k_ref, k_ref2, k_x, k_y, k_probe = jax.random.split(key, 6)
    law = spec.population_law()
    ref = law(k_ref, spec.n_ref).astype(dtype)
    ref2 = law(k_ref2, spec.n_ref).astype(dtype)
    x0 = law(k_x, spec.batch).astype(dtype)
    y = law(k_y, spec.batch).astype(dtype)
    probes = ball_probes(k_probe, spec.num_probes, spec.dim, spec.radius, dtype)
    return k_model, ref, ref2, x0, y, probes


def seed_deviations(spec: ChaosSpec, key, *, padded: bool = True) -> dict:
    """Sup-over-depth deviations for one seed, every n of ``spec.ns`` (pure in ``key``).

    The reference (first ``n_ref`` draws) is solved once; each n-point system starts from its
    first n points. ``padded`` (default): one n-system of size max(ns) with zero-weight atoms,
    mapped over the ns (one compiled body); otherwise one unpadded system per n (the check).
    ``floor_<quantity>`` compares the reference with an independent second reference (the
    proxy's own error). Model, references, targets and probes depend on ``key`` only, so the
    n-sweep uses common random numbers.

    Returns quantity -> ``(len(ns),)`` and ``floor_<quantity>`` -> scalar. With an exact
    reference (``spec.reference`` ``"gaussian"`` or ``"qmc"``) see :func:`exact_reference_deviations`.
    """
    if spec.reference != "sample":
        return exact_reference_deviations(spec, key)
    k_model, ref, ref2, x0, y, probes = seed_inputs(spec, key)
    model = build_model(spec, k_model, ref)
    use_adj = spec.adjoint and spec.field == "attention"
    w1_size = min(spec.w1_size, spec.n_ref) if spec.w1 else None
    eps = spec.relative_epsilon
    sys_ref = _system(model, x0, EmpiricalMeasure(ref), y, probes, use_adj)
    sys_ref2 = _system(model, x0, EmpiricalMeasure(ref2), y, probes, use_adj)

    def one(context):
        a = _system(model, x0, context, y, probes, use_adj)
        return _sups(_compare(a, sys_ref, coupled=True, w1_size=w1_size, relative_epsilon=eps))

    if padded:
        size = max(spec.ns)
        ns = jnp.asarray(spec.ns)
        out = jax.lax.map(lambda n: one(EmpiricalMeasure(ref[:size], prefix_weights(n, size, ref.dtype))), ns)
    else:
        per_n = [one(EmpiricalMeasure(ref[:n])) for n in spec.ns]
        out = {k: jnp.stack([r[k] for r in per_n]) for k in per_n[0]}
    floor = _sups(_compare(sys_ref2, sys_ref, coupled=False, w1_size=w1_size, relative_epsilon=eps))
    out.update({f"floor_{k}": v for k, v in floor.items()})
    return out


def size_buckets(ns) -> list[list[int]]:
    """The ns grouped for padding: a new group starts above 4× the group's smallest n, so a
    padded system costs at most ~16× its smallest member's and ~all of its largest's."""
    out: list[list[int]] = []
    for n in sorted(int(v) for v in ns):
        if out and n <= 4 * out[-1][0]:
            out[-1].append(n)
        else:
            out.append([n])
    return out


def wasserstein1_to_normal_1d(points, weights, mean, std) -> jax.Array:
    """Exact W1 between a weighted 1-D point measure and N(mean, std²), with no sample of the law.

    W1 = ∫₀¹ |F_μ^{-1}(u) − Q(u)| du with Q(u) = mean + std·Φ^{-1}(u): atom k (sorted) holds
    u ∈ [c_{k−1}, c_k] (cumulative weights), split where Q crosses it, at u* = Φ((x_k − mean)/std),
    and ∫_a^b Q du = mean·(b − a) + std·(g(a) − g(b)) with g = φ∘Φ^{-1} (g(0) = g(1) = 0).
    ``points``: ``(n, 1)`` or ``(n,)``; ``weights``: ``(n,)`` summing to 1 (zero-weight atoms
    allowed: they add nothing). Jit/vmap-able; O(n log n).
    """
    from jax.scipy.special import ndtr, ndtri

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


def quantity_reference(spec: ChaosSpec, quantity: str) -> str:
    """What ``quantity`` of ``spec`` is compared with: ``gaussian`` (the exact limit, floor 0),
    ``qmc`` (scrambled-Sobol points: ∇φ, and W1 in d >= 2, on Gaussian rows) or ``sample``."""
    if spec.reference == "gaussian" and (quantity == "grad_phi" or (quantity == "w1" and spec.dim > 1)):
        return "qmc"
    return spec.reference


def exact_reference_deviations(spec: ChaosSpec, key) -> dict:
    """:func:`seed_deviations` against the exact Gaussian limit or a QMC reference (module docstring).

    The n-point contexts are prefixes of one i.i.d. sample of max(ns) points (padded per
    :func:`size_buckets`); the reference moves those points passively for ``context``. Each
    quantity is measured at :meth:`ChaosSpec.quantity_ns` (W1 and ∇φ over their own sizes).
    Floors: 0 for the exact quantities, else two independent references (QMC) or QMC samples
    of μ̂_s (W1 in d >= 2).

    Gaussian rows: token, context, adjoint exact; W1 exact in d = 1
    (:func:`wasserstein1_to_normal_1d` against N(m_s, Σ_s)), else Sinkhorn against ``w1_size``
    Sobol points pushed by the exact flow; ∇φ (no closed form) against a QMC reference of
    ``n_ref`` points, with the same model.
    """
    dtype = jnp.result_type(float)
    k_model, k_ctx, k_ref, k_ref2, k_x, k_y, k_probe = jax.random.split(key, 7)
    law = spec.population_law()
    N = max(spec.ns)
    use_adj = spec.adjoint and spec.field == "attention"
    w1_ns = spec.quantity_ns("w1") if spec.w1 else ()
    probe_ns = spec.quantity_ns("grad_phi") if use_adj and spec.num_probes else ()
    z = law(k_ctx, max((N, *w1_ns))).astype(dtype)
    x0 = law(k_x, spec.batch).astype(dtype)
    y = law(k_y, spec.batch).astype(dtype)
    probes = ball_probes(k_probe, spec.num_probes, spec.dim, spec.radius, dtype)
    w1_size = min(spec.w1_size, spec.n_ref) if spec.w1 else None
    eps = spec.relative_epsilon
    B = spec.batch
    save = SaveAt(layers=True)
    floor = {}
    exact_w1 = spec.reference == "gaussian" and spec.dim == 1
    if spec.reference == "gaussian":
        model = build_model(spec, k_model)
        mean, scale = law.mean, law.scale  # pyright: ignore[reportAttributeAccessIssue]  (a Gaussian population)
        mu = GaussianMeasure.unchecked(mean.astype(dtype), scale**2 * jnp.eye(spec.dim, dtype=dtype))
        W = 0 if (w1_size is None or exact_w1) else w1_size
        q = [mu.sample(k, W, qmc=True) for k in (k_ref, k_ref2)] if W else []
        sol = gaussian_flow(model, jnp.concatenate([x0, z[:N], *q]), mu, saveat=save, throw=False)
        xs = sol.xs
        assert xs is not None and sol.contexts is not None
        ref = {"xs": xs[:, :B], "passive": xs[:, B : B + N], "zs": xs[:, B + N : B + N + W]}
        ref["means"], ref["stds"] = sol.contexts.mean[:, 0], jnp.sqrt(sol.contexts.cov[:, 0, 0])
        if W:
            wq = jnp.full((W,), 1.0 / W, dtype)
            floor["w1"] = jnp.max(_w1_path(xs[:, B + N + W :], wq, ref["zs"], wq, eps))
        elif w1_size is not None:
            floor["w1"] = jnp.zeros((), dtype)
        floor.update(token=jnp.zeros((), dtype), context=jnp.zeros((), dtype))
        if use_adj:
            ref["ps"] = token_adjoint(model, x0, mu, y, throw=False)[1]
            floor["adjoint"] = jnp.zeros((), dtype)
        if probe_ns:  # ∇φ̂ has no closed form: a QMC reference of n_ref points (two, for its floor)
            r1 = law(jax.random.fold_in(k_ref, 1), spec.n_ref, qmc=True).astype(dtype)
            r2 = law(jax.random.fold_in(k_ref2, 1), spec.n_ref, qmc=True).astype(dtype)
            g1 = _system(model, x0, EmpiricalMeasure(r1), y, probes, True)
            g2 = _system(model, x0, EmpiricalMeasure(r2), y, probes, True)
            ref["pg"] = g1["pg"]
            floor["grad_phi"] = _sups(_compare(g2, g1, coupled=False, w1_size=None, relative_epsilon=eps))["grad_phi"]
    else:
        r1 = law(k_ref, spec.n_ref, qmc=True).astype(dtype)
        r2 = law(k_ref2, spec.n_ref, qmc=True).astype(dtype)
        model = build_model(spec, k_model, r1)
        systems = []
        for r in (r1, r2):  # the particle adjoints only where ∇φ is wanted, else the token adjoint alone
            sys_r = _system(model, x0, EmpiricalMeasure(r), y, probes, bool(probe_ns))
            if use_adj and not probe_ns:
                sys_r["ps"] = token_adjoint_states(model, sys_r["xs"], sys_r["zs"], sys_r["w"], y)
            systems.append(sys_r)
        ref, ref2 = systems
        ref["passive"] = forward(model, z[:N], EmpiricalMeasure(r1), saveat=save, throw=False).xs
        floor = _sups(_compare(ref2, ref, coupled=False, w1_size=w1_size, relative_epsilon=eps))

    def one(context, size, with_probes):
        a = _system(model, x0, context, y, probes, with_probes)
        if use_adj:
            a["ps"] = token_adjoint_states(model, a["xs"], a["zs"], context.weights, y)
        out = {
            "token": jnp.linalg.norm(a["xs"] - ref["xs"], axis=-1),
            "context": jnp.linalg.norm(a["zs"] - ref["passive"][:, :size], axis=-1) @ a["w"],
        }
        if use_adj:
            out["adjoint"] = B * jnp.linalg.norm(a["ps"] - ref["ps"], axis=-1)
            if with_probes:
                out["grad_phi"] = jnp.max(jnp.linalg.norm(a["pg"] - ref["pg"], axis=-1), axis=-1)
        return _sups(out)

    def one_w1(context):
        contexts = forward(model, x0, context, saveat=save, throw=False).contexts
        assert contexts is not None
        zs = contexts.points
        if exact_w1:
            path = jax.vmap(wasserstein1_to_normal_1d, in_axes=(0, None, 0, 0))(
                zs, context.weights, ref["means"], ref["stds"]
            )
        else:
            assert w1_size is not None
            wb = jnp.full((w1_size,), 1.0 / w1_size, dtype)
            path = _w1_path(zs, context.weights, ref["zs"][:, :w1_size], wb, eps)
        return {"w1": jnp.max(path)}

    def over(ns, fn):
        """fn(context, size) for every n of ``ns`` (padded per size bucket): n -> results."""
        per_n = {}
        for bucket in size_buckets(ns):
            size = bucket[-1]
            res = jax.lax.map(
                lambda n, size=size: fn(EmpiricalMeasure(z[:size], prefix_weights(n, size, dtype)), size),
                jnp.asarray(bucket),
            )
            per_n.update({n: {k: v[i] for k, v in res.items()} for i, n in enumerate(bucket)})
        return per_n

    cut = max(probe_ns) if probe_ns else 0
    per_n = over([n for n in spec.ns if n <= cut], lambda c, size: one(c, size, True))
    per_n.update(over([n for n in spec.ns if n > cut], lambda c, size: one(c, size, False)))
    if w1_ns:
        for n, r in over(w1_ns, lambda c, size: one_w1(c)).items():
            per_n.setdefault(n, {}).update(r)
    out = {
        q: jnp.stack([per_n[n][q] for n in spec.quantity_ns(q)])
        for q in QUANTITIES
        if spec.quantity_ns(q) and all(q in per_n.get(n, {}) for n in spec.quantity_ns(q))
    }
    out.update({f"floor_{k}": v for k, v in floor.items() if k in out})
    return out


@functools.lru_cache(maxsize=64)
def _batched(spec: ChaosSpec, padded: bool, devices: tuple = ()):
    """``jit(vmap(seed_deviations))``; with several ``devices``, the seeds split across them."""
    body = jax.vmap(lambda k: seed_deviations(spec, k, padded=padded))
    if len(devices) <= 1:
        return jax.jit(body)
    mesh = Mesh(np.asarray(devices), ("seeds",))
    # Seeds are independent: no collective, each device runs its block of seeds. check_vma is off
    # because the VJPs inside (adjoints, Sinkhorn) pull varying cotangents back to unvarying
    # constants of the model.
    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("seeds"), out_specs=P("seeds"), check_vma=False))


@functools.lru_cache(maxsize=16)
def _single(spec: ChaosSpec):
    return jax.jit(lambda k: seed_deviations(spec, k))


def seed_devices(seeds: int, devices=None) -> tuple:
    """The devices :func:`run_seeds` splits ``seeds`` across: the first k of ``devices`` (default
    ``jax.local_devices()``), k the largest count <= their number that divides ``seeds``."""
    if int(seeds) < 1:
        raise ValueError(f"`seeds` must be >= 1, got {seeds!r}.")
    devices = tuple(jax.local_devices() if devices is None else devices)
    if not devices:
        raise ValueError("`devices` must name at least one device.")
    k = max(c for c in range(1, len(devices) + 1) if int(seeds) % c == 0)
    return devices[:k]


def run_seeds(spec: ChaosSpec, seeds: int, base_seed: int = 0, *, padded: bool = True, devices=None) -> dict:
    """All seeds at once (``jit(vmap)``); returns quantity -> NumPy ``(seeds, len(ns))`` (floors ``(seeds,)``).

    With several local devices (GPUs, or CPU devices from ``jax_num_cpu_devices``; the CLI makes
    one per core) the seeds are split across them (:func:`seed_devices`); every seed's numbers
    are those of one device to round-off. ``devices``: the devices to use (default: all local).
    """
    validate_spec(spec)
    devices = seed_devices(seeds, devices)  # also checks ``seeds``
    keys = jax.random.split(jax.random.key(base_seed), seeds)
    out = jax.block_until_ready(_batched(spec, padded, devices)(keys))
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def run_seeds_loop(spec: ChaosSpec, seeds: int, base_seed: int = 0) -> dict:
    """Same as :func:`run_seeds` with a Python loop over seeds (the benchmark's baseline)."""
    validate_spec(spec)
    keys = jax.random.split(jax.random.key(base_seed), seeds)
    fn = _single(spec)
    rows = [jax.block_until_ready(fn(k)) for k in keys]
    return {k: np.asarray([r[k] for r in rows], dtype=np.float64) for k in rows[0]}


def uniform_attention_deviation(model: Transformer, mean_difference) -> jax.Array:
    """Closed-form token deviation x_l − x̂_l for K = 0 (uniform attention) and no MLP.

    Then V(x, μ) = M_l · mean(μ) with M_l = Σ_h V_{l,h}; the context mean obeys
    m_{l+1} = (I + M_l/L) m_l and x_{l+1} = x_l + M_l m_l / L, so for the Euler scheme

        x_l − x̂_l = (Π_{k<l} (I + M_k/L) − I)(m_0 − m̂_0),

    independent of x_0. Returns ``(L + 1, d)``.
    """
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
    "ChaosSpec",
    "QUANTITIES",
    "adjoint_states",
    "build_model",
    "coupled_deviations",
    "exact_reference_deviations",
    "quantity_reference",
    "expected_slope",
    "prefix_weights",
    "run_seeds",
    "run_seeds_loop",
    "seed_deviations",
    "seed_devices",
    "seed_inputs",
    "size_buckets",
    "uniform_attention_deviation",
    "validate_spec",
    "wasserstein1_to_normal_1d",
    "wasserstein_slope",
]
