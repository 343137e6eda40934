"""Part ``chaos_w2`` (optional): propagation of chaos in the second paper's metric E sup_t W₂².

For the paper's model (tanh, σ = 0.1, softmax attention +1) and each dimension d, one row: the
N-token system starts at the first N tokens of an N_ref-token reference and is driven by the
same layer keys (the same MLPs: the same common noise); over the saved layers, the exact
W₂²(μ^N_t, μ^{N_ref}_t) between the two uniform empirical measures (N divides N_ref, so an
optimal plan is an assignment to the N points repeated N_ref/N times: Birkhoff), its sup over t
for every run, and the log-log slope of the mean in N with its bootstrap interval over runs.

**Claim**, one line per d: the paper's rates are N^{-1/2} in low and N^{-2/d} in high dimension
(its introduction and its body place the threshold at different d), so whichever applies,
E sup_t W₂² = O(N^{-min(1/2, 2/d)}); the order rule of :mod:`.common` gives the verdict. The
reference is finite (the largest N is a quarter of it), which biases the largest-N points down
and the slopes towards steeper values.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
from scipy.optimize import linear_sum_assignment

from cfm_jax import compiled
from cfm_jax.stats import RateFit, fit_loglog
from cfm_jax.stochastic import StochasticTransformer, simulate_many

from ..declarations.sync import CHAOS_W2
from ..plotting import COLORS, figure, log_ticks, log_values, reference_slope, save
from ..protocol import Claim, Part, Settings, Summary
from ..verdicts.sync import order_verdict
from .common import interval_text, random_starts
from .paper import attention_of, kernel_of


def w2_squared_uniform(y, z) -> float:
    """Exact W₂² between the uniform measures on the rows of ``y (N, d)`` and ``z (M, d)``, N | M
    (``scipy.optimize.linear_sum_assignment`` on y repeated M/N times)."""
    y, z = np.asarray(y, np.float64), np.asarray(z, np.float64)
    if z.shape[0] % y.shape[0]:
        raise ValueError(f"the size of `y` ({y.shape[0]}) must divide that of `z` ({z.shape[0]}).")
    yy = np.repeat(y, z.shape[0] // y.shape[0], axis=0)
    cost = ((yy[:, None, :] - z[None, :, :]) ** 2).sum(-1)
    r, c = linear_sum_assignment(cost)
    return float(cost[r, c].mean())


@compiled
def paths(model, x0, keys, save_every: int):
    """``(R, S, N, d)``: one run per start ``x0 (R, N, d)`` and key (a key gives every size the same MLPs)."""
    return simulate_many(model, x0, keys, save_every=save_every)[1]


def claimed_order(d: int) -> float:
    """min(1/2, 2/d): the slower of the paper's two rates of E sup_t W₂² in dimension d."""
    return min(0.5, 2 / d)


