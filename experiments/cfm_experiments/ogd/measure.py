"""The one OGD measurement: coupled runs of every seed at a ridge λ, and C on the region they visited.

A **task** (:class:`Task`) is an OGD problem family: how seed s draws its student and stream,
which context the population trajectory θ̂ sees (a sampled reference of n_ref points, or the
exact infinite-context limit of a Gaussian law, ``coupled_run(..., population=μ)``), its
gradient source and optimiser, and its sizes. :func:`measure` runs, for every seed s at once
(vmapped) and at ridge λ_s (traced),

1. the coupled run: the n-context trajectories θ^{(n)}_k (the first n context points) and θ̂_k,
   all on the same samples, recording ‖θ^{(n)}_k − θ̂_k‖_{L∞} at every step k = 1 … K;
2. the **pilot statistic** C: :func:`cfm_jax.ogd.estimate_lipschitz` on the region θ̂ visited
   (16 points θ̂_{k} at the end of 16 equal stretches of the run, 16 pairs of each kind,
   samples K, K + 1, … of the seed's stream — after the ones the run used —, pair key
   ``fold_in(key(0), s)``);
3. the task's extra statistics (:meth:`Task.extras`; e.g. the finite-time Lyapunov exponent).

**The ridge rule** (:func:`ridge`): each seed's λ = 0 run is its pilot, λ_c = 2C with C from
step 2 of that run, and a regime at ratio ρ runs at λ = ρ·λ_c (capped at 0.9/η for ρ ≥ 1; a
ratio below 1 that breaks η·λ < 1 is an error naming ``--eta``). The ablation's regimes are
ρ = 0, 1/8, 1.5; the curvature scan's ρ = ¼ … 4.

Steps 1 and 2 are two programs (:func:`coupled`, :func:`region_constant`), each compiled once at
its definition per task shape (dimensions, sizes, number of seeds) and reused for every λ, base
seed and regime; the extras are the task's own programs.
"""

from __future__ import annotations

import abc
import functools
import json
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array

from cfm_jax import (
    AbstractCFM,
    AbstractStream,
    GaussianMeasure,
    Sample,
    TeacherStudentStream,
    Transformer,
    forward,
    loss_and_grad,
    make_population,
    ogd,
)

#: λ_c = LAMBDA_C_FACTOR · C (the first paper's threshold).
LAMBDA_C_FACTOR = 2.0
#: the ablation's regimes: λ/λ_c.
REGIMES = {"zero": 0.0, "weak": 1 / 8, "strong": 1.5}
#: a ridge at ratio >= 1 is capped at CAP/η (η·λ must stay below 1).
CAP = 0.9
#: visited points and pairs of the pilot statistic.
PILOT_POINTS = 16


def ridge(C: float, ratio: float, eta: float) -> float:
    """λ = ratio · λ_c with λ_c = 2C; min(λ, 0.9/η) for ratio >= 1; a ValueError naming ``--eta``
    when a ratio below 1 breaks η·λ < 1 (the sub-threshold regime cannot be run at that η)."""
    lam = ratio * LAMBDA_C_FACTOR * C
    if ratio >= 1:
        return min(lam, CAP / eta)
    if not eta * lam < 1:
        raise ValueError(
            f"--eta {eta}: the ridge {ratio:g}·λ_c = {lam:.4g} (λ_c = 2C from the λ = 0 pilot, C = {C:.4g}) "
            f"needs η·λ < 1, i.e. --eta below {1 / lam:.4g}; lower --eta."
        )
    return lam


def k_c(eta: float) -> int:
    """k_c = 1/η (rounded, >= 1): the first paper's horizon."""
    return max(1, round(1 / eta))


class PopulationStream(AbstractStream):
    """Sample k: x_0 ~ N(0, I) ``(batch, d)``, ``context_size`` i.i.d. points of μ, and y = the
    teacher's x_1 on the population μ itself (its exact infinite-context output)."""

    teacher: AbstractCFM
    population: GaussianMeasure
    key: Array
    batch: int = eqx.field(static=True)
    context_size: int = eqx.field(static=True)

    def __call__(self, k) -> Sample:
        kx, kz = jax.random.split(jax.random.fold_in(self.key, k))
        mu = self.population
        x0 = jax.random.normal(kx, (self.batch, mu.dim), mu.mean.dtype)
        chol = jnp.linalg.cholesky(mu.cov)
        z = mu.mean + jax.random.normal(kz, (self.context_size, mu.dim), mu.mean.dtype) @ chol.T
        y = forward(self.teacher, x0, mu, throw=False).x1  # generated inputs: cacheable, unchecked
        return Sample(x0, z, jax.lax.stop_gradient(y))


