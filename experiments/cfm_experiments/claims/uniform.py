"""Part ``uniform``: E_z sup_θ √n·dev over the ball of parameters, the uniform-in-θ quantity, vs d and H.

The OGD bounds of the paper need the deviation uniformly over the parameters a run may visit:
E_z sup_{θ ∈ Θ} √n·sup_s‖x_s(θ; z) − x̂_s(θ)‖, the supremum taken per context. This is where a
√(d/n) can live: the more directions θ has, the better it can be fitted to one context's
fluctuation. Each context gets its own projected ascent (:data:`~.ascent.ascend_each`, the law
fixed) from the aligned and trivial constructions and one random model, with Σ_h‖V_h‖ ≤ 1; the
largest value per context is its supremum found (a lower bound). Two isotropic laws: N(0, I/d)
(E‖z‖² = 1) and N(0, I) (E‖z‖² = d, where the trivial model's empirical mean already grows like √d,
so that a √d growth shows if it is there); the heads sweep at one d on the first.

Beside E sup: the best fixed start (the start whose value, before any ascent, is largest on average
over the contexts: sup_θ E rather than E sup_θ) and the trivial model (Q = K = 0). A per-context
ascent that gains nothing over the best fixed start measures one model, not the uniform quantity:
its line says so (:func:`.supremum.search`) and its verdict is withheld.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cfm_jax.stats import bootstrap

from ..declarations.claims import UNIFORM
from ..plotting import COLORS, figure, log_ticks, log_values, save
from ..protocol import Claim, Part, Settings, Summary
from ..verdicts import claims as V
from .ascent import Problem, ascend_each, normals
from .searches import ENERGIES, LEARNING_RATE, Energy, budget
from .starts import stack, starts
from .statistics import ci, growth
from .suprema import embed_dim, label
from .supremum import search, search_verdict

#: the starts of every context's ascent: the aligned and trivial constructions, then one random model.
PAIRS = (("aligned", "isotropic"), ("trivial", "isotropic"))
STARTS = len(PAIRS) + 1


class Uniform(Part):
    declaration = UNIFORM
    title = "E sup over the parameter ball (one ascent per context): the uniform-in-θ deviation vs d and H"

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
            dict(base, sweep="d", dim=d, heads=1, energy=e, embed_dim=embed_dim(d, settings["uni_dims"]), embed_heads=1)
            for d in settings["uni_dims"]
            for e in ENERGIES
        ]
        out += [
            dict(base, sweep="heads", dim=at, heads=h, energy="1", embed_dim=at, embed_heads=h)
            for h in settings["uni_heads"]
            if h > 1
        ]
        return out

    def run(self, config: dict) -> dict:
        d, H, L, M = (int(config[k]) for k in ("dim", "heads", "layers", "uni_contexts"))
        energy = budget(config["energy"], d)
        rng = np.random.default_rng([int(config["seed"]), 2, d, H, ENERGIES.index(config["energy"])])
        prob = Problem(d, H, int(config["embed_dim"]), int(config["embed_heads"]), energy)
        drawn = [starts(rng, d, H, L, energy, PAIRS, 1, True) for _ in range(M)]  # a random model per context
        theta0 = stack([{k: a[i] for k, a in t.items()} for t, _, _ in drawn for i in range(STARTS)])
        law0 = stack([{k: a[i] for k, a in w.items()} for _, w, _ in drawn for i in range(STARTS)])
        eps = prob.points(normals(rng, M, int(config["sup_n"]), d))
        _, _, best, history = ascend_each(
            prob.theta(theta0), prob.law(law0), prob.x0, np.repeat(eps, STARTS, axis=0)[:, None], energy,
            1.0, 1.0, True, LEARNING_RATE, *prob.masks, learn_law=False, steps=int(config["sup_steps"]),
        )  # fmt: skip
        return {
            "starts": [name.replace(" 1 ·", " ·") for name in drawn[0][2]],
            "best": np.asarray(best, np.float64).reshape(M, STARTS).tolist(),
            "initial": np.asarray(history, np.float64)[:, 0].reshape(M, STARTS).tolist(),
        }

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        claims, text = [], []
        have = {
            "steps": settings["sup_steps"],
            "contexts": settings["uni_contexts"],
            "largest d": max(settings["uni_dims"]),
        }
        for r in rows:
            u, c = uniform_sup(r), r["config"]
            text.append(
                f"{c['sweep']:5s} d={c['dim']:3d} H={c['heads']} {label(c['energy']):10s}: E sup √n·dev = "
                f"{ci(u['interval'])}; best fixed start ({u['start']}) {ci(u['fixed'])}, gain "
                f"{ci(u['gain'], fmt='+.3g')}; trivial {ci(u['trivial'])}" + "".join(f"; {p}" for p in u["problems"])
            )
        for energy in ENERGIES:
            dims = sorted(
                (r for r in rows if r["config"]["sweep"] == "d" and r["config"]["energy"] == energy),
                key=lambda r: r["config"]["dim"],
            )
            if len(dims) >= 2:
                claims.append(uniform_line(dims, "d", lambda r: r["config"]["dim"], have | {"largest H": 0}, energy))
        at = settings["sup_at_dim"]
        heads = [
            r for r in rows if r["config"]["sweep"] == "d" and r["config"]["dim"] == at and r["config"]["energy"] == "1"
        ]
        heads += sorted((r for r in rows if r["config"]["sweep"] == "heads"), key=lambda r: r["config"]["heads"])
        if len(heads) >= 2:
            p = lambda r: 3 * r["config"]["layers"] * r["config"]["heads"] * r["config"]["dim"] ** 2  # noqa: E731
            claims.append(uniform_line(heads, "p", p, have | {"largest H": max(settings["uni_heads"])}, "1"))
        return Summary(text="\n".join(text), claims=tuple(claims))

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        return [save(uniform_figure(rows), out / "uniform.png")] if rows else []


def uniform_sup(row) -> dict:
    """E sup (per context the largest value any ascent reached) with its interval, the best fixed
    start (largest mean value before the ascent: its name and interval), the trivial model's
    interval, and :func:`~.supremum.search`'s gain over the best fixed start and problems."""
    best, initial = np.asarray(row["best"]), np.asarray(row["initial"])
    sup = best.max(axis=1)
    s = int(np.argmax(initial.mean(axis=0)))
    t = next(i for i, name in enumerate(row["starts"]) if name.startswith("trivial"))
    return {
        "values": sup,
        "interval": bootstrap(np.mean, sup),
        "start": row["starts"][s],
        "fixed": bootstrap(np.mean, initial[:, s]),
        "trivial": bootstrap(np.mean, initial[:, t]),
        **search(sup, initial[:, s], initial[:, t]),
    }


