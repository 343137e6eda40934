"""``cfm-jax gradcheck``: every gradient method against the gradient it must match.

On a small float64 problem (H heads, an MLP, non-uniform context weights, a batch of targets)
the gradient of ½‖x_1 − y‖² is computed by each method (one row each) and compared with

- autodiff through the same Euler scheme (an exact method must match it to round-off),
- central finite differences of the Euler scheme along random parameter directions,
- the exact continuous gradient (autodiff through a fine Tsit5 solve), which the continuous
  adjoint approaches at its solver's order.

The rows record each method's relative errors and its time per gradient (median of ``repeats``
after a warm-up call) over one forward solve's; the summary is a code check: every exact method
within 1e-10 of autodiff and 1e-6 of finite differences (else the command exits with 1).
"""

from __future__ import annotations

import functools
import time
from pathlib import Path

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from cfm_jax import (
    AbstractField,
    Backsolve,
    ContinuousAdjoint,
    DiscreteAdjoint,
    EmpiricalMeasure,
    PiecewiseConstantCFM,
    Recompute,
    StoreEvery,
    Transformer,
    forward,
    loss_and_grad,
    mean_squared_loss,
)

from .declarations.gradcheck import GRADCHECK
from .plotting import COLORS, figure, save
from .protocol import Claim, Part, Settings, Summary
from .verdicts import code_check

#: the bounds of the code check: exact methods against autodiff and against finite differences.
ROUND_OFF, FD_LEVEL = 1e-10, 1e-6


def methods() -> dict:
    """name -> (adjoint, solver, steps per layer, reference). ``reference`` is the gradient the
    method must match: ``"euler"`` (exact gradient of the residual network: autodiff and FD of the
    Euler scheme, to round-off) or ``"continuous"`` (the continuous flow's gradient, approached at
    the solver's order; its distance to the Euler references is discretisation, not error)."""
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


def make_problem(seed: int, dim: int, context: int, batch: int, layers: int, heads: int, mlp_width: int):
    """A random problem in the default dtype: (model, x0, context measure, y)."""
    km, kx, kz, kw, ky = jax.random.split(jax.random.key(seed), 5)
    model = Transformer.init(km, dim, heads=heads, mlp_width=mlp_width, layers=layers, qk_scale=1.5, v_scale=1.5)
    if mlp_width:
        assert model.b1 is not None  # an MLP has biases
        model = eqx.tree_at(lambda m: m.b1, model, 0.3 * jnp.ones_like(model.b1))
    w = jax.random.uniform(kw, (context,), minval=0.2, maxval=2.0)
    ctx = EmpiricalMeasure(jax.random.normal(kz, (context, dim)), w / w.sum())
    return model, jax.random.normal(kx, (batch, dim)), ctx, jax.random.normal(ky, (batch, dim))


def flat(tree) -> jax.Array:
    """Every inexact array leaf of ``tree``, flattened into one vector."""
    return jnp.concatenate([jnp.ravel(a) for a in jax.tree.leaves(eqx.filter(tree, eqx.is_inexact_array))])


def timed(fn, repeats: int):
    """(result, median seconds) of ``fn()`` after one warm-up call (compile time excluded)."""
    out = jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return out, float(np.median(times))


