"""Command line: ``cfm-jax <command> [options]`` (also ``python -m cfm_experiments``).

The commands are the registry's (:mod:`cfm_experiments.registry`); each one's options are what its
parts declare (:mod:`cfm_experiments.declarations`), with the options every run has (``--quick``,
``--out``, ``--resume``/``--overwrite``, ``--seed``, ``--no-progress``, and ``--parts`` where it
has several parts) and the global ones (``--float64``, ``--cache-dir``, ``--no-cache``,
``--cpu-devices``), which may also follow the command. Help is text built from declarations: it
imports no experiment, nor JAX or matplotlib; the chosen command's parts are imported when it
runs. Every option is checked before any work, by the rule the Python entry point uses; errors end
with one line on stderr and a non-zero exit code (2 for a bad option, or for a command run without
matplotlib and tqdm, which this distribution depends on, installed); SIGINT/SIGTERM end any command
at once with 130/143, finished rows on disk (the line says how many, or that none were and a rerun
needs no ``--resume``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .options import (
    HelpFormatter,
    add_global_arguments,
    apply_global_options,
    check_global_options,
    check_out,
    path_argument,
)
from .registry import COMMANDS, Command
from .signals import exit_on_signals

if TYPE_CHECKING:
    from .results import ResultsFolder

DESCRIPTION = (
    "Contextual flow maps in JAX: the papers' experiments, and a demo.\n"
    "Experiments write OUT/run.json (what wrote the folder), OUT/rows.jsonl (one finished row per\n"
    "line), OUT/summary.json and PNG figures; a folder holding results needs --resume (the same\n"
    "command continues) or --overwrite. Global options may also follow the command."
)

#: ``cfm-jax demo``: not an experiment (it writes nothing).
DEMO = ("demo", "small forward solve on built-in defaults")

#: what this distribution needs beside cfm_jax (experiments/pyproject.toml), by import name: without
#: them the experiments cannot run (a broken installation), though every ``--help`` still shows.
EXTRA = frozenset({"matplotlib", "tqdm"})
#: what the experiments import of the extra: one of them failing to import (the package itself, or
#: a module it needs, such as pyplot's kiwisolver) is the extra missing.
EXTRA_MODULES = ("matplotlib", "matplotlib.pyplot", "tqdm")
NEEDS_EXTRA = (
    "cfm-jax: this command needs matplotlib and tqdm, which cfm_jax_experiments depends on: pip install matplotlib tqdm"
)

#: what an interrupt says when rows of the run are on disk, and when none are (``{folder}``, ``{n}``).
INTERRUPTED = "{n} finished row(s) are on disk in {folder}; rerun the same command with --resume to continue."
NOTHING_FINISHED = "no row was finished, so there is nothing to resume: rerun the same command (no --resume needed)."


class _Run:
    """The command being run and its results folder, once opened (what an interrupt reports)."""

    command: str | None = None  # set once the command line is parsed
    folder: ResultsFolder | None = None  # set when it is opened

    def interrupted(self) -> str:
        """What an interrupt leaves: the finished rows of this run and ``--resume``, or that there are
        none (nothing for the demo, which writes nothing)."""
        if self.command == DEMO[0]:
            return ""
        folder = self.folder
        n = 0 if folder is None else folder.finished_rows()
        return INTERRUPTED.format(n=n, folder=folder.path) if folder is not None and n else NOTHING_FINISHED


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
    """The options of ``cfm-jax <cmd>``: those of every run, ``--parts`` (with several parts), and
    its parts' own, from their declarations (no experiment imported); ``--quick`` quotes the
    command's measured times (:mod:`cfm_experiments.measured`)."""
    from .measured import help_times
    from .protocol import declared

    parts = cmd.declared()
    times = help_times(cmd.name)
    quick = "reduced configuration" + (f" ({times})" if times else "")
    p.add_argument("--quick", action="store_true", help=quick)
    out = f"results folder (default: {Path('cfm_out', cmd.name)}"  # the driver's default_out
    p.add_argument(
        "--out",
        type=path_argument,
        default=None,
        help=out + ("; with --parts other than the default: a subfolder named after them)" if len(parts) > 1 else ")"),
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
        default = " ".join(q.name for q in parts if not q.optional)
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
            from .declarations.demo import OPTIONS

            for opt in OPTIONS:
                opt.add_to(p)
        else:
            _run_arguments(p, COMMANDS[name])
        add_global_arguments(p, suppress=True)
    return parser


class _ExtraMissing(ImportError):
    """A module of the ``experiments`` extra (``module``) that does not import: ``needs`` names the
    missing module when it is not the extra's own."""

    def __init__(self, module: str, needs: str | None):
        super().__init__(f"{module} does not import", name=module)
        self.needs = needs


def _needs_extra(exc: BaseException) -> bool:
    """Whether ``exc`` is a module of the ``experiments`` extra missing."""
    if isinstance(exc, _ExtraMissing):
        return True
    return isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] in EXTRA


