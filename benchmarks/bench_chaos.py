"""Sweep throughput of the propagation-of-chaos experiment: the seeds of one program vmapped all at
once, mapped one at a time (``chaos.map_seeds``' batching, ``run_seeds(batch_size=0 | 1)``), or
run by a Python loop of single-seed programs.

Writes benchmarks/results/chaos.json and chaos.md. Compile time is excluded (every path is
warmed up first); times are the best of ``--repeats`` runs, on one device. Also records the
wall time of the committed default ``cfm-jax rates`` run (experiments/results/rates/summary.json).

    python benchmarks/bench_chaos.py [--seeds 16] [--repeats 3] [--notes "..."]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import numpy as np
from _machine import machine

from cfm_jax import chaos

RESULTS = Path(__file__).resolve().parent / "results"


def _best(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def seeds_loop(spec: chaos.ChaosSpec, seeds: int) -> dict:
    """The baseline: ``chaos.run_seeds``' rows by a Python loop over seeds, one seed at a time
    through the same programs (compiled once for a single seed)."""
    rows = [chaos.seed_deviations(spec, k) for k in jax.random.split(jax.random.key(0), seeds)]
    return {k: np.asarray([np.asarray(r[k]) for r in rows], dtype=np.float64) for k in rows[0]}


def main(argv=None):
    assert __doc__ is not None  # the module docstring is the description
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--notes", default="")
    args = p.parse_args(argv)

    cases = [
        (
            "tiny: attention d=2, ns=(4,8), n_ref=16, L=2, forward only",
            chaos.ChaosSpec(field="attention", dim=2, ns=(4, 8), n_ref=16, layers=2, batch=2, w1=False, adjoint=False),
        ),
        (
            "attention d=2, ns=(16,32), n_ref=128, tokens+W1-free, adjoint on",
            chaos.ChaosSpec(field="attention", dim=2, ns=(16, 32), n_ref=128, w1=False),
        ),
        (
            "attention d=8, ns=(16,32), n_ref=256, forward only",
            chaos.ChaosSpec(field="attention", dim=8, ns=(16, 32), n_ref=256, w1=False, adjoint=False),
        ),
        (
            "attention d=4, ns=(64,256,1024), exact reference, adjoint on, W1 off (a rates row's sizes)",
            chaos.ChaosSpec(
                field="attention",
                dim=4,
                ns=(64, 256, 1024),
                reference="gaussian",
                mlp_activation="linear",
                w1=False,
                grad_phi_max_n=32,
            ),
        ),
        (
            "attention d=8, 4 heads, ns=(256,1024), exact reference, forward only",
            chaos.ChaosSpec(
                field="attention",
                dim=8,
                heads=4,
                ns=(256, 1024),
                reference="gaussian",
                mlp_activation="linear",
                w1=False,
                adjoint=False,
            ),
        ),
    ]
    rows = []
    one = jax.local_devices()[:1]
    for name, spec in cases:
        ways = {
            "vmap": lambda: chaos.run_seeds(spec, args.seeds, devices=one, batch_size=0),
            "map": lambda: chaos.run_seeds(spec, args.seeds, devices=one, batch_size=1),
            "loop": lambda: seeds_loop(spec, args.seeds),
        }
        for fn in ways.values():
            fn()  # compile
        t = {way: _best(fn, args.repeats) for way, fn in ways.items()}
        rows.append(
            dict(
                case=name,
                seeds=args.seeds,
                **{f"{way}_s": v for way, v in t.items()},
                **{f"{way}_seeds_per_s": args.seeds / v for way, v in t.items()},
                map_over_vmap=t["vmap"] / t["map"],
                vmap_over_loop=t["loop"] / t["vmap"],
            )
        )
        print(rows[-1], flush=True)

    rates = RESULTS / "rates" / "summary.json"
    rates_wall = None
    if rates.exists():
        s = json.loads(rates.read_text())
        rates_wall = s.get("rows_seconds", s.get("sweep_seconds"))  # the driver's name; the legacy one
    out = dict(machine=machine(), notes=args.notes, throughput=rows, default_rates_sweep_seconds=rates_wall)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "chaos.json").write_text(json.dumps(out, indent=2) + "\n")
    lines = [
        "# Propagation-of-chaos sweep throughput",
        "",
        f"Machine: {out['machine']['processor']}, {out['machine']['cpu_count']} CPUs, jax {out['machine']['jax']} "
        f"({out['machine']['backend']}).",
        "Compile time excluded; best of %d runs. %s" % (args.repeats, args.notes),
        "",
        "| case | seeds | vmap (seeds/s) | lax.map (seeds/s) | Python loop (seeds/s) | lax.map / vmap | vmap / loop |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['seeds']} | {r['vmap_seeds_per_s']:.1f} | {r['map_seeds_per_s']:.1f} | "
            f"{r['loop_seeds_per_s']:.1f} | {r['map_over_vmap']:.2f}x | {r['vmap_over_loop']:.2f}x |"
        )
    lines += [
        "",
        "vmap: every seed of a program at once (`run_seeds(batch_size=0)`, the default on accelerators); "
        "lax.map: one seed after another inside the same program (`batch_size=1`, the default on CPUs); "
        "Python loop: one single-seed program per seed. On a CPU a vmapped n-point system's score matrices "
        "(seeds × H(n + B) × n entries) leave the caches once n reaches the hundreds, and the batched "
        "system runs memory-bound.",
    ]
    if rates_wall is not None:
        lines += [
            "",
            f"Default `cfm-jax rates` (committed in `results/rates/`): {rates_wall:.0f} s of sweep time "
            "(sum over configurations, compile included).",
        ]
    (RESULTS / "chaos.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
