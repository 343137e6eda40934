"""Stochastic transformer on the sphere with random-MLP common noise (second paper; docs/stochastic.md).

* :mod:`.kernels` — κ(ρ), κ(1), κ'(1) (closed forms for ReLU/linear, Gauss–Hermite otherwise),
  the closed-form Lyapunov exponent, the paper's parametrisation (``NoiseKernel.paper``), λ̄ and
  the energy rate λ̄' of its theorem.
* :mod:`.noise` — exact common-noise sampler (symmetric PSD square root) and random features.
* :mod:`.model` — the discrete post-norm model, attention drift, :func:`simulate`.
* :mod:`.sde` — the limit Stratonovich SDE (scan and diffrax integrators, coupled increments).
* :mod:`.energies` — the paper's E_β, ∬‖x−y‖^{2p}, polar and nematic order, diameter.
* :mod:`.lyapunov` — Benettin (tangent) and twin-trajectory estimators.
* :mod:`.theorem` — the attention term ε of the theorem's Assumption 2 (a lower estimate).
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
from ._kernels import (
    ACTIVATIONS,
    PAPER_ACTIVATIONS,
    KernelMethod,
    NoiseKernel,
    energy_rate,
    energy_rate_function,
    get_activation,
    kappa_monte_carlo,
    lyapunov_exponent,
)
from ._lyapunov import LyapunovEstimate, LyapunovMethod, benettin, estimate_lyapunov, twin
from ._model import (
    AttentionKind,
    SphereAttention,
    StochasticTransformer,
    check_model_arguments,
    check_tokens,
    normalise,
    random_tokens,
    simulate,
    simulate_many,
)
from ._noise import (
    exact_increment,
    feature_increment,
    field_factor,
    kernel_matrix,
    mlp_noise,
    psd_sqrt,
    sample_mlp,
)
from ._sde import NoiseSampler, SphereSDE, brownian_increments, brownian_path, integrate_increments, solve_diffrax
from ._theorem import EpsilonEstimate, attention_epsilon, attention_velocity, energy_growth_ratio

__all__ = [
    "ACTIVATIONS",
    "AttentionKind",
    "EpsilonEstimate",
    "KernelMethod",
    "LyapunovEstimate",
    "LyapunovMethod",
    "NoiseKernel",
    "NoiseSampler",
    "PAPER_ACTIVATIONS",
    "SphereAttention",
    "SphereSDE",
    "StochasticTransformer",
    "attention_epsilon",
    "attention_velocity",
    "benettin",
    "brownian_increments",
    "brownian_path",
    "check_model_arguments",
    "check_tokens",
    "diameter",
    "distance_energy",
    "energy_deficit",
    "energy_growth_ratio",
    "energy_rate",
    "energy_rate_function",
    "estimate_lyapunov",
    "exact_increment",
    "feature_increment",
    "field_factor",
    "fit_exponential_rate",
    "get_activation",
    "integrate_increments",
    "interaction_energy",
    "kappa_monte_carlo",
    "kernel_matrix",
    "lyapunov_exponent",
    "mlp_noise",
    "nematic_order",
    "normalise",
    "observables",
    "order_parameter",
    "pairwise_cosines",
    "psd_sqrt",
    "random_tokens",
    "realisation_stats",
    "sample_mlp",
    "simulate",
    "simulate_many",
    "solve_diffrax",
    "trajectory_observables",
    "twin",
]
