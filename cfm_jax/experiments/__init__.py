"""Experiments: a shared resumable sweep runner, rate fits, and the paper's experiments."""

from ..stats import RateFit, fit_loglog, mean_ci
from .runner import Sweep, config_key, read_rows, write_summary

__all__ = ["RateFit", "Sweep", "config_key", "fit_loglog", "mean_ci", "read_rows", "write_summary"]
