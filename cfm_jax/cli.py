"""Command line: ``cfm-jax <command>`` (also ``python -m cfm_jax``).

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and ``run(args) -> int``;
this file only dispatches. Only the module of the chosen subcommand is imported (``cfm-jax --help``
imports none). Errors end with one line on stderr and a non-zero exit code; SIGINT/SIGTERM end
any subcommand at once with 130/143, finished rows on disk (see ``experiments.runner``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from .experiments.options import (
    HelpFormatter,
    add_global_arguments,
    apply_global_options,
    validate_options,
)
from .experiments.runner import exit_on_signals

#: subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("cfm_jax._demo", "small forward solve on built-in defaults"),
    "gradcheck": ("cfm_jax.experiments.gradcheck", "compare gradient methods and finite differences"),
    "rates": ("cfm_jax.experiments.rates", "finite vs infinite context: fitted rates in n and d"),
    "ogd": ("cfm_jax.experiments.ogd_ablation", "ridge-regularised OGD ablation over lambda and n"),
    "sync": ("cfm_jax.experiments.sync", "stochastic transformer: synchronisation and Lyapunov table"),
    "constants": ("cfm_jax.experiments.constants", "the first paper's constants and tails vs the exact limit"),
}

DESCRIPTION = (
    "Contextual flow maps in JAX: demos and the paper's experiments.\n"
    "Experiments write OUT/run.json (what wrote the folder), OUT/rows.jsonl (one finished row per\n"
    "line), OUT/summary.json and PNG figures; a folder holding results needs --resume (the same\n"
    "command continues) or --overwrite. Global options may also follow the subcommand."
)

INTERRUPTED = "finished rows are on disk; rerun the same command with --resume to continue."

__all__ = ["COMMANDS", "build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line on stderr (exit code 2), pointing to ``--help``."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _chosen(argv: list[str]) -> str | None:
    """The subcommand named in ``argv`` (the first word that is one), without parsing."""
    return next((a for a in argv if a in COMMANDS), None)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; only the subcommand named in ``argv`` gets its options (and its module imported)."""
    argv = sys.argv[1:] if argv is None else argv
    parser = _Parser(prog="cfm-jax", description=DESCRIPTION, formatter_class=HelpFormatter)
    add_global_arguments(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = _chosen(argv)
    for name, (module, help_) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_, formatter_class=HelpFormatter)
        if name != chosen:
            continue
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            p.set_defaults(_missing=module)
            continue
        mod.add_arguments(p)
        add_global_arguments(p, suppress=True)
        p.set_defaults(_run=mod.run)
    return parser


def _error(command: str | None, exc: BaseException) -> int:
    text = str(exc).strip().splitlines()
    msg = text[0] if text else type(exc).__name__
    if not isinstance(exc, (ValueError, OSError)):
        msg = f"{type(exc).__name__}: {msg}"
    print(f"cfm-jax{' ' + command if command else ''}: error: {msg}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    with exit_on_signals(INTERRUPTED):
        try:
            parser = build_parser(argv)
            args = parser.parse_args(argv)
        except KeyboardInterrupt:
            return 130
        except Exception as e:  # an experiment module that fails to import
            return _error(_chosen(argv), e)
        if getattr(args, "_missing", None):
            parser.error(f"`{args.command}` is not available in this build (module {args._missing} missing).")
        if getattr(args, "no_progress", False):
            os.environ["TQDM_DISABLE"] = "1"  # also for experiments that build their own bars
        try:
            validate_options(args)  # every subcommand's options, before any work
        except ValueError as e:  # a bad option value is a usage error, like argparse's own (exit 2)
            return _error(args.command, e) + 1
        try:
            apply_global_options(args)
            return int(args._run(args) or 0)
        except KeyboardInterrupt:  # a signal that arrived before the handlers were installed
            print(f"\ninterrupted: {INTERRUPTED}", file=sys.stderr)
            return 130
        except Exception as e:
            return _error(args.command, e)


if __name__ == "__main__":
    sys.exit(main())
