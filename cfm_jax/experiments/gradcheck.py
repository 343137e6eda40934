"""``cfm-jax gradcheck``: every gradient method against autodiff and central finite differences.

On a small float64 problem (H heads, MLP, non-uniform context weights, a batch of targets) the
gradient of ½‖x_1 − y‖² is computed by each method and compared with

- autodiff through the same Euler scheme (the discrete adjoint must match it to round-off),
- central finite differences of the Euler scheme along random parameter directions,
- the exact continuous gradient (autodiff through a fine Tsit5 solve), which the continuous
  adjoint approaches at its solver's order.

Prints a table (relative errors, time per gradient, time relative to one forward solve) and
writes ``OUT/rows.jsonl``, ``OUT/summary.json`` and ``OUT/gradcheck.png``.
"""

from __future__ import annotations

import time

METHODS = {
    # name: (value_and_grad kwargs, steps per layer)
    "discrete_adjoint": (dict(method="discrete_adjoint"), 1),
    "discrete_adjoint[vjp fallback]": (dict(method="discrete_adjoint", closed_form=False), 1),
    "discrete_adjoint[recompute]": (dict(method="discrete_adjoint", checkpoint="recompute"), 1),
    "continuous_adjoint[Euler]": (dict(method="continuous_adjoint"), 1),
    "continuous_adjoint[Bosh3, 8/layer]": (dict(method="continuous_adjoint", solver="Bosh3"), 8),
    "autodiff[RecursiveCheckpoint]": (dict(method="autodiff"), 1),
    "autodiff[Direct]": (dict(method="autodiff", adjoint="DirectAdjoint"), 1),
    "autodiff[Backsolve]": (dict(method="autodiff", adjoint="BacksolveAdjoint"), 1),
}


def add_arguments(parser):
    from ..cli import add_experiment_arguments

    add_experiment_arguments(parser, "cfm_out/gradcheck")
    parser.add_argument("--dim", type=int, default=4, help="token dimension d")
    parser.add_argument("--context", type=int, default=32, help="context size n")
    parser.add_argument("--batch", type=int, default=3, help="target tokens B")
    parser.add_argument("--layers", type=int, default=6, help="layers L")
    parser.add_argument("--heads", type=int, default=2, help="attention heads H")
    parser.add_argument("--mlp-width", type=int, default=8, help="MLP width m (0: none)")
    parser.add_argument("--fd-directions", type=int, default=4, help="random directions for finite differences")
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions (median)")


