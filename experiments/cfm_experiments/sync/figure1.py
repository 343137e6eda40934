"""Part ``figure1`` (optional): the second paper's Figure 1, ReLU against tanh.

N = 64 tokens on S³, L = 2000 layers, T = 20, m = 2048, no attention, σ = 0 (``--quick``: N = 16,
L = 200, m = 64); one row per activation holding the first two coordinates of every token every
10 layers (rounded to 1e-4, for the figure) and, at the last layer, the polar order |mean x|,
the nematic order (top eigenvalue of mean x xᵀ) and the smallest pairwise cosine. An odd field
(tanh without bias) keeps antipodal pairs antipodal, the paper's two-point random attractor;
ReLU gathers the tokens on one point. At T = 20 neither attractor is reached (λ₁T = −2.5 for
ReLU), so the rows are descriptive: no claim line.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from cfm_jax import compiled
from cfm_jax.stochastic import (
    NoiseKernel,
    StochasticTransformer,
    nematic_order,
    order_parameter,
    random_tokens,
    simulate,
)

from ..declarations.sync import FIGURE1
from ..plotting import figure, save
from ..protocol import Part, Settings, Summary

ACTS = ("relu", "tanh")


@compiled
def trajectory(model, x0, key, save_every: int):
    """``(ts, xs (S, N, d), polar order, nematic order, smallest cosine)``, the orders at the last state."""
    ts, xs = simulate(model, x0, key, save_every=save_every)
    last = xs[-1]
    return ts, xs, order_parameter(last), nematic_order(last), jnp.min(last @ last.T)


class Figure1(Part):
    declaration = FIGURE1
    title = "Figure 1 (no attention, σ = 0): order parameters at the last layer"
    float64 = True

    def configs(self, settings: Settings) -> list[dict]:
        quick = settings.quick
        size = dict(n=16, layers=200, width=64) if quick else dict(n=64, layers=2000, width=2048)
        return [dict(act=a, d=4, T=20.0, save_every=10, seed=settings.seed, **size) for a in ACTS]

    def run(self, config: dict) -> dict:
        c = config
        model = StochasticTransformer(
            NoiseKernel.paper(c["act"], c["d"]), width=c["width"], layers=c["layers"], horizon=c["T"]
        )
        x0 = random_tokens(jax.random.key(c["seed"]), c["n"], c["d"])
        ts, xs, polar, nematic, mincos = trajectory(model, x0, jax.random.key(c["seed"] + 1), c["save_every"])
        return {
            "t": np.asarray(ts),
            "coordinates": np.round(np.asarray(xs[:, :, :2]), 4),  # (S, n, 2), for the figure only
            "polar_order": float(polar),
            "nematic_order": float(nematic),
            "min_cosine": float(mincos),
        }

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        if not rows:
            return Summary()
        lines = [f"{'act':>6} {'polar |mean x|':>15} {'nematic λ_max(mean xxᵀ)':>24} {'min cosine':>11}"]
        lines += [
            f"{r['config']['act']:>6} {r['polar_order']:>15.4f} {r['nematic_order']:>24.4f} {r['min_cosine']:>11.4f}"
            for r in rows
        ]
        keys = ("polar_order", "nematic_order", "min_cosine")
        records = [
            {
                "act": r["config"]["act"],
                **{k: r[k] for k in keys},
                **{k: r["config"][k] for k in ("n", "layers", "width")},
            }
            for r in rows
        ]
        return Summary(text="\n".join(lines), data={"figure1": records})

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        return [save(figure1(rows), out / "figure1.png")] if rows else []


def figure1(rows: list[dict]):
    """Two rows (ReLU, tanh) × two columns (coordinates 1 and 2 of every token over depth)."""
    fig, axes = figure(2 * len(rows), ncols=2, width=4.4, height=2.5)
    for i, r in enumerate(rows):
        c = r["config"]
        layer = np.asarray(r["t"]) * c["layers"] / c["T"]
        x = np.asarray(r["coordinates"])
        for j in range(2):
            ax = axes[2 * i + j]
            ax.plot(layer, x[:, :, j], lw=0.6)
            ax.set_ylim(-1.05, 1.05)
            ax.set_xlabel(r"layer $\ell$")
            ax.set_ylabel(f"coordinate $x_{j + 1}$")
            ax.set_title(
                f"{c['act']}: coordinate {j + 1} of every token (polar {r['polar_order']:.3f}, "
                f"nematic {r['nematic_order']:.3f})",
                fontsize=8,
            )
    c = rows[0]["config"]
    fig.suptitle(
        f"Figure 1: $N$ = {c['n']} tokens on $S^{{{c['d'] - 1}}}$, no attention, $\\sigma$ = 0, $L$ = {c['layers']}, "
        f"$T$ = {c['T']:g}, $m$ = {c['width']}",
        fontsize=10,
    )
    return fig


__all__ = ["ACTS", "Figure1", "figure1", "trajectory"]
