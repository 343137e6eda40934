"""Wall time of the main job, cold and warm: ``cfm-jax rates`` on built-in defaults.

    python benchmarks/bench_wall.py [--quick] [--tests]

Cold: an empty persistent compilation cache (a fresh temporary ``CFM_JAX_CACHE_DIR``); warm: the
same command again with the cache the cold run filled. Compilations are counted from JAX's own
log (``JAX_LOG_COMPILES``, one "Finished XLA compilation" line per program, compiled or loaded from the persistent cache). ``--tests``
also times the default test suite (``python -m pytest``) cold. Writes
``benchmarks/results/wall_times.{json,md}`` with the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def _run(cmd, cache, log_compiles=True):
    env = {**os.environ, "CFM_JAX_CACHE_DIR": str(cache), "TQDM_DISABLE": "1"}
    if log_compiles:
        env["JAX_LOG_COMPILES"] = "1"
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    log = proc.stdout + proc.stderr
    # ru_maxrss of the children is the largest so far: exact for the first run (cold), an upper
    # bound for later ones.
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {
        "command": " ".join(cmd),
        "wall_s": wall,
        "returncode": proc.returncode,
        "peak_rss_kb_so_far": peak_kb,
        "compilations": log.count("Finished XLA compilation"),
        "tail": log.strip().splitlines()[-1] if log.strip() else "",
    }


def main(argv=None):
    assert __doc__ is not None  # the module docstring is the description
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="time `cfm-jax rates --quick` instead of the defaults")
    p.add_argument("--tests", action="store_true", help="also time the default test suite (cold)")
    p.add_argument("--notes", default="")
    args = p.parse_args(argv)
    res = {"machine": machine(), "notes": args.notes}
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"

        def rates(out):
            return ["cfm-jax", "rates", "--out", str(out), "--no-progress"] + (["--quick"] if args.quick else [])

        res["rates_cold"] = _run(rates(Path(tmp) / "cold"), cache)
        res["rates_warm"] = _run(rates(Path(tmp) / "warm"), cache)
        cold_table = (Path(tmp) / "cold" / "table.txt").read_text()
        res["same_table"] = cold_table == (Path(tmp) / "warm" / "table.txt").read_text()
        committed = RESULTS / ("rates_quick" if args.quick else "rates") / "table.txt"
        res["same_as_committed_table"] = committed.exists() and cold_table == committed.read_text()
        if args.tests:
            res["tests_cold"] = _run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                Path(tmp) / "tcache",
                log_compiles=False,
            )
    for k in ("rates_cold", "rates_warm", "tests_cold"):
        if k in res:
            print(k, {a: res[k][a] for a in ("wall_s", "compilations", "returncode")}, flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "wall_times.json").write_text(json.dumps(res, indent=2) + "\n")
    m = res["machine"]
    lines = [
        "# Wall time of the main job",
        "",
        f"Machine: {m['processor']}, {m['cpu_count']} CPUs, jax {m['jax']} ({m['backend']}), otherwise idle. "
        "Cold = empty persistent compilation cache; warm = the cache the cold run filled.",
        "",
        "| run | wall (s) | XLA programs (compiled, or loaded from the cache when warm) | peak RSS so far (GB) | exit |",
        "|---|---|---|---|---|",
    ]
    for k, label in (
        ("rates_cold", "`cfm-jax rates` cold"),
        ("rates_warm", "`cfm-jax rates` warm"),
        ("tests_cold", "`python -m pytest` cold"),
    ):
        if k in res:
            r = res[k]
            comp = r["compilations"] if k != "tests_cold" else "—"
            lines.append(
                f"| {label}{' (--quick)' if args.quick and k != 'tests_cold' else ''} | {r['wall_s']:.0f} | {comp} | "
                f"{r['peak_rss_kb_so_far'] / 1e6:.1f} | {r['returncode']} |"
            )
    lines += [
        "",
        f"Same table cold and warm: {res['same_table']}; the same as the committed "
        f"`benchmarks/results/rates/table.txt`: {res['same_as_committed_table']}.",
    ]
    if res["notes"]:
        lines += ["", "Notes: " + res["notes"]]
    (RESULTS / "wall_times.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
