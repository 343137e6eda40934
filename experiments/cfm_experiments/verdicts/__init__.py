"""The verdicts: the vocabulary every claim line concludes with, and every rule that reads it from
intervals, in one package.

- :mod:`~cfm_experiments.verdicts.vocabulary`: the :class:`Verdict` values, their order, and the two
  rules every other is written with (an interval against a band, against a claimed value);
- :mod:`~cfm_experiments.verdicts.claims`: the claims command's rules (the ρ line's law, the
  reference's bias of token_sample) and the sizes at which a verdict is stable
  (:func:`~cfm_experiments.verdicts.claims.judge`); :mod:`~cfm_experiments.verdicts.tails`: the
  tail exponent's rule, each threshold derived from the claim;
- :mod:`~cfm_experiments.verdicts.ogd`: the OGD parts' rules (growth exponents, the threshold, the
  curvature part's growth rates);
- :mod:`~cfm_experiments.verdicts.rates`, :mod:`~cfm_experiments.verdicts.sync`: the rates and sync
  commands' rules;
- :mod:`~cfm_experiments.verdicts.table`: every rule of the experiments in one table, run by one
  property test over random, degenerate and straddling intervals (it imports the parts whose
  rules read their own rows, so nothing here imports it). No rule lives anywhere else (a test).

The package imports only the vocabulary: any module may import a verdict from here. Writing a
claim line is :mod:`cfm_experiments.rendering`'s.
"""

from .vocabulary import *  # noqa: F403  (the vocabulary is the package's public face)
from .vocabulary import __all__ as __all__  # one list: the vocabulary's
