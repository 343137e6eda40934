"""Part ``rho``: the Gaussian rate against ρ = 2‖QᵀK‖σ²/d, to n ≥ 10⁴.

At a Gaussian context N(0, σ²I/d) the context's own self-attention weights e^{z'ᵀAz} (A = QᵀK) have
a Pareto tail: z'ᵀAz ≈ ‖A‖(σ²/d) g g′ with g, g′ standard normals, whose tail is e^{−t/(‖A‖σ²/d)},
so P(weight > w) ≈ w^{−2/ρ}. Their variance is infinite once ρ > 1 and their mean once ρ > 2, so
past some ρ the n-point softmax averages converge more slowly than n^{-1/2}. A plausible law is
a rate n^{−min(1/2, 2/ρ²)}; this part measures, for random models of each β = ‖Q‖‖K‖σ² (their ρ
taken per model, the largest over layers and heads, by :func:`cfm_jax.attention_regime` at the
context law), the local slope of the mean sup deviation (over
contexts) between the two largest n, and sets it next to max(−1/2, −2/ρ²). The verdict regresses
the measured slopes on the predicted ones across models (paired bootstrap): the law holds when
the slope of that regression contains 1 and its intercept 0.

Sizes: n up to 10240 on a CPU (a minute or two on two cores); ``--rho-ns … 40960 163840`` runs
10⁵ on a GPU as is: attention switches to query blocks above the dense limit
(``AttentionField(chunk_size="auto")``), so memory grows like n, not n².
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from cfm_jax import Transformer, attention_regime
from cfm_jax.chaos import size_buckets
from cfm_jax.stats import Interval, bootstrap

from ..declarations.claims import RHO
from ..plotting import COLORS, figure, save
from ..protocol import Claim, Part, Settings, Summary
from ..verdicts import HOLDS, NOT_OBSERVED, REFUTED
from . import verdicts as V
from .deviation import deviations_program, references
from .sampling import DRAW_OPTIONS, fixed_norm_params, gaussian_law, sample_law
from .statistics import ci, local_slopes

#: the dimension of the ρ sweep (ρ = 2‖A‖/d at σ = 1).
DIM = 4
#: σ of the context law N(0, σ²I/d) (and of the target tokens).
SCALE = 1.0
#: above this n every size is its own program (its n² cost dominates padding savings).
OWN_BUCKET = 1024


def predicted_slope(rho):
    """The candidate law's local slope, max(−1/2, −2/ρ²)."""
    rho = np.asarray(rho, np.float64)
    return np.maximum(-0.5, -2.0 / np.maximum(rho, 1e-12) ** 2)


def rho_of(params: dict, scale: float = 1.0) -> np.ndarray:
    """Per model: the largest over layers and heads of :func:`cfm_jax.attention_regime`'s
    ρ = 2‖Σ^½ Q_hᵀK_h Σ^½‖₂ at the part's context law N(0, σ²I/d) (:func:`~.sampling.gaussian_law`,
    σ = ``scale``), i.e. 2 max‖Q_hᵀK_h‖ σ²/d; stacked params ``Q, K: (B, L, H, d, d)`` (others ignored)."""
    Q, K = jnp.asarray(params["Q"]), jnp.asarray(params["K"])
    d = Q.shape[-1]
    law = gaussian_law(d, scale, Q.dtype)

    def one(q, k):  # ρ reads Q and K only: the values are zero
        model = Transformer(Q=q, K=k, V=jnp.zeros_like(q))
        return jnp.max(attention_regime(model, law, jnp.zeros((d,), q.dtype), throw=False).rho)

    return np.asarray(jax.vmap(one)(Q, K), np.float64)


def buckets(ns) -> list[list[int]]:
    """:func:`cfm_jax.chaos.size_buckets`, with every n above :data:`OWN_BUCKET` alone."""
    out: list[list[int]] = []
    for b in size_buckets(ns):
        out += [b] if b[-1] <= OWN_BUCKET else [[n] for n in b]
    return out


def _draw(key, qk, *, models, contexts, dim, layers, size):
    k_models, k_ctx = jax.random.split(key)
    mkeys = jax.random.split(k_models, models)

    def model(k):
        km, kx = jax.random.split(k)
        return fixed_norm_params(km, dim, heads=1, width=0, layers=layers, qk=qk, v=1.0), sample_law(
            "gaussian", kx, 1, dim, SCALE
        )

    params, x0 = jax.vmap(model)(mkeys)
    ckeys = jax.random.split(k_ctx, models * contexts)
    z = jax.vmap(lambda k: sample_law("gaussian", k, size, dim, SCALE))(ckeys)
    return params, x0, z


