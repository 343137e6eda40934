"""``cfm-jax claims``: the first paper's claims, measured where they can fail.

The paper bounds the token deviation between the n-token and the infinite-context transformer,
uniformly in depth, by

    sup_s ‖x_s − x̂_s‖ ≤ C(R, ‖Q‖‖K‖, ‖V‖) · √(log(1/δ) / n)     with probability 1 − δ,

with a constant that depends on the support radius R and the parameter norms only, not on the
dimension d nor the parameter count p. Each part measures one piece of that statement against an
exact infinite-context limit (or a QMC reference with its floor), with claimed-vs-measured lines
whose verdicts state the sizes at which they are stable (:mod:`.verdicts`):

- ``prefactors``: the typical constant (mean over random fixed-norm models) vs d, the heads and a
  linear MLP's width (a code check), and the n^{-1/2} rate;
- ``scales``: C vs the context scale and ‖Q‖‖K‖ through β (the homogeneity code check; the growth
  in β against the bound's e^{2β});
- ``tails``: the tail quantiles' n^{-1/2} decay over 512 contexts;
- ``suprema``: the paper's constant as a supremum over fixed-norm parameters (projected gradient
  ascent through the n-point system and the exact limit; structured constructions) vs d and H;
- ``uniform``: E_z sup_θ over the parameter ball (one ascent per context) vs d and H;
- ``rho``: the Gaussian rate's local slope at n ≥ 10⁴ against ρ = 2‖QᵀK‖σ²/d;
- ``tail_exponent``: the tail exponent with 10⁵ contexts down to δ = 10⁻⁴, against the
  linearised limiting Gaussian process;
- ``bounds`` and ``curvature`` (optional; :data:`cfm_experiments.ogd.CLAIM_PARTS`, also parts of
  ``cfm-jax ogd``): the paper's online-gradient-descent claims against the exact limit, and the
  ridge threshold where curvature makes it act;
- ``token_sample`` (optional): another paper's measurement (Bohbot et al.'s token sample complexity
  of one attention layer) redone against the exact Gaussian limit, beside the Monte-Carlo
  reference it used.

Docs: ``docs/claims.md``.
"""

from __future__ import annotations

from ..ogd import CLAIM_PARTS
from .prefactors import Prefactors
from .rho import Rho
from .scales import Scales
from .suprema import Suprema
from .tail_exponent import TailExponent
from .tails import Tails
from .token_sample import TokenSample
from .uniform import Uniform

#: the parts of ``cfm-jax claims``, in order.
PARTS = (
    Prefactors(),
    Scales(),
    Tails(),
    Suprema(),
    Uniform(),
    Rho(),
    TailExponent(),
    *CLAIM_PARTS,
    TokenSample(),
)

__all__ = ["PARTS", "Prefactors", "Rho", "Scales", "Suprema", "TailExponent", "Tails", "TokenSample", "Uniform"]
