"""The compile budget of every command: cold and warm, full and ``--quick``.

    python experiments/benchmarks/bench_compile.py [--commands [rates claims ...]] [--configs quick full]
                                       [--xla-options [OPTION ...]] [--tests] [--merge] [--keep]
                                       [--notes TEXT]

For each command of the registry (or those named; ``--commands`` alone: none) and each configuration (``--quick`` and the built-in defaults):
a **cold** run on an empty persistent compilation cache (a fresh ``CFM_JAX_CACHE_DIR``), then a
**warm** run of the same command with the cache the cold run filled. Each run's ``summary.json``
says what the compiler did (the driver records it: programs compiled, their total and largest
compile time, programs loaded from the cache, time spent tracing and lowering); the wall time is
measured around the whole process (interpreter start and imports included). Per command and
configuration: programs, total and largest compile time, the run time after compilation (cold wall
− compile − tracing), the warm wall time, the peak memory, and whether the targets hold (no program
compiles for more than 10 s; compilation at most a quarter of a cold run; the main job cold within
1.3× of warm; ``claims --quick`` cold under 3 minutes).

``--xla-options`` times ``rates --quick`` cold and warm under XLA's CPU compile options (all of
them, or those named): ``jax_disable_most_optimizations``, LLVM's expensive passes off, LLVM's
optimisation level 1, XLA:CPU's fusion emitters off, and the test suite's setting (the first and
the fourth together).
``--tests`` also times the default test suite, cold then warm. Writes
``experiments/results/compile.{json,md}`` with the machine, and the times ``--help`` quotes
(``cfm_experiments/measured.json``), after every command (``--merge``: keep
the entries of the committed file that this run does not repeat). ``--keep``: the warm run of each
default configuration becomes the command's committed results folder ``experiments/results/<command>``
(the cold and warm runs' results must agree: ``same_results``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository: the tests run from there
sys.path.insert(0, str(ROOT / "benchmarks"))  # the machine's description, shared with the library's benchmarks

from _machine import machine  # noqa: E402  # pyright: ignore[reportMissingImports]

from cfm_experiments import measured  # noqa: E402  (its formatter and what --help quotes)

RESULTS = ROOT / "experiments" / "results"
#: targets on the 2-core CPU with nothing else running
LARGEST_S, COMPILE_SHARE, COLD_OVER_WARM, CLAIMS_QUICK_S = 10.0, 0.25, 1.3, 180.0

#: compile options compared by --xla-options: name -> extra environment
XLA_OPTIONS = {
    "default": {},
    "JAX_DISABLE_MOST_OPTIMIZATIONS=1": {"JAX_DISABLE_MOST_OPTIMIZATIONS": "1"},
    "LLVM expensive passes off": {"XLA_FLAGS": "--xla_llvm_disable_expensive_passes=true"},
    "LLVM optimisation level 1, expensive passes off": {
        "XLA_FLAGS": "--xla_backend_optimization_level=1 --xla_llvm_disable_expensive_passes=true"
    },
    "fusion emitters off": {"XLA_FLAGS": "--xla_cpu_use_fusion_emitters=false"},
    "the tests' setting: JAX_DISABLE_MOST_OPTIMIZATIONS=1, fusion emitters off": {
        "JAX_DISABLE_MOST_OPTIMIZATIONS": "1",
        "XLA_FLAGS": "--xla_cpu_use_fusion_emitters=false",
    },
}


def module_seconds(report: Path) -> dict[str, float]:
    """Seconds per test module (its tests' set-up, call and tear-down, summed over both workers) from
    pytest's JUnit XML report, largest first."""
    import xml.etree.ElementTree as ET

    per: dict[str, float] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        parts = case.get("classname", "?").split(".")  # tests.test_x (or experiments.tests.test_x.TestClass)
        module = next((p for p in parts if p.startswith("test_")), parts[-1])
        per[module] = per.get(module, 0.0) + float(case.get("time", 0.0))
    return dict(sorted(per.items(), key=lambda kv: -kv[1]))


def _peak_kb() -> int:
    # ru_maxrss of the children is the largest so far: exact for the first run, an upper bound after
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss


def run_once(argv: list[str], cache: Path, out: Path, env_extra: dict | None = None) -> dict:
    """One ``cfm-jax`` process: its wall time, exit code and what its summary.json recorded."""
    env = {**os.environ, "CFM_JAX_CACHE_DIR": str(cache), "TQDM_DISABLE": "1", **(env_extra or {})}
    cmd = ["cfm-jax", *argv, "--out", str(out), "--no-progress"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    res = {"command": " ".join(cmd[:-3]), "wall_s": wall, "returncode": proc.returncode, "peak_rss_kb": _peak_kb()}
    if proc.returncode not in (0, 1):
        res["error"] = (proc.stderr.strip().splitlines() or [""])[-1]
        return res
    summary = json.loads((out / "summary.json").read_text())
    res.update(compile=summary["compile"], inner_wall_s=summary["wall_seconds"], rows_s=summary["rows_seconds"])
    res["results"] = {k: summary.get(k) for k in ("results", "claims")}
    return res


def cold_and_warm(argv: list[str], tmp: Path, env_extra: dict | None = None) -> dict:
    cache = tmp / "cache"
    cold = run_once(argv, cache, tmp / "cold", env_extra)
    warm = run_once(argv, cache, tmp / "warm", env_extra)
    entry = {"cold": cold, "warm": warm}
    if "compile" in cold and "compile" in warm:
        c = cold["compile"]
        entry["programs"] = c["programs"]
        entry["compile_s"] = c["seconds"]
        entry["largest_s"] = c["largest"]
        entry["largest_name"] = c["largest_name"]
        entry["trace_s"] = c["trace_seconds"]
        entry["run_after_compile_s"] = cold["wall_s"] - c["seconds"] - c["trace_seconds"]
        entry["compile_share"] = c["seconds"] / cold["wall_s"]
        entry["cold_over_warm"] = cold["wall_s"] / warm["wall_s"]
        entry["warm_programs"] = warm["compile"]["programs"]
        entry["same_results"] = cold.pop("results") == warm.pop("results")
    return entry


def _targets(name: str, config: str, e: dict) -> list[str]:
    """The targets this entry misses (empty: all met)."""
    miss = []
    if e.get("largest_s", 0) > LARGEST_S:
        miss.append(f"a program compiled for {e['largest_s']:.1f} s > {LARGEST_S:g} s")
    if e.get("compile_share", 0) > COMPILE_SHARE:
        miss.append(f"compilation {100 * e['compile_share']:.0f} % of the cold run > {100 * COMPILE_SHARE:.0f} %")
    if name == "rates" and config == "full" and e.get("cold_over_warm", 0) > COLD_OVER_WARM:
        miss.append(f"cold {e['cold_over_warm']:.2f}× warm > {COLD_OVER_WARM}×")
    if name == "claims" and config == "quick" and e["cold"]["wall_s"] > CLAIMS_QUICK_S:
        miss.append(f"cold {e['cold']['wall_s']:.0f} s > {CLAIMS_QUICK_S:.0f} s")
    return miss


def markdown(res: dict) -> str:
    m = res["machine"]
    lines = [
        "# Compile budget of every command",
        "",
        f"Machine: {m['processor']}, {m['cpu_count']} CPUs, {m['platform']}; Python {m['python']}, "
        f"JAX {m['jax']} ({m['backend']}). {res.get('notes', '')}",
        "",
        "Cold: an empty persistent compilation cache; warm: the same command again with the cache the cold "
        "run filled. Wall times around the whole process; compile figures from the run's `summary.json`. "
        "*cold = warm results*: the two runs' results and claim lines are equal (`gradcheck`'s results "
        "hold its own timings, so its runs differ by design). Targets: no program compiles for more "
        "than 10 s; compilation at most a quarter of a cold run; the main job cold within 1.3× of warm; "
        "`claims --quick` cold under 3 minutes. Peak memory: the largest resident size of the benchmark's "
        "child processes so far (exact for the first run of an invocation, an upper bound after).",
        "",
        "| command | programs | compile (largest) | tracing | run after compile | cold | warm | cold/warm | "
        "peak memory | cold = warm results | targets |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, e in res["commands"].items():
        if "programs" not in e:
            lines.append(f"| `{e['cold']['command']}` | failed: {e['cold'].get('error', '')} | | | | | | | | | |")
            continue
        miss = e["missed_targets"]
        lines.append(
            f"| `{e['cold']['command']}` | {e['programs']} (warm: {e['warm_programs']}) | "
            f"{e['compile_s']:.1f} s ({e['largest_s']:.1f} s) | {e['trace_s']:.1f} s | "
            f"{measured.duration(e['run_after_compile_s'])} | {measured.duration(e['cold']['wall_s'])} | {measured.duration(e['warm']['wall_s'])} | "
            f"{e['cold_over_warm']:.2f} | {e['cold']['peak_rss_kb'] / 2**20:.1f} GB | "
            f"{'yes' if e.get('same_results') else 'no'} | {'met' if not miss else '; '.join(miss)} |"
        )
    if res.get("xla_options"):
        lines += [
            "",
            "## XLA's CPU compile options (`cfm-jax rates --quick`)",
            "",
            "| option | programs | compile | cold | warm |",
            "|---|---|---|---|---|",
        ]
        # in XLA_OPTIONS' order, whichever run measured each row (--merge)
        order = {name: i for i, name in enumerate(XLA_OPTIONS)}
        rows = sorted(res["xla_options"].items(), key=lambda kv: order.get(kv[0], len(order)))
        for name, e in rows:
            lines.append(
                f"| {name} | {e.get('programs', '—')} | {e.get('compile_s', float('nan')):.1f} s | "
                f"{measured.duration(e['cold']['wall_s'])} | {measured.duration(e['warm']['wall_s'])} |"
            )
    if res.get("tests"):
        t = res["tests"]
        lines += [
            "",
            f"Test suite (`python -m pytest`): cold {measured.duration(t['cold_s'])}, warm {measured.duration(t['warm_s'])}.",
        ]
        if t.get("modules_cold_s"):
            cold, warm = t["modules_cold_s"], t["modules_warm_s"]
            lines += [
                "",
                f"Where the time goes: seconds per test module, summed over both workers (all {len(cold)} modules: "
                f"{sum(cold.values()):.0f} s cold, {sum(warm.values()):.0f} s warm); the ten largest cold:",
                "",
                "| module | cold | warm |",
                "|---|---|---|",
                *[f"| `{m}` | {c:.0f} s | {warm.get(m, 0.0):.0f} s |" for m, c in list(cold.items())[:10]],
            ]
    return "\n".join(lines) + "\n"


def keep(run: Path, folder: Path) -> None:
    """``run``'s files replace ``folder``'s; its subfolders (other parts' committed results) stay."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        if old.is_file():
            old.unlink()
    for new in run.iterdir():
        if new.is_file():
            shutil.copy2(new, folder / new.name)


def write(res: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "compile.json").write_text(json.dumps(res, indent=2) + "\n")
    (RESULTS / "compile.md").write_text(markdown(res))
    # what --help quotes of it, shipped with the package
    (ROOT / "experiments" / "cfm_experiments" / measured.FILE).write_text(
        json.dumps(measured.extract(res), indent=2) + "\n"
    )


def main(argv=None):
    assert __doc__ is not None
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--commands", nargs="*", default=None, help="commands to time (default: every registered one)")
    p.add_argument("--configs", nargs="+", choices=("quick", "full"), default=["quick", "full"])
    p.add_argument(
        "--xla-options",
        nargs="*",
        choices=list(XLA_OPTIONS),
        default=None,
        help="compare XLA's CPU compile options on rates --quick (default: all of them)",
    )
    p.add_argument("--tests", action="store_true", help="also time the default test suite, cold and warm")
    p.add_argument("--merge", action="store_true", help="keep the committed entries this run does not repeat")
    p.add_argument("--keep", action="store_true", help="the default runs become the committed results folders")
    p.add_argument("--notes", default="")
    args = p.parse_args(argv)
    from cfm_experiments.registry import COMMANDS

    names = list(COMMANDS) if args.commands is None else args.commands
    res: dict = {"machine": machine(), "notes": args.notes, "commands": {}}
    committed = RESULTS / "compile.json"
    if args.merge and committed.exists():
        old = json.loads(committed.read_text())
        res = {**old, **res, "commands": old["commands"]}
    for name in names:
        for config in args.configs:
            with tempfile.TemporaryDirectory() as tmp:
                e = cold_and_warm([name] + (["--quick"] if config == "quick" else []), Path(tmp))
                if args.keep and config == "full" and e.get("same_results"):
                    keep(Path(tmp) / "warm", RESULTS / name)
            e["missed_targets"] = _targets(name, config, e) if "programs" in e else ["failed"]
            res["commands"][f"{name} {config}"] = e
            write(res)
            print(f"{name} {config}: {json.dumps({k: v for k, v in e.items() if k not in ('cold', 'warm')})}")
    if args.xla_options is not None:
        res["xla_options"] = res.get("xla_options", {}) if args.merge else {}
        for label in args.xla_options or list(XLA_OPTIONS):
            env = XLA_OPTIONS[label]
            with tempfile.TemporaryDirectory() as tmp:
                res["xla_options"][label] = cold_and_warm(["rates", "--quick"], Path(tmp), env)
    if args.tests:
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "CFM_JAX_CACHE_DIR": str(Path(tmp) / "cache")}
            times, modules = [], []
            for run in ("cold", "warm"):
                report = Path(tmp) / f"{run}.xml"
                cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"]
                t0 = time.perf_counter()
                subprocess.run(cmd, cwd=ROOT, env=env)
                times.append(time.perf_counter() - t0)
                modules.append(module_seconds(report))
            res["tests"] = {
                "cold_s": times[0],
                "warm_s": times[1],
                "modules_cold_s": modules[0],
                "modules_warm_s": modules[1],
            }
    write(res)
    print(markdown(res))


if __name__ == "__main__":
    main()
