"""cfm_jax: contextual flow maps in JAX.

Deep transformers as target tokens moving through a context of n tokens carried by the same
attention flow (a McKean–Vlasov particle system): forward solves differentiable by hand-written
Eulerian adjoints or autodiff, propagation-of-chaos experiments, ridge-regularised online gradient
descent and the stochastic (common-noise) transformer on the sphere. The theory and every
convention the code relies on: ``docs/theory.md``.

The public API is ``__all__``, made from the one table ``_EXPORTS`` below (each public name with
the module that defines it), among them the subpackages ``chaos``, ``distributed``, ``ogd``,
``stats`` and ``stochastic``, whose names live there alone; modules whose names start with ``_``
are implementation. The package root is lazy: a name is imported from its module on first use, so
``import cfm_jax`` does not import JAX until something numerical is asked for. The
``TYPE_CHECKING`` imports at the end say the same to static analysers (``tests/test_layout.py``
holds them equal to ``_EXPORTS``). Names renamed or moved stay for one release in ``_DEPRECATED``:
they work, warn with what replaced them, and are listed nowhere else.
"""

# pyright: reportUnsupportedDunderAll=false
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._deprecations import Deprecated, deprecated_attribute

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
    "chaos": "chaos",
    "compiled": "_validation",
    "CompileRecorder": "_compilation",
    "context_mesh": "_sharding",
    "ContinuousAdjoint": "_adjoint",
    "default_adjoint": "_solve",
    "default_cache_dir": "_compilation",
    "DiscreteAdjoint": "_adjoint",
    "distributed": "distributed",
    "embedded_sphere": "_populations",
    "EmpiricalMeasure": "_measures",
    "enable_compilation_cache": "_compilation",
    "FlowSolution": "_flow",
    "forward": "_solve",
    "functional_gradient": "_gradients",
    "FunctionStream": "_streams",
    "gather": "_sharding",
    "gaussian_mixture": "_populations",
    "GaussianMeasure": "_measures",
    "GaussianSumField": "_fields",
    "generic_local_vjp": "_fields",
    "grid_probes": "_adjoint",
    "HeavyTailWarning": "_regime",
    "isotropic_gaussian": "_populations",
    "LinearMLPField": "_fields",
    "LocalVJP": "_fields",
    "loss_and_grad": "_gradients",
    "make_population": "_populations",
    "mean_squared_loss": "_gradients",
    "MLPField": "_fields",
    "ogd": "ogd",
    "PallasAttention": "_fields",
    "PiecewiseConstantCFM": "_paths",
    "PiecewiseLinearCFM": "_paths",
    "probe_gradients": "_gradients",
    "Recompute": "_adjoint",
    "replicate": "_sharding",
    "Sample": "_streams",
    "SaveAt": "_flow",
    "shard_inputs": "_sharding",
    "sobol": "_qmc",
    "sobol_normal": "_qmc",
    "split_atom": "_measures",
    "stats": "stats",
    "stochastic": "stochastic",
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

__all__ = sorted(_EXPORTS, key=str.lower)

#: old name -> where its value now lives and what to write instead; removed in the next release
_DEPRECATED = {
    "CFM": Deprecated("cfm_jax._paths", "PiecewiseConstantCFM", "cfm_jax.PiecewiseConstantCFM"),
    "gaussian": Deprecated("cfm_jax._populations", "isotropic_gaussian", "cfm_jax.isotropic_gaussian"),
    "gaussian_flow": Deprecated(
        "cfm_jax._solve", "gaussian_flow", "cfm_jax.forward (it takes a GaussianMeasure context)"
    ),
    "linear": Deprecated("jax.nn", "identity", "jax.nn.identity (the identity activation)"),
    **{
        name: Deprecated("cfm_jax.ogd", name, f"cfm_jax.ogd.{name}")
        for name in (
            "coupled_run",
            "estimate_lipschitz",
            "LipschitzEstimate",
            "load_checkpoint",
            "OGDResult",
            "OGDState",
            "ridge_sgd",
            "run_ogd",
            "save_checkpoint",
        )
    },
    **{
        name: Deprecated("cfm_jax.stochastic", name, f"cfm_jax.stochastic.{name}")
        for name in ("NoiseKernel", "SphereSDE", "StochasticTransformer")
    },
}


def __getattr__(name: str) -> Any:
    """Import ``name`` from its module on first access (PEP 562); a deprecated name warns on every access."""
    if name in _DEPRECATED:
        return deprecated_attribute(__name__, name, _DEPRECATED[name])
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f".{_EXPORTS[name]}", __name__)
    value = module if _EXPORTS[name] == name else getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # the names of _EXPORTS, for static analysers (deprecated names left out)
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
    from ._paths import (
        AbstractCFM,
        AbstractPiecewiseConstantCFM,
        PiecewiseConstantCFM,
        PiecewiseLinearCFM,
        Transformer,
    )
    from ._populations import (
        embedded_sphere,
        gaussian_mixture,
        isotropic_gaussian,
        make_population,
        subspace_gaussian,
        uniform_sphere,
    )
    from ._qmc import sobol, sobol_normal
    from ._regime import AttentionRegime, HeavyTailWarning, attention_regime, warn_if_heavy_tailed
    from ._sharding import context_mesh, gather, replicate, shard_inputs
    from ._solve import default_adjoint, forward
    from ._streams import AbstractStream, ArrayStream, FunctionStream, Sample, TeacherStudentStream
    from ._validation import compiled
    from ._wasserstein import wasserstein1