#: ``draw(key, qk, *, models, contexts, dim, layers, size)``: ``models`` random fixed-norm models (with
#: their tokens) and ``models × contexts`` contexts of ``size`` points. Random numbers only.
draw = jax.jit(_draw, static_argnames=("models", "contexts", "dim", "layers", "size"), compiler_options=DRAW_OPTIONS)


def inputs(config: dict):
    """A row's ``(params, x0, z)`` as NumPy arrays (:data:`draw` with the row's key and sizes)."""
    ns = [int(n) for n in config["rho_ns"]]
    S, M, L = int(config["rho_models"]), int(config["rho_contexts"]), int(config["layers"])
    key = jax.random.fold_in(jax.random.key(int(config["seed"])), int(round(1000 * config["beta"])))
    out = draw(key, float(config["beta"]), models=S, contexts=M, dim=DIM, layers=L, size=max(ns))
    return jax.tree.map(np.asarray, out)


class Rho(Part):
    name = "rho"
    title = "The Gaussian rate against ρ = 2‖QᵀK‖σ²/d (local slopes to n ≥ 10⁴)"
    options = RHO.options

    def configs(self, settings: Settings) -> list[dict]:
        keys = ("rho_ns", "rho_models", "rho_contexts", "layers")
        return [{"beta": b, "seed": settings.seed, **{k: settings[k] for k in keys}} for b in settings["rho_betas"]]

    def run(self, config: dict) -> dict:
        ns = sorted(int(n) for n in config["rho_ns"])
        S, M = int(config["rho_models"]), int(config["rho_contexts"])
        params, x0, z = inputs(config)
        ref_xs, _ = references(params, x0, SCALE, None)
        rep = lambda a: np.repeat(np.asarray(a), M, axis=0)  # noqa: E731  (model s serves contexts s·M … s·M + M − 1)
        P, X, R = jax.tree.map(rep, params), rep(x0), rep(ref_xs)
        dev = np.zeros((S * M, len(ns)))
        for bucket in buckets(ns):
            out = deviations_program(P, X, z[:, : bucket[-1]], R, np.asarray(bucket))
            for j, n in enumerate(bucket):
                dev[:, ns.index(n)] = np.asarray(out[:, j], np.float64)
        return {"ns": ns, "rho": rho_of(params, SCALE).tolist(), "values": dev.reshape(S, M, len(ns)).tolist()}

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        if not rows:
            return Summary()
        models = per_model(rows)
        text = "\n".join(
            f"β={m['beta']:5g} ρ={m['rho']:5.2f}: local slopes " + " ".join(f"{s:+.2f}" for s in m["local"])
            for m in models
        )
        have = {"largest n": max(settings["rho_ns"]), "models": len(models), "contexts": settings["rho_contexts"]}
        return Summary(text=text, data={"models": models}, claims=(rho_line(models, have),))

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        return [save(rho_figure(rows, summary.data["models"]), out / "rho.png")] if rows else []


def per_model(rows) -> list[dict]:
    """Per model: β, ρ, its local slopes (mean over its contexts) and the last one's bootstrap interval."""
    out = []
    for r in rows:
        ns = r["ns"]
        for rho, v in zip(r["rho"], r["values"]):
            v = np.asarray(v)  # (contexts, K)
            last = bootstrap(lambda s: local_slopes(ns, s)[-1], v)
            out.append(
                {
                    "beta": r["config"]["beta"],
                    "rho": rho,
                    "local": local_slopes(ns, v).tolist(),
                    "last": last.as_dict(),
                    "ns": ns,
                }
            )
    return out


def regression(models) -> tuple[Interval, Interval]:
    """(intercept a, slope b) of measured last local slope ≈ a + b·predicted across models, paired bootstrap."""
    pred = predicted_slope([m["rho"] for m in models])
    meas = np.asarray([m["last"]["value"] for m in models])
    data = np.stack([pred, meas], axis=1)

    def fit(s, j):
        if np.ptp(s[:, 0]) == 0:
            return np.nan
        return np.polyfit(s[:, 0], s[:, 1], 1)[1 - j]

    return bootstrap(lambda s: fit(s, 0), data), bootstrap(lambda s: fit(s, 1), data)


RHO_BINS = (0.0, 1.0, 2.0, 4.0, np.inf)


