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


def methods() -> dict:
    """name -> (adjoint, solver, steps per layer, reference). ``reference`` is the gradient the
    method must match: ``"euler"`` (exact gradient of the residual network: autodiff and FD of the
    Euler scheme, to round-off) or ``"continuous"`` (the continuous flow's gradient, approached at
    the solver's order; its distance to the Euler references is discretisation, not error)."""
    import diffrax

    from .._adjoint import Backsolve, ContinuousAdjoint, DiscreteAdjoint, Recompute, StoreEvery

    return {
        "DiscreteAdjoint()": (DiscreteAdjoint(), None, 1, "euler"),
        "DiscreteAdjoint(StoreEvery(2))": (DiscreteAdjoint(StoreEvery(2)), None, 1, "euler"),
        "DiscreteAdjoint(Recompute())": (DiscreteAdjoint(Recompute()), None, 1, "euler"),
        "DiscreteAdjoint() [jax.vjp products]": (DiscreteAdjoint(), None, 1, "euler"),
        "ContinuousAdjoint() [Euler]": (ContinuousAdjoint(), None, 1, "continuous"),
        "ContinuousAdjoint() [Bosh3, 8/layer]": (ContinuousAdjoint(), diffrax.Bosh3(), 8, "continuous"),
        "ContinuousAdjoint(Backsolve()) [Bosh3, 8/layer]": (
            ContinuousAdjoint(memory=Backsolve()),
            diffrax.Bosh3(),
            8,
            "continuous",
        ),
        "diffrax.RecursiveCheckpointAdjoint()": (diffrax.RecursiveCheckpointAdjoint(), None, 1, "euler"),
        "diffrax.DirectAdjoint()": (diffrax.DirectAdjoint(), None, 1, "euler"),
    }


