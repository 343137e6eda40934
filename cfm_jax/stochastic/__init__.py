"""Stochastic transformer on the sphere with random-MLP common noise (SPEC §5, second paper).

* :mod:`.kernels` — κ(ρ), κ(1), κ'(1) (closed forms for ReLU/linear, Gauss–Hermite otherwise),
  the closed-form Lyapunov exponent.
* :mod:`.noise` — exact common-noise sampler (symmetric PSD square root) and random features.
* :mod:`.model` — the discrete post-norm model, attention drift, :func:`simulate`.
* :mod:`.sde` — the limit Stratonovich SDE (scan and diffrax integrators, coupled increments).
* :mod:`.energies` — E_β, the deficit 𝔇_β, ∬‖x−y‖^{2p}, order parameter, diameter.
* :mod:`.lyapunov` — Benettin (tangent) and twin-trajectory estimators.
"""

from .energies import (
    diameter,
    distance_energy,
    energy_deficit,
    fit_exponential_rate,
    interaction_energy,
    observables,
    order_parameter,
    realisation_stats,
    trajectory_observables,
)
from .kernels import ACTIVATIONS, NoiseKernel, get_activation, kappa_monte_carlo, lyapunov_exponent
from .lyapunov import LyapunovEstimate, benettin, estimate_lyapunov, twin
from .model import (
    SphereAttention,
    StochasticTransformer,
    check_tokens,
    normalise,
    random_tokens,
    simulate,
    simulate_many,
)
from .noise import (
    exact_increment,
    feature_increment,
    field_factor,
    kernel_matrix,
    mlp_noise,
    psd_sqrt,
    sample_mlp,
)
from .sde import SphereSDE, brownian_increments, brownian_path, integrate_increments, solve_diffrax

__all__ = [
    "ACTIVATIONS",
    "LyapunovEstimate",
    "NoiseKernel",
    "SphereAttention",
    "SphereSDE",
    "StochasticTransformer",
    "benettin",
    "brownian_increments",
    "brownian_path",
    "check_tokens",
    "diameter",
    "distance_energy",
    "energy_deficit",
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
    "normalise",
    "observables",
    "order_parameter",
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
