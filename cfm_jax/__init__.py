"""cfm_jax: contextual flow maps in JAX.

Deep transformers as target tokens moving through a context of n tokens carried by the same
attention flow (a McKean–Vlasov particle system): forward solves differentiable by hand-written
Eulerian adjoints or autodiff, propagation-of-chaos experiments, ridge-regularised online gradient
descent and the stochastic (common-noise) transformer on the sphere. The theory and every
convention the code relies on: ``docs/theory.md``.

The public API is the names imported in the ``TYPE_CHECKING`` block below — the one list of them:
static analysers read it as imports, and at run time it is read from this file to give ``__all__``
and the module of each name — plus the subpackages ``chaos``, ``distributed``, ``ogd``, ``stats``
and ``stochastic``; modules whose names start with ``_`` are implementation. The package root is
lazy: a name is imported from its module on first use, so ``import cfm_jax`` does not import JAX
until something numerical is asked for.
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports are the public list, read at run time: see the docstring)
# pyright: reportUnsupportedDunderAll=false
from __future__ import annotations

import ast
import importlib
import pathlib
import warnings
from typing import TYPE_CHECKING

__version__ = "0.1.0"

if TYPE_CHECKING:  # the public names, once
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
    from ._fields import (
        AbstractField,
        AbstractGaussianField,
        AttentionField,
        GaussianSumField,
        LinearMLPField,
        LocalVJP,
        MLPField,
        SumField,
        generic_local_vjp,
        linear,
    )
    from ._flow import FlowSolution, SaveAt
    from ._gradients import (
        AdjointSolution,
        adjoint_trajectories,
        functional_gradient,
        gaussian_token_adjoint,
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


def _public_names() -> dict[str, str]:
    """``{name: module}`` from the ``TYPE_CHECKING`` imports of this file (a subpackage maps to itself)."""
    tree = ast.parse(pathlib.Path(__file__).read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    return {
        alias.asname or alias.name: node.module or alias.name
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


_EXPORTS = _public_names()
__all__ = sorted(_EXPORTS, key=str.lower)

#: deprecated name -> (module, name, what to use instead); resolvable for one release, not in __all__
_DEPRECATED = {"GaussianSolution": ("_flow", "FlowSolution", "cfm_jax.FlowSolution (one type for every context)")}


def __getattr__(name: str):
    """Import ``name`` from its module on first access (PEP 562)."""
    if name in _DEPRECATED:
        module, target, instead = _DEPRECATED[name]
        warnings.warn(f"cfm_jax.{name} is deprecated: use {instead}.", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(f".{module}", __name__), target)
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f".{_EXPORTS[name]}", __name__)
    value = module if _EXPORTS[name] == name else getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
