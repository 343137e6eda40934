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

# --- wasserstein / experiments (issue 4) ---

# --- ogd (issue 5) ---

# --- stochastic (issue 6) ---

__version__ = "0.1.0"