def uniform_line(scan, label_x, x_of, have, energy: Energy) -> Claim:
    """E sup ∝ x^γ: against d, γ ≤ 1/2 (the √(d/n) of the OGD bounds); against p, independence.
    Withheld when a per-context ascent gains nothing over the best fixed start."""
    xs = [x_of(r) for r in scan]
    sups = [uniform_sup(r) for r in scan]
    gamma = growth(np.log(xs), [np.log(u["values"]) for u in sups])[0]
    entries = [(f"{label_x}={x}", u) for x, u in zip(xs, sups)]
    law = "$N(0, I/d)$, $E\\|z\\|^2 = 1$" if energy == "1" else "$N(0, I)$, $E\\|z\\|^2 = d$"
    if label_x == "d":
        claim = (
            rf"the uniform-in-θ deviation $E_z\sup_\theta\sqrt{{n}}\,$dev on {law} grows at most like $\sqrt{{d}}$ "
            r"(the $\sqrt{d/n}$ of the OGD bounds)"
        )
        rule, need = V.at_most(gamma, 0.5), {"steps": 60, "contexts": 16, "largest d": 16}
    else:
        claim = (
            rf"the uniform-in-θ deviation $E_z\sup_\theta\sqrt{{n}}\,$dev on {law} does not grow with the parameter "
            r"count p (heads, $\sum_h ‖V_h‖ \leq 1$)"
        )
        rule, need = V.independence(gamma), {"steps": 60, "contexts": 16, "largest H": 8}
    verdict, searched = search_verdict(
        entries, rule, "every context's supremum improved on the best fixed start and beats the trivial models"
    )
    verdict, sizes = V.judge(verdict, need, have)
    values = "; ".join(
        f"{x}: {ci(u['interval'])} (best fixed start {u['fixed'].value:.3g}, gain {ci(u['gain'], fmt='+.3g')}; "
        f"trivial {u['trivial'].value:.3g})" + "".join(f", {p}" for p in u["problems"])
        for x, u in entries
    )
    return Claim(
        claim=claim,
        measured=f"E sup found (95 % CI over contexts): {values}; $∝ {label_x}^γ$, γ = {ci(gamma, fmt='+.3f')}; "
        + searched.replace("on its start", "on the best fixed start"),
        verdict=verdict,
        figure="uniform.png",
        sizes=sizes,
    )