class ChaosW2(Part):
    declaration = CHAOS_W2
    title = (
        "Propagation of chaos: E sup_t W₂²(μ^N_t, μ^{N_ref}_t) (exact W₂, same common noise), fitted slope in N\n"
        "[95% bootstrap CI over runs]; the paper states N^{−1/2}, N^{−1/2} log N or N^{−2/d} depending on d"
    )
    float64 = True

    def configs(self, settings: Settings) -> list[dict]:
        quick = settings.quick
        return [
            dict(
                d=d,
                act="tanh",
                sigma=0.1,
                Ns=[4, 8, 16, 32] if quick else [8, 16, 32, 64, 128],
                N_ref=64 if quick else 512,
                L=20 if quick else 50,
                T=2.0,
                width=64 if quick else 256,
                R=4 if quick else 8,
                save_every=5 if quick else 10,
                seed=settings.seed,
            )
            for d in ((2, 5) if quick else (2, 3, 5, 8))
        ]

    def run(self, config: dict) -> dict:
        c = config
        d, R = c["d"], c["R"]
        kernel = kernel_of(c["act"], d, c["sigma"])
        model = StochasticTransformer(
            kernel, width=c["width"], layers=c["L"], horizon=c["T"], attention=attention_of(1.0, d, 1.0)
        )
        kx, kr = jax.random.split(jax.random.fold_in(jax.random.key(c["seed"]), 1000 + d))
        x0 = random_starts(kx, R, c["N_ref"], d)
        keys = jax.random.split(kr, R)
        ref = np.asarray(paths(model, x0, keys, c["save_every"]))  # (R, S, N_ref, d)
        sup = np.empty((len(c["Ns"]), R))
        for i, n in enumerate(c["Ns"]):
            xs = np.asarray(paths(model, x0[:, :n], keys, c["save_every"]))
            sup[i] = [max(w2_squared_uniform(xs[r, s], ref[r, s]) for s in range(xs.shape[1])) for r in range(R)]
        fit = fit_loglog(np.asarray(c["Ns"], float), sup)
        return {"sup_w2_squared": sup, "mean": sup.mean(1), "fit": fit.as_dict()}

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        if not rows:
            return Summary()
        lines, claims, records = [], [], []
        for r in rows:
            c, f = r["config"], RateFit.from_dict(r["fit"])
            means = ", ".join(f"{m:.4f}" for m in r["mean"])
            lines.append(
                f"  d = {c['d']}: N = {c['Ns']} (N_ref = {c['N_ref']}): {means}; slope "
                f"{interval_text(f.slope, f.ci_low, f.ci_high, 3)}  (−2/d = {-2 / c['d']:.3f})"
            )
            p = claimed_order(c["d"])
            claims.append(
                Claim(
                    claim=f"d = {c['d']}: E sup_t W₂²(μ^N_t, μ_t) = O(N^(−{p:.3g})), the slower of the paper's rates "
                    "N^(−1/2) and N^(−2/d)",
                    measured=f"slope {interval_text(f.slope, f.ci_low, f.ci_high)} (95% bootstrap CI over runs)",
                    verdict=order_verdict(f.ci_low, f.ci_high, p),
                    figure="chaos_w2.png",
                    sizes=f"N ∈ {c['Ns']} vs N_ref = {c['N_ref']}; L = {c['L']}, T = {c['T']:g}, m = {c['width']}, "
                    f"{c['R']} runs",
                )
            )
            records.append({"d": c["d"], "Ns": c["Ns"], "mean": r["mean"], "fit": r["fit"]})
        return Summary(text="\n".join(lines), data={"chaos_w2": records}, claims=tuple(claims))

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        return [save(chaos_figure(rows), out / "chaos_w2.png")] if rows else []


def chaos_figure(rows: list[dict]):
    """E sup_t W₂² against N, one line per d, with reference slopes −1/2 and −1."""
    fig, (ax,) = figure(1, width=5.4, height=4.0)
    for i, r in enumerate(rows):
        c, f = r["config"], RateFit.from_dict(r["fit"])
        label = f"$d$ = {c['d']}: slope {interval_text(f.slope, f.ci_low, f.ci_high)}"
        ax.plot(np.asarray(c["Ns"], float), r["mean"], "o-", color=COLORS[i], label=label)
    Ns = np.asarray(rows[0]["config"]["Ns"], float)
    anchor = (Ns[0], rows[0]["mean"][0])
    reference_slope(ax, Ns, anchor, -0.5, label="reference slope $-1/2$")
    reference_slope(ax, Ns, anchor, -1.0, label="reference slope $-1$", ls=":")
    log_ticks(ax, Ns, "x")
    log_values(ax, "y")
    ax.set_xlabel("tokens $N$")
    ax.set_ylabel(r"$\mathbb{E}\,\sup_t W_2^2(\mu^N_t, \mu^{\mathrm{ref}}_t)$")
    c = rows[0]["config"]
    ax.set_title(
        f"Propagation of chaos, {c['act']} $\\sigma$ = {c['sigma']:g}, attention +1, $L$ = {c['L']}, $T$ = {c['T']:g}, "
        f"$N_{{\\mathrm{{ref}}}}$ = {c['N_ref']}",
        fontsize=8,
    )
    ax.legend(fontsize=7)
    return fig


__all__ = ["ChaosW2", "chaos_figure", "claimed_order", "paths", "w2_squared_uniform"]
