"""The command line's global options and what they switch on.

Global options
(``--float64``, ``--cache-dir``, ``--no-cache``, ``--cpu-devices``) are accepted before *and* after
the subcommand.

The persistent compilation cache lives in ``$CFM_JAX_CACHE_DIR``, else
``$XDG_CACHE_HOME/cfm_jax``, else ``~/.cache/cfm_jax``; a second run of the same experiment
loads its compiled XLA programs from there instead of compiling them again.

On the CPU backend the process gets one JAX device per core (``jax_num_cpu_devices``) unless
``XLA_FLAGS`` already forces a count: a sweep that splits its seeds across devices (``cfm-jax
rates``) then keeps every core busy, where one device leaves the solvers' small loops on one.
This module imports neither JAX nor an experiment, so ``--help`` stays fast.

(``RULES``, :func:`check_option`, :func:`add_experiment_arguments`, :func:`results_mode` and
:func:`configuration` serve the commands not yet written as parts; a part declares its options
and their rules itself, :class:`cfm_experiments.protocol.Option`.)
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Literal

#: environment variable overriding the compilation-cache folder.
CACHE_ENV = "CFM_JAX_CACHE_DIR"


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows ``(default: …)`` after every option that has a default (not for flags or ``None``)."""

    def _get_help_string(self, action):
        help_ = action.help or ""
        if (
            "%(default)" in help_
            or "default" in help_
            or action.default is None
            or action.default is False
            or action.default == argparse.SUPPRESS
            or not action.option_strings
        ):
            return help_
        return help_ + " (default: %(default)s)"


def default_cache_dir() -> Path:
    """``$CFM_JAX_CACHE_DIR``, else ``$XDG_CACHE_HOME/cfm_jax``, else ``~/.cache/cfm_jax``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "cfm_jax"


def add_global_arguments(parser: argparse.ArgumentParser, *, suppress: bool = False) -> None:
    """``--float64``, ``--cache-dir``, ``--no-cache``, ``--cpu-devices``.

    ``suppress``: on a subcommand, leave the values parsed before the subcommand untouched when
    the option is not repeated after it.
    """
    kw: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
    flag_kw: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {"default": False}
    parser.add_argument("--float64", action="store_true", help="compute in float64 (jax_enable_x64)", **flag_kw)
    parser.add_argument(
        "--cache-dir",
        type=Path,
        help=f"persistent compilation cache (default: ${CACHE_ENV}, "
        "else $XDG_CACHE_HOME/cfm_jax, else ~/.cache/cfm_jax)",
        **kw,
    )
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the compilation cache", **flag_kw)
    parser.add_argument(
        "--cpu-devices",
        type=int,
        metavar="N",
        help="JAX devices on the CPU backend (default: one per core, unless XLA_FLAGS forces a count)",
        **kw,
    )


def cpu_device_count(requested: int | None = None) -> int | None:
    """The CPU device count to set: ``requested``, else one per core; ``None`` when
    ``XLA_FLAGS`` already forces one (and nothing was requested)."""
    if requested is not None:
        check_option("cpu_devices", requested)
        return int(requested)
    if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""):
        return None
    return os.cpu_count() or 1


#: every numeric option of every subcommand, by its dest: (kind, lower bound, what the bound is for);
#: seeds also have an upper bound (a JAX PRNG seed is a 64-bit integer, offsets are added to it).
#: The command line checks them all in one pass (:func:`validate_options`) before any work starts;
#: the experiments' Python entry points check their arguments with the same rules (:func:`check_option`).
RULES: dict[str, tuple[str, float, str]] = {
    "cpu_devices": ("int", 1, ""),
    "dim": ("int", 1, ""),
    "dims": ("int", 1, ""),
    "control_dims": ("int", 1, ""),
    "context": ("int", 1, ""),
    "batch": ("int", 1, ""),
    "layers": ("int", 1, ""),
    "heads": ("int", 1, ""),
    "mlp_width": ("int", 0, "0: no MLP"),
    "width": ("int", 1, ""),
    "ns": ("int", 1, ""),
    "control_ns": ("int", 1, ""),
    "n_ref": ("int", 1, ""),
    "control_n_ref": ("int", 1, ""),
    "w1_ns": ("int", 1, ""),
    "seeds": ("int", 2, "a confidence interval needs two"),
    "realisations": ("int", 2, "a confidence interval needs two"),
    "steps": ("int", 4, ""),
    "fd_directions": ("int", 1, ""),
    "repeats": ("int", 1, ""),
    "eta": ("real", 0, ""),
    "seed": ("int", 0, ""),
}
_MAX_SEED = 2**62


def check_option(dest: str, value) -> None:
    """A ValueError naming ``--<dest>`` unless ``value`` (or each entry of a list) obeys :data:`RULES`.

    Integers must be >= the bound; reals finite and > it.
    """
    import math
    import numbers

    kind, low, why = RULES[dest]
    flag = "--" + dest.replace("_", "-")
    for v in value if isinstance(value, (list, tuple)) else (value,):
        if kind == "int":
            ok = isinstance(v, numbers.Integral) and not isinstance(v, bool) and int(v) >= low
            need = f"an integer >= {low:g}"
            if dest == "seed":
                ok, need = ok and v < _MAX_SEED, "an integer in [0, 2**62)"
        else:
            ok = isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and float(v) > low
            need = f"a finite number > {low:g}"
        if not ok:
            raise ValueError(f"{flag} must be {need}{f' ({why})' if why else ''}, got {v!r}.")


def validate_options(args: argparse.Namespace) -> None:
    """Check every option in ``args`` that has a rule (:data:`RULES`): one place for all subcommands,
    called by the command line before any work."""
    for dest, value in vars(args).items():
        if dest in RULES and value is not None:
            check_option(dest, value)


def add_experiment_arguments(parser: argparse.ArgumentParser, default_out: str) -> None:
    """The options every experiment subcommand shares (``--quick/--out/--resume/--seed/--no-progress``)."""
    parser.formatter_class = HelpFormatter
    parser.add_argument("--quick", action="store_true", help="reduced configuration (about a minute on 2 CPU cores)")
    parser.add_argument("--out", type=Path, default=Path(default_out), help="output folder")
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--resume",
        action="store_true",
        help="continue the results in OUT (only those of this same command and configuration)",
    )
    group.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the results in OUT (removed when the first new row is written, not before)",
    )
    parser.add_argument("--seed", type=int, default=0, help="base PRNG seed")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


#: options that do not change what an experiment computes (left out of its recorded configuration).
NOT_CONFIGURATION = frozenset(
    {"out", "resume", "overwrite", "no_progress", "command", "cache_dir", "no_cache", "cpu_devices", "float64"}
)


def results_mode(args: argparse.Namespace) -> Literal["new", "resume", "overwrite"]:
    """``"resume"``, ``"overwrite"`` or ``"new"`` from ``--resume``/``--overwrite`` (see
    :class:`cfm_jax.experiments.ResultsFolder`)."""
    if getattr(args, "resume", False) and getattr(args, "overwrite", False):
        raise ValueError("--resume and --overwrite exclude each other.")
    return "resume" if getattr(args, "resume", False) else "overwrite" if getattr(args, "overwrite", False) else "new"


def configuration(args: argparse.Namespace) -> dict:
    """The options that choose what an experiment computes (every option but output, progress,
    caching and device placement; the float precision is recorded separately)."""
    return {k: v for k, v in sorted(vars(args).items()) if not k.startswith("_") and k not in NOT_CONFIGURATION}


def enable_compilation_cache(path: str | os.PathLike) -> Path:
    """Point JAX's persistent compilation cache at ``path`` (created), caching every program."""
    import jax

    path = Path(path).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    # Cache every program, however small or quick to compile: the sweeps are many small ones.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path