def binned(models) -> list[tuple[str, Interval, float]]:
    """Mean last local slope per ρ bin (bootstrap over models) and the prediction at the bin's mean ρ."""
    out = []
    for lo, hi in zip(RHO_BINS[:-1], RHO_BINS[1:]):
        sel = [m for m in models if lo <= m["rho"] < hi]
        if len(sel) >= 2:
            label = f"ρ ∈ [{lo:g}, {hi:g})" if np.isfinite(hi) else f"ρ ≥ {lo:g}"
            out.append(
                (
                    label,
                    bootstrap(np.mean, [m["last"]["value"] for m in sel]),
                    float(predicted_slope(np.mean([m["rho"] for m in sel]))),
                )
            )
    return out


def rho_line(models, have) -> Claim:
    a, b = regression(models)
    ns = models[0]["ns"]
    bins = "; ".join(f"{label}: {ci(v, fmt='+.2f')} (law {p:+.2f})" for label, v, p in binned(models))
    if b.contains(1.0) and a.contains(0.0):
        verdict = HOLDS
    elif not b.contains(1.0):
        verdict = REFUTED
    else:
        verdict = NOT_OBSERVED
    verdict, sizes = V.judge(verdict, {"largest n": 10240, "models": 25, "contexts": 4}, have)
    return Claim(
        claim=r"at a Gaussian context the local rate at large n is $n^{-\min(1/2,\,2/\rho^2)}$, "
        r"$\rho = 2‖Q^\top K‖\sigma^2/d$",
        measured=f"{len(models)} models, local slope between n = {ns[-2]} and {ns[-1]} (mean over contexts) "
        f"by ρ bin: {bins}; "
        f"measured ≈ a + b·law across models: a = {ci(a, fmt='+.2f')}, b = {ci(b, fmt='+.2f')} (the law: a = 0, b = 1)",
        verdict=verdict,
        figure="rho.png",
        sizes=sizes,
    )


def rho_figure(rows, models):
    """Left: the last local slope vs ρ per model, with the law; right: mean deviation vs n per β."""
    fig, (a0, a1) = figure(2, ncols=2, width=4.8, height=3.9)
    betas = sorted({m["beta"] for m in models})
    for i, b in enumerate(betas):
        sel = [m for m in models if m["beta"] == b]
        x = [m["rho"] for m in sel]
        y = np.array([m["last"]["value"] for m in sel])
        err = [y - [m["last"]["ci_low"] for m in sel], [m["last"]["ci_high"] for m in sel] - y]
        a0.errorbar(x, y, yerr=err, fmt="o", color=COLORS[i % 8], capsize=2, label=f"β = {b:g}")
    grid = np.linspace(0.05, max(m["rho"] for m in models) * 1.1, 200)
    a0.plot(grid, predicted_slope(grid), "--", color="0.3", label=r"law $\max(-1/2,\,-2/\rho^2)$")
    a0.axhline(-0.5, color="0.6", lw=0.8)
    a0.set_xlabel(r"$\rho = 2\,\max_l\|Q_l^\top K_l\|\,\sigma^2/d$ (per model)")
    a0.set_ylabel(f"local slope, n = {models[0]['ns'][-2]} → {models[0]['ns'][-1]}")
    a0.set_title("rate vs ρ (95 % CI over contexts)")
    a0.legend(fontsize=7)
    for i, r in enumerate(sorted(rows, key=lambda r: r["config"]["beta"])):
        v = np.asarray(r["values"]).mean(axis=1)  # (models, K)
        for j, curve in enumerate(v):
            a1.plot(
                r["ns"],
                curve,
                "-",
                color=COLORS[i % 8],
                lw=0.8,
                alpha=0.8,
                label=f"β = {r['config']['beta']:g}" if j == 0 else None,
            )
    ns = np.asarray(rows[0]["ns"], np.float64)
    top = np.asarray(rows[0]["values"]).mean(axis=(0, 1))[0]
    a1.plot(ns, top * (ns / ns[0]) ** -0.5, "--", color="0.3", label="slope $-1/2$")
    a1.set_xscale("log")
    a1.set_yscale("log")
    a1.set_xlabel("context size $n$")
    a1.set_ylabel(r"mean over contexts of $\sup_s\|x_s-\hat x_s\|$")
    a1.set_title("deviation vs n, one line per model")
    a1.legend(fontsize=7)
    return fig


__all__ = [
    "DIM",
    "RHO_BINS",
    "SCALE",
    "Rho",
    "binned",
    "buckets",
    "inputs",
    "per_model",
    "predicted_slope",
    "regression",
    "rho_line",
    "rho_of",
]
