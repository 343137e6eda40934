"""Part ``suprema``: the paper's constant as a supremum over parameters of given norms, vs d and the heads.

For each d (and each head count H at one d) the sup deviation's √n·dev is maximised over θ with
‖Q_lh‖‖K_lh‖ ≤ 1 and ‖[V_l1 … V_lH]‖ ≤ 1 (or Σ_h‖V_lh‖ ≤ 1) by projected gradient ascent through
the library's n-point system and exact Gaussian limit, on common random contexts, from random and
structured starts (:mod:`.ascent`). Two context laws with E‖z‖² = 1: isotropic N(0, I/d), where
the logits' spread shrinks like 1/d whatever θ, and a low-dimensional one (its energy in one plane),
where the aligned construction keeps the spread at every d. The θ found is then measured on
independent contexts at several n (the value maximised on the training contexts is biased upward).
The d- and p-verdicts rest on the supremum found (a lower bound of the true supremum), with the
mean over random models beside it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cfm_jax.chaos import size_buckets
from cfm_jax.stats import Interval, bootstrap, fit_loglog

from ..declarations.claims import SUP_AT_DIM, SUP_CONTEXTS, SUP_N, SUP_STEPS, SUPREMA
from ..plotting import COLORS, figure, log_ticks, save
from ..protocol import Claim, Part, Settings, Summary
from . import verdicts as V
from .ascent import STRUCTURED, Problem, ascend, contexts, evaluate, law_cov, random_params, stack, starts
from .statistics import ci, growth

#: Adam's step size in the ascent (parameters of operator norm ~1).
LEARNING_RATE = 0.05
LAWS = ("isotropic", "low-dimensional")


def start_names(restarts: int) -> list[str]:
    return [*STRUCTURED, *(f"random {i + 1}" for i in range(restarts))]


class Suprema(Part):
    name = "suprema"
    title = "The paper's constant as a supremum over fixed-norm parameters (projected gradient ascent) vs d and H"
    options = SUPREMA.options

    def check(self, settings: Settings) -> None:
        if settings["sup_at_dim"] not in settings["sup_dims"]:
            raise ValueError(
                f"--sup-at-dim must be one of --sup-dims {list(settings['sup_dims'])}, got {settings['sup_at_dim']}."
            )
        if 1 not in settings["sup_heads"]:
            raise ValueError(
                f"--sup-heads must include 1 (the heads are compared with one head), got {list(settings['sup_heads'])}."
            )
        if settings["sup_n"] not in settings["sup_eval_ns"]:
            raise ValueError(
                f"--sup-eval-ns must include --sup-n ({settings['sup_n']}), got {list(settings['sup_eval_ns'])}."
            )

    def configs(self, settings: Settings) -> list[dict]:
        keys = ("sup_n", "sup_steps", "sup_contexts", "sup_restarts", "sup_randoms", "sup_eval_contexts", "layers")
        base = {k: settings[k] for k in keys} | {"eval_ns": list(settings["sup_eval_ns"]), "seed": settings.seed}
        # one program per group of dims (each embedded in its group's largest, at most 4× its own
        # d: chaos.size_buckets) and one per head count (an attention layer costs H times one head:
        # padding heads would cost more than the programs it saves)
        dims = dict(base, sweep="d", heads=1, vnorm="concat", embed_heads=1)
        out = [
            dict(dims, dim=d, law=law, embed_dim=embed_dim(d, settings["sup_dims"]))
            for d in settings["sup_dims"]
            for law in LAWS
        ]
        at = settings["sup_at_dim"]
        heads = dict(base, sweep="heads", dim=at, law="low-dimensional", embed_dim=at)
        for vnorm in ("concat", "sum"):
            out += [dict(heads, heads=h, vnorm=vnorm, embed_heads=h) for h in settings["sup_heads"] if h > 1]
        return out

    def run(self, config: dict) -> dict:
        return run_suprema(config)

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        claims, text = [], []
        at = settings["sup_at_dim"]
        have = {
            "steps": settings["sup_steps"],
            "held-out contexts": settings["sup_eval_contexts"],
            "largest d": max(settings["sup_dims"]),
            "largest H": max(settings["sup_heads"]),
        }
        for r in rows:
            best = supremum(r)
            text.append(
                f"{r['config']['sweep']:5s} d={r['config']['dim']:3d} H={r['config']['heads']} "
                f"{r['config']['law']:15s} {r['config']['vnorm']:6s}: sup √n·dev = {ci(best['interval'])} "
                f"({best['start']}), random mean {ci(random_mean(r))}"
            )
        dims = [r for r in rows if r["config"]["sweep"] == "d"]
        if len({r["config"]["dim"] for r in dims}) >= 2:
            claims.append(d_line(dims, have))
        for vnorm in ("concat", "sum"):
            heads = heads_scan(rows, at, vnorm)
            if len(heads) >= 2:
                claims.append(heads_line(heads, vnorm, have))
        if rows:
            claims.append(worst_rate_line(rows, have))
        return Summary(text="\n".join(text), claims=tuple(claims))

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        return [save(suprema_figure(rows), out / "suprema.png")] if rows else []


def embed_dim(d: int, dims) -> int:
    """The dimension a d-sweep problem is embedded in: the largest of its group of ``dims``
    (:func:`cfm_jax.chaos.size_buckets`: a group spans at most a factor 4)."""
    return next(group[-1] for group in size_buckets(dims) if d in group)


def heads_scan(rows, at, vnorm) -> list[dict]:
    """The heads sweep at d = ``at`` for one value norm, with the one-head row of the d-sweep first."""
    base = [
        r
        for r in rows
        if r["config"]["sweep"] == "d" and r["config"]["dim"] == at and r["config"]["law"] == "low-dimensional"
    ]
    heads = [r for r in rows if r["config"]["sweep"] == "heads" and r["config"]["vnorm"] == vnorm]
    return base + sorted(heads, key=lambda r: r["config"]["heads"])


def run_suprema(config: dict) -> dict:
    """One ascent configuration: the starts, the ascent on the training contexts, and every θ found
    (and ``sup_randoms`` random models) measured on the held-out contexts at each n of ``eval_ns``,
    the problem embedded in ``embed_dim`` and ``embed_heads`` (one program serves every problem of
    that embedding)."""
    d, H, L = int(config["dim"]), int(config["heads"]), int(config["layers"])
    v_sum = config["vnorm"] == "sum"
    rng = np.random.default_rng([int(config["seed"]), 1, d, H])
    prob = Problem(
        d, H, int(config["embed_dim"]), int(config["embed_heads"]), law_cov(d, config["law"] == "low-dimensional")
    )
    theta0 = prob.theta(starts(rng, d, H, L, int(config["sup_restarts"]), v_sum))
    randoms = prob.theta(
        stack([random_params(rng, d, H, L, 1.0, 1.0, v_sum) for _ in range(int(config["sup_randoms"]))])
    )
    train = prob.points(contexts(rng, int(config["sup_contexts"]), int(config["sup_n"]), prob.cov[:d, :d]))
    held = prob.points(contexts(rng, int(config["sup_eval_contexts"]), max(config["eval_ns"]), prob.cov[:d, :d]))
    theta, best, history = ascend(
        theta0, prob.x0, train, prob.cov, 1.0, 1.0, v_sum, LEARNING_RATE, *prob.masks, steps=int(config["sup_steps"])
    )
    thetas = {k: np.concatenate([np.asarray(theta[k]), randoms[k]]) for k in theta}
    values = evaluate(thetas, prob.x0, held, prob.cov, np.asarray(config["eval_ns"]))
    return {
        "starts": start_names(int(config["sup_restarts"])),
        "train_initial": np.asarray(history[:, 0], np.float64).tolist(),
        "train_best": np.asarray(best, np.float64).tolist(),
        "held_out": np.asarray(values, np.float64).tolist(),  # (starts + randoms, contexts, eval ns)
    }


def _at_n(row) -> int:
    return row["config"]["eval_ns"].index(row["config"]["sup_n"])


def supremum(row) -> dict:
    """The best start on the held-out contexts at the ascent's n: its name, per-context values and interval."""
    held = np.asarray(row["held_out"])[: len(row["starts"]), :, _at_n(row)]
    i = int(np.argmax(held.mean(axis=1)))
    return {"start": row["starts"][i], "index": i, "values": held[i], "interval": bootstrap(np.mean, held[i])}


