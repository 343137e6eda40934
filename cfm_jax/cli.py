"""Command line: ``cfm-jax <command>`` (also ``python -m cfm_jax``).

Each experiment subcommand lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> int``; this file only dispatches (modules are imported lazily so that
``cfm-jax demo`` starts fast). Experiment subcommands share ``--quick``, ``--out DIR`` and
``--resume`` and write ``DIR/summary.json`` plus PNG figures.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("cfm_jax._demo", "small forward solve on built-in defaults"),
    "gradcheck": ("cfm_jax.experiments.gradcheck", "compare gradient methods and finite differences"),
    "rates": ("cfm_jax.experiments.chaos", "finite vs infinite context: fitted rates in n and d"),
    "ogd": ("cfm_jax.experiments.ogd_ablation", "ridge-regularised OGD ablation over lambda and n"),
    "sync": ("cfm_jax.experiments.sync", "stochastic transformer: synchronisation and Lyapunov table"),
}


def add_experiment_arguments(parser: argparse.ArgumentParser, default_out: str) -> None:
    """The options every experiment subcommand shares."""
    parser.add_argument("--quick", action="store_true", help="reduced configuration (~1 min on 2 CPU cores)")
    parser.add_argument("--out", default=default_out, help=f"output folder (default: {default_out})")
    parser.add_argument("--resume", action="store_true", help="keep finished rows in OUT and run only the rest")
    parser.add_argument("--seed", type=int, default=0, help="base PRNG seed")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cfm-jax", description=__doc__.splitlines()[0])
    parser.add_argument("--float64", action="store_true", help="enable jax_enable_x64")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, help_) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            p.set_defaults(_missing=module)
            continue
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "_missing", None):
        parser.error(f"`{args.command}` is not available in this build (module {args._missing} missing).")
    if args.float64:
        import jax

        jax.config.update("jax_enable_x64", True)
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("\ninterrupted: finished rows are on disk; rerun with --resume to continue.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
