"""The measured wall times each command's ``--help`` quotes, and the programs its progress bar
counts while it compiles, read from the compile benchmark.

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
    machine (``"2-core CPU"``) and each command's cold and warm wall seconds, ``full`` and ``quick``,
    and the ``programs`` its cold run built (compiled, or loaded from the cache it was filling), which
    the progress bar counts down while a run compiles (:func:`expected_programs`)."""
    m = bench["machine"]
    commands: dict[str, dict] = {}
    for key, entry in sorted(bench["commands"].items()):
        name, config = key.rsplit(" ", 1)
        cold, warm = entry["cold"], entry["warm"]
        if "wall_s" in cold and "wall_s" in warm:
            commands.setdefault(name, {})[config] = {"cold_s": cold["wall_s"], "warm_s": warm["wall_s"]}
            if "compile" in cold:
                built = cold["compile"]["programs"] + cold["compile"]["cache_loads"]
                commands[name][config]["programs"] = built
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


def expected_programs(command: str, config: str, measured: dict | None = None) -> int | None:
    """The programs the benchmark's cold run of ``cfm-jax COMMAND`` built, ``config`` ``"full"`` or
    ``"quick"`` (``measured``: :func:`load`'s); None when it did not count them."""
    measured = load() if measured is None else measured
    return measured["commands"].get(command, {}).get(config, {}).get("programs")


__all__ = ["FILE", "duration", "expected_programs", "extract", "help_times", "load"]
