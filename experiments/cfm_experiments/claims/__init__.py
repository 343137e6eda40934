"""``cfm-jax claims``: the first paper's claims, measured where they can fail.

The paper bounds the token deviation between the n-token and the infinite-context transformer,
uniformly in depth, by

    sup_s ‖x_s − x̂_s‖ ≤ C(R, ‖Q‖‖K‖, ‖V‖) · √(log(1/δ) / n)     with probability 1 − δ,

with a constant that depends on the support radius R and the parameter norms only, not on the
dimension d nor the parameter count p. Each part measures one piece of that statement against an
exact infinite-context limit (or a QMC reference with its floor), with claimed-vs-measured lines
whose verdicts state the sizes at which they are stable (:mod:`cfm_experiments.verdicts.claims`; the
vocabulary is :mod:`cfm_experiments.verdicts.vocabulary`) and, for the parts that sample, that two
independent draws agree (:mod:`cfm_experiments.draws`):

- ``prefactors``: the typical constant (mean over random fixed-norm models) vs d, the heads and a
  linear MLP's width (a code check), and the n^{-1/2} rate;
- ``scales``: C vs the context scale and ‖Q‖‖K‖ through β (the homogeneity code check; the growth
  in β against the bound's e^{2β});
- ``tails``: the tail quantiles' n^{-1/2} decay over 512 contexts;
- ``suprema``: the paper's constant as a supremum searched over θ within the norm ball and over
  laws supported in the ball B_1 (four atoms: an exact limit), beside the a-priori bound there, by
  projected ascent through the n-point system until it converges, from the constructions (the
  aligned corner, Q = K = V = I), the trivial model and random starts, vs d (and H with
  ``--heads-sweeps``); Gaussian laws
  within an energy budget as a labelled contrast without a verdict; each row reports the ascent's
  gain over its start, its steps and the best trivial model, and a "supremum" that does not beat
  them, did not converge or does not decay like n^{-1/2} withholds its verdict;
- ``uniform``: E_z sup_θ over the parameter ball (one ascent per context, to convergence) vs d (and
  H with ``--heads-sweeps``) on one law in the ball B_1 (the cross law ±e_i: an exact limit; its
  constant, not the ball's supremum over laws), beside the best fixed start, a lower bound of the
  ball's (the skewed two-atom law, exact) and the a-priori bound at that n, withheld when it is not a
  measured constant of the rate; N(0, I/d) and N(0, I) as a labelled contrast without a verdict;
- ``rho``: the Gaussian rate's local slope at n ≥ 10⁴ against ρ = 2‖QᵀK‖σ²/d, with models drawn to
  fill every ρ bin, pooled over independent draws (each draw's own verdict beside the pooled one);
- ``tail_exponent``: the tail exponent with 25000 contexts per model down to δ = 10⁻³, for models
  spanning ρ, against the linearised limiting Gaussian process (exponent and quantiles, two-sided);
- ``bounds`` and ``curvature`` (optional; :mod:`cfm_experiments.ogd`'s, also parts of
  ``cfm-jax ogd``): the paper's online-gradient-descent claims against the exact limit, and the
  ridge threshold where curvature makes it act;
- ``token_sample`` (optional): another paper's measurement (Bohbot et al.'s token sample complexity
  of one attention layer) redone against the exact Gaussian limit, beside the Monte-Carlo
  reference it used and the floor model that predicts what that reference does.

The parts are declared, in the command's order, in :mod:`cfm_experiments.declarations.claims`.
Docs: ``docs/claims.md``.
"""

from __future__ import annotations

from .. import ogd  # noqa: F401  (its bounds and curvature parts are this command's too)
from .prefactors import Prefactors
from .rho import Rho
from .scales import Scales
from .suprema import Suprema
from .tail_exponent import TailExponent
from .tails import Tails
from .token_sample import TokenSample
from .uniform import Uniform

__all__ = ["Prefactors", "Rho", "Scales", "Suprema", "TailExponent", "Tails", "TokenSample", "Uniform"]