def random_mean(row) -> Interval:
    """Mean over random models and held-out contexts of √n·dev at the ascent's n (models resampled)."""
    held = np.asarray(row["held_out"])[len(row["starts"]) :, :, _at_n(row)]
    return bootstrap(np.mean, held.mean(axis=1))


def d_line(dims, have) -> Claim:
    """sup over laws and starts per d; C ∝ d^γ of the supremum."""
    by_d: dict[int, dict] = {}
    for r in dims:
        s = supremum(r)
        d = r["config"]["dim"]
        if d not in by_d or s["interval"].value > by_d[d]["sup"]["interval"].value:
            by_d[d] = {"sup": s, "row": r}
    ds = sorted(by_d)
    gamma = growth(np.log(ds), [np.log(by_d[d]["sup"]["values"]) for d in ds])[0]
    parts = ", ".join(
        f"d={d}: {ci(by_d[d]['sup']['interval'])} ({by_d[d]['row']['config']['law']}, {by_d[d]['sup']['start']}; "
        f"random mean {random_mean(by_d[d]['row']).value:.3g})"
        for d in ds
    )
    verdict, sizes = V.judge(V.independence(gamma), {"steps": 60, "held-out contexts": 32, "largest d": 32}, have)
    return Claim(
        claim="the paper's constant (sup over ‖Q‖‖K‖ ≤ 1, ‖V‖ ≤ 1 and the two context laws of √n·dev) "
        "does not grow with d",
        measured=f"sup found (held-out √n·dev at the ascent's n, 95 % CI over contexts): {parts}; "
        f"$C ∝ d^γ$, γ = {ci(gamma, fmt='+.3f')}",
        verdict=verdict,
        figure="suprema.png",
        sizes=sizes,
    )


