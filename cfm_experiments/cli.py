"""Command line: ``cfm-jax <command> [options]`` (also ``python -m cfm_experiments``).

The commands are the registry's (:mod:`cfm_experiments.registry`); each one's options are what its
parts declare (:class:`~cfm_experiments.protocol.Option`), with the options every run has
(``--quick``, ``--out``, ``--resume``/``--overwrite``, ``--seed``, ``--no-progress``, ``--parts``)
and the global ones (``--float64``, ``--cache-dir``, ``--no-cache``, ``--cpu-devices``), which may
also follow the command. Only the chosen command's module is imported (``cfm-jax --help`` imports
none, nor JAX). Every option is checked before any work, by the rule the Python entry point uses;
errors end with one line on stderr and a non-zero exit code (2 for a bad option); SIGINT/SIGTERM
end any command at once with 130/143, finished rows on disk.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .options import HelpFormatter, add_global_arguments, apply_global_options
from .registry import COMMANDS, Command
from .signals import exit_on_signals

DESCRIPTION = (
    "Contextual flow maps in JAX: the papers' experiments, and a demo.\n"
    "Experiments write OUT/run.json (what wrote the folder), OUT/rows.jsonl (one finished row per\n"
    "line), OUT/summary.json and PNG figures; a folder holding results needs --resume (the same\n"
    "command continues) or --overwrite. Global options may also follow the command."
)

#: ``cfm-jax demo``: not an experiment (it writes nothing).
DEMO = ("demo", "small forward solve on built-in defaults")

INTERRUPTED = "finished rows are on disk; rerun the same command with --resume to continue."

#: the options of every run that are not a part's (they choose where and how, not what).
RUN_OPTIONS = frozenset({"quick", "out", "resume", "overwrite", "no_progress", "parts"})


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line on stderr (exit code 2), pointing to ``--help``."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _names() -> list[str]:
    return [DEMO[0], *COMMANDS]


def _chosen(argv: list[str]) -> str | None:
    """The command named in ``argv`` (the first word that is one), without parsing."""
    names = set(_names())
    return next((a for a in argv if a in names), None)


def _run_arguments(p: argparse.ArgumentParser, cmd: Command) -> None:
    """The options of ``cfm-jax <cmd>``: those of every run, ``--parts``, and its parts' own."""
    from .driver import default_out
    from .protocol import declared

    parts = cmd.parts()
    quick = "reduced configuration" + (f" ({cmd.times})" if cmd.times else "")
    p.add_argument("--quick", action="store_true", help=quick)
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"results folder (default: {default_out(cmd, cmd.default_parts())}; "
        "with --parts other than the default: a subfolder named after them)",
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--resume", action="store_true", help="continue the results in OUT (only those of this same run)"
    )
    group.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the results in OUT (removed when the first new row is written, not before)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    if len(parts) > 1:
        default = " ".join(q.name for q in cmd.default_parts())
        p.add_argument(
            "--parts",
            nargs="+",
            choices=[q.name for q in parts],
            metavar="PART",
            help=f"parts to run, from: {', '.join(q.name for q in parts)} (default: {default})",
        )
    for opt in declared(parts).values():
        opt.add_to(p)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; only the command named in ``argv`` gets its options (and its module imported)."""
    argv = sys.argv[1:] if argv is None else argv
    parser = _Parser(prog="cfm-jax", description=DESCRIPTION, formatter_class=HelpFormatter)
    add_global_arguments(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = _chosen(argv)
    helps = {DEMO[0]: DEMO[1], **{n: c.help for n, c in COMMANDS.items()}}
    for name in _names():
        p = sub.add_parser(name, help=helps[name], description=helps[name], formatter_class=HelpFormatter)
        if name != chosen:
            continue
        if name == DEMO[0]:
            from .demo import OPTIONS

            for opt in OPTIONS:
                opt.add_to(p)
        else:
            _run_arguments(p, COMMANDS[name])
        add_global_arguments(p, suppress=True)
    return parser


def _error(command: str | None, exc: BaseException) -> int:
    text = str(exc).strip().splitlines()
    msg = text[0] if text else type(exc).__name__
    if not isinstance(exc, (ValueError, OSError)):
        msg = f"{type(exc).__name__}: {msg}"
    print(f"cfm-jax{' ' + command if command else ''}: error: {msg}", file=sys.stderr)
    return 1


def _prepare(args: argparse.Namespace):
    """Check the options (a ValueError naming the bad one) and return what runs: a callable."""
    given = {k: v for k, v in vars(args).items() if not k.startswith("_") and v is not None}
    if args.command == DEMO[0]:
        from . import demo

        values = {o.name: o.check(given.get(o.name, o.default)) for o in demo.OPTIONS}
        return lambda: demo.main(**values)
    from .driver import default_out, execute, open_folder
    from .protocol import declared, resolve

    cmd = COMMANDS[args.command]
    chosen = cmd.select(given.get("parts"))
    names = set(declared(cmd.parts()))
    options = {k: v for k, v in given.items() if k in names}
    settings = resolve(chosen, quick=bool(args.quick), **options)
    mode = "resume" if args.resume else "overwrite" if args.overwrite else "new"
    out = args.out if args.out is not None else default_out(cmd, chosen)

    def go() -> int:
        folder = open_folder(cmd, chosen, settings, out, mode)
        report = execute(cmd, chosen, settings, folder, progress=not args.no_progress)
        return 0 if report.passed else 1

    return go


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
        if vars(args).get("no_progress"):
            os.environ["TQDM_DISABLE"] = "1"  # also for bars an experiment builds itself
        try:
            go = _prepare(args)  # every option checked, before any work
        except ValueError as e:  # a bad option value is a usage error, like argparse's own (exit 2)
            return _error(args.command, e) + 1
        try:
            apply_global_options(args)
            return int(go() or 0)
        except KeyboardInterrupt:  # a signal that arrived before the handlers were installed
            print(f"\ninterrupted: {INTERRUPTED}", file=sys.stderr)
            return 130
        except Exception as e:
            return _error(args.command, e)


if __name__ == "__main__":
    sys.exit(main())
