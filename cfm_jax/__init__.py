"""cfm_jax: contextual flow maps in JAX.

Deep transformers as target tokens moving through a context of n tokens carried by the same
attention flow (a McKean–Vlasov particle system): forward solves differentiable by hand-written
Eulerian adjoints or autodiff, propagation-of-chaos experiments, ridge-regularised online gradient
descent and the stochastic (common-noise) transformer on the sphere. The theory and every
convention the code relies on: ``docs/theory.md``.

The public API is ``__all__``: the names of the table ``_EXPORTS`` below (each with the module
that defines it), among them the subpackages ``chaos``, ``distributed``, ``ogd``, ``stats`` and
``stochastic``; modules whose names start with ``_`` are implementation. The package root is lazy:
a name is imported from its module on first use, so ``import cfm_jax`` does not import JAX until
something numerical is asked for. The ``TYPE_CHECKING`` imports at the end say the same to static
analysers (a test holds the two lists equal).
"""

# pyright: reportUnsupportedDunderAll=false
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.2.0"

#: public name -> the module that defines it (a subpackage: itself), imported on first use
_EXPORTS = {
    "AbstractAttentionKernel": "_fields",
    "AbstractCFM": "_paths",
    "AbstractField": "_fields",
    "AbstractGaussianField": "_fields",
    "AbstractHandAdjoint": "_adjoint",
    "AbstractMemory": "_adjoint",
    "AbstractPiecewiseConstantCFM": "_paths",
    "AbstractStream": "_streams",
    "adjoint_trajectories": "_gradients",
    "AdjointSolution": "_gradients",
    "ArrayStream": "_streams",
    "as_measure": "_measures",
    "attention_output": "_fields.attention_output",
    "attention_output_moments": "_fields.attention_output",
    "attention_regime": "_regime",
    "AttentionField": "_fields",
    "AttentionRegime": "_regime",
    "Backsolve": "_adjoint",
    "ball_probes": "_adjoint",
    "CACHE_ENV": "_compilation",
    "CFM": "_paths",
    "chaos": "chaos",
    "compiled": "_validation",
    "CompileRecorder": "_compilation",
    "context_mesh": "_sharding",
    "ContinuousAdjoint": "_adjoint",
    "coupled_run": "ogd",
    "default_adjoint": "_solve",
    "default_cache_dir": "_compilation",
    "DiscreteAdjoint": "_adjoint",
    "distributed": "distributed",
    "embedded_sphere": "_populations",
    "EmpiricalMeasure": "_measures",
    "enable_compilation_cache": "_compilation",
    "estimate_lipschitz": "ogd",
    "FlowSolution": "_flow",
    "forward": "_solve",
    "functional_gradient": "_gradients",
    "FunctionStream": "_streams",
    "gather": "_sharding",
    "gaussian": "_populations",
    "gaussian_flow": "_solve",
    "gaussian_mixture": "_populations",
    "GaussianMeasure": "_measures",
    "GaussianSumField": "_fields",
    "generic_local_vjp": "_fields",
    "grid_probes": "_adjoint",
    "HeavyTailWarning": "_regime",
    "linear": "_fields",
    "LinearMLPField": "_fields",
    "LipschitzEstimate": "ogd",
    "load_checkpoint": "ogd",
    "LocalVJP": "_fields",
    "loss_and_grad": "_gradients",
    "make_population": "_populations",
    "mean_squared_loss": "_gradients",
    "MLPField": "_fields",
    "NoiseKernel": "stochastic",
    "ogd": "ogd",
    "OGDResult": "ogd",
    "OGDState": "ogd",
    "PallasAttention": "_fields",
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
    "stats": "stats",
    "stochastic": "stochastic",
    "StochasticTransformer": "stochastic",
    "StoreAll": "_adjoint",
    "StoreEvery": "_adjoint",
    "subspace_gaussian": "_populations",
    "SumField": "_fields",
    "TeacherStudentStream": "_streams",
    "token_adjoint": "_gradients",
    "Transformer": "_paths",
    "uniform_sphere": "_populations",
    "W1ControlField": "_control",
    "warn_if_heavy_tailed": "_regime",
    "wasserstein1": "_wasserstein",
    "XLAAttention": "_fields",
}

__all__ = [
    "AbstractAttentionKernel",
    "AbstractCFM",
    "AbstractField",
    "AbstractGaussianField",
    "AbstractHandAdjoint",
    "AbstractMemory",
    "AbstractPiecewiseConstantCFM",
    "AbstractStream",
    "adjoint_trajectories",
    "AdjointSolution",
    "ArrayStream",
    "as_measure",
    "attention_output",
    "attention_output_moments",
    "attention_regime",
    "AttentionField",
    "AttentionRegime",
    "Backsolve",
    "ball_probes",
    "CACHE_ENV",
    "CFM",
    "chaos",
    "compiled",
    "CompileRecorder",
    "context_mesh",
    "ContinuousAdjoint",
    "coupled_run",
    "default_adjoint",
    "default_cache_dir",
    "DiscreteAdjoint",
    "distributed",
    "embedded_sphere",
    "EmpiricalMeasure",
    "enable_compilation_cache",
    "estimate_lipschitz",
    "FlowSolution",
    "forward",
    "functional_gradient",
    "FunctionStream",
    "gather",
    "gaussian",
    "gaussian_flow",
    "gaussian_mixture",
    "GaussianMeasure",
    "GaussianSumField",
    "generic_local_vjp",
    "grid_probes",
    "HeavyTailWarning",
    "linear",
    "LinearMLPField",
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
    "PallasAttention",
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
    "token_adjoint",
    "Transformer",
    "uniform_sphere",
    "W1ControlField",
    "warn_if_heavy_tailed",
    "wasserstein1",
    "XLAAttention",
]


def __getattr__(name: str):
    """Import ``name`` from its module on first access (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f".{_EXPORTS[name]}", __name__)
    value = module if _EXPORTS[name] == name else getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # the same names, for static analysers
    # ruff: noqa: F401
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
    from ._compilation import CACHE_ENV, CompileRecorder, default_cache_dir, enable_compilation_cache
    from ._control import W1ControlField
    from ._fields import (
        AbstractAttentionKernel,
        AbstractField,
        AbstractGaussianField,
        AttentionField,
        GaussianSumField,
        LinearMLPField,
        LocalVJP,
        MLPField,
        PallasAttention,
        SumField,
        XLAAttention,
        generic_local_vjp,
        linear,
    )
    from ._fields.attention_output import attention_output, attention_output_moments
    from ._flow import FlowSolution, SaveAt
    from ._gradients import (
        AdjointSolution,
        adjoint_trajectories,
        functional_gradient,
        loss_and_grad,
        mean_squared_loss,
        probe_gradients,
        token_adjoint,
    )
    from ._measures import EmpiricalMeasure, GaussianMeasure, as_measure, split_atom
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
    from ._regime import AttentionRegime, HeavyTailWarning, attention_regime, warn_if_heavy_tailed
    from ._sharding import context_mesh, gather, replicate, shard_inputs
    from ._solve import default_adjoint, forward, gaussian_flow
    from ._streams import AbstractStream, ArrayStream, FunctionStream, Sample, TeacherStudentStream
    from ._validation import compiled
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