#: the gradient of every run: no value checks on the inputs the runs generate (cacheable programs).
unchecked_grad = functools.partial(loss_and_grad, throw=False)


class Task(eqx.Module):
    """An OGD problem family and its sizes (static); subclasses draw the seeds' problems."""

    dim: int = eqx.field(static=True)
    layers: int = eqx.field(static=True)
    batch: int = eqx.field(static=True)
    ns: tuple[int, ...] = eqx.field(static=True)
    eta: float = eqx.field(static=True)
    steps: int = eqx.field(static=True)
    seeds: int = eqx.field(static=True)

    @abc.abstractmethod
    def problem(self, base, s) -> tuple[AbstractCFM, AbstractStream]:
        """Seed ``s``'s student and stream from the base key (traceable in ``s``)."""

    @property
    def population(self) -> GaussianMeasure | None:
        """The law whose exact limit θ̂ follows (None: the sample's whole context)."""
        return None

    def optimizer(self, lam) -> optax.GradientTransformation:
        """Ridge OGD θ ← (1 − ηλ)θ − η g with λ traced (``cfm_jax.ogd.ridge_sgd``'s update)."""
        return optax.chain(optax.add_decayed_weights(lam), optax.sgd(self.eta))

    def grad_fn(self) -> Callable[..., tuple]:
        """``(model, x0, context, y) -> (loss, grads)``."""
        return unchecked_grad

    def extras(self, base, lams, path) -> dict:
        """More per-seed statistics of the runs whose θ̂ paths are ``path`` (default none)."""
        return {}


class SampledTask(Task):
    """The ablation: one teacher and one student (GELU MLP) for every seed, each seed its own
    stream; contexts of n_ref i.i.d. points of a population law; θ̂ sees all n_ref of them."""

    heads: int = eqx.field(static=True)
    mlp_width: int = eqx.field(static=True)
    n_ref: int = eqx.field(static=True)
    law: str = eqx.field(static=True)

    def problem(self, base, s):
        kt, ks, kstream = jax.random.split(base, 3)
        mk = lambda k: Transformer.init(  # noqa: E731
            k, self.dim, heads=self.heads, mlp_width=self.mlp_width, layers=self.layers, dtype=jnp.result_type(float)
        )
        stream = TeacherStudentStream(
            mk(kt),
            make_population(self.law, self.dim),  # pyright: ignore[reportArgumentType]
            jax.random.fold_in(kstream, s),
            batch=self.batch,
            context_size=self.n_ref,
        )
        return mk(ks), stream


def gaussian_law(dim: int, scale: float) -> GaussianMeasure:
    """μ = N(0, (scale²/d) I): E‖z‖² = scale², attention logits of variance O(1) at every d."""
    dtype = jnp.result_type(float)
    return GaussianMeasure(jnp.zeros(dim, dtype), (scale**2 / dim) * jnp.eye(dim, dtype=dtype))


class GaussianTask(Task):
    """The claims: each seed its own attention-only teacher and student (H = 1); contexts of
    max(ns) i.i.d. points of ``mu`` (:func:`gaussian_law`); θ̂ follows the exact limit at μ."""

    mu: GaussianMeasure

    @property
    def population(self):
        return self.mu

    def models(self, key):
        kt, ks, kstream = jax.random.split(key, 3)
        dtype = jnp.result_type(float)
        mk = lambda k: Transformer.init(k, self.dim, heads=1, mlp_width=0, layers=self.layers, dtype=dtype)  # noqa: E731
        teacher, student = mk(kt), mk(ks)
        stream = PopulationStream(teacher, self.mu, kstream, self.batch, max(self.ns))
        return teacher, student, stream

    def problem(self, base, s):
        _, student, stream = self.models(jax.random.split(base, self.seeds)[s])
        return student, stream

    @classmethod
    def of(cls, config: dict, **fields):
        """The task of a part's row ``config`` (``fields``: a subclass's own)."""
        return cls(
            dim=config["dim"],
            layers=config["layers"],
            batch=config["batch"],
            ns=tuple(config["ns"]),
            eta=config["eta"],
            steps=config["steps"],
            seeds=config["seeds"],
            mu=gaussian_law(config["dim"], config["context_scale"]),
            **fields,
        )


