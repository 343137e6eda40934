"""Stochastic transformer on the sphere with random-MLP common noise (second paper; docs/stochastic.md).

The public names, by theme (implementation in the private modules named in brackets):

* kernels [``_kernels``] — :class:`NoiseKernel`: κ(ρ), κ'(ρ), κ(1), κ'(1) (closed forms for
  ReLU/linear, Gauss–Hermite otherwise), the Lyapunov exponent (``NoiseKernel.lyapunov``), the
  paper's parametrisation (``NoiseKernel.paper``), λ̄ (``dissipation``) and the energy rate λ̄' of its
  theorem (``energy_rate``, ``energy_rate_function``); :func:`kappa_monte_carlo`, an independent check.
* common noise [``_noise``] — the exact sampler of the Gaussian field at the token positions
  (:func:`field_factor`, :func:`exact_increment`, :func:`kernel_matrix`) and random features
  (:func:`feature_increment`).
* models [``_model``, ``_sde``] — :class:`AbstractSphereModel`, the discrete post-norm
  :class:`StochasticTransformer` and the limit :class:`SphereSDE`, with :class:`SphereAttention`;
  :func:`simulate` and :func:`simulate_many` (compiled ``lax.scan`` s), and for the SDE
  :func:`integrate_increments` (given Brownian increments) and :func:`solve_diffrax` (the same scheme
  through ``diffrax.diffeqsolve`` on a :func:`brownian_path`).
* observables [``_energies``] — the paper's $E_β$ (:func:`energy_deficit`), $∬‖x−y‖^{2p}$, polar and
  nematic order, diameter, and their statistics over realisations.
* Lyapunov exponents [``_lyapunov``] — :func:`estimate_lyapunov` (Benettin tangent vectors or twin
  trajectories, one compiled program reused across calls).
* the theorem's attention term [``_theorem``] — :func:`attention_epsilon`, a lower estimate of ε of
  Assumption 2.

The simulators are compiled (``cfm_jax.compiled``) and check the tokens' values by the library's one
value check, so bad tokens raise an error naming ``x0`` eagerly and under ``jax.jit``.
"""

from ._energies import (
    diameter,
    distance_energy,
    energy_deficit,
    fit_exponential_rate,
    interaction_energy,
    nematic_order,
    observables,
    order_parameter,
    pairwise_cosines,
    realisation_stats,
    trajectory_observables,
)
from ._kernels import ACTIVATIONS, PAPER_ACTIVATIONS, Activation, KernelMethod, NoiseKernel, kappa_monte_carlo
from ._lyapunov import LyapunovEstimate, LyapunovMethod, estimate_lyapunov
from ._model import (
    AbstractSphereModel,
    AttentionKind,
    SphereAttention,
    StochasticTransformer,
    normalise,
    random_tokens,
    simulate,
    simulate_many,
)
from ._noise import exact_increment, feature_increment, field_factor, kernel_matrix
from ._sde import NoiseSampler, SphereSDE, brownian_increments, brownian_path, integrate_increments, solve_diffrax
from ._theorem import EpsilonEstimate, attention_epsilon, attention_velocity, energy_growth_ratio

__all__ = [
    # kernels
    "ACTIVATIONS",
    "Activation",
    "KernelMethod",
    "NoiseKernel",
    "PAPER_ACTIVATIONS",
    "kappa_monte_carlo",
    # common noise
    "exact_increment",
    "feature_increment",
    "field_factor",
    "kernel_matrix",
    # models and simulation
    "AbstractSphereModel",
    "AttentionKind",
    "NoiseSampler",
    "SphereAttention",
    "SphereSDE",
    "StochasticTransformer",
    "brownian_increments",
    "brownian_path",
    "integrate_increments",
    "normalise",
    "random_tokens",
    "simulate",
    "simulate_many",
    "solve_diffrax",
    # observables
    "diameter",
    "distance_energy",
    "energy_deficit",
    "fit_exponential_rate",
    "interaction_energy",
    "nematic_order",
    "observables",
    "order_parameter",
    "pairwise_cosines",
    "realisation_stats",
    "trajectory_observables",
    # Lyapunov exponents
    "LyapunovEstimate",
    "LyapunovMethod",
    "estimate_lyapunov",
    # the theorem's attention term
    "EpsilonEstimate",
    "attention_epsilon",
    "attention_velocity",
    "energy_growth_ratio",
]