def apply_global_options(args: argparse.Namespace) -> None:
    """Switch on ``--float64``, the compilation cache and the CPU device count.

    A cache folder that cannot be made, or ``--cpu-devices`` once JAX has started computing in this
    process, is a ValueError (the default count is then left as it is).
    """
    import jax

    requested = getattr(args, "cpu_devices", None)
    count = cpu_device_count(requested)
    if count is not None:
        try:
            jax.config.update("jax_num_cpu_devices", count)
        except RuntimeError:  # JAX already ran in this process (e.g. main() called from Python)
            if requested is not None:
                raise ValueError(
                    "--cpu-devices: JAX has already started in this process; set it before any computation."
                ) from None
    if getattr(args, "float64", False):
        jax.config.update("jax_enable_x64", True)
    if not getattr(args, "no_cache", False):
        path = getattr(args, "cache_dir", None) or default_cache_dir()
        try:
            enable_compilation_cache(path)
        except OSError as e:
            raise ValueError(f"--cache-dir {path}: cannot create it ({e.strerror or e}).") from None


def prepare_out(path: str | os.PathLike) -> Path:
    """Create the ``--out`` folder; a ValueError naming ``--out`` when that is impossible."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"--out {path}: cannot create the folder ({e.strerror or e}).") from None
    if not os.access(path, os.W_OK):
        raise ValueError(f"--out {path}: the folder is not writable.")
    return path


__all__ = [
    "CACHE_ENV",
    "RULES",
    "HelpFormatter",
    "add_experiment_arguments",
    "add_global_arguments",
    "apply_global_options",
    "check_option",
    "configuration",
    "cpu_device_count",
    "default_cache_dir",
    "enable_compilation_cache",
    "prepare_out",
    "results_mode",
    "validate_options",
]
