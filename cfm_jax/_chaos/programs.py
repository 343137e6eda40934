"""The compiled programs of a propagation-of-chaos sweep: one per bucket, one for the reference.

For a spec and its seeds, :func:`run_seeds` runs

1. the **reference program** (:func:`cfm_jax._chaos.references.reference`): every seed's inputs,
   reference trajectories and floors;
2. for every bucket of :func:`~cfm_jax._chaos.spec.buckets`, for every n of it, the **bucket
   program**: the n-point system on the first ``size`` points with weights 1/n on the first n and
   exactly 0 after (zero-weight atoms move with the flow but act on nothing, so the deviations
   equal the unpadded system's to round-off), its adjoints, and its deviations from the
   reference, sup over depth.

Each program holds one system's computation, not a sweep's: the loops over buckets and their n
are Python loops outside it, the two references of a floor one ``lax.map`` body inside it. Both
are compiled once, at their definition (``eqx.filter_jit``), with static arguments that are
shapes and structure only: the reference program's are its :class:`ReferenceKey`, the bucket
program's its :class:`Measure` (padded size and measurements); n and the Sinkhorn ε are traced.
So a sweep compiles ``1 + len(buckets(spec))`` programs for a given
number of seeds and devices, and every seed, every n of a bucket and every configuration of the
same shapes reuses them (``tests/test_chaos_programs.py`` counts them). The seeds are mapped
and, with several local devices, split across them (``shard_map``; no collective).
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

from .._gradients import token_covectors
from .._measures import EmpiricalMeasure
from .._regime import AttentionRegime, warn_if_heavy_tailed
from .batching import _check_batch_size, map_seeds, seed_batch_size
from .deviations import _prefix_weights, sups, system, w1_path, w1_to_normal_1d
from .references import ReferenceKey, reference, seed_regime
from .spec import Bucket, ChaosSpec, buckets, validate_spec


@dataclasses.dataclass(frozen=True)
class Measure:
    """The static arguments of a bucket program: the padded ``size`` and what it measures.

    ``core``: token and context (and p); ``probes``: the particle adjoints at the probes (∇φ,
    and p on sample references); ``token_adjoint``: p by the token-only adjoint; ``w1``: W1 to
    the reference's points (``"points"``) or to its exact 1-D law (``"normal"``), or none.
    """

    size: int
    core: bool
    probes: bool
    token_adjoint: bool
    w1: str | None

    @classmethod
    def of(cls, spec: ChaosSpec, bucket: Bucket) -> Measure:
        exact = spec.reference != "sample"
        w1 = None
        if bucket.w1:
            w1 = "normal" if spec.reference == "gaussian" and spec.dim == 1 else "points"
        token = exact and spec.uses_adjoint and bucket.core
        return cls(bucket.size, bucket.core, bucket.probes, token, w1)


def over_seeds(fn: Callable, devices: tuple, per_seed, *shared, batch_size: int | None = None):
    """``fn(one seed's per_seed, *shared)`` for every seed on the leading axis of ``per_seed``
    (:func:`map_seeds` with ``batch_size``); with several ``devices`` the seeds are split across
    them (each device its block of seeds)."""
    body = lambda per, *sh: map_seeds(lambda p: fn(p, *sh), per, batch_size=batch_size)  # noqa: E731
    if len(devices) <= 1:
        return body(per_seed, *shared)
    mesh = Mesh(np.asarray(devices), ("seeds",))
    dyn, static = eqx.partition(per_seed, eqx.is_array)
    out_static = []

    def local(dyn, shared):
        arrays, rest = eqx.partition(body(eqx.combine(dyn, static), *shared), eqx.is_array)
        out_static.append(rest)
        return arrays

    # Seeds are independent: no collective. check_vma is off because the VJPs inside (adjoints,
    # Sinkhorn) pull varying cotangents back to unvarying constants of the model.
    arrays = jax.shard_map(local, mesh=mesh, in_specs=(P("seeds"), P()), out_specs=P("seeds"), check_vma=False)(
        dyn, shared
    )
    return eqx.combine(arrays, out_static[-1])


@eqx.filter_jit
def reference_program(key: ReferenceKey, seed_keys, devices: tuple, batch_size: int | None = None):
    """(inputs, reference, floors) of every seed (:func:`~cfm_jax._chaos.references.reference`)."""
    return over_seeds(lambda k: reference(key, k), devices, seed_keys, batch_size=batch_size)


def measure(m: Measure, inputs: dict, ref: dict, n, eps) -> dict:
    """One seed's sup-over-depth deviations of the n-point system padded to ``m.size`` atoms."""
    model, x0, y = inputs["model"], inputs["x0"], inputs["y"]
    dtype = x0.dtype
    context = EmpiricalMeasure.unchecked(inputs["points"][: m.size], _prefix_weights(n, m.size, dtype))
    a = system(model, x0, context, y, inputs["probes"], m.probes)  # the particle adjoints with the probes
    out = {}
    if m.core:
        if m.token_adjoint:
            a["ps"] = token_covectors(model, a["xs"], a["zs"], context.weights, y)
        out["token"] = jnp.linalg.norm(a["xs"] - ref["xs"], axis=-1)
        out["context"] = jnp.linalg.norm(a["zs"] - ref["passive"][:, : m.size], axis=-1) @ context.weights
        if a.get("ps") is not None:
            out["adjoint"] = x0.shape[0] * jnp.linalg.norm(a["ps"] - ref["ps"], axis=-1)
        if m.probes:
            out["grad_phi"] = jnp.max(jnp.linalg.norm(a["pg"] - ref["pg"], axis=-1), axis=-1)
    if m.w1 == "normal":
        out["w1"] = jax.vmap(w1_to_normal_1d, in_axes=(0, None, 0, 0))(
            a["zs"], context.weights, ref["means"], ref["stds"]
        )
    elif m.w1 == "points":
        W = ref["w1_points"].shape[1]
        wb = jnp.full((W,), 1.0 / W, dtype)
        out["w1"] = w1_path(a["zs"], context.weights, ref["w1_points"], wb, eps)
    return sups(out)


@eqx.filter_jit
def bucket_program(m: Measure, inputs: dict, ref: dict, n, eps, devices: tuple, batch_size: int | None = None) -> dict:
    """:func:`measure` for every seed (n and ε traced: one program for every n of the bucket)."""
    one = lambda per, n, eps: measure(m, per[0], per[1], n, eps)  # noqa: E731
    return over_seeds(one, devices, (inputs, ref), n, eps, batch_size=batch_size)


def program_count(spec: ChaosSpec, padded: bool = True) -> int:
    """Deprecated (``1 + len(buckets(spec, padded))``): the programs a sweep of ``spec`` compiles (for one
    number of seeds and set of devices): the reference program and one per bucket."""
    return 1 + len(buckets(spec, padded))


def deviations(spec: ChaosSpec, seed_keys, devices: tuple = (), padded: bool = True, batch_size: int | None = None):
    """(n -> quantity -> ``(seeds,)``, floor quantity -> ``(seeds,)``) through the programs."""
    batch_size = seed_batch_size() if batch_size is None else batch_size  # a static argument: resolved once
    inputs, ref, floors = reference_program(ReferenceKey.of(spec), seed_keys, tuple(devices), batch_size)
    eps = np.asarray(spec.relative_epsilon, np.dtype(jnp.result_type(float)))
    per_n: dict[int, dict] = {}
    for bucket in buckets(spec, padded):
        m = Measure.of(spec, bucket)
        for n in bucket.ns:
            res = bucket_program(m, inputs, ref, np.asarray(n, np.int32), eps, tuple(devices), batch_size)
            per_n.setdefault(n, {}).update(res)
    return per_n, floors


def assemble(spec: ChaosSpec, per_n: dict, floors: dict, stack) -> dict:
    """quantity -> ``stack`` of the per-n values over :meth:`ChaosSpec.quantity_ns` (last axis), and
    ``floor_<quantity>`` for the measured quantities that have a floor."""
    measured = spec.measured()
    out = {q: stack([per_n[n][q] for n in spec.quantity_ns(q)], axis=-1) for q in measured}
    out.update({f"floor_{q}": floors[q] for q in measured if q in floors})
    return out


def seed_devices(seeds: int, devices=None) -> tuple:
    """The devices :func:`run_seeds` splits ``seeds`` across: the first k of ``devices`` (default
    ``jax.local_devices()``), k the largest count <= their number that divides ``seeds``."""
    if isinstance(seeds, bool) or not isinstance(seeds, numbers.Integral) or int(seeds) < 1:
        raise ValueError(f"`seeds` must be an integer >= 1, got {seeds!r}.")
    devices = tuple(jax.local_devices() if devices is None else devices)
    if not devices:
        raise ValueError("`devices` must name at least one device.")
    k = max(c for c in range(1, len(devices) + 1) if int(seeds) % c == 0)
    return devices[:k]


def _seed_keys(seeds: int, base_seed: int):
    if isinstance(base_seed, bool) or not isinstance(base_seed, numbers.Integral) or base_seed < 0:
        raise ValueError(f"`base_seed` must be an integer >= 0, got {base_seed!r}.")
    return jax.random.split(jax.random.key(int(base_seed)), int(seeds))


def run_seeds(
    spec: ChaosSpec,
    seeds: int,
    base_seed: int = 0,
    *,
    padded: bool = True,
    devices=None,
    batch_size: int | None = None,
) -> dict:
    """All seeds at once; returns quantity -> NumPy ``(seeds, len(ns))`` (floors ``(seeds,)``).

    Each quantity over its own sizes (:meth:`ChaosSpec.quantity_ns`). Runs the
    ``1 + len(buckets(spec))`` programs of the module docstring, the seeds mapped (:func:`map_seeds`) and, with several
    local devices (GPUs, or CPU devices from ``jax_num_cpu_devices``; the CLI makes one per core),
    split across them (:func:`seed_devices`); every seed's numbers are those of one device to
    round-off. ``padded``: pad each bucket's n to its largest (default), else one program per n
    (the check). ``devices``: the devices to use (default: all local). ``batch_size``: the seeds
    a device vmaps together (:func:`map_seeds`; default :func:`seed_batch_size`, one at a time on a
    CPU, all at once on accelerators).

    Against the exact Gaussian limit (``reference="gaussian"``) it warns once per process
    ([`HeavyTailWarning`][cfm_jax.HeavyTailWarning]) when the seeds' models are in the heavy-tail
    regime at the population law, or their softmax's effective sample size at the largest n is
    below 100 points ([`warn_if_heavy_tailed`][cfm_jax.warn_if_heavy_tailed] of
    [`attention_regimes`][cfm_jax.chaos.attention_regimes]): the sweep will then measure a rate
    slower than $n^{-1/2}$, or none.
    """
    validate_spec(spec)
    devices = seed_devices(seeds, devices)  # also checks ``seeds``
    _check_batch_size(batch_size)
    if spec.reference == "gaussian":
        warn_if_heavy_tailed(attention_regimes(spec, seeds, base_seed), max(spec.ns))
    per_n, floors = deviations(spec, _seed_keys(seeds, base_seed), devices, padded, batch_size)
    host = lambda v: np.asarray(v, dtype=np.float64)  # noqa: E731
    per_n = {n: {q: host(v) for q, v in r.items()} for n, r in per_n.items()}
    return assemble(spec, per_n, {q: host(v) for q, v in floors.items()}, np.stack)


def seed_deviations(spec: ChaosSpec, key, *, padded: bool = True) -> dict:
    """Sup-over-depth deviations for one seed (pure in ``key``; jit-able: under ``jax.jit`` the
    programs are inlined into one).

    Returns quantity -> ``(len(quantity_ns(q)),)`` and ``floor_<quantity>`` -> scalar: the
    deviations of the n-point systems from the reference of ``spec.reference`` (``"sample"``: the
    first ``n_ref`` i.i.d. draws, whose prefixes are the n-point contexts; ``"qmc"`` and
    ``"gaussian"``: see :func:`exact_reference_deviations`), and the reference's floor. Model,
    references, targets and probes depend on ``key`` only, so the n-sweep uses common random
    numbers.
    """
    validate_spec(spec)
    per_n, floors = deviations(spec, key[None], (), padded)
    return jax.tree.map(lambda v: v[0], assemble(spec, per_n, floors, jnp.stack))


def exact_reference_deviations(spec: ChaosSpec, key) -> dict:
    r""":func:`seed_deviations` against the exact Gaussian limit or a QMC reference.

    The n-point contexts are prefixes of one i.i.d. sample of max(ns) points (padded per
    :func:`~cfm_jax.chaos.buckets`); the reference moves those points passively for ``context``.
    Each quantity is measured at :meth:`ChaosSpec.quantity_ns` ($W_1$ and $∇φ$ over their own sizes).
    Floors: 0 for the exact quantities, else two independent references (QMC) or QMC samples
    of $\hat μ_s$ ($W_1$ in d >= 2). Gaussian rows: token, context, adjoint exact; $W_1$ exact in d = 1
    (:func:`~cfm_jax.chaos.wasserstein1_to_normal_1d` against $N(m_s, Σ_s)$), else Sinkhorn against
    ``w1_size`` Sobol points pushed by the exact flow; $∇φ$ (no closed form) against a QMC
    reference of ``n_ref`` points, with the same model.
    """
    if spec.reference == "sample":
        raise ValueError("`spec.reference` must be 'gaussian' or 'qmc' here; use seed_deviations for 'sample'.")
    return seed_deviations(spec, key)


def attention_regimes(spec: ChaosSpec, seeds: int, base_seed: int = 0) -> AttentionRegime:
    """The attention regime ([`attention_regime`][cfm_jax.attention_regime]) of the models of a
    ``"gaussian"`` reference row: every field with a leading ``seeds`` axis (``rho (seeds, L, H)``,
    ``ess_fraction (seeds, L, H, B)``, …), for the models and target tokens x0 that
    [`run_seeds`][cfm_jax.chaos.run_seeds] draws with the same ``seeds`` and ``base_seed``, at the
    population law.

    One small program, apart from the sweep's: whether the sampled contexts of the row can
    approach the exact limit at $n^{-1/2}$ (see [`warn_if_heavy_tailed`][cfm_jax.warn_if_heavy_tailed]).
    """
    validate_spec(spec)
    if spec.reference != "gaussian":
        raise ValueError(f"`spec.reference` must be 'gaussian' (a Gaussian context law), got {spec.reference!r}.")
    seed_devices(seeds)  # checks ``seeds``
    return _regimes(ReferenceKey.of(spec).spec, _seed_keys(seeds, base_seed))


@eqx.filter_jit
def _regimes(spec: ChaosSpec, seed_keys) -> AttentionRegime:
    return jax.vmap(lambda k: seed_regime(spec, k))(seed_keys)


def run_seeds_loop(spec: ChaosSpec, seeds: int, base_seed: int = 0) -> dict:
    """Deprecated (a benchmark's baseline, written there): :func:`run_seeds` with a Python loop over
    seeds, one seed at a time through the same programs (compiled once for a single seed)."""
    validate_spec(spec)
    seed_devices(seeds)  # checks ``seeds``
    rows = [seed_deviations(spec, k) for k in _seed_keys(seeds, base_seed)]
    return {k: np.asarray([np.asarray(r[k]) for r in rows], dtype=np.float64) for k in rows[0]}


__all__ = [
    "Measure",
    "assemble",
    "attention_regimes",
    "bucket_program",
    "deviations",
    "exact_reference_deviations",
    "measure",
    "over_seeds",
    "program_count",
    "reference_program",
    "run_seeds",
    "run_seeds_loop",
    "seed_deviations",
    "seed_devices",
]