def references(model, x0, ctx, y, *, fd_directions: int, seed: int):
    """Autodiff (same Euler scheme), exact continuous gradient and a finite-difference checker."""
    auto = diffrax.RecursiveCheckpointAdjoint()
    # throw=False throughout: the problem is drawn here (finite by construction), and a program with
    # value checks holds a host callback, which the persistent compilation cache never stores
    _, g_euler = loss_and_grad(model, x0, ctx, y, adjoint=auto, throw=False)
    _, g_cont = loss_and_grad(
        model, x0, ctx, y, adjoint=auto, solver=diffrax.Tsit5(), steps=32 * model.num_layers, throw=False
    )
    params, static = eqx.partition(model, eqx.is_inexact_array)

    @jax.jit
    def loss(p):
        x1 = forward(eqx.combine(p, static), x0, ctx, adjoint=auto, throw=False).x1
        return mean_squared_loss(x1, y)

    leaves, treedef = jax.tree.flatten(params)
    dirs = []
    for key in jax.random.split(jax.random.key(seed + 1000), fd_directions):
        ks = jax.random.split(key, len(leaves))
        # drawn flat, the same numbers: a multi-axis draw compiles 5-7x slower on a CPU
        draws = [jax.random.normal(k, (a.size,), a.dtype).reshape(a.shape) for k, a in zip(ks, leaves)]
        dirs.append(jax.tree.unflatten(treedef, draws))
    eps = 1e-5
    fds = []
    for v in dirs:
        plus = jax.tree.map(lambda a, b: a + eps * b, params, v)
        minus = jax.tree.map(lambda a, b: a - eps * b, params, v)
        fds.append(float((loss(plus) - loss(minus)) / (2 * eps)))

    def fd_error(grads):
        g = flat(grads)
        return max(abs(float(jnp.dot(g, flat(v))) - fd) / abs(fd) for v, fd in zip(dirs, fds))

    return g_euler, g_cont, fd_error


class WithoutClosedForms(AbstractField):
    """A field with the ``jax.vjp`` default local products instead of its closed forms."""

    inner: AbstractField

    def __call__(self, x, measure, params):
        return self.inner(x, measure, params)


def _rel(a, b) -> float:
    a, b = flat(a), flat(b)
    return float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b))


@functools.lru_cache(maxsize=4)
def _setup(seed: int, dim: int, context: int, batch: int, layers: int, heads: int, mlp_width: int, fd: int, reps: int):
    """The problem, its references and one forward solve's time (shared by every method's row)."""
    model, x0, ctx, y = make_problem(seed, dim, context, batch, layers, heads, mlp_width)
    model = model.astype(jnp.float64)
    g_euler, g_cont, fd_error = references(model, x0, ctx, y, fd_directions=fd, seed=seed)
    _, t_fwd = timed(lambda: forward(model, x0, ctx, throw=False).x1, reps)
    return (model, x0, ctx, y), g_euler, g_cont, fd_error, t_fwd


PROBLEM = ("dim", "context", "batch", "layers", "heads", "mlp_width")


