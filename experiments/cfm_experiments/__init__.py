"""cfm_experiments: the two papers' experiments on cfm_jax, and the ``cfm-jax`` command.

A distribution of its own, ``cfm_jax_experiments`` (``experiments/pyproject.toml``: it brings
matplotlib and tqdm, which the library does not need), built on ``cfm_jax``'s public API only.

An experiment is a set of parts (:class:`Part`: its options, configurations, one row's
computation, its summary with claimed-vs-measured lines, its figures); a command is a named set
of parts (:data:`COMMANDS`); one driver runs any of them (:func:`run`, or ``cfm-jax <command>``):
the results folder and its manifest, resume and overwrite, progress, per-row timing, Ctrl-C, the
summary, the printed tables and the compile accounting. ``docs/experiments.md`` shows how to add
one.

The package root imports no experiment and not JAX: ``cfm-jax --help`` stays fast.
"""

# pyright: reportUnsupportedDunderAll=false
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"  # released with the library of the same version

#: public name -> the module that defines it (imported on first use)
_EXPORTS = {
    "COMMANDS": "registry",
    "Claim": "protocol",
    "Command": "registry",
    "Declaration": "protocol",
    "Option": "protocol",
    "Part": "protocol",
    "Report": "driver",
    "ResultsFolder": "results",
    "Settings": "protocol",
    "Summary": "protocol",
    "Sweep": "results",
    "VERDICTS": "protocol",
    "read_rows": "results",
    "resolve": "protocol",
    "run": "driver",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from .driver import Report, run  # noqa: F401
    from .protocol import VERDICTS, Claim, Declaration, Option, Part, Settings, Summary, resolve  # noqa: F401
    from .registry import COMMANDS, Command  # noqa: F401
    from .results import ResultsFolder, Sweep, read_rows  # noqa: F401