def heads_line(heads, vnorm, have) -> Claim:
    """sup per H at one d (low-dimensional law); C ∝ p^γ with p = 3LHd²; the identical-heads construction beside it."""
    hs = [r["config"]["heads"] for r in heads]
    d, L = heads[0]["config"]["dim"], heads[0]["config"]["layers"]
    sups = [supremum(r) for r in heads]
    gamma = growth(np.log([3 * L * h * d * d for h in hs]), [np.log(s["values"]) for s in sups])[0]
    ident = [np.asarray(r["held_out"])[STRUCTURED.index("identical heads"), :, _at_n(r)].mean() for r in heads]
    norm = "$‖[V_1 … V_H]‖ ≤ 1$" if vnorm == "concat" else "$Σ_h‖V_h‖ ≤ 1$"
    measured = (
        f"d = {d}, low-dimensional law: sup √n·dev at H = "
        + ", ".join(f"{h}: {ci(s['interval'])} ({s['start']})" for h, s in zip(hs, sups))
        + f"; $C ∝ p^γ$, γ = {ci(gamma, fmt='+.3f')}; identical heads alone: C(H)/C(1) = "
        + ", ".join(f"{q / ident[0]:.2f}" for q in ident[1:])
        + f" at H = {', '.join(map(str, hs[1:]))}"
    )
    verdict, sizes = V.judge(V.independence(gamma), {"steps": 60, "held-out contexts": 32, "largest H": 8}, have)
    return Claim(
        claim=f"the paper's constant (sup over $‖Q_h‖‖K_h‖ ≤ 1$, {norm}) does not grow with the parameter count p "
        "(heads)",
        measured=measured,
        verdict=verdict,
        figure="suprema.png",
        sizes=sizes,
    )


def worst_rate_line(rows, have) -> Claim:
    """The slope in n of the worst case found, on the held-out contexts (−1/2: a constant)."""
    fits = []
    for r in rows:
        s = supremum(r)
        ns = np.asarray(r["config"]["eval_ns"], np.float64)
        dev = np.asarray(r["held_out"])[s["index"]] / np.sqrt(ns)  # (contexts, K)
        fits.append((r, fit_loglog(ns, dev.T)))
    off = [(r, f) for r, f in fits if not f.contains(-0.5)]
    measured = (
        f"slopes of the worst case found, n = {rows[0]['config']['eval_ns'][0]} … {rows[0]['config']['eval_ns'][-1]}: "
        + "; ".join(
            f"d={r['config']['dim']} H={r['config']['heads']} {r['config']['law'][:3]} {r['config']['vnorm']}: "
            f"{ci(f.slope, f.ci_low, f.ci_high, '+.2f')}"
            for r, f in fits
        )
    )
    measured += f"; {len(off)}/{len(fits)} intervals miss −1/2"
    verdict, sizes = V.judge(
        V.rate([Interval(f.slope, f.ci_low, f.ci_high) for _, f in fits], -0.5),
        {"steps": 60, "held-out contexts": 32},
        have,
    )
    return Claim(
        claim="the worst-case deviation found still decays like $n^{-1/2}$ (the supremum is a constant of the rate)",
        measured=measured,
        verdict=verdict,
        figure="suprema.png",
        sizes=sizes,
    )