def _visited(task: Task, ref_params):
    """The pilot statistic's points: θ̂ at the end of each of 16 equal stretches of the run."""
    stride = max(1, task.steps // PILOT_POINTS)
    return jax.tree.map(lambda a: a[stride - 1 :: stride], ref_params)


@eqx.filter_jit
def coupled(task: Task, base, lams) -> dict:
    """Every seed's coupled run at its ridge ``lams[s]`` (one program per task shape).

    Returns per seed: ``deviations (S, K, len(ns))``, ``losses (S, K, len(ns) + 1)``,
    ``ref_norms (S, K)`` (‖θ̂_k‖_{L∞}) and ``ref_params`` (θ̂_1 … θ̂_K, leading axes (S, K)).
    """

    def one(s, lam):
        student, stream = task.problem(base, s)
        res = ogd.coupled_run(
            student,
            stream,
            task.ns,
            task.optimizer(lam),
            task.steps,
            record_params=True,
            population=task.population,
            grad_fn=task.grad_fn(),
        )
        return dict(deviations=res.deviations, losses=res.losses, ref_norms=res.ref_norms, ref_params=res.ref_params)

    return jax.vmap(one)(jnp.arange(task.seeds), lams)


@eqx.filter_jit
def region_constant(task: Task, base, ref_params):
    """``(S,)`` C of every seed on the region its θ̂ visited (the pilot statistic, module docstring)."""

    def one(s, path):
        student, stream = task.problem(base, s)
        est = ogd.estimate_lipschitz(
            student,
            _visited(task, path),
            stream,
            jax.random.fold_in(jax.random.key(0), s),
            num_pairs=PILOT_POINTS,
            first_step=task.steps,
            population=task.population,
            grad_fn=task.grad_fn(),
        )
        return est.C

    return jax.vmap(one)(jnp.arange(task.seeds), ref_params)


def measure(task: Task, base, lams) -> dict[str, np.ndarray]:
    """The measurement of every seed at ridge ``lams[s]``: the coupled runs (:func:`coupled`),
    ``C (S,)`` on the regions θ̂ visited (:func:`region_constant`) and the task's
    :meth:`~Task.extras`, as NumPy arrays (``ref_params`` dropped)."""
    lams = jnp.asarray(np.asarray(lams, dtype=np.float64), jnp.result_type(float))
    run = coupled(task, base, lams)
    path = run.pop("ref_params")
    out = {k: np.asarray(v) for k, v in run.items()}
    out["C"] = np.asarray(region_constant(task, base, path))
    out |= {k: np.asarray(v) for k, v in task.extras(base, lams, path).items()}
    return out


#: λ = 0 measurements of this process, by their configuration (results, not programs).
_PILOTS: dict[str, dict[str, np.ndarray]] = {}


def pilot(task: Task, base, identity: dict) -> dict[str, np.ndarray]:
    """The λ = 0 measurement of every seed (the pilot of the ridge rule), kept for this process:
    the regimes of a configuration all need it (``identity``: the configuration without its
    regime). A run that diverges is a ValueError naming ``--eta``."""
    key = json.dumps(identity, sort_keys=True)
    if key not in _PILOTS:
        out = measure(task, base, np.zeros(task.seeds))
        if not (np.isfinite(out["losses"]).all() and np.isfinite(out["C"]).all()):
            raise ValueError(f"--eta {task.eta}: the λ = 0 pilot diverged (non-finite loss or C); lower --eta.")
        _PILOTS[key] = out
    return _PILOTS[key]


def ridges(C, ratio: float, eta: float) -> np.ndarray:
    """λ per seed from the seeds' pilot constants ``C`` (:func:`ridge`)."""
    return np.asarray([ridge(float(c), ratio, eta) for c in np.asarray(C)])


def at_ratio(task: Task, base, identity: dict, ratio: float) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """The one measurement rule of every OGD part: ``(measurement, λ per seed, pilot C)`` at
    λ = ``ratio`` × λ_c of each seed's λ = 0 pilot (:func:`pilot`, shared by the configurations
    of one ``identity``); ``ratio`` 0 is the pilot itself."""
    zero = pilot(task, base, identity)
    if ratio == 0:
        return zero, np.zeros(task.seeds), zero["C"]
    lams = ridges(zero["C"], ratio, task.eta)
    return measure(task, base, lams), lams, zero["C"]


__all__ = [
    "CAP",
    "LAMBDA_C_FACTOR",
    "PILOT_POINTS",
    "REGIMES",
    "GaussianTask",
    "PopulationStream",
    "SampledTask",
    "Task",
    "at_ratio",
    "k_c",
    "measure",
    "pilot",
    "gaussian_law",
    "ridge",
    "ridges",
    "coupled",
    "region_constant",
    "unchecked_grad",
]
