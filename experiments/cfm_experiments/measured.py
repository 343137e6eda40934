"""The measured wall times each command's ``--help`` quotes, read from the compile benchmark.

``benchmarks/bench_compile.py`` times every command in a fresh process, cold (an empty persistent
compilation cache) and warm (the cache the cold run filled), full and ``--quick``, and writes
``experiments/results/compile.json``; it writes what ``--help`` quotes of it, :func:`extract`, beside
this module as ``measured.json`` (package data: the package finds it installed too). A test holds
the two files equal. Standard library only: ``--help`` imports no JAX.
"""

from __future__ import annotations

import json
from importlib import resources

#: the package data file, beside this module.
FILE = "measured.json"


def duration(seconds: float) -> str:
    """``53 s``, or ``2 min 58 s`` from two minutes on (the benchmark's tables write the same)."""
    s = float(seconds)
    return f"{s:.0f} s" if s < 120 else f"{int(s // 60)} min {s % 60:02.0f} s"


def extract(bench: dict) -> dict:
    """What ``measured.json`` holds of the benchmark's results ``bench`` (``compile.json``): the
    machine (``"2-core CPU"``) and each command's cold and warm wall seconds, ``full`` and ``quick``."""
    m = bench["machine"]
    commands: dict[str, dict] = {}
    for key, entry in sorted(bench["commands"].items()):
        name, config = key.rsplit(" ", 1)
        if "wall_s" in entry["cold"] and "wall_s" in entry["warm"]:
            commands.setdefault(name, {})[config] = {
                "cold_s": entry["cold"]["wall_s"],
                "warm_s": entry["warm"]["wall_s"],
            }
    return {"machine": f"{m['cpu_count']}-core {m['backend'].upper()}", "commands": commands}


def load() -> dict:
    """The shipped ``measured.json`` (:func:`extract` of the committed benchmark)."""
    return json.loads(resources.files("cfm_experiments").joinpath(FILE).read_text(encoding="utf-8"))


def help_times(command: str, measured: dict | None = None) -> str:
    """The times ``cfm-jax COMMAND --help`` quotes (``measured``: :func:`load`'s), or ``""`` when the
    benchmark did not time both of its configurations."""
    measured = load() if measured is None else measured
    runs = measured["commands"].get(command, {})
    if "quick" not in runs or "full" not in runs:
        return ""
    q, f = runs["quick"], runs["full"]
    return (
        f"{measured['machine']}, otherwise idle: {duration(q['cold_s'])} with an empty compilation cache, "
        f"{duration(q['warm_s'])} with it filled; the default run {duration(f['cold_s'])} and {duration(f['warm_s'])}"
    )


__all__ = ["FILE", "duration", "extract", "help_times", "load"]
