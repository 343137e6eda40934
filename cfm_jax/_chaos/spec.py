"""What a propagation-of-chaos experiment measures: its spec, the paper's rates, and its buckets.

A :class:`ChaosSpec` fixes one (field, population, d) experiment and the context sizes n of each
quantity (:meth:`ChaosSpec.quantity_ns`). :func:`buckets` groups those sizes into the compiled
programs of a sweep (:mod:`cfm_jax._chaos.programs`): the n measured by the same set of
quantities are padded, per :func:`size_buckets`, to the largest n of their group.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Literal

import jax
import jax.numpy as jnp

from .._control import control_field
from .._measures import EmpiricalMeasure
from .._paths import AbstractCFM, PiecewiseConstantCFM, Transformer
from .._populations import PopulationName, make_population

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


def _check_quantity(quantity) -> None:
    if not isinstance(quantity, str) or quantity not in QUANTITIES:
        raise ValueError(f"`quantity` must be one of {list(QUANTITIES)}, got {quantity!r}.")


def wasserstein_slope(intrinsic_dim: int) -> float:
    """Empirical W1 rate exponent: −1/d' for d' ≥ 2 (with a log at d' = 2), −1/2 for d' = 1."""
    if isinstance(intrinsic_dim, bool) or int(intrinsic_dim) != intrinsic_dim or int(intrinsic_dim) < 1:
        raise ValueError(f"`intrinsic_dim` must be an integer >= 1, got {intrinsic_dim!r}.")
    return -1.0 / max(2, int(intrinsic_dim))


def expected_slope(field: Field, quantity: str, intrinsic_dim: int) -> float:
    """The paper's rate: −1/2 for attention's token-level quantities, −1/d' for W1 and the control."""
    _check_quantity(quantity)
    if quantity == "w1" or field == "control":
        return wasserstein_slope(intrinsic_dim)
    return -0.5


@dataclasses.dataclass(frozen=True)
class ChaosSpec:
    """One (field, population, d, ns) experiment; hashable (the compiled reference program's key).

    ``field``: ``"attention"`` (a random :class:`~cfm_jax.Transformer`) or ``"control"``
    (:class:`~cfm_jax.W1ControlField` with ν = the reference sample). Populations are scaled to
    unit second moment (E‖z‖² = 1) so that constants can be compared across d.
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
        """The context sizes at which ``quantity`` is measured (the W1 policy of ``docs/chaos.md``):
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

    @property
    def uses_adjoint(self) -> bool:
        """Whether the adjoint quantities (p, ∇φ) are measured: attention with ``adjoint``."""
        return bool(self.adjoint) and self.field == "attention"

    def measured(self) -> tuple[str, ...]:
        """The quantities this spec measures, in :data:`QUANTITIES` order."""
        probes = self.uses_adjoint and self.num_probes >= 1
        on = {
            "token": True,
            "context": True,
            "w1": bool(self.w1),
            "adjoint": self.uses_adjoint,
            "grad_phi": probes and bool(self.quantity_ns("grad_phi")),
        }
        return tuple(q for q in QUANTITIES if on[q])


def _is_count(value, low: int = 1) -> bool:
    """Whether ``value`` is an integer (Python or NumPy, not a bool) >= ``low``: checked as it is used,
    never as ``int(value)`` (2.5 would pass as 2 and reach a shape as 2.5)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= low


def _sizes(name: str, value, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, tuple) or not value or not all(_is_count(n) for n in value):
        none = "None or " if optional else ""
        raise ValueError(f"`{name}` must be {none}a non-empty tuple of positive context sizes, got {value!r}.")


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
        if not _is_count(value):
            raise ValueError(f"`{name}` must be an integer >= 1, got {value!r}.")
    _sizes("ns", spec.ns)
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
    _sizes("w1_ns", spec.w1_ns, optional=True)
    if spec.grad_phi_max_n is not None and not _is_count(spec.grad_phi_max_n):
        raise ValueError(f"`grad_phi_max_n` must be None or an integer >= 1, got {spec.grad_phi_max_n!r}.")
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


def quantity_reference(spec: ChaosSpec, quantity: str) -> str:
    """What ``quantity`` of ``spec`` is compared with: ``gaussian`` (the exact limit, floor 0),
    ``qmc`` (scrambled-Sobol points: ∇φ, and W1 in d >= 2, on Gaussian rows) or ``sample``."""
    _check_quantity(quantity)
    if spec.reference == "gaussian" and (quantity == "grad_phi" or (quantity == "w1" and spec.dim > 1)):
        return "qmc"
    return spec.reference


def build_model(spec: ChaosSpec, key, reference=None) -> AbstractCFM:
    """The model of ``spec``: a random transformer, or the control field around ``reference`` (its
    values checked, a failed check naming ``nu``)."""
    return model_of(spec, key, reference)


def model_of(spec: ChaosSpec, key, reference=None, *, checked: bool = True) -> AbstractCFM:
    """:func:`build_model`; ``checked=False`` leaves out the control field's in-program checks of a
    traced ``reference`` (the sweeps build it from a sample they drew: a program with a check inside
    a caller's ``jit`` holds a host callback, which the persistent compilation cache never stores)."""
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
            activation=jax.nn.identity if spec.mlp_activation == "linear" else jax.nn.gelu,
            dtype=dtype,
        )
    if reference is None:
        raise ValueError("the control field needs the `reference` sample it is built around.")
    field = control_field(EmpiricalMeasure(reference), relative_epsilon=spec.relative_epsilon, checked=checked)
    return PiecewiseConstantCFM(field, {"c": jnp.full((spec.layers,), spec.control_strength, dtype)}, spec.dim)


def size_buckets(ns) -> list[list[int]]:
    """The ns grouped for padding: a new group starts above 4× the group's smallest n, so a
    padded system costs at most ~16× its smallest member's and ~all of its largest's."""
    sizes = sorted(int(v) for v in ns)
    if sizes and sizes[0] < 1:
        raise ValueError(f"`ns` must be context sizes >= 1, got {sizes[0]}.")
    out: list[list[int]] = []
    for n in sizes:
        if out and n <= 4 * out[-1][0]:
            out[-1].append(n)
        else:
            out.append([n])
    return out


@dataclasses.dataclass(frozen=True)
class Bucket:
    """The context sizes ``ns`` that one compiled program measures, each padded to ``size`` atoms
    (weights 1/n on the first n, exactly 0 after), with the same measurements:

    - ``core``: token, context and, with the adjoint, p (token-only adjoint on exact references,
      the particle adjoints' p on sample references);
    - ``probes``: the particle adjoints at the probe points (∇φ);
    - ``w1``: W1 between the n-point and the reference measure.
    """

    size: int
    ns: tuple[int, ...]
    core: bool
    probes: bool
    w1: bool


def buckets(spec: ChaosSpec, padded: bool = True) -> tuple[Bucket, ...]:
    """The buckets of ``spec``'s sweep: the n are grouped by the measurements made at them
    (:meth:`ChaosSpec.quantity_ns`), then by :func:`size_buckets` (``padded``) or one per n.

    A sweep compiles one program per bucket and one for the reference (per seed count and
    device set); every seed runs through them, and a configuration with the same shapes reuses
    them. Example: ns = 16…4096 (×4 apart) with ∇φ up to 256 gives [16, 64] (with ∇φ),
    [256] (with ∇φ) and [1024, 4096].
    """
    if not isinstance(spec, ChaosSpec):
        raise ValueError(f"`spec` must be a ChaosSpec, got {type(spec).__name__}.")
    measured = spec.measured()
    core = set(spec.ns)
    probes = set(spec.quantity_ns("grad_phi")) if "grad_phi" in measured else set()
    w1 = set(spec.quantity_ns("w1")) if "w1" in measured else set()
    groups: dict[tuple[bool, bool, bool], list[int]] = {}
    for n in sorted({int(n) for n in core | w1}):
        groups.setdefault((n in core, n in probes, n in w1), []).append(n)
    out = []
    for (c, p, w), ns in sorted(groups.items(), reverse=True):
        for group in size_buckets(ns) if padded else [[n] for n in ns]:
            out.append(Bucket(size=group[-1], ns=tuple(group), core=c, probes=p, w1=w))
    return tuple(out)


__all__ = [
    "QUANTITIES",
    "Bucket",
    "ChaosSpec",
    "Field",
    "Reference",
    "buckets",
    "build_model",
    "expected_slope",
    "quantity_reference",
    "size_buckets",
    "validate_spec",
    "wasserstein_slope",
]
