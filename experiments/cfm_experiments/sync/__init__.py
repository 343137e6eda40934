"""``cfm-jax sync``: the stochastic transformer on the sphere (the second paper; docs/stochastic.md).

Parts run by default (``cfm-jax sync``):

* ``sync`` — synchronisation by common noise: the paper's energy E_β over time for several noise
  strengths, with and without input bias (:mod:`.synchronisation`);
* ``lyapunov`` — the top Lyapunov exponent against its closed form λ₁ (:mod:`.lyapunov`);
* ``strong``, ``chaos``, ``weak_L``, ``weak_m`` — convergence rates: the exact-noise scheme in its
  step, N tokens against a large-N reference, the discrete model against the limit in depth and
  width (:mod:`.convergence`; the weak parts run no row under ``--quick``).

Optional parts (``--parts``; the results go to ``cfm_out/sync/<parts>`` unless ``--out``):

* ``paper`` — the paper's appendix grid, kernel table and theorem bound (:mod:`.paper`);
* ``figure1`` — its Figure 1 (:mod:`.figure1`);
* ``chaos_w2`` — propagation of chaos in its metric E sup_t W₂² (:mod:`.chaos_w2`).

Every part computes in float64 (nearly merged tokens, twin trajectories 1e-6 apart). Each
compiled program is one configuration shape's computation, defined once at module level and
reused for every seed (and, in the paper grid, for both attention signs); the kernel's
activation and scales are static in ``NoiseKernel``, so each kernel has its own program.
"""

from __future__ import annotations

from .chaos_w2 import ChaosW2
from .convergence import Chaos, Strong, WeakL, WeakM
from .figure1 import Figure1
from .lyapunov import Lyapunov
from .paper import PaperGrid
from .synchronisation import Synchronisation

__all__ = ["Chaos", "ChaosW2", "Figure1", "Lyapunov", "PaperGrid", "Strong", "Synchronisation", "WeakL", "WeakM"]
