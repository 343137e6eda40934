"""Part ``uniform``: E_z sup_θ √n·dev over the ball of parameters, the uniform-in-θ quantity, vs d and H.

The OGD bounds of the paper need the deviation uniformly over the parameters a run may visit:
E_z sup_{θ ∈ Θ} √n·sup_s‖x_s(θ; z) − x̂_s(θ)‖, the supremum taken per context. This is where a
√(d/n) can live: the more directions θ has, the better it can be fitted to one context's
fluctuation. Each context (isotropic N(0, I/d); the heads sweep at one d with Σ_h‖V_h‖ ≤ 1) gets
its own projected ascent (:data:`~.ascent.ascend_each`) from the two structured starts and one
random start; the largest value per context is its supremum found (a lower bound). A random
model's value on the same context is reported beside it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cfm_jax.stats import bootstrap

from ..declarations.claims import UNIFORM
from ..plotting import COLORS, figure, log_ticks, save
from ..protocol import Claim, Part, Settings, Summary
from . import verdicts as V
from .ascent import Problem, ascend_each, contexts, law_cov, stack, starts
from .statistics import ci, growth
from .suprema import LEARNING_RATE, embed_dim

#: starts per context: the two structured constructions and one random model.
STARTS = 3


def unstack(params: dict) -> list[dict]:
    return [{k: a[i] for k, a in params.items()} for i in range(params["Q"].shape[0])]


class Uniform(Part):
    name = "uniform"
    title = "E sup over the parameter ball (one ascent per context): the uniform-in-θ deviation vs d and H"
    options = UNIFORM.options

    def check(self, settings: Settings) -> None:
        if settings["sup_at_dim"] not in settings["uni_dims"]:
            raise ValueError(
                f"--sup-at-dim must be one of --uni-dims {list(settings['uni_dims'])}, got {settings['sup_at_dim']}."
            )
        if 1 not in settings["uni_heads"]:
            raise ValueError(f"--uni-heads must include 1, got {list(settings['uni_heads'])}.")

    def configs(self, settings: Settings) -> list[dict]:
        base = {k: settings[k] for k in ("sup_n", "sup_steps", "uni_contexts", "layers")} | {"seed": settings.seed}
        at = settings["sup_at_dim"]
        out = [
            dict(base, sweep="d", dim=d, heads=1, embed_dim=embed_dim(d, settings["uni_dims"]), embed_heads=1)
            for d in settings["uni_dims"]
        ]
        out += [
            dict(base, sweep="heads", dim=at, heads=h, embed_dim=at, embed_heads=h)
            for h in settings["uni_heads"]
            if h > 1
        ]
        return out

    def run(self, config: dict) -> dict:
        d, H, L, M = (int(config[k]) for k in ("dim", "heads", "layers", "uni_contexts"))
        rng = np.random.default_rng([int(config["seed"]), 2, d, H])
        prob = Problem(d, H, int(config["embed_dim"]), int(config["embed_heads"]), law_cov(d, False))
        theta0 = prob.theta(stack([p for _ in range(M) for p in unstack(starts(rng, d, H, L, STARTS - 2, True))]))
        train = prob.points(contexts(rng, M, int(config["sup_n"]), prob.cov[:d, :d]))
        steps = int(config["sup_steps"])
        _, best, history = ascend_each(
            theta0,
            prob.x0,
            np.repeat(train, STARTS, axis=0)[:, None],
            prob.cov,
            1.0,
            1.0,
            True,
            LEARNING_RATE,
            *prob.masks,
            steps=steps,
        )
        best = np.asarray(best, np.float64).reshape(M, STARTS)
        random = np.asarray(history, np.float64)[:, 0].reshape(M, STARTS)[:, 2]
        return {"sup": best.max(axis=1).tolist(), "random": random.tolist()}

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        claims, text = [], []
        have = {
            "steps": settings["sup_steps"],
            "contexts": settings["uni_contexts"],
            "largest d": max(settings["uni_dims"]),
        }
        for r in rows:
            text.append(
                f"{r['config']['sweep']:5s} d={r['config']['dim']:3d} H={r['config']['heads']}: E sup √n·dev = "
                f"{ci(bootstrap(np.mean, r['sup']))}, a random model {ci(bootstrap(np.mean, r['random']))}"
            )
        dims = sorted((r for r in rows if r["config"]["sweep"] == "d"), key=lambda r: r["config"]["dim"])
        if len(dims) >= 2:
            claims.append(uniform_line(dims, "d", lambda r: r["config"]["dim"], have | {"largest H": 0}))
        at = settings["sup_at_dim"]
        heads = [r for r in dims if r["config"]["dim"] == at] + sorted(
            (r for r in rows if r["config"]["sweep"] == "heads"), key=lambda r: r["config"]["heads"]
        )
        if len(heads) >= 2:
            p = lambda r: 3 * r["config"]["layers"] * r["config"]["heads"] * r["config"]["dim"] ** 2  # noqa: E731
            claims.append(uniform_line(heads, "p", p, have | {"largest H": max(settings["uni_heads"])}))
        return Summary(text="\n".join(text), claims=tuple(claims))

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        return [save(uniform_figure(rows), out / "uniform.png")] if rows else []


def uniform_line(scan, label, x_of, have) -> Claim:
    """E sup ∝ x^γ: against d, γ ≤ 1/2 (the √(d/n) of the OGD bounds); against p, independence."""
    xs = [x_of(r) for r in scan]
    gamma = growth(np.log(xs), [np.log(r["sup"]) for r in scan])[0]
    values = ", ".join(
        f"{label}={x}: {ci(bootstrap(np.mean, r['sup']))} (random {np.mean(r['random']):.3g})" for x, r in zip(xs, scan)
    )
    if label == "d":
        claim = (
            r"the uniform-in-θ deviation $E_z\sup_\theta\sqrt{n}\,$dev grows at most like $\sqrt{d}$ "
            r"(the $\sqrt{d/n}$ of the OGD bounds)"
        )
        rule, need = V.at_most(gamma, 0.5), {"steps": 60, "contexts": 16, "largest d": 16}
    else:
        claim = (
            r"the uniform-in-θ deviation $E_z\sup_\theta\sqrt{n}\,$dev does not grow with the parameter count p "
            r"(heads, $\sum_h ‖V_h‖ \leq 1$)"
        )
        rule, need = V.independence(gamma), {"steps": 60, "contexts": 16, "largest H": 8}
    verdict, sizes = V.judge(rule, need, have)
    return Claim(
        claim=claim,
        measured=f"E sup found (95 % CI over contexts): {values}; $∝ {label}^γ$, γ = {ci(gamma, fmt='+.3f')}",
        verdict=verdict,
        figure="uniform.png",
        sizes=sizes,
    )


def uniform_figure(rows):
    """E sup and a random model's value vs d (with √d from the first d), and vs H."""
    fig, (a0, a1) = figure(2, ncols=2, width=4.6, height=3.9)
    for ax, sweep, key, label in ((a0, "d", "dim", "dimension $d$"), (a1, "heads", "heads", "heads $H$")):
        sel = sorted(
            (
                r
                for r in rows
                if r["config"]["sweep"] == sweep
                or (
                    sweep == "heads"
                    and r["config"]["heads"] == 1
                    and r["config"]["dim"]
                    == next((x["config"]["dim"] for x in rows if x["config"]["sweep"] == "heads"), -1)
                )
            ),
            key=lambda r: r["config"][key],
        )
        if len(sel) < 2:
            ax.set_visible(False)
            continue
        xs = np.asarray([r["config"][key] for r in sel], np.float64)
        sup = [bootstrap(np.mean, r["sup"]) for r in sel]
        v = np.array([q.value for q in sup])
        ax.errorbar(
            xs,
            v,
            yerr=[v - [q.ci_low for q in sup], [q.ci_high for q in sup] - v],
            fmt="o-",
            color=COLORS[0],
            capsize=3,
            label=r"$E\sup_\theta$ (one ascent per context)",
        )
        ax.plot(xs, [np.mean(r["random"]) for r in sel], "x:", color=COLORS[1], label="a random model, same contexts")
        ax.plot(
            xs,
            v[0] * np.sqrt(xs / xs[0]),
            "--",
            color="0.35",
            lw=1.0,
            label=f"$\\sqrt{{{'d' if sweep == 'd' else 'H'}}}$ growth",
        )
        log_ticks(ax, xs, "x")
        ax.set_xlabel(label)
        ax.set_ylabel(r"$\sqrt{n}\,\sup_s\|x_s-\hat x_s\|$")
        ax.set_title(f"uniform-in-θ deviation vs {sweep}")
        ax.legend(fontsize=7)
    return fig


__all__ = ["STARTS", "Uniform", "uniform_figure", "uniform_line"]
