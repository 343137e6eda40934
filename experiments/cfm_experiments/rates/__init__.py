"""``cfm-jax rates``: the propagation-of-chaos sweep (parts, grid, rate fits, claims, table, figure).

The physics (coupled n-point vs reference systems, their deviations, the compiled programs) is
:mod:`cfm_jax.chaos`. The command's parts are :class:`Exact` and :class:`Sample`
(:mod:`~cfm_experiments.rates.parts`; declared in :mod:`cfm_experiments.declarations.rates`); from
Python, ``cfm_experiments.run("rates", quick=True, dims=[2, 8])`` runs it with the command line's
rules.
"""

from __future__ import annotations

from .claims import CLAIMS, agrees, claims, counts, verdict
from .figure import plot_rates, rates_figure
from .fits import COLUMNS, POLICY, expected_band, fit_rates, format_prefactors, format_table, prefactors_vs_dim
from .grid import W1_SIZE, run_config, spec_from_config, sweep_configs
from .parts import Exact, Sample

__all__ = [
    "CLAIMS",
    "COLUMNS",
    "POLICY",
    "W1_SIZE",
    "Exact",
    "Sample",
    "agrees",
    "claims",
    "counts",
    "expected_band",
    "fit_rates",
    "format_prefactors",
    "format_table",
    "plot_rates",
    "prefactors_vs_dim",
    "rates_figure",
    "run_config",
    "spec_from_config",
    "sweep_configs",
    "verdict",
]