def _check_extra() -> None:
    """Import what the experiments use of the ``experiments`` extra: an :class:`_ExtraMissing`
    before any work when one does not import (the sweep imports tqdm only once it has started)."""
    for name in EXTRA_MODULES:
        try:
            importlib.import_module(name)
        except ImportError as e:
            missing = (e.name or "").split(".")[0]
            raise _ExtraMissing(name, None if missing in EXTRA else e.name or str(e)) from e


def _error(command: str | None, exc: BaseException) -> int:
    if _needs_extra(exc):  # a usage error: the command exists, this installation cannot run it
        why = (
            f" ({exc.name} needs {exc.needs}, which is missing)" if isinstance(exc, _ExtraMissing) and exc.needs else ""
        )
        print(NEEDS_EXTRA + why, file=sys.stderr)
        return 2
    text = str(exc).strip().splitlines()
    msg = text[0] if text else type(exc).__name__
    if not isinstance(exc, (ValueError, OSError)):
        msg = f"{type(exc).__name__}: {msg}"
    print(f"cfm-jax{' ' + command if command else ''}: error: {msg}", file=sys.stderr)
    return 1


def _check_declared(cmd: Command, given: dict, out: Path | None) -> None:
    """Every given option of ``cmd``'s chosen parts by its declared rule, and ``--out``, from the
    declarations alone (no experiment, no JAX imported): a bad value is refused in a fraction of a
    second, before the extra and the parts are imported. The parts' own checks of several options
    together run later, still before any folder is touched."""
    from .protocol import declared

    decls = cmd.declared()
    names = given.get("parts")
    chosen = [d for d in decls if d.name in names] if names else [d for d in decls if not d.optional]
    options = declared(chosen)
    for name, value in given.items():
        if name in options:
            options[name].check(value)
    check_out(out if out is not None else Path("cfm_out"))


def _prepare(args: argparse.Namespace, run: _Run):
    """Check the options (a ValueError naming the bad one) and return what runs: a callable (which
    notes in ``run`` the results folder it opens)."""
    given = {k: v for k, v in vars(args).items() if not k.startswith("_") and v is not None}
    check_global_options(args)
    if args.command == DEMO[0]:
        from . import demo

        values = {o.name: o.check(given.get(o.name, o.default)) for o in demo.OPTIONS}
        return lambda: demo.main(**values)
    cmd = COMMANDS[args.command]
    _check_declared(cmd, given, args.out)
    _check_extra()
    from .driver import default_out, execute, open_folder
    from .protocol import declared, resolve

    chosen = cmd.select(given.get("parts"))
    names = set(declared(cmd.parts()))
    options = {k: v for k, v in given.items() if k in names}
    settings = resolve(chosen, quick=bool(args.quick), **options)
    mode = "resume" if args.resume else "overwrite" if args.overwrite else "new"
    out = args.out if args.out is not None else default_out(cmd, chosen)

    def go() -> int:
        folder = run.folder = open_folder(cmd, chosen, settings, out, mode)
        report = execute(cmd, chosen, settings, folder, progress=not args.no_progress)
        return 0 if report.passed else 1

    return go


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    run = _Run()
    with exit_on_signals(run.interrupted):
        try:
            parser = build_parser(argv)
            for problem in COMMANDS.problems:  # a broken package's command: named, skipped
                print(f"cfm-jax: warning: {problem} (its command is skipped)", file=sys.stderr)
            args = parser.parse_args(argv)
            run.command = args.command
        except KeyboardInterrupt:
            return 130
        except Exception as e:  # an experiment module, or an installed command, that fails to load
            try:
                chosen = _chosen(argv)
            except ValueError:  # the installed commands are what failed
                chosen = None
            return _error(chosen, e)
        with _quiet(bool(vars(args).get("no_progress"))):
            return _execute(args, run)


@contextlib.contextmanager
def _quiet(quiet: bool):
    """``--no-progress`` for the bars an experiment builds itself: ``TQDM_DISABLE`` set while the
    command runs, the caller's value put back after (``main`` may be called from Python, whose later
    subprocesses inherit the environment). tqdm reads the variable once, when first imported: in the
    command's own process that is during the run; a tqdm imported earlier keeps its defaults. The
    driver's own bar follows ``--no-progress`` directly."""
    before = os.environ.get("TQDM_DISABLE")
    if quiet:
        os.environ["TQDM_DISABLE"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TQDM_DISABLE", None)
        else:
            os.environ["TQDM_DISABLE"] = before


def _execute(args: argparse.Namespace, run: _Run) -> int:
    """Check every option, then run the parsed command (the exit codes of :func:`main`)."""
    try:
        go = _prepare(args, run)  # every option checked, before any work
    except ValueError as e:  # a bad option value is a usage error, like argparse's own (exit 2)
        return _error(args.command, e) + 1
    except ImportError as e:  # the command's parts need what is not installed
        return _error(args.command, e)
    try:
        apply_global_options(args)
        return int(go() or 0)
    except KeyboardInterrupt:  # a signal that arrived before the handlers were installed
        text = run.interrupted()
        print(f"\ninterrupted: {text}" if text else "\ninterrupted", file=sys.stderr)
        return 130
    except Exception as e:
        return _error(args.command, e)


if __name__ == "__main__":
    sys.exit(main())
