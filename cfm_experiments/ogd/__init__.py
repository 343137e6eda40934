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

:data:`CLAIM_PARTS` are the parts the first paper's claims command runs as well.
"""

from __future__ import annotations

from ..draws import redrawn
from ..protocol import Part
from .ablation import PART as ABLATION
from .claims import PART
from .curvature import PART as _CURVATURE

#: the claim parts sample teachers and data: run at independent seeds, a verdict only where they agree.
CLAIMS, CURVATURE = redrawn(PART), redrawn(_CURVATURE)
#: the parts of ``cfm-jax ogd``, in order (the ablation runs by default; it reads no verdict).
PARTS: tuple[Part, ...] = (ABLATION, CLAIMS, CURVATURE)
#: the parts the first paper's claims command runs too.
CLAIM_PARTS: tuple[Part, ...] = (CLAIMS, CURVATURE)

__all__ = ["CLAIM_PARTS", "PARTS"]
