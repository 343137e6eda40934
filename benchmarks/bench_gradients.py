"""Benchmark of the gradient methods: time relative to the forward, memory, float64 accuracy.

    python benchmarks/bench_gradients.py            # n in {1024, 4096, 16384}, d=16, L=16, float32
    python benchmarks/bench_gradients.py --quick    # n in {256, 1024}

Writes ``benchmarks/results/gradients.json`` and ``benchmarks/results/gradients.md``.
Timings exclude compilation (one warm-up call, then the median of ``--repeats`` calls).
Peak memory at n = 65536, d = 16, L = 32 comes from XLA's buffer assignment of the compiled
gradient (``jit(...).lower(...).compile().memory_analysis()``), so nothing that large is run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _machine import machine  # noqa: E402
from _timing import warm_median  # noqa: E402

import cfm_jax  # noqa: E402
from cfm_experiments.gradcheck import flat, make_problem, references  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def _strategies():
    import diffrax

    from cfm_jax import Backsolve, ContinuousAdjoint, DiscreteAdjoint, Recompute, StoreEvery

    timed = {
        "discrete_adjoint": DiscreteAdjoint(),
        "discrete_adjoint[StoreEvery(4)]": DiscreteAdjoint(StoreEvery(4)),
        "continuous_adjoint[Euler]": ContinuousAdjoint(),
        "autodiff[RecursiveCheckpoint]": diffrax.RecursiveCheckpointAdjoint(),
    }
    memory = {
        "discrete_adjoint[StoreAll]": DiscreteAdjoint(),
        "discrete_adjoint[StoreEvery(1)]": DiscreteAdjoint(StoreEvery(1)),
        "discrete_adjoint[StoreEvery(8)]": DiscreteAdjoint(StoreEvery(8)),
        "discrete_adjoint[Recompute]": DiscreteAdjoint(Recompute()),
        "continuous_adjoint[Euler, StoreEvery(1)]": ContinuousAdjoint(),
        "continuous_adjoint[Euler, Backsolve]": ContinuousAdjoint(memory=Backsolve()),
        "autodiff[RecursiveCheckpoint]": diffrax.RecursiveCheckpointAdjoint(),
    }
    return timed, memory


def token_loss(sol, y):
    """½‖x_1 − y‖² averaged over the batch."""
    return 0.5 * jnp.mean(jnp.sum((sol.x1 - y) ** 2, -1))


def context_loss(sol, y):
    """A loss of the final context measure, Σ_j w_j ‖z_j(1)‖² / 2 (drives the particle adjoints)."""
    del y
    return 0.5 * jnp.sum(sol.context.weights * jnp.sum(sol.context.points**2, -1))


class gradient_fn:
    """``jax.value_and_grad`` in the model's arrays of ``loss(forward(model, ...), y)``, jitted (the
    user's path); ``.lower(...)`` exposes XLA's compiled memory analysis."""

    def __init__(self, adjoint, loss=token_loss):
        import equinox as eqx

        self._eqx = eqx

        def f(params, static, x0, ctx, y):
            g = lambda p: loss(cfm_jax.forward(eqx.combine(p, static), x0, ctx, adjoint=adjoint), y)  # noqa: E731
            return jax.value_and_grad(g)(params)

        self._jit = jax.jit(f, static_argnums=1)

    def _split(self, model):
        return self._eqx.partition(model, self._eqx.is_inexact_array)

    def __call__(self, model, x0, ctx, y):
        params, static = self._split(model)
        return self._jit(params, static, x0, ctx, y)

    def lower(self, model, x0, ctx, y):
        params, static = self._split(model)
        return self._jit.lower(params, static, x0, ctx, y)


def _setup(n, d, L, B=4, heads=1, mlp=32, seed=0):
    km, kx, kz, ky = jax.random.split(jax.random.key(seed), 4)
    model = cfm_jax.Transformer.init(km, d, heads=heads, mlp_width=mlp, layers=L, dtype=jnp.float32)
    x0 = jax.random.normal(kx, (B, d), jnp.float32)
    ctx = cfm_jax.EmpiricalMeasure(jax.random.normal(kz, (n, d), jnp.float32))
    y = jax.random.normal(ky, (B, d), jnp.float32)
    return model, x0, ctx, y


def bench_times(sizes, d, L, repeats):
    """Forward and gradient times; methods interleaved within each repeat, min and median kept.

    Ratios use the minimum over repeats, the estimate least sensitive to other jobs' load.
    """
    rows = []
    for n in sizes:
        model, x0, ctx, y = _setup(n, d, L)
        fwd = jax.jit(lambda m, a, c: cfm_jax.forward(m, a, c).x1)
        fns = {"forward": lambda: fwd(model, x0, ctx)}
        timed, _ = _strategies()
        for name, adjoint in timed.items():
            fns[name] = lambda g=gradient_fn(adjoint): g(model, x0, ctx, y)
        fns["discrete_adjoint[loss on z1]"] = lambda g=gradient_fn(timed["discrete_adjoint"], context_loss): g(
            model, x0, ctx, y
        )
        for f in fns.values():
            jax.block_until_ready(f())  # compile + warm-up
        reps = repeats if n <= 4096 else 1
        times = {k: [] for k in fns}
        for _ in range(reps):
            for k, f in fns.items():
                t0 = time.perf_counter()
                jax.block_until_ready(f())
                times[k].append(time.perf_counter() - t0)
        t_fwd = min(times["forward"])
        row = {
            "n": n,
            "d": d,
            "L": L,
            "repeats": reps,
            "forward_s": t_fwd,
            "forward_median_s": float(np.median(times["forward"])),
        }
        for name in list(timed) + ["discrete_adjoint[loss on z1]"]:
            t = min(times[name])
            row[name + "_s"] = t
            row[name + "_median_s"] = float(np.median(times[name]))
            row[name + "_over_forward"] = t / t_fwd
            print(f"n={n:6d} {name:32s} {t:8.3f} s  x{t / t_fwd:5.2f} forward", flush=True)
        row["autodiff_over_hand"] = row["autodiff[RecursiveCheckpoint]_s"] / row["discrete_adjoint_s"]
        rows.append(row)
    return rows


def bench_memory(n, d, L, B=4):
    """Compiled peak temporary memory of each gradient (no execution)."""
    model, x0, ctx, y = _setup(n, d, L, B=B)
    traj_bytes = (L + 1) * (n + B) * d * 4
    out = {"n": n, "d": d, "L": L, "trajectory_bytes": traj_bytes}
    _, variants = _strategies()
    for name, adjoint in variants.items():
        try:
            t0 = time.perf_counter()
            mem = gradient_fn(adjoint).lower(model, x0, ctx, y).compile().memory_analysis()
            assert mem is not None  # the CPU and GPU backends both report it
            out[name] = {
                "temp_bytes": int(mem.temp_size_in_bytes),
                "argument_bytes": int(mem.argument_size_in_bytes),
                "output_bytes": int(mem.output_size_in_bytes),
                "compile_s": time.perf_counter() - t0,
            }
            print(f"memory n={n} L={L} {name:40s} temp {mem.temp_size_in_bytes / 2**20:10.1f} MiB", flush=True)
        except Exception as e:  # report rather than crash (e.g. an allocation the compiler refuses)
            out[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
            print(f"memory {name}: {out[name]['error']}", flush=True)
    return out


def bench_memory_vs_L(n, d, Ls):
    """Temp memory of the store-all and recompute discrete adjoints as L grows."""
    out = []
    for L in Ls:
        model, x0, ctx, y = _setup(n, d, L)
        row = {"L": L}
        from cfm_jax import DiscreteAdjoint, Recompute, StoreEvery

        for name, adjoint in (
            ("store", DiscreteAdjoint()),
            ("layers", DiscreteAdjoint(StoreEvery(1))),
            ("recompute", DiscreteAdjoint(Recompute())),
        ):
            mem = gradient_fn(adjoint).lower(model, x0, ctx, y).compile().memory_analysis()
            assert mem is not None  # the CPU and GPU backends both report it
            row[name + "_temp_bytes"] = int(mem.temp_size_in_bytes)
        out.append(row)
        print(f"memory vs L: n={n} L={L} {row}", flush=True)
    return out


def bench_op_costs(n=4096, d=16, rows=256, repeats=20):
    """Cost of the two kinds of work in one attention row block, and the ratio they imply.

    Per head and step the forward needs 2 (rows, n)·d products (logits, means) and one pass of
    exponentials; any backward that does not store the n×n softmax needs 5 products (logits,
    v·z, Σ α s z, the two measure terms) and one pass (the FlashAttention count). With M the
    time of one product and E of one pass, gradient / forward ≥ (7M + 2E) / (2M + E), whatever
    the implementation; storing the softmax instead (O(L·n²) memory) leaves (6M + E) / (2M + E)
    plus the cost of writing and reading it.
    """
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    u = jax.random.normal(k1, (rows, d), jnp.float32) / 4
    z = jax.random.normal(k2, (n, d), jnp.float32)
    p = jax.random.uniform(k3, (rows, n), jnp.float32)
    ops = {
        "logits u·zᵀ": (jax.jit(lambda u, z: u @ z.T), (u, z)),
        "means P·z": (jax.jit(lambda p, z: p @ z), (p, z)),
        "measure term uᵀ·P": (jax.jit(lambda u, p: u.T @ p), (u, p)),
        "exp pass": (jax.jit(jnp.exp), (p,)),
    }
    t = {name: warm_median(f, *a, repeats=repeats) for name, (f, a) in ops.items()}
    M = (t["logits u·zᵀ"] + t["means P·z"] + t["measure term uᵀ·P"]) / 3
    E = t["exp pass"]
    out = {
        "n": n,
        "d": d,
        "rows": rows,
        "times_s": t,
        "product_s": M,
        "exp_pass_s": E,
        "bound_recompute": (7 * M + 2 * E) / (2 * M + E),
        "bound_stored_softmax_no_memory_traffic": (6 * M + E) / (2 * M + E),
    }
    print("op costs", out, flush=True)
    return out


def bench_stored_softmax(n=1024, d=16, L=16, repeats=7):
    """Design probe: keep each layer's n×n softmax from the forward instead of recomputing it.

    A single-head attention flow of the context (no MLP, no targets), written out here so that
    the two backward strategies differ only in where α comes from: recomputed (logits, row max,
    normaliser, mean: what `cfm_jax._adjoint` does) or read back from the (L, n, n) stack the
    forward saved (4 products instead of 6, no exponentials, O(L·n²) memory).
    """
    k = jax.random.split(jax.random.key(0), 4)
    z0 = jax.random.normal(k[0], (n, d), jnp.float32)
    c0 = jax.random.normal(k[1], (n, d), jnp.float32) / n
    A = jax.random.normal(k[2], (L, d, d), jnp.float32) / d
    Vh = jax.random.normal(k[3], (L, d, d), jnp.float32) / 4
    logw = jnp.full((n,), -jnp.log(n), jnp.float32)

    def softmax_and_mean(z, l):
        u = z @ A[l]
        logits = u @ z.T + logw
        P = jnp.exp(logits - jnp.max(logits, -1, keepdims=True))
        P = P / P.sum(-1, keepdims=True)
        return u, P, P @ z

    def step(z, l):
        return z + softmax_and_mean(z, l)[2] @ Vh[l].T / L

    def back(a, z, l, u, P, m):
        v = a @ Vh[l]
        R = P * (v @ z.T - jnp.sum(m * v, -1, keepdims=True))
        g = R @ z - R.sum(-1, keepdims=True) * m
        return a + (g @ A[l].T + (v.T @ P + u.T @ R).T) / L

    forward = jax.jit(lambda z: jax.lax.scan(lambda z, l: (step(z, l), None), z, jnp.arange(L))[0])

    @jax.jit
    def grad_recompute(z):
        _, zs = jax.lax.scan(lambda z, l: (step(z, l), z), z, jnp.arange(L))
        body = lambda a, i: (back(a, i[0], i[1], *softmax_and_mean(*i)), None)  # noqa: E731
        return jax.lax.scan(body, c0, (zs, jnp.arange(L)), reverse=True)[0]

    @jax.jit
    def grad_stored(z):
        def fwd(z, l):
            u, P, m = softmax_and_mean(z, l)
            return z + m @ Vh[l].T / L, (z, u, P, m)

        _, saved = jax.lax.scan(fwd, z, jnp.arange(L))
        body = lambda a, i: (back(a, i[0], i[4], i[1], i[2], i[3]), None)  # noqa: E731
        return jax.lax.scan(body, c0, saved + (jnp.arange(L),), reverse=True)[0]

    t_f = warm_median(forward, z0, repeats=repeats)
    t_r = warm_median(grad_recompute, z0, repeats=repeats)
    t_s = warm_median(grad_stored, z0, repeats=repeats)
    diff = float(jnp.abs(grad_stored(z0) - grad_recompute(z0)).max() / jnp.abs(grad_recompute(z0)).max())
    out = {
        "n": n,
        "d": d,
        "L": L,
        "recompute_over_forward": t_r / t_f,
        "stored_over_forward": t_s / t_f,
        "stored_softmax_bytes": L * n * n * 4,
        "relative_difference": diff,
    }
    print("stored softmax", out, flush=True)
    return out


def bench_accuracy():
    """float64: hand adjoint vs autodiff vs central finite differences on small problems."""
    jax.config.update("jax_enable_x64", True)
    rows = []
    for seed in range(3):
        model, x0, ctx, y = make_problem(seed, dim=4, context=24, batch=3, layers=6, heads=2, mlp_width=8)
        g_euler, g_cont, fd_error = references(model, x0, ctx, y, fd_directions=4, seed=seed)
        rel = lambda a, b: float(jnp.linalg.norm(flat(a) - flat(b)) / jnp.linalg.norm(flat(b)))  # noqa: E731
        _, g_hand = cfm_jax.loss_and_grad(model, x0, ctx, y)
        import diffrax

        from cfm_experiments.gradcheck import WithoutClosedForms

        generic = cfm_jax.PiecewiseConstantCFM(WithoutClosedForms(model.field), model.stacked_params(), model.dim)
        _, g_vjp = cfm_jax.loss_and_grad(generic, x0, ctx, y)
        g_vjp = cfm_jax.PiecewiseConstantCFM(model.field, g_vjp.params, model.dim)
        g_hand_cfm = cfm_jax.PiecewiseConstantCFM(model.field, g_hand.stacked_params(), model.dim)
        _, g_c = cfm_jax.loss_and_grad(
            model, x0, ctx, y, adjoint=cfm_jax.ContinuousAdjoint(), solver=diffrax.Bosh3(), steps=16 * 6
        )
        rows.append(
            {
                "seed": seed,
                "hand_vs_autodiff": rel(g_hand, g_euler),
                "hand_vs_fd": fd_error(g_hand),
                "autodiff_vs_fd": fd_error(g_euler),
                "vjp_fallback_vs_hand": rel(g_vjp, g_hand_cfm),
                "continuous_bosh3_16_vs_exact": rel(g_c, g_cont),
            }
        )
        print("accuracy", rows[-1], flush=True)
    return rows


def write_markdown(res, path):
    m = res["machine"]
    lines = [
        "# Gradient benchmark",
        "",
        f"Machine: {m['processor']}, {m['cpu_count']} CPUs, jax {m['jax']} ({m['backend']}). "
        "Ratios are measured within one run (absolute times vary on shared machines).",
        f"Model: d={res['config']['d']}, L={res['config']['L']}, 1 head, MLP width 32, B=4 targets, float32, "
        "Euler with one step per layer; minimum over interleaved warm calls, compilation excluded "
        "(rows marked * come from an earlier run of this script: median of warm calls).",
        "",
        "## Time (gradient time / forward time)",
        "",
        "Every gradient is `jax.value_and_grad` of a loss of `cfm_jax.forward(model, x0, context, adjoint=...)` (jitted),",
        "the path a user takes; the forward is `cfm_jax.forward` with its default (hand) adjoint.",
        "",
        "| n | forward (s) | DiscreteAdjoint() | DiscreteAdjoint(StoreEvery(4)) | ContinuousAdjoint() (Euler) | RecursiveCheckpointAdjoint (autodiff) | autodiff / hand | DiscreteAdjoint, loss on z1 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in res["times"]:
        lines.append(
            f"| {r['n']}{'*' if r.get('from_earlier_run') else ''} | {r['forward_s']:.3f} | {r['discrete_adjoint_over_forward']:.2f} | "
            f"{r['discrete_adjoint[StoreEvery(4)]_over_forward']:.2f} | {r['continuous_adjoint[Euler]_over_forward']:.2f} | "
            f"{r['autodiff[RecursiveCheckpoint]_over_forward']:.2f} | {r['autodiff_over_hand']:.2f} | "
            f"{r['discrete_adjoint[loss on z1]_over_forward']:.2f} |"
        )
    mem = res.get("memory")
    if mem:
        lines += [
            "",
            f"## Peak temporary memory of one gradient (n={mem['n']}, d={mem['d']}, L={mem['L']}; compiled buffer assignment)",
            "",
            f"Stored trajectory (L+1 states of n+B tokens, float32): {mem['trajectory_bytes'] / 2**20:.1f} MiB.",
            "",
            "| variant | temp memory (MiB) | / trajectory |",
            "|---|---|---|",
        ]
        for k, v in mem.items():
            if isinstance(v, dict):
                if "error" in v:
                    lines.append(f"| {k} | {v['error'][:80]} | |")
                else:
                    lines.append(
                        f"| {k} | {v['temp_bytes'] / 2**20:.1f} | {v['temp_bytes'] / mem['trajectory_bytes']:.2f} |"
                    )
    if res.get("memory_vs_L"):
        lines += [
            "",
            "### Temp memory vs L (discrete adjoint, n=%d)" % res["memory_vs_L_n"],
            "",
            "| L | StoreAll() (MiB) | StoreEvery(1) (MiB) | Recompute() (MiB) |",
            "|---|---|---|---|",
        ]
        for r in res["memory_vs_L"]:
            lines.append(
                f"| {r['L']} | {r['store_temp_bytes'] / 2**20:.1f} | {r['layers_temp_bytes'] / 2**20:.1f} | "
                f"{r['recompute_temp_bytes'] / 2**20:.1f} |"
            )
    if res.get("accuracy"):
        lines += [
            "",
            "## float64 accuracy (d=4, n=24, B=3, L=6, H=2, MLP 8, non-uniform weights)",
            "",
            "| seed | hand vs autodiff | hand vs central FD | autodiff vs central FD | vjp fallback vs hand | continuous Bosh3 (16/layer) vs exact |",
            "|---|---|---|---|---|---|",
        ]
        for r in res["accuracy"]:
            lines.append(
                f"| {r['seed']} | {r['hand_vs_autodiff']:.1e} | {r['hand_vs_fd']:.1e} | {r['autodiff_vs_fd']:.1e} | "
                f"{r['vjp_fallback_vs_hand']:.1e} | {r['continuous_bosh3_16_vs_exact']:.1e} |"
            )
    oc = res.get("op_costs")
    if oc:
        lines += [
            "",
            f"## Lower bound from the operation mix (one block of {oc['rows']} query rows, n={oc['n']}, d={oc['d']}, float32)",
            "",
            "| operation | time (ms) |",
            "|---|---|",
        ]
        lines += [f"| {k} | {v * 1e3:.3f} |" for k, v in oc["times_s"].items()]
        lines += [
            "",
            f"M (one (rows, n)·d product) = {oc['product_s'] * 1e3:.3f} ms, E (one pass of exponentials) = "
            f"{oc['exp_pass_s'] * 1e3:.3f} ms. Forward = 2M + E per block; a backward that recomputes the "
            "softmax needs at least 5M + E (the FlashAttention count), so gradient / forward ≥ (7M + 2E) / (2M + E) = "
            f"**{oc['bound_recompute']:.2f}** on this machine, whatever the implementation. Storing the n×n softmax "
            f"(O(L·n²) memory: 16 GiB at n = 16384, L = 16) would still leave ≥ {oc['bound_stored_softmax_no_memory_traffic']:.2f} "
            "before the cost of writing and reading it.",
        ]
    ss = res.get("stored_softmax")
    if ss:
        lines += [
            "",
            f"## Design probe: storing the softmax (single-head attention flow, n={ss['n']}, d={ss['d']}, L={ss['L']})",
            "",
            f"Backward recomputing α: {ss['recompute_over_forward']:.2f}× the forward; reading back the stored "
            f"(L, n, n) softmax ({ss['stored_softmax_bytes'] / 2**20:.0f} MiB): {ss['stored_over_forward']:.2f}× "
            f"(max relative difference {ss['relative_difference']:.1e}). The memory traffic costs more than the exponentials "
            "and products it saves, so the library recomputes.",
        ]
    if res.get("notes"):
        lines += ["", "Notes: " + res["notes"]]
    path.write_text("\n".join(lines) + "\n")


def main(argv=None):
    assert __doc__ is not None  # the module docstring is the description
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--sizes", type=int, nargs="*", default=None)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--memory-n", type=int, default=65536)
    p.add_argument("--memory-L", type=int, default=32)
    p.add_argument("--skip-memory", action="store_true")
    p.add_argument("--notes", default="")
    p.add_argument("--out", default=str(RESULTS))
    p.add_argument(
        "--merge",
        action="store_true",
        help="keep rows of sizes not re-run (and memory/accuracy when skipped) from OUT/gradients.json",
    )
    p.add_argument("--skip-accuracy", action="store_true")
    args = p.parse_args(argv)
    sizes = args.sizes or ([256, 1024] if args.quick else [1024, 4096, 16384])
    d, L = 16, 16
    old = {}
    if args.merge and (Path(args.out) / "gradients.json").exists():
        old = json.loads((Path(args.out) / "gradients.json").read_text())
    res = {"machine": machine(), "config": {"d": d, "L": L, "sizes": sizes, "repeats": args.repeats}}
    res["times"] = bench_times(sizes, d, L, args.repeats)
    if old:
        kept = [r for r in old.get("times", []) if r["n"] not in sizes]
        for r in kept:
            r["from_earlier_run"] = True
        res["times"] = sorted(res["times"] + kept, key=lambda r: r["n"])
        for key in ("memory", "memory_vs_L_n", "memory_vs_L", "accuracy", "op_costs", "stored_softmax"):
            if key in old:
                res[key] = old[key]
    if not args.skip_memory:
        res["memory"] = bench_memory(args.memory_n if not args.quick else 4096, d, args.memory_L)
        res["memory_vs_L_n"] = 4096
        res["memory_vs_L"] = bench_memory_vs_L(4096, d, [8, 16, 32])
    res["op_costs"] = bench_op_costs()
    res["stored_softmax"] = bench_stored_softmax()
    if not args.skip_accuracy:
        res["accuracy"] = bench_accuracy()
    res["notes"] = args.notes
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gradients.json").write_text(json.dumps(res, indent=2) + "\n")
    write_markdown(res, out / "gradients.md")
    print((out / "gradients.md").read_text())


if __name__ == "__main__":
    main()
