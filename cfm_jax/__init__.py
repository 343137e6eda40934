"""cfm_jax: contextual flow maps in JAX.

Deep transformers as target tokens moving through a context of n tokens carried by the same
attention flow (a McKean–Vlasov particle system): forward solves differentiable by hand-written
Eulerian adjoints or autodiff, propagation-of-chaos experiments, ridge-regularised OGD and the
stochastic (common-noise) transformer on the sphere. The theory and every convention the code
relies on: ``docs/theory.md``.

The package root is lazy: a name is imported from its module on first use, so ``import cfm_jax``
(and ``cfm-jax --help``) does not import JAX until something numerical is asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "AbstractCFM": "paths",
    "AbstractField": "fields",
    "AbstractHandAdjoint": "adjoint",
    "AbstractMemory": "adjoint",
    "adjoint_trajectories": "gradients",
    "AdjointSolution": "gradients",
    "ArrayStream": "streams",
    "as_measure": "measures",
    "AttentionField": "fields",
    "Backsolve": "adjoint",
    "ball_probes": "adjoint",
    "CFM": "paths",
    "context_mesh": "sharding",
    "ContinuousAdjoint": "adjoint",
    "coupled_run": "ogd",
    "default_adjoint": "solve",
    "DiscreteAdjoint": "adjoint",
    "embedded_sphere": "populations",
    "EmpiricalMeasure": "measures",
    "estimate_lipschitz": "ogd",
    "FlowSolution": "flow",
    "forward": "solve",
    "functional_gradient": "gradients",
    "FunctionStream": "streams",
    "gather": "sharding",
    "gaussian": "populations",
    "gaussian_mixture": "populations",
    "generic_local_vjp": "fields",
    "grid_probes": "adjoint",
    "LipschitzEstimate": "ogd",
    "load_checkpoint": "ogd",
    "LocalVJP": "fields",
    "make_population": "populations",
    "mean_squared_loss": "gradients",
    "MLPField": "fields",
    "NoiseKernel": "stochastic",
    "OGDResult": "ogd",
    "OGDState": "ogd",
    "PiecewiseLinearCFM": "paths",
    "probe_gradients": "gradients",
    "Recompute": "adjoint",
    "replicate": "sharding",
    "loss_and_grad": "gradients",
    "ridge_sgd": "ogd",
    "run_ogd": "ogd",
    "Sample": "streams",
    "save_checkpoint": "ogd",
    "SaveAt": "flow",
    "shard_inputs": "sharding",
    "SphereSDE": "stochastic",
    "split_atom": "measures",
    "StochasticTransformer": "stochastic",
    "StoreAll": "adjoint",
    "StoreEvery": "adjoint",
    "subspace_gaussian": "populations",
    "SumField": "fields",
    "TeacherStudentStream": "streams",
    "Transformer": "paths",
    "uniform_sphere": "populations",
    "value_and_grad": "gradients",
    "W1ControlField": "control",
    "wasserstein1": "wasserstein",
}
_SUBMODULES = ("adjoint", "chaos", "control", "distributed", "experiments", "fields", "flow", "gradients", "measures", "ogd", "paths", "populations", "sharding", "solve", "stats", "stochastic", "streams", "wasserstein")


def __getattr__(name: str):
    """Import ``name`` from its module on first access (PEP 562)."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # static analysers and IDEs see the eager imports
    from .adjoint import AbstractHandAdjoint, AbstractMemory, Backsolve, ball_probes, ContinuousAdjoint, DiscreteAdjoint, grid_probes, Recompute, StoreAll, StoreEvery
    from .control import W1ControlField
    from .fields import AbstractField, AttentionField, generic_local_vjp, LocalVJP, MLPField, SumField
    from .flow import FlowSolution, SaveAt
    from .gradients import adjoint_trajectories, AdjointSolution, functional_gradient, loss_and_grad, mean_squared_loss, probe_gradients, value_and_grad
    from .measures import as_measure, EmpiricalMeasure, split_atom
    from .ogd import coupled_run, estimate_lipschitz, LipschitzEstimate, load_checkpoint, OGDResult, OGDState, ridge_sgd, run_ogd, save_checkpoint
    from .paths import AbstractCFM, CFM, PiecewiseLinearCFM, Transformer
    from .populations import embedded_sphere, gaussian, gaussian_mixture, make_population, subspace_gaussian, uniform_sphere
    from .sharding import context_mesh, gather, replicate, shard_inputs
    from .solve import default_adjoint, forward
    from .stochastic import NoiseKernel, SphereSDE, StochasticTransformer
    from .streams import ArrayStream, FunctionStream, Sample, TeacherStudentStream
    from .wasserstein import wasserstein1
    from . import adjoint, chaos, control, distributed, experiments, fields, flow, gradients, measures, ogd, paths, populations, sharding, solve, stats, stochastic, streams, wasserstein

__all__ = [
    "AbstractCFM",
    "AbstractField",
    "AbstractHandAdjoint",
    "AbstractMemory",
    "adjoint",
    "adjoint_trajectories",
    "AdjointSolution",
    "ArrayStream",
    "as_measure",
    "AttentionField",
    "Backsolve",
    "ball_probes",
    "CFM",
    "chaos",
    "context_mesh",
    "ContinuousAdjoint",
    "control",
    "coupled_run",
    "default_adjoint",
    "DiscreteAdjoint",
    "distributed",
    "embedded_sphere",
    "EmpiricalMeasure",
    "estimate_lipschitz",
    "experiments",
    "fields",
    "flow",
    "FlowSolution",
    "forward",
    "functional_gradient",
    "FunctionStream",
    "gather",
    "gaussian",
    "gaussian_mixture",
    "generic_local_vjp",
    "gradients",
    "grid_probes",
    "LipschitzEstimate",
    "load_checkpoint",
    "LocalVJP",
    "make_population",
    "mean_squared_loss",
    "measures",
    "MLPField",
    "NoiseKernel",
    "ogd",
    "OGDResult",
    "OGDState",
    "paths",
    "PiecewiseLinearCFM",
    "populations",
    "probe_gradients",
    "Recompute",
    "replicate",
    "loss_and_grad",
    "ridge_sgd",
    "run_ogd",
    "Sample",
    "save_checkpoint",
    "SaveAt",
    "shard_inputs",
    "sharding",
    "solve",
    "SphereSDE",
    "split_atom",
    "stats",
    "stochastic",
    "StochasticTransformer",
    "StoreAll",
    "StoreEvery",
    "streams",
    "subspace_gaussian",
    "SumField",
    "TeacherStudentStream",
    "Transformer",
    "uniform_sphere",
    "value_and_grad",
    "W1ControlField",
    "wasserstein",
    "wasserstein1",
]
