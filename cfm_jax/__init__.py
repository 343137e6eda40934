"""cfm_jax: contextual flow maps in JAX.

Deep transformers as target tokens moving through a context of n tokens carried by the same
attention flow (a McKean–Vlasov particle system): forward solves differentiable by hand-written
Eulerian adjoints or autodiff, coupled finite- vs infinite-context deviations (propagation of
chaos), ridge-regularised online gradient descent and the stochastic (common-noise) transformer on
the sphere. The theory and every convention the code relies on: ``docs/theory.md``. The papers'
experiments and the ``cfm-jax`` command are a separate package, ``cfm_experiments``, built on this
public API only.

The public API is the names below (``__all__``) and the subpackages ``chaos``, ``distributed``,
``ogd``, ``stats`` and ``stochastic``; modules whose names start with ``_`` are implementation.
The package root is lazy: a name is imported from its module on first use, so ``import cfm_jax``
does not import JAX until something numerical is asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "AbstractCFM": "_paths",
    "AbstractField": "_fields",
    "AbstractHandAdjoint": "_adjoint",
    "AbstractMemory": "_adjoint",
    "AbstractPiecewiseConstantCFM": "_paths",
    "AbstractStream": "_streams",
    "adjoint_trajectories": "_gradients",
    "AdjointSolution": "_gradients",
    "ArrayStream": "_streams",
    "as_measure": "_measures",
    "AttentionField": "_fields",
    "Backsolve": "_adjoint",
    "ball_probes": "_adjoint",
    "CFM": "_paths",
    "context_mesh": "_sharding",
    "ContinuousAdjoint": "_adjoint",
    "coupled_run": "ogd",
    "default_adjoint": "_solve",
    "DiscreteAdjoint": "_adjoint",
    "embedded_sphere": "_populations",
    "EmpiricalMeasure": "_measures",
    "estimate_lipschitz": "ogd",
    "FlowSolution": "_flow",
    "forward": "_solve",
    "functional_gradient": "_gradients",
    "FunctionStream": "_streams",
    "gather": "_sharding",
    "gaussian": "_populations",
    "gaussian_flow": "_gaussian_limit",
    "gaussian_mixture": "_populations",
    "gaussian_token_adjoint": "_gaussian_limit",
    "GaussianMeasure": "_gaussian_limit",
    "GaussianSolution": "_gaussian_limit",
    "generic_local_vjp": "_fields",
    "grid_probes": "_adjoint",
    "linear": "_fields",
    "LipschitzEstimate": "ogd",
    "load_checkpoint": "ogd",
    "LocalVJP": "_fields",
    "loss_and_grad": "_gradients",
    "make_population": "_populations",
    "mean_squared_loss": "_gradients",
    "MLPField": "_fields",
    "NoiseKernel": "stochastic",
    "OGDResult": "ogd",
    "OGDState": "ogd",
    "PiecewiseLinearCFM": "_paths",
    "probe_gradients": "_gradients",
    "Recompute": "_adjoint",
    "replicate": "_sharding",
    "ridge_sgd": "ogd",
    "run_ogd": "ogd",
    "Sample": "_streams",
    "save_checkpoint": "ogd",
    "SaveAt": "_flow",
    "shard_inputs": "_sharding",
    "sobol": "_qmc",
    "sobol_normal": "_qmc",
    "SphereSDE": "stochastic",
    "split_atom": "_measures",
    "StochasticTransformer": "stochastic",
    "StoreAll": "_adjoint",
    "StoreEvery": "_adjoint",
    "subspace_gaussian": "_populations",
    "SumField": "_fields",
    "TeacherStudentStream": "_streams",
    "Transformer": "_paths",
    "uniform_sphere": "_populations",
    "value_and_grad": "_gradients",
    "W1ControlField": "_control",
    "wasserstein1": "_wasserstein",
}
_SUBMODULES = ("chaos", "distributed", "ogd", "stats", "stochastic")


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
    from . import chaos, distributed, ogd, stats, stochastic
    from ._adjoint import (
        AbstractHandAdjoint,
        AbstractMemory,
        Backsolve,
        ContinuousAdjoint,
        DiscreteAdjoint,
        Recompute,
        StoreAll,
        StoreEvery,
        ball_probes,
        grid_probes,
    )
    from ._control import W1ControlField
    from ._fields import AbstractField, AttentionField, LocalVJP, MLPField, SumField, generic_local_vjp, linear
    from ._flow import FlowSolution, SaveAt
    from ._gaussian_limit import GaussianMeasure, GaussianSolution, gaussian_flow, gaussian_token_adjoint
    from ._gradients import (
        AdjointSolution,
        adjoint_trajectories,
        functional_gradient,
        loss_and_grad,
        mean_squared_loss,
        probe_gradients,
        value_and_grad,
    )
    from ._measures import EmpiricalMeasure, as_measure, split_atom
    from ._paths import CFM, AbstractCFM, AbstractPiecewiseConstantCFM, PiecewiseLinearCFM, Transformer
    from ._populations import (
        embedded_sphere,
        gaussian,
        gaussian_mixture,
        make_population,
        subspace_gaussian,
        uniform_sphere,
    )
    from ._qmc import sobol, sobol_normal
    from ._sharding import context_mesh, gather, replicate, shard_inputs
    from ._solve import default_adjoint, forward
    from ._streams import AbstractStream, ArrayStream, FunctionStream, Sample, TeacherStudentStream
    from ._wasserstein import wasserstein1
    from .ogd import (
        LipschitzEstimate,
        OGDResult,
        OGDState,
        coupled_run,
        estimate_lipschitz,
        load_checkpoint,
        ridge_sgd,
        run_ogd,
        save_checkpoint,
    )
    from .stochastic import NoiseKernel, SphereSDE, StochasticTransformer

__all__ = [
    "AbstractCFM",
    "AbstractField",
    "AbstractHandAdjoint",
    "AbstractMemory",
    "AbstractPiecewiseConstantCFM",
    "adjoint_trajectories",
    "AdjointSolution",
    "AbstractStream",
    "ArrayStream",
    "as_measure",
    "AttentionField",
    "Backsolve",
    "ball_probes",
    "CFM",
    "chaos",
    "context_mesh",
    "ContinuousAdjoint",
    "coupled_run",
    "default_adjoint",
    "DiscreteAdjoint",
    "distributed",
    "embedded_sphere",
    "EmpiricalMeasure",
    "estimate_lipschitz",
    "FlowSolution",
    "forward",
    "functional_gradient",
    "FunctionStream",
    "gather",
    "gaussian",
    "gaussian_flow",
    "gaussian_mixture",
    "gaussian_token_adjoint",
    "GaussianMeasure",
    "GaussianSolution",
    "generic_local_vjp",
    "grid_probes",
    "linear",
    "LipschitzEstimate",
    "load_checkpoint",
    "LocalVJP",
    "loss_and_grad",
    "make_population",
    "mean_squared_loss",
    "MLPField",
    "NoiseKernel",
    "ogd",
    "OGDResult",
    "OGDState",
    "PiecewiseLinearCFM",
    "probe_gradients",
    "Recompute",
    "replicate",
    "ridge_sgd",
    "run_ogd",
    "Sample",
    "save_checkpoint",
    "SaveAt",
    "shard_inputs",
    "sobol",
    "sobol_normal",
    "SphereSDE",
    "split_atom",
    "stats",
    "stochastic",
    "StochasticTransformer",
    "StoreAll",
    "StoreEvery",
    "subspace_gaussian",
    "SumField",
    "TeacherStudentStream",
    "Transformer",
    "uniform_sphere",
    "value_and_grad",
    "W1ControlField",
    "wasserstein1",
]
