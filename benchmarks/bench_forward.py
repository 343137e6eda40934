"""Forward-solver benchmarks.

1. Attention throughput: achieved FLOP/s of one velocity evaluation of the whole context
   (queries = keys = the n context points; 4·n²·d FLOPs per head, the n² exponentials counted
   separately) divided by the FLOP/s of plain ``jnp.dot`` measured in the same run, both against
   a square 2048² matmul and against the same-shape (n, d)·(d, n) product.
2. Peak memory of one chunked forward step at n = 65536, d = 16 (resident-set high-water mark
   in a fresh process), next to smaller n to show it grows like n, and the dense path's n².
3. ``forward`` (its one loop: one solve per layer), run by autodiff and by the default hand
   adjoint, vs the same Euler steps written as a bare ``lax.scan``.
4. The cost of ``forward``'s value checks (``eqx.error_if`` inside the compiled program): the same
   call with the checks on (``throw=True``, the default) and off (``throw=False``), each in fresh
   processes, alternated.

Run: ``python benchmarks/bench_forward.py [--quick]``; writes ``benchmarks/results/forward.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import diffrax
import jax
import jax.numpy as jnp
from _machine import machine

import cfm_jax

RESULTS = Path(__file__).parent / "results"


def _best_time(fn, *args, reps=5, min_time=0.2):
    jax.block_until_ready(fn(*args))
    best = float("inf")
    total = 0.0
    count = 0
    while count < reps or total < min_time:
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        dt = time.perf_counter() - t0
        best = min(best, dt)
        total += dt
        count += 1
        if count >= 50:
            break
    return best


def _velocity_fn(model):
    field = model.field
    params = model.layer_params(0)

    def step(z):
        return field(z, cfm_jax.EmpiricalMeasure(z), params)

    return jax.jit(step)


def throughput(ns, ds, heads=1):
    sq = 2048
    a = jax.random.normal(jax.random.key(0), (sq, sq), jnp.float32)
    t_sq = _best_time(jax.jit(jnp.dot), a, a)
    dot_square = 2 * sq**3 / t_sq
    rows = []
    for d in ds:
        for n in ns:
            model = cfm_jax.Transformer.init(jax.random.key(1), d, heads=heads, layers=1, dtype=jnp.float32)
            z = jax.random.normal(jax.random.key(2), (n, d), jnp.float32)
            t = _best_time(_velocity_fn(model), z, reps=3)
            flops = 4 * n * n * d * heads
            zq = jax.random.normal(jax.random.key(3), (n, d), jnp.float32)
            t_same = _best_time(jax.jit(lambda p, q: p @ q.T), zq, z, reps=3)
            dot_same = 2 * n * n * d / t_same
            rows.append(
                {
                    "n": n,
                    "d": d,
                    "heads": heads,
                    "time_s": t,
                    "gflops": flops / t / 1e9,
                    "gexp_per_s": n * n * heads / t / 1e9,
                    "dot_square_gflops": dot_square / 1e9,
                    "dot_same_shape_gflops": dot_same / 1e9,
                    "ratio_vs_square_dot": flops / t / dot_square,
                    "ratio_vs_same_shape_dot": flops / t / dot_same,
                    "chunk_size": cfm_jax._fields.attention.resolve_chunk_size("auto", heads, n, n),
                }
            )
            print(rows[-1])
    return rows


_MEM_SCRIPT = """
import sys, jax, jax.numpy as jnp, cfm_jax
n, d, chunk = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
chunk = None if chunk == "dense" else chunk
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
model = cfm_jax.Transformer.init(jax.random.key(1), d, layers=1, dtype=jnp.float32, chunk_size=chunk)
z = jax.random.normal(jax.random.key(2), (n, d), jnp.float32)
params = model.layer_params(0)
f = jax.jit(lambda z: model.field(z, cfm_jax.EmpiricalMeasure(z), params))
compiled = f.lower(z).compile()
jax.block_until_ready(z)
base = status("VmRSS")
import time; t0 = time.perf_counter()
jax.block_until_ready(compiled(z))
print(status("VmHWM") - base, time.perf_counter() - t0)
"""


def step_memory(runs, d=16):
    """Peak resident memory added by one velocity evaluation (fresh subprocess per run)."""
    import subprocess
    import sys

    rows = []
    for n, path in runs:
        out = subprocess.run(
            [sys.executable, "-c", _MEM_SCRIPT, str(n), str(d), "auto" if path == "chunked" else "dense"],
            capture_output=True,
            text=True,
            check=True,
        )
        peak, secs = out.stdout.split()
        rows.append(
            {
                "n": n,
                "d": d,
                "path": path,
                "peak_extra_mib": int(peak) / 2**20,
                "n2_float32_mib": n * n * 4 / 2**20,
                "nd_float32_mib": n * d * 4 / 2**20,
                "time_s": float(secs),
            }
        )
        print(rows[-1])
    return rows


def _bare_scan(model, x, context):
    """The L-layer residual network as a bare ``lax.scan`` (no diffrax, no checks): the floor."""
    w, L = context.weights, model.num_layers

    def layer(state, l):
        x, z = state
        v = model.velocity(jnp.concatenate([x, z]), cfm_jax.EmpiricalMeasure.unchecked(z, w), model.layer_params(l))
        return (x + v[: x.shape[0]] / L, z + v[x.shape[0] :] / L), None

    return jax.lax.scan(layer, (x, context.points), jnp.arange(L))[0][0]


def _overhead_problem(n, d=16, layers=16, batch=8):
    model = cfm_jax.Transformer.init(jax.random.key(1), d, heads=2, mlp_width=32, layers=layers, dtype=jnp.float32)
    z = cfm_jax.EmpiricalMeasure(jax.random.normal(jax.random.key(2), (n, d), jnp.float32))
    x0 = jax.random.normal(jax.random.key(3), (batch, d), jnp.float32)
    return model, x0, z


def _default_times(ns, throw: bool = True) -> dict:
    """Best time of the default ``forward`` per n, in this process (for the check-cost comparison)."""

    def run(m, x, c):
        return cfm_jax.forward(m, x, c, throw=throw).x1

    return {str(n): _best_time(run, *_overhead_problem(n), reps=10) for n in ns}


def check_cost(ns, rounds=5):
    """forward with its value checks vs ``throw=False`` (fresh processes, alternated, best of ``rounds``)."""
    best = {"on": {}, "off": {}}
    for _ in range(rounds):
        for mode in ("on", "off"):
            env = {k: v for k, v in os.environ.items() if k != "EQX_ON_ERROR"}
            out = subprocess.run(
                [sys.executable, __file__, "--child-times", ",".join(map(str, ns))]
                + (["--child-unchecked"] if mode == "off" else []),
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            for n, t in json.loads(out.strip().splitlines()[-1]).items():
                best[mode][n] = min(t, best[mode].get(n, float("inf")))
    rows = [
        {
            "n": n,
            "checked_s": best["on"][str(n)],
            "unchecked_s": best["off"][str(n)],
            "ratio": best["on"][str(n)] / best["off"][str(n)],
        }
        for n in ns
    ]
    for r in rows:
        print(r)
    return rows


def diffrax_overhead(ns, d=16, layers=16, batch=8):
    rows = []
    for n in ns:
        model, x0, z = _overhead_problem(n, d, layers, batch)
        auto = diffrax.RecursiveCheckpointAdjoint()  # autodiff through the loop
        f_diffrax = jax.jit(lambda m, x, c: cfm_jax.forward(m, x, c, adjoint=auto).x1)
        f_default = jax.jit(lambda m, x, c: cfm_jax.forward(m, x, c).x1)  # the same loop inside DiscreteAdjoint
        f_scan = jax.jit(_bare_scan)
        t_d = _best_time(f_diffrax, model, x0, z)
        t_f = _best_time(f_default, model, x0, z)
        t_s = _best_time(f_scan, model, x0, z)
        rows.append(
            {
                "n": n,
                "d": d,
                "layers": layers,
                "diffrax_s": t_d,
                "default_s": t_f,
                "scan_s": t_s,
                "ratio": t_d / t_s,
                "default_ratio": t_f / t_s,
            }
        )
        print(rows[-1])
    return rows


def to_markdown(result) -> str:
    m = result["machine"]
    lines = [
        "# Forward benchmarks",
        "",
        f"Machine: {m['processor']}, {m['cpu_count']} CPUs, jax {m['jax']} ({m['backend']}). {result['note']}",
        "",
        "## Attention throughput (float32, one velocity evaluation of the whole context, H=1)",
        "",
        "| n | d | chunk | GFLOP/s | Gexp/s | ratio vs square dot | ratio vs (n,d)(d,n) dot |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["throughput"]:
        lines.append(
            f"| {r['n']} | {r['d']} | {r['chunk_size']} | {r['gflops']:.1f} | {r['gexp_per_s']:.2f} | "
            f"{r['ratio_vs_square_dot']:.2f} | {r['ratio_vs_same_shape_dot']:.2f} |"
        )
    sq = result["throughput"][0]["dot_square_gflops"]
    lines += [
        "",
        f"Square 2048² `jnp.dot`: {sq:.1f} GFLOP/s in the same run.",
        "",
        "## Memory of one forward step",
        "",
        "| n | d | path | peak extra MiB | n² float32 MiB | time s |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["memory"]:
        lines.append(
            f"| {r['n']} | {r['d']} | {r['path']} | {r['peak_extra_mib']:.1f} | {r['n2_float32_mib']:.0f} | "
            f"{r['time_s']:.2f} |"
        )
    lines += [
        "",
        "Peak resident memory added by one evaluation (VmHWM − VmRSS before the call, fresh process "
        "each). The chunked path stays O(n·d + H·chunk·n); the dense path holds the n² score matrix.",
        "",
        "## `forward` vs a bare `lax.scan` of the same Euler loop (d=16, H=2, m=32, L=16, B=8)",
        "",
        "Both run the one forward loop (one solve per layer): diffrax: `forward(..., "
        "adjoint=diffrax.RecursiveCheckpointAdjoint())`, whose layers `diffrax.diffeqsolve` solves; default: "
        "`forward(...)`, the loop inside `DiscreteAdjoint()`'s custom VJP, whose layers are a scan of the "
        "diffrax solver's steps. scan: the same Euler steps as a bare `lax.scan`, without diffrax or input checks.",
        "",
        "| n | diffrax s | default s | scan s | diffrax / scan | default / scan |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["diffrax_overhead"]:
        lines.append(
            f"| {r['n']} | {r['diffrax_s']:.4f} | {r.get('default_s', float('nan')):.4f} | {r['scan_s']:.4f} | "
            f"{r['ratio']:.3f} | {r.get('default_ratio', float('nan')):.3f} |"
        )
    if result.get("check_cost"):
        lines += [
            "",
            "## Cost of the value checks (`eqx.error_if` inside `forward`, same problem as above)",
            "",
            "Best time of the default `forward` with its checks on (`throw=True`) and off (`throw=False`) (fresh "
            "processes, alternated). The checks read x0, the context and the parameters once per call.",
            "",
            "| n | checks on s | checks off s | on / off |",
            "|---|---|---|---|",
        ]
        for r in result["check_cost"]:
            lines.append(f"| {r['n']} | {r['checked_s']:.4f} | {r['unchecked_s']:.4f} | {r['ratio']:.3f} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child-times", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-unchecked", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--only-overhead", action="store_true", help="sections 3 and 4 only (merged into the file)")
    parser.add_argument(
        "--note",
        default="Ratios are measured within one run; absolute numbers vary between runs on shared machines.",
    )
    args = parser.parse_args()
    if args.child_times:
        ns = [int(n) for n in args.child_times.split(",")]
        print(json.dumps(_default_times(ns, throw=not args.child_unchecked)))
        return
    ns = [1024, 4096] if args.quick else [1024, 4096, 16384]
    if args.only_overhead:
        result = json.loads((RESULTS / "forward.json").read_text())
        result["machine"] = machine()
    else:
        result = {"machine": machine(), "note": args.note, "throughput": throughput(ns, [16, 64])}
        result["memory"] = step_memory(
            [(4096, "dense"), (16384, "dense"), (16384, "chunked"), (32768, "chunked"), (65536, "chunked")]
        )
    result["diffrax_overhead"] = diffrax_overhead([256, 1024, 4096])
    result["check_cost"] = check_cost([256, 1024, 4096])
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "forward.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "forward.md").write_text(to_markdown(result))
    print(to_markdown(result))


if __name__ == "__main__":
    main()
