"""GPU benchmark: forward and gradient steps against the device's own matmul rate and bandwidth.

    python benchmarks/bench_gpu.py               # on a GPU: n = 2^14, 2^16, 2^18, 2^20, d ∈ {16, 64}, ≤ 8 min
    python benchmarks/bench_gpu.py --kernel      # on a GPU: the fused attention kernel against XLA, ≤ 8 min
    python benchmarks/bench_gpu.py --dry-run     # tiny sizes (automatic when no GPU is present)

One *step* is one layer of the model (L = 1, H = 1, MLP width 32, B = 4 target tokens, float32
arrays, context of n uniform-weight Gaussian points): the forward step is ``cfm_jax.forward``,
the gradient step ``cfm_jax.loss_and_grad`` (hand adjoint), both jitted with the XLA attention
path (``XLAAttention()``) and its automatic blocks (``resolve_chunk_size``, backend-aware). Each runs under every matmul
precision JAX offers for float32 arrays (``jax.default_matmul_precision``): ``float32`` (full
precision, the reference), ``default`` (what JAX does with no setting), ``tensorfloat32`` and
``bfloat16``; the error of each is measured against the float32 run of the same cell.

Rates: the attention's matmul FLOPs are counted as M = 2·(n + B)·n·d·H per (rows, n)·d product;
a forward step needs 2M (scores, then the weighted means), a gradient step 7M (the forward's 2M
plus the 5M a backward that recomputes the softmax needs). They are divided by the rate of a
square float32 matmul under the same precision, measured in the same run. "score passes" is the
step time over the time one read + write of the (n + B)·n float32 score matrix takes at the
device bandwidth measured in the same run (an elementwise pass over a large array).

Memory per cell: XLA's buffer assignment of the compiled step (arguments + outputs + temporaries
− aliased), exact for that program; the process-wide ``device.memory_stats()`` peak (GPU only)
is recorded next to it, as a running maximum.

``--kernel`` measures the fused attention kernel (``PallasAttention``) instead, at H ∈ {1, 4}:
per (n, d, H, kind) the XLA path at float32 (IEEE) products, the reference, then the kernel at
each of its precisions (3xTF32, TF32, IEEE; every other matmul of the step at float32), with the
error against the reference and the fraction of two floors measured in the same run: the
exponentials (one per score in the forward; four in a gradient step: the solve, the kernel's
forward and its two backward passes) at the rate of XLA's exp (32 chained per element, so not
bandwidth-bound), and the products (forward 2M, gradient 11M: the solve's 2M, the kernel's
forward 2M, key pass 4M, query pass 3M) at the square-matmul rate of the precision (3xTF32:
a third of the TF32 rate). On a GPU it needs a JAX before 0.11 (the kernel's Pallas Triton
backend, deprecated from 0.11 on): on a later one it exits with status 2 and the kernel's one-line
refusal before measuring or writing anything.

Results are written after every cell to ``benchmarks/results/gpu.{json,md}`` (``--kernel``:
``gpu_kernel``; ``--out`` to change); a dry run (tiny sizes, or no GPU) writes to
``benchmarks/results/dry/`` instead, never over the committed GPU tables. ``--resume`` keeps the
cells of an earlier run on the same backend. A cell is skipped
when its predicted time (the same cell at the previous n, scaled by n²) would overrun ``--budget``
seconds.
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
from _timing import warm_times  # noqa: E402

import cfm_jax  # noqa: E402
from cfm_jax._fields.attention import resolve_chunk_size  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
PRECISIONS = ("float32", "default", "tensorfloat32", "bfloat16")
KINDS = ("forward", "gradient")
FLOP_UNITS = {"forward": 2, "gradient": 7}
HEADS, MLP, BATCH = 1, 32, 4
#: --kernel: the implementations of one cell, the XLA reference first; products and exponentials
#: per score of a step (module docstring); the matmul rate each precision's floor is taken from
IMPLS = ("xla-float32", "pallas-3xTF32", "pallas-TF32", "pallas-IEEE")
KERNEL_HEADS = (1, 4)
KERNEL_FLOP_UNITS = {"forward": 2, "gradient": 11}
KERNEL_EXP_UNITS = {"forward": 1, "gradient": 4}
FLOOR_RATE = {"xla-float32": ("float32", 1), "pallas-IEEE": ("float32", 1)}
FLOOR_RATE |= {"pallas-TF32": ("tensorfloat32", 1), "pallas-3xTF32": ("tensorfloat32", 3)}


def _precision(name):
    """Context manager for one precision option (``default``: no setting)."""
    return jax.default_matmul_precision(None if name == "default" else name)


def matmul_rate(size: int, precision: str) -> float:
    """FLOP/s of a square float32 ``size``² matmul under ``precision`` (best of warm calls)."""
    a = jax.random.normal(jax.random.key(0), (size, size), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (size, size), jnp.float32)
    with _precision(precision):
        f = jax.jit(jnp.dot).lower(a, b).compile()
    return 2 * size**3 / min(warm_times(f, a, b, repeats=5))


def bandwidth(elements: int) -> float:
    """Bytes/s of an elementwise pass (read + write) over a float32 array of ``elements``."""
    a = jnp.ones((elements,), jnp.float32)
    f = jax.jit(lambda x: x * 1.5).lower(a).compile()
    return 2 * 4 * elements / min(warm_times(f, a, repeats=5))


def exp_rate(elements: int) -> float:
    """Exponentials per second: 32 chained ``exp`` per element of a float32 array (one fused pass)."""

    def chain(x):
        for _ in range(32):
            x = jnp.exp(-x)
        return x

    a = jnp.linspace(-1.0, 1.0, elements, dtype=jnp.float32)
    f = jax.jit(chain).lower(a).compile()
    return 32 * elements / min(warm_times(f, a, repeats=5))


def problem(n: int, d: int, seed: int = 0, heads: int = HEADS, kernel=None):
    km, kx, kz, ky = jax.random.split(jax.random.key(seed), 4)
    model = cfm_jax.Transformer.init(km, d, heads=heads, mlp_width=MLP, layers=1, dtype=jnp.float32)
    model = model.with_kernel(cfm_jax.XLAAttention() if kernel is None else kernel)
    x0 = jax.random.normal(kx, (BATCH, d), jnp.float32)
    context = cfm_jax.EmpiricalMeasure(jax.random.normal(kz, (n, d), jnp.float32))
    y = jax.random.normal(ky, (BATCH, d), jnp.float32)
    return model, x0, context, y


def _forward_step(model, x0, context, y):
    sol = cfm_jax.forward(model, x0, context)
    return sol.x1, sol.context.points


def _gradient_step(model, x0, context, y):
    return cfm_jax.loss_and_grad(model, x0, context, y)


STEPS = {"forward": _forward_step, "gradient": _gradient_step}


def _flat(out, kind, x0, context):
    """The compared vector: the velocities (x1 − x0, z1 − z0) of a forward, (loss, ∂L/∂θ) of a gradient."""
    if kind == "forward":
        x1, z1 = out
        return jnp.concatenate([(x1 - x0).ravel(), (z1 - context.points).ravel()])
    loss, grads = out
    return jnp.concatenate([jnp.ravel(loss)] + [g.ravel() for g in jax.tree.leaves(grads)])


def _memory_bytes(compiled) -> int | None:
    m = compiled.memory_analysis()
    if m is None:
        return None
    return int(m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes)


def _device_peak() -> int | None:
    stats = jax.devices()[0].memory_stats()
    return None if not stats else int(stats.get("peak_bytes_in_use", 0))


def run_cell(n, d, precision, kind, reference, repeats):
    """Time, error and memory of one (n, d, precision, kind) cell; ``reference``: float32 output or None."""
    args = problem(n, d)
    t0 = time.perf_counter()
    with _precision(precision):
        compiled = jax.jit(STEPS[kind]).lower(*args).compile()
    compile_s = time.perf_counter() - t0
    times = warm_times(compiled, *args, repeats=repeats)
    out = _flat(compiled(*args), kind, args[1], args[2])
    err = None if reference is None else float(jnp.linalg.norm(out - reference) / jnp.linalg.norm(reference))
    row = {
        "n": n,
        "d": d,
        "precision": precision,
        "kind": kind,
        "chunk_size": resolve_chunk_size("auto", HEADS, n + BATCH, n),
        "time_s": min(times),
        "times_s": times,
        "compile_s": compile_s,
        "flops": FLOP_UNITS[kind] * 2 * (n + BATCH) * n * d * HEADS,
        "rel_error_vs_float32": err,
        "program_bytes": _memory_bytes(compiled),
        "device_peak_bytes": _device_peak(),
    }
    return row, out


def reference_output(n, d, kind):
    """The float32 output of one cell, untimed (for cells resumed from an earlier run)."""
    args = problem(n, d)
    with _precision("float32"):
        return _flat(jax.jit(STEPS[kind])(*args), kind, args[1], args[2])


def _kernel(impl: str):
    return cfm_jax.XLAAttention() if impl == "xla-float32" else cfm_jax.PallasAttention(precision=impl.split("-")[1])


def run_kernel_cell(n, d, heads, kind, impl, reference, repeats, rates, exps):
    """One --kernel cell: time, floors, error against the XLA float32 output, memory."""
    args = problem(n, d, heads=heads, kernel=_kernel(impl))
    t0 = time.perf_counter()
    with _precision("float32"):  # the other products of the step at float32: only the kernel's differ
        compiled = jax.jit(STEPS[kind]).lower(*args).compile()
    compile_s = time.perf_counter() - t0
    times = warm_times(compiled, *args, repeats=repeats)
    out = _flat(compiled(*args), kind, args[1], args[2])
    err = None if reference is None else float(jnp.linalg.norm(out - reference) / jnp.linalg.norm(reference))
    scores = (n + BATCH) * n * heads
    rate_name, slowdown = FLOOR_RATE[impl]
    flops = KERNEL_FLOP_UNITS[kind] * 2 * scores * d
    row = {
        "n": n,
        "d": d,
        "heads": heads,
        "kind": kind,
        "impl": impl,
        "time_s": min(times),
        "times_s": times,
        "compile_s": compile_s,
        "exp_floor_s": KERNEL_EXP_UNITS[kind] * scores / exps,
        "matmul_floor_s": flops * slowdown / rates[rate_name],
        "rel_error_vs_xla_float32": err,
        "program_bytes": _memory_bytes(compiled),
        "device_peak_bytes": _device_peak(),
    }
    return row, out


def _key(r):
    if "impl" in r:
        return (r["n"], r["d"], r["heads"], r["kind"], r["impl"])
    return (r["n"], r["d"], r["precision"], r["kind"])


def _previous_rows(json_path: Path, dry: bool) -> dict:
    """The rows of an earlier run at ``json_path`` on this backend and in this mode, by key (--resume)."""
    if not json_path.exists():
        return {}
    prev = json.loads(json_path.read_text())
    if prev["machine"]["backend"] != jax.default_backend() or prev["config"]["dry_run"] != dry:
        return {}
    return {_key(r): r for r in prev["rows"]}


def to_markdown(result) -> str:
    m, cfg = result["machine"], result["config"]
    rates, bw = result["matmul_rate_flops"], result["bandwidth_bytes_per_s"]
    lines = ["# GPU benchmark" + (" — CPU DRY RUN (not GPU figures)" if cfg["dry_run"] else ""), ""]
    if cfg["dry_run"]:
        lines += [
            "**This is a CPU dry run at tiny sizes**, to show the script works and what it writes; no "
            "GPU was available to this run. Run `python benchmarks/bench_gpu.py` on a GPU for the real "
            "table (n = 2^14, 2^16, 2^18, 2^20, d ∈ {16, 64}).",
            "",
        ]
    if m["backend"] == "cpu":
        lines += [
            "On CPU, XLA evaluates float32 dots in float32 whatever the precision setting, so every "
            "error below is exactly 0 and the precision rows differ only by timing noise; they "
            "differ on GPUs and TPUs.",
            "",
        ]
    lines += [
        f"Machine: {m['processor']}, {m['cpu_count']} CPUs, jax {m['jax']}, backend {m['backend']}, "
        f"devices {', '.join(m['devices'])}.",
        f"One step = one layer (L = 1, H = {HEADS}, MLP {MLP}, B = {BATCH}), float32 arrays, automatic "
        f"attention blocks; minimum of {cfg['repeats']} warm calls (1 for cells predicted over 1 s), "
        f"compilation excluded; wall time {result['wall_s']:.0f} s of a {cfg['budget_s']:.0f} s budget.",
        "",
        "Device rates measured in this run:",
        "",
        "| precision | square matmul (size " + str(cfg["matmul_size"]) + ") TFLOP/s |",
        "|---|---|",
    ]
    lines += [f"| {p} | {rates[p] / 1e12:.3f} |" for p in cfg["precisions"]]
    lines += [
        "",
        f"Elementwise bandwidth (read + write, {cfg['bandwidth_elements']} float32): {bw / 1e9:.1f} GB/s.",
        "",
        "FLOPs counted: forward 2M, gradient 7M, M = 2·(n+B)·n·d·H. *of matmul* = achieved FLOP/s over "
        "the square matmul at the same precision; *score passes* = time over one read + write of the "
        "(n+B)·n float32 scores at the measured bandwidth; *error* = ‖out − out_float32‖/‖out_float32‖ "
        "of the velocities (forward) or of (loss, ∂L/∂θ) (gradient); *program MiB* = compiled buffer "
        "assignment (arguments + outputs + temporaries); *device peak MiB* = `memory_stats()` running "
        "peak of the process (— where the backend reports none).",
        "",
        "| n | d | kind | precision | chunk | time s | TFLOP/s | of matmul | score passes | error | "
        "program MiB | device peak MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(result["rows"], key=lambda r: (r["d"], r["kind"], r["n"], PRECISIONS.index(r["precision"]))):
        rate = r["flops"] / r["time_s"]
        passes = r["time_s"] / (2 * 4 * (r["n"] + BATCH) * r["n"] * HEADS / bw)
        err = "ref" if r["rel_error_vs_float32"] is None else f"{r['rel_error_vs_float32']:.1e}"
        prog = "—" if r["program_bytes"] is None else f"{r['program_bytes'] / 2**20:.1f}"
        peak = "—" if r["device_peak_bytes"] is None else f"{r['device_peak_bytes'] / 2**20:.1f}"
        lines.append(
            f"| 2^{int(np.log2(r['n']))} | {r['d']} | {r['kind']} | {r['precision']} | {r['chunk_size']} | "
            f"{r['time_s']:.4g} | {rate / 1e12:.3f} | {rate / rates[r['precision']]:.3f} | {passes:.1f} | {err} | "
            f"{prog} | {peak} |"
        )
    if result["skipped"]:
        lines += ["", "Skipped cells:", ""]
        lines += [
            f"- n = 2^{int(np.log2(s['n']))}, d = {s['d']}, {s['kind']}, {s['precision']}: {s['reason']} "
            f"(predicted {s['predicted_s']:.0f} s, {s['left_s']:.0f} s left)"
            for s in result["skipped"]
        ]
    return "\n".join(lines) + "\n"


def _header(result, title) -> list[str]:
    m, cfg = result["machine"], result["config"]
    lines = [f"# {title}" + (" — DRY RUN (not GPU figures)" if cfg["dry_run"] else ""), ""]
    if cfg["dry_run"]:
        lines += [
            "**This is a dry run at tiny sizes**, to show the script works and what it writes; run "
            "`python benchmarks/bench_gpu.py" + (" --kernel" if cfg.get("kernel") else "") + "` on a GPU for "
            "the real table (n = 2^14 … 2^20, d ∈ {16, 64}). Off a GPU the kernel runs in Pallas interpret "
            "mode, at the CPU's own float32 precision whatever the precision setting.",
            "",
        ]
    lines += [
        f"Machine: {m['processor']}, {m['cpu_count']} CPUs, jax {m['jax']}, backend {m['backend']}, "
        f"devices {', '.join(m['devices'])}.",
    ]
    return lines


def kernel_markdown(result) -> str:
    cfg, rates = result["config"], result["matmul_rate_flops"]
    lines = _header(result, "GPU benchmark: the fused attention kernel")
    lines += [
        f"One step = one layer (L = 1, MLP {MLP}, B = {BATCH}), float32 arrays, every product outside the "
        f"kernel at float32; minimum of {cfg['repeats']} warm calls (1 for cells over 1 s), compilation "
        f"excluded; wall time {result['wall_s']:.0f} s of a {cfg['budget_s']:.0f} s budget.",
        "",
        f"Measured in this run: exp {result['exp_rate_per_s']:.3g} /s (32 chained per element); "
        + ", ".join(f"{p} matmul {rates[p] / 1e12:.3f} TFLOP/s" for p in ("float32", "tensorfloat32")),
        "",
        "*exp floor* / *matmul floor*: the step's exponentials (forward 1, gradient 4 per score) and products "
        "(forward 2M, gradient 11M, M = 2·(n+B)·n·d·H; 3xTF32 at a third of the TF32 rate) at those rates; "
        "*of floor* = the larger floor over the time; *error* = ‖out − out_xla‖/‖out_xla‖ against the XLA path "
        "at float32 products (velocities of a forward, (loss, ∂L/∂θ) of a gradient); *program MiB* = "
        "compiled buffer assignment.",
        "",
        "| n | d | H | kind | kernel | time s | exp floor s | matmul floor s | of floor | speed-up vs XLA | "
        "error | program MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    xla = {(r["n"], r["d"], r["heads"], r["kind"]): r["time_s"] for r in result["rows"] if r["impl"] == IMPLS[0]}
    for r in sorted(result["rows"], key=lambda r: (r["d"], r["heads"], r["kind"], r["n"], IMPLS.index(r["impl"]))):
        floor = max(r["exp_floor_s"], r["matmul_floor_s"])
        base = xla.get((r["n"], r["d"], r["heads"], r["kind"]))
        speed = "—" if base is None else f"{base / r['time_s']:.2f}"
        err = "ref" if r["rel_error_vs_xla_float32"] is None else f"{r['rel_error_vs_xla_float32']:.1e}"
        prog = "—" if r["program_bytes"] is None else f"{r['program_bytes'] / 2**20:.1f}"
        lines.append(
            f"| 2^{int(np.log2(r['n']))} | {r['d']} | {r['heads']} | {r['kind']} | {r['impl']} | {r['time_s']:.4g} | "
            f"{r['exp_floor_s']:.3g} | {r['matmul_floor_s']:.3g} | {floor / r['time_s']:.3f} | {speed} | {err} | {prog} |"
        )
    if result["skipped"]:
        lines += ["", "Skipped cells:", ""]
        lines += [
            f"- n = 2^{int(np.log2(s['n']))}, d = {s['d']}, H = {s['heads']}, {s['kind']}, {s['impl']}: "
            f"{s['reason']} (predicted {s['predicted_s']:.0f} s, {s['left_s']:.0f} s left)"
            for s in result["skipped"]
        ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    assert __doc__ is not None  # the module docstring is the description
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes (automatic without a GPU)")
    parser.add_argument("--budget", type=float, default=None, help="seconds for the cells (default 400; dry run 120)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--resume", action="store_true", help="keep the cells of an earlier run on this backend")
    parser.add_argument("--kernel", action="store_true", help="the fused attention kernel against the XLA path")
    parser.add_argument(
        "--heads", type=int, nargs="+", default=list(KERNEL_HEADS), help="--kernel: heads H (default 1 4)"
    )
    parser.add_argument("--dims", type=int, nargs="+", default=[16, 64], help="token dimensions d (default 16 64)")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output stem (default results/gpu, --kernel results/gpu_kernel; a dry run: results/dry/…)",
    )
    parser.add_argument(
        "--log2-n",
        type=int,
        nargs="+",
        default=None,
        help="context sizes as powers of two (default 14 16 18 20; dry run 8 9 10 11)",
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    dry = args.dry_run or jax.default_backend() == "cpu"
    if args.out is None:  # a dry run never overwrites the committed GPU tables
        args.out = (RESULTS / "dry" if dry else RESULTS) / ("gpu_kernel" if args.kernel else "gpu")
    if args.kernel:
        if not dry:  # PallasAttention refuses a JAX without its GPU backend: say so before measuring anything
            shapes = [jax.ShapeDtypeStruct(s, jnp.float32) for s in ((2, 2), (2, 2), (2,), (1, 2, 2))]
            try:
                jax.eval_shape(cfm_jax.PallasAttention().means, *shapes)
            except NotImplementedError as error:
                print(f"bench_gpu.py: {str(error).splitlines()[0]}", file=sys.stderr)
                raise SystemExit(2) from None
        return main_kernel(args, dry, start)
    # Every other power of two spans 2^14 … 2^20 with half the compilations (each cell compiles
    # its own program, and on a GPU compilation is a large share of an 8-minute budget).
    logns = args.log2_n or ((8, 9, 10, 11) if dry else (14, 16, 18, 20))
    ds = tuple(args.dims)
    budget = args.budget if args.budget is not None else (120.0 if dry else 400.0)
    config = {
        "dry_run": dry,
        "log2_n": list(logns),
        "d": list(ds),
        "precisions": list(PRECISIONS),
        "heads": HEADS,
        "mlp_width": MLP,
        "batch": BATCH,
        "layers": 1,
        "repeats": args.repeats,
        "budget_s": budget,
        "matmul_size": 1024 if dry else 8192,
        "bandwidth_elements": 1 << (24 if dry else 28),
    }
    json_path, md_path = args.out.with_suffix(".json"), args.out.with_suffix(".md")
    old = _previous_rows(json_path, dry) if args.resume else {}
    result = {
        "machine": machine(),
        "config": config,
        "matmul_rate_flops": {p: matmul_rate(config["matmul_size"], p) for p in PRECISIONS},
        "bandwidth_bytes_per_s": bandwidth(config["bandwidth_elements"]),
        "rows": [],
        "skipped": [],
        "wall_s": 0.0,
    }
    print({p: f"{r / 1e12:.3f} TFLOP/s" for p, r in result["matmul_rate_flops"].items()}, flush=True)
    deadline = start + budget

    def save():
        result["wall_s"] = time.perf_counter() - start
        args.out.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result, indent=1))
        md_path.write_text(to_markdown(result))

    last = {}  # (d, precision, kind) -> (n, time_s, compile_s) of the previous n
    # n outermost, so that a budget cut drops the largest n of every d rather than a whole d.
    for logn in logns:
        n = 1 << logn
        for d in ds:
            for kind in KINDS:
                reference = None
                for precision in PRECISIONS:
                    cell = (d, precision, kind)
                    if (n, d, precision, kind) in old:
                        row = old[(n, d, precision, kind)]
                        result["rows"].append(row)
                        last[cell] = (n, row["time_s"], row["compile_s"])
                        missing = any((n, d, p, kind) not in old for p in PRECISIONS)
                        if precision == "float32" and missing:
                            reference = reference_output(n, d, kind)
                        continue
                    n_prev, t_prev, c_prev = last.get(cell, (n, 0.0, 0.0))
                    t_pred = t_prev * (n / n_prev) ** 2  # O(n²) work per step
                    repeats = args.repeats if t_pred < 1.0 else 1
                    predicted = c_prev + (repeats + 2) * t_pred
                    left = deadline - time.perf_counter()
                    reason = "budget" if predicted > left else None
                    if reason is None and precision != "float32" and reference is None:
                        reason = "no float32 reference in this run"
                    if reason:
                        result["skipped"].append(
                            {
                                "n": n,
                                "d": d,
                                "precision": precision,
                                "kind": kind,
                                "reason": reason,
                                "predicted_s": predicted,
                                "left_s": left,
                            }
                        )
                        continue
                    row, out = run_cell(n, d, precision, kind, reference, repeats)
                    if precision == "float32":
                        reference = out
                    last[cell] = (n, row["time_s"], row["compile_s"])
                    result["rows"].append(row)
                    shown = ("n", "d", "kind", "precision", "time_s", "rel_error_vs_float32")
                    print({k: row[k] for k in shown}, flush=True)
                    save()
    save()
    print(f"wrote {json_path} and {md_path} in {result['wall_s']:.0f} s")


def main_kernel(args, dry, start):
    """The --kernel table (module docstring); n outermost, so a budget cut drops the largest n."""
    logns = args.log2_n or ((6, 7) if dry else (14, 16, 18, 20))
    ds, heads_list = tuple(args.dims), tuple(args.heads)
    budget = args.budget if args.budget is not None else (300.0 if dry else 420.0)
    config = {
        "kernel": True,
        "dry_run": dry,
        "log2_n": list(logns),
        "d": list(ds),
        "heads": list(heads_list),
        "impls": list(IMPLS),
        "mlp_width": MLP,
        "batch": BATCH,
        "layers": 1,
        "repeats": args.repeats,
        "budget_s": budget,
        "matmul_size": 1024 if dry else 8192,
        "exp_elements": 1 << (20 if dry else 26),
    }
    json_path, md_path = args.out.with_suffix(".json"), args.out.with_suffix(".md")
    old = _previous_rows(json_path, dry) if args.resume else {}
    result = {
        "machine": machine(),
        "config": config,
        "matmul_rate_flops": {p: matmul_rate(config["matmul_size"], p) for p in ("float32", "tensorfloat32")},
        "exp_rate_per_s": exp_rate(config["exp_elements"]),
        "rows": [],
        "skipped": [],
        "wall_s": 0.0,
    }
    print({"exp/s": f"{result['exp_rate_per_s']:.3e}"} | result["matmul_rate_flops"], flush=True)
    deadline = start + budget

    def save():
        result["wall_s"] = time.perf_counter() - start
        args.out.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result, indent=1))
        md_path.write_text(kernel_markdown(result))

    last = {}  # (d, H, kind, impl) -> (n, time_s, compile_s) of the previous n
    for logn in logns:
        n = 1 << logn
        for d in ds:
            for heads in heads_list:
                for kind in KINDS:
                    reference = None
                    for impl in IMPLS:
                        key, cell = (n, d, heads, kind, impl), (d, heads, kind, impl)
                        if key in old:
                            result["rows"].append(old[key])
                            last[cell] = (n, old[key]["time_s"], old[key]["compile_s"])
                            if impl == IMPLS[0] and any((n, d, heads, kind, i) not in old for i in IMPLS):
                                with _precision("float32"):
                                    a = problem(n, d, heads=heads, kernel=_kernel(impl))
                                    reference = _flat(jax.jit(STEPS[kind])(*a), kind, a[1], a[2])
                            continue
                        n_prev, t_prev, c_prev = last.get(cell, (n, 0.0, 0.0))
                        t_pred = t_prev * (n / n_prev) ** 2
                        repeats = args.repeats if t_pred < 1.0 else 1
                        predicted = c_prev + (repeats + 2) * t_pred
                        left = deadline - time.perf_counter()
                        reason = "budget" if predicted > left else None
                        if reason is None and impl != IMPLS[0] and reference is None:
                            reason = "no XLA reference in this run"
                        if reason:
                            result["skipped"].append(
                                dict(n=n, d=d, heads=heads, kind=kind, impl=impl, reason=reason)
                                | {"predicted_s": predicted, "left_s": left}
                            )
                            continue
                        row, out = run_kernel_cell(
                            n,
                            d,
                            heads,
                            kind,
                            impl,
                            reference,
                            repeats,
                            result["matmul_rate_flops"],
                            result["exp_rate_per_s"],
                        )
                        if impl == IMPLS[0]:
                            reference = out
                        last[cell] = (n, row["time_s"], row["compile_s"])
                        result["rows"].append(row)
                        shown = ("n", "d", "heads", "kind", "impl", "time_s", "rel_error_vs_xla_float32")
                        print({k: row[k] for k in shown}, flush=True)
                        save()
    save()
    print(f"wrote {json_path} and {md_path} in {result['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
