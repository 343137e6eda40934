"""Two revisions of the library on one machine: each one's gradient and compile benchmarks.

    python benchmarks/bench_revisions.py --before REV [--after HEAD] [--rounds 2] [--notes TEXT]

Each revision is checked out into a temporary git worktree and runs its own
``bench_gradients.py`` (n = 64, 256, 1024, 4096; times only: no memory or accuracy sections) and
``bench_process.py`` (programs compiled and compiling seconds of the README's example, the entry
points and a user's step, in fresh processes on an empty cache), with that worktree (library and
experiments) first on the path. Rounds alternate the revisions (before, after, before, after, ...)
so that a drift of the machine falls on both; the table keeps each figure's best round (the
minimum time, the fewest compiling seconds). Per n: the forward's time and the time of a gradient
through the hand adjoint (``DiscreteAdjoint``), its ratio to the forward and to
``diffrax.RecursiveCheckpointAdjoint``'s; per script: programs compiled and compiling seconds.
Writes ``benchmarks/results/revisions.{json,md}`` with the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
SIZES = (64, 256, 1024, 4096)
HAND, AUTODIFF = "discrete_adjoint", "autodiff[RecursiveCheckpoint]"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def _run(tree: Path, script: str, *args: str) -> None:
    """``benchmarks/<script>`` of the checkout ``tree``, importing that checkout's packages."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), str(tree / "experiments")]))
    subprocess.run([sys.executable, str(tree / "benchmarks" / script), *args], cwd=tree, env=env, check=True)


def one_round(tree: Path) -> dict:
    """One run of both benchmarks in ``tree``: the gradient times per n and the compile figures per script."""
    out = tree / "benchmarks" / "results"
    _run(tree, "bench_gradients.py", "--sizes", *map(str, SIZES), "--skip-memory", "--skip-accuracy")
    _run(tree, "bench_process.py")
    grads = json.loads((out / "gradients.json").read_text())["times"]
    process = json.loads((out / "process.json").read_text())["scripts"]
    times = {
        r["n"]: {"forward_s": r["forward_s"], "hand_s": r[HAND + "_s"], "autodiff_s": r[AUTODIFF + "_s"]} for r in grads
    }
    compiles = {
        name: {"programs": r["first"]["programs"], "compile_s": r["first"]["compile_s"], "raised": r["first"]["raised"]}
        for name, r in process.items()
    }
    return {"times": times, "compile": compiles}


def best(rounds: list[dict]) -> dict:
    """Each figure's best round: the minimum time, the fewest compiling seconds (programs: that round's)."""
    times = {n: {k: min(r["times"][n][k] for r in rounds) for k in rounds[0]["times"][n]} for n in rounds[0]["times"]}
    compiles = {
        name: min((r["compile"][name] for r in rounds), key=lambda c: c["compile_s"]) for name in rounds[0]["compile"]
    }
    return {"times": times, "compile": compiles}


def markdown(res: dict) -> str:
    m, b, a = res["machine"], res["before"], res["after"]
    lines = [
        "# Two revisions on one machine",
        "",
        f"Machine: {m['processor']}, {m['cpu_count']} CPUs, JAX {m['jax']}"
        + (f"; {res['notes']}" if res["notes"] else "")
        + ".",
        f"Before: `{res['revisions']['before']}`; after: `{res['revisions']['after']}`; {res['rounds']} rounds "
        "alternating the two, each figure its best round. `python benchmarks/bench_revisions.py --before REV`.",
        "",
        "## Run: a gradient through `forward` (d = 16, L = 16, B = 4, float32; `bench_gradients.py`)",
        "",
        "| n | forward before (ms) | forward after (ms) | after / before | hand gradient before (ms) | after (ms) | after / before "
        "| hand / forward before | after | RecursiveCheckpoint / hand before | after |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in b["times"]:
        tb, ta = b["times"][n], a["times"][n]
        lines.append(
            f"| {n} | {1e3 * tb['forward_s']:.2f} | {1e3 * ta['forward_s']:.2f} | {ta['forward_s'] / tb['forward_s']:.2f} "
            f"| {1e3 * tb['hand_s']:.2f} | {1e3 * ta['hand_s']:.2f} | {ta['hand_s'] / tb['hand_s']:.2f} "
            f"| {tb['hand_s'] / tb['forward_s']:.2f} | {ta['hand_s'] / ta['forward_s']:.2f} "
            f"| {tb['autodiff_s'] / tb['hand_s']:.2f} | {ta['autodiff_s'] / ta['hand_s']:.2f} |"
        )
    lines += [
        "",
        "## Compile: the first of two fresh processes on an empty cache (`bench_process.py`)",
        "",
        "| script | programs before | after | compiling before (s) | after (s) | after / before | a NaN token after |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in b["compile"]:
        cb, ca = b["compile"][name], a["compile"][name]
        lines.append(
            f"| {name} | {cb['programs']} | {ca['programs']} | {cb['compile_s']:.1f} | {ca['compile_s']:.1f} "
            f"| {ca['compile_s'] / max(cb['compile_s'], 1e-9):.2f} | {ca['raised'] or ''} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--before", required=True, help="the earlier revision (a git commit)")
    parser.add_argument("--after", default="HEAD", help="the later revision (default HEAD)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--notes", default="", help="how the machine was loaded")
    args = parser.parse_args(argv)
    revisions = {k: _git("rev-parse", "--short", getattr(args, k)) for k in ("before", "after")}
    rounds: dict[str, list[dict]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {k: Path(tmp) / k for k in revisions}
        for k, rev in revisions.items():
            _git("worktree", "add", "--detach", str(trees[k]), rev)
        try:
            for _ in range(args.rounds):
                for k in ("before", "after"):
                    rounds[k].append(one_round(trees[k]))
        finally:
            for tree in trees.values():
                _git("worktree", "remove", "--force", str(tree))
    res = {
        "machine": machine(notes=args.notes),
        "revisions": revisions,
        "rounds": args.rounds,
        "notes": args.notes,
        "before": best(rounds["before"]),
        "after": best(rounds["after"]),
        "every_round": rounds,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "revisions.json").write_text(json.dumps(res, indent=1) + "\n")
    (RESULTS / "revisions.md").write_text(markdown(res))
    print(markdown(res))


if __name__ == "__main__":
    main()