class GradCheck(Part):
    declaration = GRADCHECK
    title = "Gradient methods against the gradient each must match (float64; relative errors ‖g − g_ref‖/‖g_ref‖)"
    float64 = True  # finite differences need it

    def configs(self, settings: Settings) -> list[dict]:
        problem = {k: settings[k] for k in PROBLEM}
        extra = {"fd_directions": settings["fd_directions"], "repeats": settings["repeats"]}
        return [{"method": name, "seed": settings.seed, **problem, **extra} for name in methods()]

    def run(self, config: dict) -> dict:
        args = [config[k] for k in ("seed", *PROBLEM, "fd_directions", "repeats")]
        (model, x0, ctx, y), g_euler, g_cont, fd_error, t_fwd = _setup(*args)
        adjoint, solver, k, reference = methods()[config["method"]]
        generic = "jax.vjp" in config["method"]
        m = (
            PiecewiseConstantCFM(WithoutClosedForms(model.field), model.stacked_params(), model.dim)
            if generic
            else model
        )
        steps = k * model.num_layers
        (loss, grads), t = timed(
            lambda: loss_and_grad(m, x0, ctx, y, adjoint=adjoint, solver=solver, steps=steps, throw=False),
            config["repeats"],
        )
        if generic:
            names = ("Q", "K", "V", "W1", "b1", "W2", "b2")
            where = lambda g: (g.Q, g.K, g.V, g.W1, g.b1, g.W2, g.b2)  # noqa: E731
            grads = eqx.tree_at(where, model, tuple(grads.params[n] for n in names))
        return {
            "reference": reference,
            "loss": float(loss),
            "rel_err_vs_autodiff_euler": _rel(grads, g_euler),
            "rel_err_vs_finite_differences": fd_error(grads),
            "rel_err_vs_exact_continuous": _rel(grads, g_cont),
            "time_s": t,
            "forward_s": t_fwd,
            "time_over_forward": t / t_fwd,
        }

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        if not rows:
            return Summary()
        header = (
            f"{'method':48s} {'must match':>10s} {'error vs it':>11s} {'vs autodiff':>11s} {'vs FD':>9s} "
            f"{'vs contin.':>10s} {'ms':>8s} {'x fwd':>6s}"
        )
        lines = [
            f"d={settings['dim']} n={settings['context']} B={settings['batch']} L={settings['layers']} "
            f"H={settings['heads']} m={settings['mlp_width']}; one forward solve {1e3 * rows[0]['forward_s']:.2f} ms",
            header,
            "-" * len(header),
        ]
        for r in rows:
            name, ref = r["config"]["method"], r["reference"]
            own = r["rel_err_vs_autodiff_euler"] if ref == "euler" else r["rel_err_vs_exact_continuous"]
            fd = f"{r['rel_err_vs_finite_differences']:9.1e}" if ref == "euler" else f"{'—':>9s}"
            lines.append(
                f"{name:48s} {ref:>10s} {own:11.1e} {r['rel_err_vs_autodiff_euler']:11.1e} {fd} "
                f"{r['rel_err_vs_exact_continuous']:10.1e} {1e3 * r['time_s']:8.2f} {r['time_over_forward']:6.2f}"
            )
        lines.append(
            "Exact methods must match autodiff through the Euler scheme and central finite differences of it; the "
            "continuous adjoints approach\nthe continuous gradient (a fine Tsit5 solve), so their distance to the "
            "Euler references is discretisation, not error. diffrax.BacksolveAdjoint()\nis not offered: it cannot "
            "differentiate the per-layer parameters each layer's solve closes over; ContinuousAdjoint(Backsolve())\n"
            "is the hand-written backsolve."
        )
        exact = [r for r in rows if r["reference"] == "euler"]
        worst = max(r["rel_err_vs_autodiff_euler"] for r in exact)
        worst_fd = max(r["rel_err_vs_finite_differences"] for r in exact)
        passed = worst <= ROUND_OFF and worst_fd <= FD_LEVEL
        claim = Claim(
            claim=f"every exact gradient method equals autodiff of the Euler scheme (≤ {ROUND_OFF:g}) and central "
            f"finite differences (≤ {FD_LEVEL:g})",
            measured=f"worst of {len(exact)} methods: {worst:.1e} vs autodiff, {worst_fd:.1e} vs finite differences",
            verdict=code_check(passed),
            figure="gradcheck.png",
            sizes=lines[0].split(";")[0],
        )
        data = {
            "exact_methods_worst_rel_err_vs_autodiff": worst,
            "exact_methods_worst_rel_err_vs_fd": worst_fd,
            "forward_ms": 1e3 * rows[0]["forward_s"],
        }
        return Summary(text="\n".join(lines), data=data, claims=(claim,), passed=passed)

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        return [save(gradcheck_figure(rows), out / "gradcheck.png")] if rows else []


def gradcheck_figure(rows: list[dict]):
    """Left: each method's error against the gradient it must match (log scale, with the round-off
    bound); right: gradient time over one forward solve."""
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
    ax1.axvline(ROUND_OFF, color="0.3", ls="--", lw=1)
    ax1.set_title("accuracy")
    ax1.legend(
        handles=[
            Patch(color=COLORS[0], label="exact: vs autodiff of the Euler scheme"),
            Patch(color=COLORS[1], label="continuous: vs the continuous gradient"),
            Line2D([], [], color="0.3", ls="--", label=f"round-off bound {ROUND_OFF:g}"),
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
    return fig


__all__ = ["GradCheck", "flat", "gradcheck_figure", "make_problem", "methods", "references", "timed"]
