"""OGD training-loop benchmark.

Training steps per second of the jit-compiled ``lax.scan`` loop (:func:`cfm_jax.ogd.run_ogd`, one
trajectory, ridge SGD, default gradient source) for n ∈ {256, 4096}, d = 16, L = 8, H = 2,
m = 32, B = 4, float32, and the ratio of one loop step to one jit-compiled gradient evaluation
on the same sample (the loop overhead; target <= 1.1). Samples come from an in-memory
``ArrayStream``, so the ratio isolates the loop; the teacher–student stream (which also runs the
teacher forward to make the label) is timed separately. Compile time is excluded (every timed
call has been compiled before).

Run: ``python benchmarks/bench_ogd.py [--quick]``; writes ``benchmarks/results/ogd.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from _machine import machine
from _timing import warm_times

import cfm_jax
from cfm_jax import ArrayStream, TeacherStudentStream, ogd, uniform_sphere

RESULTS = Path(__file__).parent / "results"


def bench(n, *, d=16, layers=8, heads=2, mlp=32, batch=4, steps=10, reps=3):
    kt, ks, kz = jax.random.split(jax.random.key(n), 3)
    teacher = cfm_jax.Transformer.init(kt, d, heads=heads, mlp_width=mlp, layers=layers, dtype=jnp.float32)
    student = cfm_jax.Transformer.init(ks, d, heads=heads, mlp_width=mlp, layers=layers, dtype=jnp.float32)
    tstream = TeacherStudentStream(teacher, uniform_sphere(d), kz, batch=batch, context_size=n)
    samples = [tstream(k) for k in range(steps)]
    arrays = ArrayStream(*(jnp.stack([getattr(s, f) for s in samples]) for f in ("x0", "context", "y")))
    opt = ogd.ridge_sgd(0.01, 1.0)
    grad_fn = ogd.default_grad_fn()
    s0 = samples[0]
    ctx = cfm_jax.EmpiricalMeasure(s0.context)
    grad = jax.jit(lambda m: grad_fn(m, s0.x0, ctx, s0.y))

    @jax.jit
    def scanned_grads(m):
        # the same gradients inside a bare lax.scan (summed, so XLA cannot drop them): the
        # in-loop cost of a gradient without any of the OGD machinery
        def body(acc, k):
            s = arrays(k)
            _, g = grad_fn(m, s.x0, cfm_jax.EmpiricalMeasure(s.context), s.y)
            return jax.tree.map(jnp.add, acc, eqx.filter(g, eqx.is_inexact_array)), None

        return jax.lax.scan(body, eqx.filter(m, eqx.is_inexact_array), jnp.arange(steps))[0]

    # interleave the measurements so that load from other users hits both alike
    t_grad, t_loop, t_teacher, t_scan = [], [], [], []
    for _ in range(reps):
        # `steps` consecutive calls per timing window, like the loop: minima over windows of the
        # same length (shorter windows catch quiet moments of a loaded machine more easily)
        t_grad.append(np.median(warm_times(lambda: [grad(student) for _ in range(steps)], repeats=1)) / steps)
        t_scan.append(np.median(warm_times(lambda: scanned_grads(student), repeats=1)) / steps)
        t_loop.append(np.median(warm_times(lambda: ogd.run_ogd(student, arrays, opt, steps).state, repeats=1)) / steps)
        t_teacher.append(
            np.median(warm_times(lambda: ogd.run_ogd(student, tstream, opt, steps).state, repeats=1)) / steps
        )
    t_grad, t_loop, t_teacher, t_scan = (float(np.min(t)) for t in (t_grad, t_loop, t_teacher, t_scan))
    return {
        "n": n,
        "d": d,
        "L": layers,
        "H": heads,
        "m": mlp,
        "B": batch,
        "steps_per_call": steps,
        "gradient_s": t_grad,
        "step_s": t_loop,
        "steps_per_s": 1 / t_loop,
        "ratio_step_over_gradient": t_loop / t_grad,
        "scanned_gradient_s": t_scan,
        "ratio_step_over_scanned_gradient": t_loop / t_scan,
        "teacher_stream_step_s": t_teacher,
        "teacher_stream_steps_per_s": 1 / t_teacher,
        "gradient_method": getattr(grad_fn, "__module__", "") + "." + getattr(grad_fn, "__name__", ""),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--notes", default="", help="how the machine was loaded during the run")
    args = p.parse_args()
    rows = [
        bench(256, steps=20 if not args.quick else 5, reps=3 if not args.quick else 1),
        bench(4096, steps=5 if not args.quick else 2, reps=3 if not args.quick else 1),
    ]
    res = {
        "machine": machine(),
        "rows": rows,
        "note": "Ratios are measured in the same run (absolute times vary on shared machines); "
        "interleaved, minimum over repetitions.",
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "ogd.json").write_text(json.dumps(res, indent=2) + "\n")
    m = res["machine"]
    lines = [
        "# OGD training loop",
        "",
        f"Machine: {m['processor']}, {m['cpu_count']} CPUs, jax {m['jax']}, backend {m['backend']}. "
        f"{args.notes + ' ' if args.notes else ''}Ratios are measured within one run (absolute times vary on shared machines).",
        "",
        f"d = 16, L = 8, H = 2, m = 32, B = 4, float32, ridge SGD, gradient: `{rows[0]['gradient_method']}`.",
        "",
        "| n | gradient (s) | loop step (s) | steps/s | step / gradient | step / gradient in a bare scan | "
        "steps/s with teacher labels |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['n']} | {r['gradient_s']:.4g} | {r['step_s']:.4g} | {r['steps_per_s']:.3g} | "
            f"{r['ratio_step_over_gradient']:.3f} | {r['ratio_step_over_scanned_gradient']:.3f} | "
            f"{r['teacher_stream_steps_per_s']:.3g} |"
        )
    lines += [
        "",
        "step / gradient: one step of the scanned, jit-compiled loop over one jit-compiled gradient "
        "evaluation on the same sample (target <= 1.1); 'in a bare scan': over the same gradients summed inside a "
        "plain `lax.scan` with no update (isolates the OGD machinery from XLA's in-loop cost). The teacher column also runs the teacher's forward "
        "pass to make each label (not loop overhead).",
    ]
    (RESULTS / "ogd.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
