"""Experiments: a shared resumable sweep runner, its command-line options, and the paper's experiments.

The experiment modules (``rates``, ``ogd_ablation``, ``gradcheck``, ``sync``, ``constants``) are imported on
demand, not here, so that ``cfm-jax --help`` stays fast.
"""

from ..stats import RateFit, fit_loglog, mean_ci
from .runner import ResultsFolder, Sweep, config_key, exit_on_signals, read_rows, write_summary

__all__ = [
    "RateFit",
    "ResultsFolder",
    "Sweep",
    "config_key",
    "exit_on_signals",
    "fit_loglog",
    "mean_ci",
    "read_rows",
    "write_summary",
]
