"""cfm_jax: contextual flow maps in JAX.

Deep transformers as target tokens moving through a context of n tokens carried by the same
attention flow (a McKean–Vlasov particle system): forward solves differentiable by hand-written
Eulerian adjoints or autodiff, propagation-of-chaos experiments, ridge-regularised OGD and the
stochastic (common-noise) transformer on the sphere. The theory and every convention the code
relies on: ``docs/theory.md``.
"""

from . import stochastic
from .adjoint import (
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
from .fields import AbstractField, AttentionField, LocalVJP, MLPField, SumField, generic_local_vjp
from .control import W1ControlField
from .flow import FlowSolution, SaveAt, residual_forward
from .gradients import (
    AdjointSolution,
    adjoint_trajectories,
    functional_gradient,
    mean_squared_loss,
    probe_gradients,
    value_and_grad,
)
from .measures import EmpiricalMeasure, as_measure, split_atom
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
from .paths import CFM, AbstractCFM, PiecewiseLinearCFM, Transformer
from .populations import (
    embedded_sphere,
    gaussian,
    gaussian_mixture,
    make_population,
    subspace_gaussian,
    uniform_sphere,
)
from .sharding import context_mesh, shard_inputs
from .solve import default_adjoint, forward
from .stochastic import NoiseKernel, SphereSDE, StochasticTransformer
from .streams import ArrayStream, FunctionStream, Sample, TeacherStudentStream
from .wasserstein import wasserstein1

__version__ = "0.1.0"

__all__ = [
    "AbstractCFM",
    "AbstractField",
    "AbstractHandAdjoint",
    "AbstractMemory",
    "AdjointSolution",
    "ArrayStream",
    "AttentionField",
    "Backsolve",
    "CFM",
    "ContinuousAdjoint",
    "DiscreteAdjoint",
    "EmpiricalMeasure",
    "FlowSolution",
    "FunctionStream",
    "LipschitzEstimate",
    "LocalVJP",
    "MLPField",
    "NoiseKernel",
    "OGDResult",
    "OGDState",
    "PiecewiseLinearCFM",
    "Recompute",
    "Sample",
    "SaveAt",
    "SphereSDE",
    "StochasticTransformer",
    "StoreAll",
    "StoreEvery",
    "SumField",
    "TeacherStudentStream",
    "Transformer",
    "W1ControlField",
    "adjoint_trajectories",
    "as_measure",
    "ball_probes",
    "context_mesh",
    "coupled_run",
    "default_adjoint",
    "embedded_sphere",
    "estimate_lipschitz",
    "forward",
    "functional_gradient",
    "gaussian",
    "gaussian_mixture",
    "generic_local_vjp",
    "grid_probes",
    "load_checkpoint",
    "make_population",
    "mean_squared_loss",
    "probe_gradients",
    "residual_forward",
    "ridge_sgd",
    "run_ogd",
    "save_checkpoint",
    "shard_inputs",
    "split_atom",
    "stochastic",
    "subspace_gaussian",
    "uniform_sphere",
    "value_and_grad",
    "wasserstein1",
]
