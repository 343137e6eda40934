"""Benchmark of the stochastic transformer (docs/stochastic.md).

* layers/s of the discrete model (SA attention + random MLP) and steps/s of the limit SDE
  (exact sampler, random features) for N ∈ {64, 1024}, d = 16, m = 256;
* the same SDE scheme through diffrax (UnsafeBrownianPath, VirtualBrownianTree) vs the scan;
* cost of one exact increment (O(N³) eigendecomposition) vs random features (O(N m d)) over N,
  and the crossover N where random features take over.

Writes ``benchmarks/results/stochastic.{json,md}``. Compile time is excluded (one warm-up call);
each timing is the median of a few repeats.

    python benchmarks/bench_stochastic.py [--quick]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import diffrax
import jax
import jax.numpy as jnp
from _machine import machine
from _timing import warm_median

from cfm_jax.stochastic import (
    NoiseKernel,
    SphereAttention,
    SphereSDE,
    StochasticTransformer,
    brownian_path,
    exact_increment,
    feature_increment,
    random_tokens,
    simulate,
    solve_diffrax,
)

OUT = Path(__file__).parent / "results"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--notes", default="", help="how the machine was loaded during the run")
    args = ap.parse_args(argv)
    d, m = 16, 256
    k = NoiseKernel("relu", 1.0, 1.0, 0.5)
    att = SphereAttention("SA", 1.0)
    key = jax.random.key(0)
    rows = []
    for N in (64, 1024):
        x0 = random_tokens(jax.random.key(1), N, d, jnp.float32)
        L = 50 if N == 64 else 20
        disc = StochasticTransformer(k, width=m, layers=L, horizon=1.0, attention=att)
        t = warm_median(jax.jit(lambda kk: simulate(disc, x0, kk)[1]), key)
        rows.append({"what": "discrete model (SA + MLP)", "N": N, "per_second": L / t, "unit": "layers/s"})
        feat = SphereSDE(k, steps=L, horizon=1.0, attention=att, noise="features", width=m)
        t = warm_median(jax.jit(lambda kk: simulate(feat, x0, kk)[1]), key)
        rows.append({"what": f"SDE, random features m={m}", "N": N, "per_second": L / t, "unit": "steps/s"})
        S = 20 if N == 64 else 3
        exact = SphereSDE(k, steps=S, horizon=1.0, attention=att, noise="exact")
        t = warm_median(jax.jit(lambda kk: simulate(exact, x0, kk)[1]), key, repeats=2 if N > 64 else 3)
        rows.append({"what": "SDE, exact sampler", "N": N, "per_second": S / t, "unit": "steps/s"})
    # diffrax vs scan on the same scheme (exact noise, N = 64, float32)
    N, S = 64, 20
    x0 = random_tokens(jax.random.key(1), N, d, jnp.float32)
    sde = SphereSDE(k, steps=S, horizon=1.0, attention=att)
    t_scan = warm_median(jax.jit(lambda kk: simulate(sde, x0, kk)[1]), key)
    dfx = {}
    for kind, path_type in (("unsafe", diffrax.UnsafeBrownianPath), ("tree", diffrax.VirtualBrownianTree)):
        f = jax.jit(
            lambda kk: solve_diffrax(sde, x0, brownian_path(kk, sde, (N, d), path_type=path_type, dtype=jnp.float32))
        )
        dfx[kind] = warm_median(f, key)
    integrators = {
        "scan_steps_per_s": S / t_scan,
        "diffrax_unsafe_steps_per_s": S / dfx["unsafe"],
        "diffrax_tree_steps_per_s": S / dfx["tree"],
        "unsafe_over_scan_time": dfx["unsafe"] / t_scan,
        "tree_over_scan_time": dfx["tree"] / t_scan,
    }
    # exact sampler vs random features per increment, over N
    Ns = (16, 64, 256, 1024) if args.quick else (16, 32, 64, 128, 256, 512, 1024, 2048)
    sampler = []
    for N in Ns:
        x = random_tokens(jax.random.key(2), N, d, jnp.float32)
        te = warm_median(jax.jit(lambda kk: exact_increment(kk, x, k, 0.01)), key)
        tf = {
            mm: warm_median(jax.jit(lambda kk, mm=mm: feature_increment(kk, x, k, 0.01, mm)), key) for mm in (256, 4096)
        }
        sampler.append(
            {"N": N, "exact_ms": 1e3 * te, "features_m256_ms": 1e3 * tf[256], "features_m4096_ms": 1e3 * tf[4096]}
        )
    cross = next((s["N"] for s in sampler if s["exact_ms"] > s["features_m4096_ms"]), None)
    res = {
        "machine": machine(dtype="float32", note="shared, noisy machine (other engineers running jobs concurrently)"),
        "d": d,
        "m": m,
        "throughput": rows,
        "integrators_N64": integrators,
        "sampler_cost": sampler,
        "crossover_N_exact_slower_than_features_m4096": cross,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "stochastic.json").write_text(json.dumps(res, indent=2) + "\n")
    md = [
        "# Stochastic transformer benchmark",
        "",
        f"Machine: {res['machine']['processor']}, {res['machine']['cpu_count']} CPUs, jax {res['machine']['jax']} "
        f"({res['machine']['backend']}), "
        f"float32. {args.notes or 'Compare ratios, not absolutes.'}",
        "",
        f"## Throughput (d = {d}, m = {m}, SA attention on)",
        "",
        "| model | N | rate |",
        "|---|---:|---:|",
    ]
    md += [f"| {r['what']} | {r['N']} | {r['per_second']:.1f} {r['unit']} |" for r in rows]
    md += [
        "",
        "## Integrators, same scheme (exact noise, N = 64)",
        "",
        "| integrator | steps/s | time vs scan |",
        "|---|---:|---:|",
        f"| lax.scan | {integrators['scan_steps_per_s']:.1f} | 1.00 |",
        f"| diffrax, UnsafeBrownianPath | {integrators['diffrax_unsafe_steps_per_s']:.1f} | {integrators['unsafe_over_scan_time']:.2f} |",
        f"| diffrax, VirtualBrownianTree | {integrators['diffrax_tree_steps_per_s']:.1f} | {integrators['tree_over_scan_time']:.2f} |",
        "",
        "## One increment: exact sampler (eigh, O(N³)) vs random features (O(N m d))",
        "",
        "| N | exact (ms) | features m=256 (ms) | features m=4096 (ms) |",
        "|---:|---:|---:|---:|",
    ]
    md += [
        f"| {s['N']} | {s['exact_ms']:.3f} | {s['features_m256_ms']:.3f} | {s['features_m4096_ms']:.3f} |"
        for s in sampler
    ]
    md += [
        "",
        f"Exact sampling becomes slower than random features of width 4096 from N = {cross}.",
        "",
        "Notes: the exact sampler is an (N−1)×(N−1) eigendecomposition per step (O(N³), and XLA's CPU",
        "eigh gets markedly slower past N ≈ 100); random features cost O(N m d) and are shared by systems",
        "of any size, so they take over from N ≈ 100 (or whenever N·d·m < N³). The scan is used by",
        "default: on the same scheme diffrax costs ~2× (UnsafeBrownianPath: per-step key handling and",
        "MultiTerm/lineax overhead) and ~5× (VirtualBrownianTree: a tree query per step). Timings on this",
        "loaded machine fluctuate by ~2× between identical configurations (compare the scan row with the",
        "'SDE, exact sampler, N = 64' row), so only large ratios are meaningful.",
    ]
    (OUT / "stochastic.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
