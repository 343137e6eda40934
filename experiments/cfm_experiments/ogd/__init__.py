"""``cfm-jax ogd``: ridge-regularised OGD, finite against infinite context (``docs/ogd.md``).

One measurement (:mod:`.measure`: every seed's coupled run at a ridge λ, C on the region it
visited, one pilot and one ridge rule λ = ρ·λ_c with λ_c = 2C), three parts:

- ``ablation`` (default): λ = 0, λ_c/8 and 1.5·λ_c over n against a sampled population
  (:mod:`.ablation`);
- ``bounds`` (optional): the first paper's OGD claims against the exact Gaussian limit — the
  n-rate, √(d/n), bounded in k above λ_c, degradation after k_c below it, growth at λ = 0
  (:mod:`.claims`);
- ``curvature`` (optional): the threshold where the paper's mechanism acts — a student near an
  unstable stationary point, λ scanned over ¼…4·λ_c, the finite-time Lyapunov exponent of the
  OGD map and the bound's own trajectory (:mod:`.curvature`).

The parts are declared, in the command's order, in :mod:`cfm_experiments.declarations.ogd`;
``bounds`` and ``curvature`` are parts of the first paper's claims command as well.
"""

from __future__ import annotations

from .ablation import Ablation
from .claims import Claims
from .curvature import Curvature

__all__ = ["Ablation", "Claims", "Curvature"]