def suprema_figure(rows):
    """Left: sup found and random-model mean vs d per law; middle: vs H per norm; right: the worst case vs n."""
    fig, (a0, a1, a2) = figure(3, ncols=3, width=4.4, height=3.9)
    for law, color in zip(LAWS, COLORS):
        sel = sorted(
            (r for r in rows if r["config"]["sweep"] == "d" and r["config"]["law"] == law),
            key=lambda r: r["config"]["dim"],
        )
        if not sel:
            continue
        ds = [r["config"]["dim"] for r in sel]
        sups = [supremum(r)["interval"] for r in sel]
        means = [random_mean(r) for r in sel]
        for vals, marker, ls, what in ((sups, "o", "-", "sup found"), (means, "x", ":", "random mean")):
            v = np.array([q.value for q in vals])
            a0.errorbar(
                ds,
                v,
                yerr=[v - [q.ci_low for q in vals], [q.ci_high for q in vals] - v],
                fmt=marker + ls,
                color=color,
                capsize=3,
                label=f"{what}, {law}",
            )
    log_ticks(a0, sorted({r["config"]["dim"] for r in rows if r["config"]["sweep"] == "d"}), "x")
    a0.set_xlabel("dimension $d$")
    a0.set_ylabel(r"$\sqrt{n}\,\sup_s\|x_s-\hat x_s\|$ (held-out mean)")
    a0.set_title("supremum vs random mean, vs d")
    a0.legend(fontsize=7)
    at = next((r["config"]["dim"] for r in rows if r["config"]["sweep"] == "heads"), None)
    for vnorm, color in zip(("concat", "sum"), COLORS[2:]):
        sel = heads_scan(rows, at, vnorm)
        if len(sel) < 2:
            continue
        hs = [r["config"]["heads"] for r in sel]
        v = np.array([supremum(r)["interval"].value for r in sel])
        norm = r"$\|[V_1\ldots V_H]\| \leq 1$" if vnorm == "concat" else r"$\sum_h\|V_h\| \leq 1$"
        a1.plot(hs, v, "o-", color=color, label=f"sup found, {norm}")
        a1.plot(
            hs,
            v[0] * np.sqrt(np.asarray(hs) / hs[0]),
            "--",
            color=color,
            lw=1.0,
            label=r"$\sqrt{H}$ growth from $H = 1$",
        )
    if at is not None:
        log_ticks(
            a1,
            sorted({r["config"]["heads"] for r in heads_scan(rows, at, "concat") + heads_scan(rows, at, "sum")}),
            "x",
        )
    a1.set_xlabel("heads $H$")
    a1.set_ylabel(r"$\sqrt{n}\,\sup_s\|x_s-\hat x_s\|$ (held-out mean)")
    a1.set_title("supremum vs the number of heads")
    a1.legend(fontsize=7)
    for i, r in enumerate(x for x in rows if x["config"]["sweep"] == "d"):
        s = supremum(r)
        ns = np.asarray(r["config"]["eval_ns"])
        a2.plot(
            ns,
            np.asarray(r["held_out"])[s["index"]].mean(axis=0),
            "o-",
            color=COLORS[i % 8],
            lw=1.0,
            label=f"d = {r['config']['dim']}, {r['config']['law'][:3]}.",
        )
    log_ticks(a2, rows[0]["config"]["eval_ns"], "x")
    a2.set_xlabel("context size $n$")
    a2.set_ylabel(r"$\sqrt{n}\,\cdot$ deviation of the worst case (flat: rate $n^{-1/2}$)")
    a2.set_title("the worst case found, vs n")
    a2.legend(fontsize=6, ncol=2)
    return fig


__all__ = [
    "LAWS",
    "LEARNING_RATE",
    "embed_dim",
    "SUP_AT_DIM",
    "SUP_CONTEXTS",
    "SUP_N",
    "SUP_STEPS",
    "Suprema",
    "random_mean",
    "run_suprema",
    "supremum",
]
