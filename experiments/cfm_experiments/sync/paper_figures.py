"""The figures of part ``paper``: one per activation (cosines and E_β over depth, every cell) and the width check."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.ticker import NullFormatter

from ..plotting import COLORS, figure, save
from .common import interval_text

SCALES = (1.0, 0.0, -1.0)
_SCALE_LABEL = {1.0: "attention +1", 0.0: "no attention", -1.0: "attention −1"}
ENERGY = r"$E_\beta = \frac{1}{2}\iint(e^\beta - e^{\beta\langle x,y\rangle})$"


def cell_label(c: dict) -> str:
    return f"$d$ = {c['d']}, $\\sigma$ = {c['sigma']:g}, {_SCALE_LABEL[c['scale']]}"


def activation_figure(cells: list[dict], act: str, path: Path) -> Path:
    """Rows (d, σ) × columns (attention scale × {cosines, E_β}) for one activation's cells (one width; the
    grid complete: every scale run at every (d, σ))."""
    cells = [r for r in cells if r["config"]["act"] == act]
    keys = sorted({(r["config"]["d"], r["config"]["sigma"]) for r in cells})
    scales = [s for s in SCALES if any(r["config"]["scale"] == s for r in cells)]
    cols = 2 * len(scales)
    fig, axes = figure(cols * len(keys), ncols=cols, width=2.5, height=2.0)
    c0 = cells[0]["config"]
    L, T = c0["L"], c0["T"]
    at = {(r["config"]["d"], r["config"]["sigma"], r["config"]["scale"]): r for r in cells}
    for i, (d, sigma) in enumerate(keys):
        for j, s in enumerate(scales):
            r = at[(d, sigma, s)]
            layer = np.asarray(r["t"]) * L / T
            q = np.asarray(r["cos_quantiles"])
            ax = axes[cols * i + 2 * j]
            ax.fill_between(layer, q[:, 0], q[:, 4], color=COLORS[0], alpha=0.2, lw=0, label="5–95%")
            ax.fill_between(layer, q[:, 1], q[:, 3], color=COLORS[0], alpha=0.45, lw=0, label="25–75%")
            ax.plot(layer, q[:, 2], color=COLORS[0], lw=1.2, label="median")
            ax.set_ylim(-1.05, 1.05)
            ax.set_title(cell_label(r["config"]), fontsize=8)
            ax.set_ylabel(r"cosine $\langle x_i, x_j\rangle$", fontsize=8)
            ax = axes[cols * i + 2 * j + 1]
            eq = np.maximum(np.asarray(r["energy_quantiles"], float), 1e-300)
            ax.fill_between(layer, eq[:, 0], eq[:, 2], color=COLORS[1], alpha=0.3, lw=0, label="10–90% of runs")
            ax.plot(
                layer, np.maximum(np.asarray(r["energy_mean"], float), 1e-300), color=COLORS[1], lw=1.2, label="mean"
            )
            ax.plot(layer, eq[:, 1], color=COLORS[1], lw=1.0, ls="--", label="median")
            if eq.max() / eq.min() > 10:  # log only when the energy spans decades
                ax.set_yscale("log")
                ax.yaxis.set_minor_formatter(NullFormatter())
            ax.set_ylabel(r"$E_\beta(X_\ell)$", fontsize=8)
            ax.set_title(cell_label(r["config"]), fontsize=8)
            if i == len(keys) - 1:
                axes[cols * i + 2 * j].set_xlabel(r"layer $\ell$")
                ax.set_xlabel(r"layer $\ell$")
            if i == 0 and j == 0:
                axes[0].legend(fontsize=6, loc="lower right")
                ax.legend(fontsize=6, loc="lower left")
    name = "no MLP" if act == "none" else act
    fig.suptitle(
        f"{name}: pairwise cosines (pooled over {c0['R']} runs) and {ENERGY},\n$N$ = {c0['N']}, $L$ = {L}, "
        f"$T$ = {T:g}, $\\beta$ = {c0['beta']:g}, $m$ = {c0['width']}",
        fontsize=10,
    )
    return save(fig, path)


def width_figure(cells: list[dict], path: Path, width: int) -> Path:
    """Mean E_β over depth for the width-check cells (σ = 0.1, attention +1) at every width run."""
    check = sorted({(r["config"]["act"], r["config"]["d"]) for r in cells if r["config"]["width"] != width})
    fig, axes = figure(len(check), ncols=3)
    for ax, (act, d) in zip(axes, check):
        same = [
            r
            for r in cells
            if (r["config"]["act"], r["config"]["d"], r["config"]["sigma"], r["config"]["scale"]) == (act, d, 0.1, 1.0)
        ]
        for i, r in enumerate(sorted(same, key=lambda r: r["config"]["width"])):
            c = r["config"]
            lo, hi = (math.nan if v is None else v for v in r["rate_ci"])  # a stored row: NaN is null
            ax.semilogy(
                np.asarray(r["t"]) * c["L"] / c["T"],
                r["energy_mean"],
                color=COLORS[i],
                label=f"$m$ = {c['width']}: rate {interval_text(r['rate'], lo, hi, 3)}",
            )
        ax.set_title(f"{act}, $d$ = {d}, $\\sigma$ = 0.1, attention +1", fontsize=9)
        ax.set_xlabel(r"layer $\ell$")
        ax.set_ylabel(r"mean $E_\beta$ over runs")
        ax.legend(fontsize=7)
    fig.suptitle("MLP width check: mean energy and its fitted rate (95% bootstrap CI) at each width $m$", fontsize=10)
    return save(fig, path)


__all__ = ["activation_figure", "cell_label", "width_figure"]