def add_arguments(parser):
    from .options import add_experiment_arguments

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
        assert model.b1 is not None  # an MLP has biases
        model = eqx.tree_at(lambda m: m.b1, model, 0.3 * jnp.ones_like(model.b1))
    w = jax.random.uniform(kw, (context,), minval=0.2, maxval=2.0)
    ctx = EmpiricalMeasure(jax.random.normal(kz, (context, dim)), w / w.sum())
    return model, jax.random.normal(kx, (batch, dim)), ctx, jax.random.normal(ky, (batch, dim))


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

    from .. import forward, loss_and_grad

    auto = diffrax.RecursiveCheckpointAdjoint()
    _, g_euler = loss_and_grad(model, x0, ctx, y, adjoint=auto)
    _, g_cont = loss_and_grad(model, x0, ctx, y, adjoint=auto, solver=diffrax.Tsit5(), steps=32 * model.num_layers)
    params, static = eqx.partition(model, eqx.is_inexact_array)

    @jax.jit
    def loss(p):
        x1 = forward(eqx.combine(p, static), x0, ctx, adjoint=auto).x1
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
    import equinox as eqx
    import jax.numpy as jnp

    from .. import CFM, forward, loss_and_grad
    from .options import configuration, results_mode
    from .runner import ResultsFolder

    folder = ResultsFolder(args.out, "gradcheck", configuration(args), mode=results_mode(args))
    if args.quick:
        args.context, args.layers, args.repeats = min(args.context, 16), min(args.layers, 4), min(args.repeats, 3)
    problem = dict(
        dim=args.dim,
        context=args.context,
        batch=args.batch,
        layers=args.layers,
        heads=args.heads,
        mlp_width=args.mlp_width,
    )
    model, x0, ctx, y = make_problem(args.seed, **problem)
    model = model.astype(jnp.float64)
    g_euler, g_cont, fd_error = references(model, x0, ctx, y, fd_directions=args.fd_directions, seed=args.seed)
    fwd = jax.jit(lambda m, a, c: forward(m, a, c).x1)
    _, t_fwd = timed(lambda: fwd(model, x0, ctx), args.repeats)

    table = methods()
    generic = CFM(_without_closed_forms(model.field), model.stacked_params(), model.dim)

    def one(config):
        adjoint, solver, k, reference = table[config["method"]]
        m = generic if "jax.vjp" in config["method"] else model
        (loss, grads), t = timed(
            lambda: loss_and_grad(m, x0, ctx, y, adjoint=adjoint, solver=solver, steps=k * model.num_layers),
            args.repeats,
        )
        if m is generic:
            grads = eqx.tree_at(
                lambda g: (g.Q, g.K, g.V, g.W1, g.b1, g.W2, g.b2),
                model,
                tuple(grads.params[n] for n in ("Q", "K", "V", "W1", "b1", "W2", "b2")),
            )
        return {
            "reference": reference,
            "loss": float(loss),
            "rel_err_vs_autodiff_euler": _rel(grads, g_euler),
            "rel_err_vs_finite_differences": fd_error(grads),
            "rel_err_vs_exact_continuous": _rel(grads, g_cont),
            "time_s": t,
            "time_over_forward": t / t_fwd,
        }

    out = folder.path
    configs = [{"method": name, "seed": args.seed, **problem} for name in table]
    rows = folder.sweep(progress=not args.no_progress).run(configs, one, desc="gradcheck")
    print(
        f"gradcheck: float64, d={args.dim} n={args.context} B={args.batch} L={args.layers} H={args.heads} "
        f"m={args.mlp_width}; one forward solve {1e3 * t_fwd:.2f} ms (median of {args.repeats})"
    )
    print(
        "Relative errors ‖g − g_ref‖/‖g_ref‖. Exact methods must match the Euler references (autodiff through the "
        "Euler scheme, and central finite\ndifferences of it along random directions) to round-off; continuous-adjoint "
        "methods converge to the continuous gradient (autodiff\nthrough a fine Tsit5 solve), so their distance to the "
        "Euler references is the Euler scheme's discretisation error, not a bug\n(FD along random directions is "
        "shown only for the exact methods: it checks the Euler scheme)."
    )
    header = (
        f"{'method':48s} {'must match':>10s} {'error vs it':>11s} {'vs autodiff':>11s} {'vs FD':>9s} "
        f"{'vs contin.':>10s} {'ms':>8s} {'x fwd':>6s}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        name, ref = r["config"]["method"], r["reference"]
        own = r["rel_err_vs_autodiff_euler"] if ref == "euler" else r["rel_err_vs_exact_continuous"]
        fd = f"{r['rel_err_vs_finite_differences']:9.1e}" if ref == "euler" else f"{'—':>9s}"
        print(
            f"{name:48s} {ref:>10s} {own:11.1e} {r['rel_err_vs_autodiff_euler']:11.1e} "
            f"{fd} {r['rel_err_vs_exact_continuous']:10.1e} "
            f"{1e3 * r['time_s']:8.2f} {r['time_over_forward']:6.2f}"
        )
    print(
        "diffrax.BacksolveAdjoint() is not offered: the forward solves one ODE per layer inside a lax.scan and "
        "BacksolveAdjoint cannot differentiate\nthe traced per-layer parameters; ContinuousAdjoint(Backsolve()) is "
        "the hand-written backsolve."
    )
    exact = [r for r in rows if r["reference"] == "euler"]
    disc = next((r for r in rows if r["config"]["method"] == "DiscreteAdjoint()"), None)
    assert disc is not None  # the method list always holds DiscreteAdjoint()
    worst_exact = max(r["rel_err_vs_autodiff_euler"] for r in exact)
    worst_fd = max(r["rel_err_vs_finite_differences"] for r in exact)
    summary = {
        "problem": problem,
        "forward_ms": 1e3 * t_fwd,
        "discrete_adjoint_rel_err_vs_autodiff": disc["rel_err_vs_autodiff_euler"],
        "discrete_adjoint_rel_err_vs_fd": disc["rel_err_vs_finite_differences"],
        "exact_methods_worst_rel_err_vs_autodiff": worst_exact,
        "exact_methods_worst_rel_err_vs_fd": worst_fd,
        "rows": rows,
    }
    folder.write_summary(summary, "gradcheck.png")
    _plot(rows, out / "gradcheck.png")
    passed = worst_exact < 1e-10 and worst_fd < 1e-6
    print(
        f"exact methods vs autodiff (≤ 1e-10) and central FD (≤ 1e-6): {'PASS' if passed else 'FAIL'}; "
        f"wrote {out / 'rows.jsonl'}, {out / 'summary.json'}, {out / 'gradcheck.png'}"
    )
    return 0 if passed else 1


def _without_closed_forms(field):
    """``field`` with the ``jax.vjp`` default local products instead of its closed forms."""
    from .._fields import AbstractField

    class WithoutClosedForms(AbstractField):
        inner: AbstractField

        def __call__(self, x, measure, params):
            return self.inner(x, measure, params)

    return WithoutClosedForms(field)


def _plot(rows, path):
    """Left: each method's error against the gradient it must match (log scale, with the round-off
    and finite-difference levels); right: gradient time over one forward solve."""
    import numpy as np

    from .plotting import COLORS, figure, save

    if not rows:
        return
    names = [r["config"]["method"] for r in rows]
    own = [
        r["rel_err_vs_autodiff_euler"] if r["reference"] == "euler" else r["rel_err_vs_exact_continuous"] for r in rows
    ]
    colors = [COLORS[0] if r["reference"] == "euler" else COLORS[1] for r in rows]
    fig, (ax1, ax2) = figure(2, ncols=2, width=6.5, height=4.8)
    ys = np.arange(len(rows))[::-1]
    ax1.barh(ys, [max(e, 1e-17) for e in own], color=colors)
    ax1.set_xscale("log")
    for yy, e in zip(ys, own):
        if e == 0:
            ax1.text(2e-17, yy, " (is the reference)", va="center", fontsize=7)
    ax1.set_yticks(ys, names, fontsize=8)
    ax1.set_xlabel("relative error vs the gradient the method must match")
    ax1.axvline(1e-10, color="0.3", ls="--", lw=1)
    ax1.set_title("accuracy")
    from matplotlib.patches import Patch

    ax1.legend(
        handles=[
            Patch(color=COLORS[0], label="exact: vs autodiff of the Euler scheme"),
            Patch(color=COLORS[1], label="continuous: vs the continuous gradient"),
            __import__("matplotlib.lines", fromlist=["Line2D"]).Line2D(
                [], [], color="0.3", ls="--", label="round-off bound 1e-10"
            ),
        ],
        loc="lower right",
        fontsize=7,
        framealpha=0.95,
    )
    ax2.barh(ys, [r["time_over_forward"] for r in rows], color=colors)
    ax2.set_yticks(ys, [""] * len(rows))
    ax2.set_xlabel("gradient time / forward time")
    ax2.set_title("cost")
    fig.suptitle("cfm-jax gradcheck: gradient methods on one float64 problem")
    save(fig, path)
