"""The command line's global options and what they switch on.

Global options
(``--float64``, ``--cache-dir``, ``--no-cache``, ``--cpu-devices``) are accepted before *and* after
the subcommand.

The persistent compilation cache lives in :func:`cfm_jax.default_cache_dir` (``$CFM_JAX_CACHE_DIR``,
else ``$XDG_CACHE_HOME/cfm_jax``, else ``~/.cache/cfm_jax``); a second run of the same experiment
loads its compiled XLA programs from there instead of compiling them again.

On the CPU backend the process gets one JAX device per core (``jax_num_cpu_devices``) unless
``XLA_FLAGS`` already forces a count: a sweep that splits its seeds across devices (``cfm-jax
rates``) then keeps every core busy, where one device leaves the solvers' small loops on one.
This module imports neither JAX nor an experiment, so ``--help`` stays fast.

An experiment's own options are declared by its parts (:class:`cfm_experiments.protocol.Option`);
the rule every list option shares, distinct values, is :func:`distinct`.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any


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
        type=path_argument,
        # the library's rule (cfm_jax.default_cache_dir), spelled out: help imports no JAX nor cfm_jax
        help="persistent compilation cache (default: $CFM_JAX_CACHE_DIR, "
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


def path_argument(text: str) -> Path:
    """A path option's value (argparse ``type``): an empty one is refused, where ``Path("")`` would
    silently be the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path is not a folder (name one, e.g. '.' for this one)")
    return Path(text)


def check_global_options(args: argparse.Namespace) -> None:
    """The global options checked before any work, importing neither JAX nor cfm_jax: ``--cpu-devices``
    is at least 1, ``--no-cache`` is not given with a ``--cache-dir`` it would ignore, and
    ``--cache-dir`` is a folder this process can write into, or can make (:func:`check_folder`). A
    ValueError naming the option otherwise (the command line's usage error, exit 2)."""
    requested = getattr(args, "cpu_devices", None)
    if requested is not None:
        cpu_device_count(requested)
    cache = getattr(args, "cache_dir", None)
    if cache is None:
        return
    if getattr(args, "no_cache", False):
        raise ValueError(f"--no-cache, --cache-dir {cache}: --no-cache uses no cache folder; give one of the two.")
    check_folder(cache, "--cache-dir")


def cpu_device_count(requested: int | None = None) -> int | None:
    """The CPU device count to set: ``requested``, else one per core; ``None`` when
    ``XLA_FLAGS`` already forces one (and nothing was requested)."""
    if requested is not None:
        if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
            raise ValueError(f"--cpu-devices must be an integer >= 1, got {requested!r}.")
        return int(requested)
    if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""):
        return None
    return os.cpu_count() or 1


def apply_global_options(args: argparse.Namespace) -> None:
    """Switch on ``--float64``, the compilation cache and the CPU device count.

    A cache folder that cannot be made, or ``--cpu-devices`` once JAX has started computing in this
    process, is a ValueError (the default count is then left as it is).
    """
    import jax

    import cfm_jax

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
        path = getattr(args, "cache_dir", None) or cfm_jax.default_cache_dir()
        try:
            cfm_jax.enable_compilation_cache(path)
        except ValueError as e:  # the library names its own argument, `path`: say the option instead
            raise ValueError(f"--cache-dir {path}: cannot create it ({str(e).rsplit('(', 1)[-1]}") from None


def check_out(path: str | os.PathLike) -> Path:
    """``--out``: a folder this process can write results into, or a path where it can make one
    (:func:`check_folder`)."""
    return check_folder(path, "--out")


def check_folder(path: str | os.PathLike, flag: str) -> Path:
    """The folder option ``flag`` (``--out``, ``--cache-dir``): a folder this process can write into,
    or a path where it can make one, checked before anything is written (a ValueError naming
    ``flag`` otherwise; an empty path too, which would be the current folder). An existing path
    must be a writable folder; for a new one, the nearest existing folder above it must let this
    process create a folder in it, probed by making and removing an empty temporary folder there
    (permission bits do not tell: the super-user passes them on ``/proc``)."""
    if not str(path).strip():
        raise ValueError(f"{flag} '': an empty path is not a folder (name one, e.g. '.' for this one).")
    out = Path(path).expanduser()
    if out.exists():
        if not out.is_dir():
            raise ValueError(f"{flag} {path}: exists and is not a folder.")
        if not os.access(out, os.W_OK | os.X_OK):
            raise ValueError(f"{flag} {path}: the folder is not writable.")
        return out
    above = out.absolute().parent
    while not above.exists():
        above = above.parent
    if not above.is_dir():
        raise ValueError(f"{flag} {path}: {above} is not a folder.")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".cfm-out-probe-", dir=above))
    except OSError as e:
        raise ValueError(f"{flag} {path}: cannot create a folder in {above} ({e.strerror or e}).") from None
    return out


def distinct(flag: str, values: Iterable[Any]) -> tuple:
    """``values`` as a tuple, or a ValueError naming ``flag`` when one repeats: each value of a list
    option is a configuration of its own (a repeat would run one twice, or measure it against
    itself: a difference of 0, a slope of ±inf)."""
    values = tuple(values)
    seen: list = []  # a list, not a set: the values need not be hashable
    for v in values:
        if v in seen:
            raise ValueError(
                f"{flag} must list distinct values (each is a configuration): {v!r} repeats in {list(values)}."
            )
        seen.append(v)
    return values


__all__ = [
    "HelpFormatter",
    "add_global_arguments",
    "apply_global_options",
    "check_folder",
    "check_global_options",
    "check_out",
    "cpu_device_count",
    "distinct",
    "path_argument",
]