def _panel(ax, sel, key, color, what, symbol) -> bool:
    """E sup (with its interval), the best fixed start and the trivial model of ``sel`` against
    ``config[key]``, and √x growth from the first point; False when there are fewer than two rows."""
    if len(sel) < 2:
        return False
    xs = np.asarray([r["config"][key] for r in sel], np.float64)
    us = [uniform_sup(r) for r in sel]
    v = np.array([u["interval"].value for u in us])
    lo, hi = v - [u["interval"].ci_low for u in us], [u["interval"].ci_high for u in us] - v
    ax.errorbar(xs, v, yerr=[lo, hi], fmt="o-", color=color, capsize=3, label=rf"$E\sup_\theta$, {what}")
    ax.plot(xs, [u["fixed"].value for u in us], "x:", color=color, label="best fixed start")
    ax.plot(xs, [u["trivial"].value for u in us], "s--", color=color, alpha=0.5, ms=4, label="trivial ($Q = K = 0$)")
    ax.plot(xs, v[0] * np.sqrt(xs / xs[0]), "-", color="0.6", lw=0.8, label=rf"$\sqrt{{{symbol}}}$ growth")
    log_ticks(ax, xs, "x")
    return True


def uniform_figure(rows):
    """E sup, the best fixed start and the trivial model vs d per law (with √d from the first d), and vs H."""
    fig, (a0, a1) = figure(2, ncols=2, width=4.6, height=3.9)
    drawn = False
    for energy, color in zip(ENERGIES, COLORS):
        sel = sorted(
            (r for r in rows if r["config"]["sweep"] == "d" and r["config"]["energy"] == energy),
            key=lambda r: r["config"]["dim"],
        )
        drawn |= _panel(a0, sel, "dim", color, label(energy), "d")
    at = next((x["config"]["dim"] for x in rows if x["config"]["sweep"] == "heads"), -1)
    heads = [r for r in rows if r["config"]["sweep"] == "heads"] + [
        r for r in rows if r["config"]["sweep"] == "d" and r["config"]["dim"] == at and r["config"]["energy"] == "1"
    ]
    shown = (drawn, _panel(a1, sorted(heads, key=lambda r: r["config"]["heads"]), "heads", COLORS[2], "E‖z‖² = 1", "H"))
    for ax, show, what in zip((a0, a1), shown, ("d", "H")):
        ax.set_visible(show)
        log_values(ax, "y")
        ax.set_xlabel("dimension $d$" if what == "d" else "heads $H$")
        ax.set_ylabel(r"$\sqrt{n}\,\sup_s\|x_s-\hat x_s\|$")
        ax.set_title(f"uniform-in-θ deviation vs {what}")
        ax.legend(fontsize=6)
    return fig


__all__ = ["PAIRS", "STARTS", "Uniform", "uniform_figure", "uniform_line", "uniform_sup"]
