"""cfm_jax: contextual flow maps in JAX.

Deep transformers as a target token moving through a context of n tokens carried by the same
attention flow (a McKean–Vlasov particle system): forward solves, Eulerian adjoints,
propagation-of-chaos experiments, ridge-regularised OGD and the stochastic (common-noise)
transformer on the sphere. See ``SPEC.md`` in the shared folder for the conventions.
"""

from .fields import AbstractField, AttentionField, MLPField, SumField
from .flow import FlowSolution, SaveAt, forward, residual_forward
from .measures import EmpiricalMeasure, as_measure, split_atom
from .paths import CFM, AbstractCFM, PiecewiseLinearCFM, Transformer
from .sharding import context_mesh, shard_inputs

# --- gradients (issue 3) ---
from .adjoint import ball_probes, grid_probes, local_vjp, probe_gradients
from .gradients import AdjointSolution, adjoint_trajectories, functional_gradient, value_and_grad

# --- wasserstein / experiments (issue 4) ---
from .fields.control import W1ControlField
from .populations import (
    embedded_sphere,
    gaussian,
    gaussian_mixture,
    make_population,
    subspace_gaussian,
    uniform_sphere,
)
from .wasserstein import wasserstein1

# --- ogd (issue 5) ---
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
from .streams import ArrayStream, FunctionStream, Sample, TeacherStudentStream

# --- stochastic (issue 6) ---
from . import stochastic
from .stochastic import NoiseKernel, SphereSDE, StochasticTransformer

__version__ = "0.1.0"