def make_problem(seed: int, dim: int, context: int, batch: int, layers: int, heads: int, mlp_width: int):
    """A random float64-or-default-dtype problem: (model, x0, context measure, y)."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    from .. import EmpiricalMeasure, Transformer

    km, kx, kz, kw, ky = jax.random.split(jax.random.key(seed), 5)
    model = Transformer.init(km, dim, heads=heads, mlp_width=mlp_width, layers=layers, qk_scale=1.5, v_scale=1.5)
    if mlp_width:
        model = eqx.tree_at(lambda m: m.b1, model, 0.3 * jnp.ones_like(model.b1))
    w = jax.random.uniform(kw, (context,), minval=0.2, maxval=2.0)
    ctx = EmpiricalMeasure(jax.random.normal(kz, (context, dim)), w / w.sum())
    return model, jax.random.normal(kx, (batch, dim)), ctx, jax.random.normal(ky, (batch, dim))


def _resolve(kwargs):
    import diffrax

    kw = dict(kwargs)
    if isinstance(kw.get("solver"), str):
        kw["solver"] = getattr(diffrax, kw["solver"])()
    if isinstance(kw.get("adjoint"), str):
        kw["adjoint"] = getattr(diffrax, kw["adjoint"])()
    return kw


def flat(tree):
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    return jnp.concatenate([jnp.ravel(a) for a in jax.tree.leaves(eqx.filter(tree, eqx.is_inexact_array))])


def timed(fn, repeats: int):
    """(result, median seconds) of ``fn()`` after one warm-up call (compile time excluded)."""
    import jax
    import numpy as np

    out = jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return out, float(np.median(times))


def references(model, x0, ctx, y, *, fd_directions: int, seed: int):
    """Autodiff (same Euler scheme), exact continuous gradient and finite-difference checker."""
    import diffrax
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    from .. import residual_forward, value_and_grad

    _, g_euler = value_and_grad(model, x0, ctx, y, method="autodiff")
    _, g_cont = value_and_grad(model, x0, ctx, y, method="autodiff", solver=diffrax.Tsit5(), steps=32 * model.num_layers)
    params, static = eqx.partition(model, eqx.is_inexact_array)

    @jax.jit
    def loss(p):
        x1 = residual_forward(eqx.combine(p, static), x0, ctx)[0]
        return 0.5 * jnp.sum((x1 - y) ** 2) / x0.shape[0]

    leaves, treedef = jax.tree.flatten(params)
    dirs = []
    for key in jax.random.split(jax.random.key(seed + 1000), fd_directions):
        ks = jax.random.split(key, len(leaves))
        dirs.append(jax.tree.unflatten(treedef, [jax.random.normal(k, a.shape, a.dtype) for k, a in zip(ks, leaves)]))
    eps = 1e-5
    fds = []
    for v in dirs:
        plus = jax.tree.map(lambda a, b: a + eps * b, params, v)
        minus = jax.tree.map(lambda a, b: a - eps * b, params, v)
        fds.append(float((loss(plus) - loss(minus)) / (2 * eps)))

    def fd_error(grads):
        g = flat(grads)
        errs = [abs(float(jnp.dot(g, flat(v))) - fd) / abs(fd) for v, fd in zip(dirs, fds)]
        return max(errs)

    return g_euler, g_cont, fd_error


def _rel(a, b):
    import jax.numpy as jnp

    a, b = flat(a), flat(b)
    return float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b))


def run(args) -> int:
    import jax

    jax.config.update("jax_enable_x64", True)  # finite differences need float64
    import jax.numpy as jnp
    from pathlib import Path

    from .. import forward, value_and_grad
    from .runner import Sweep, write_summary

    if args.quick:
        args.context, args.layers, args.repeats = min(args.context, 16), min(args.layers, 4), min(args.repeats, 3)
    problem = dict(
        dim=args.dim, context=args.context, batch=args.batch, layers=args.layers, heads=args.heads,
        mlp_width=args.mlp_width,
    )
    model, x0, ctx, y = make_problem(args.seed, **problem)
    model = model.astype(jnp.float64)
    g_euler, g_cont, fd_error = references(model, x0, ctx, y, fd_directions=args.fd_directions, seed=args.seed)
    fwd = jax.jit(lambda m, a, c: forward(m, a, c).x1)
    _, t_fwd = timed(lambda: fwd(model, x0, ctx), args.repeats)

    def one(config):
        kwargs, k = METHODS[config["method"]]
        kw = _resolve(kwargs)
        try:
            (loss, grads), t = timed(lambda: value_and_grad(model, x0, ctx, y, steps=k * model.num_layers, **kw), args.repeats)
        except Exception as e:  # an adjoint that does not apply to this model: report, do not crash
            return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"}
        return {
            "loss": float(loss),
            "rel_err_vs_autodiff_euler": _rel(grads, g_euler),
            "rel_err_vs_finite_differences": fd_error(grads),
            "rel_err_vs_exact_continuous": _rel(grads, g_cont),
            "time_s": t,
            "time_over_forward": t / t_fwd,
        }

    out = Path(args.out)
    configs = [{"method": name, "seed": args.seed, **problem} for name in METHODS]
    rows = Sweep(out / "rows.jsonl", resume=args.resume).run(configs, one, desc="gradcheck")
    header = f"{'method':36s} {'vs autodiff(Euler)':>18s} {'vs central FD':>14s} {'vs continuous':>14s} {'ms':>9s} {'x fwd':>7s}"
    print(f"gradcheck: float64, d={args.dim} n={args.context} B={args.batch} L={args.layers} H={args.heads} "
          f"m={args.mlp_width}; forward {1e3 * t_fwd:.2f} ms")
    print(header)
    print("-" * len(header))
    for r in rows:
        name = r["config"]["method"]
        if "error" in r:
            print(f"{name:36s} not applicable: {r['error']}")
            continue
        print(f"{name:36s} {r['rel_err_vs_autodiff_euler']:18.2e} {r['rel_err_vs_finite_differences']:14.2e} "
              f"{r['rel_err_vs_exact_continuous']:14.2e} {1e3 * r['time_s']:9.2f} {r['time_over_forward']:7.2f}")
    print("(autodiff(Euler) and central FD are references for the Euler scheme, i.e. the residual network; "
          "continuous methods converge to the 'vs continuous' column instead.)")
    ok = [r for r in rows if "error" not in r]
    disc = next((r for r in ok if r["config"]["method"] == "discrete_adjoint"), None)
    summary = {
        "problem": problem,
        "forward_ms": 1e3 * t_fwd,
        "discrete_adjoint_rel_err_vs_autodiff": None if disc is None else disc["rel_err_vs_autodiff_euler"],
        "discrete_adjoint_rel_err_vs_fd": None if disc is None else disc["rel_err_vs_finite_differences"],
        "rows": rows,
    }
    write_summary(out, summary)
    _plot(ok, out / "gradcheck.png")
    passed = disc is not None and disc["rel_err_vs_autodiff_euler"] < 1e-10 and disc["rel_err_vs_finite_differences"] < 1e-6
    print(f"discrete adjoint vs autodiff / FD: {'PASS' if passed else 'FAIL'}; wrote {out / 'summary.json'}")
    return 0 if passed else 1


def _plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    if not rows:
        return
    names = [r["config"]["method"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    xs = np.arange(len(rows))
    for j, (key, label) in enumerate(
        [("rel_err_vs_autodiff_euler", "vs autodiff (Euler)"), ("rel_err_vs_finite_differences", "vs central FD"),
         ("rel_err_vs_exact_continuous", "vs exact continuous")]
    ):
        ax1.bar(xs + 0.27 * (j - 1), [max(r[key], 1e-17) for r in rows], width=0.27, label=label)
    ax1.set_yscale("log")
    ax1.set_xticks(xs, names, rotation=60, ha="right", fontsize=7)
    ax1.set_ylabel("relative error")
    ax1.legend(fontsize=7)
    ax2.bar(xs, [r["time_over_forward"] for r in rows])
    ax2.set_xticks(xs, names, rotation=60, ha="right", fontsize=7)
    ax2.set_ylabel("gradient time / forward time")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
