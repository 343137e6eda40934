"""The figure of ``cfm-jax rates``: deviation vs n on log-log axes, one panel per (field, quantity)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.lines import Line2D

from cfm_jax.chaos import QUANTITIES

from ..plotting import COLORS, figure, log_ticks, log_values, save

#: the y label of each quantity's panels (mathtext).
LABELS = {
    "token": r"$\sup_s\,\Vert x_s - \hat{x}_s\Vert$",
    "context": r"$\sup_s\,\mathrm{mean}_i\,\Vert z_i(s) - \hat{z}_i(s)\Vert$",
    "w1": r"$\sup_s\,W_1(\mu_s, \hat{\mu}_s)$",
    "adjoint": r"$\sup_s\,\Vert p_s - \hat{p}_s\Vert$",
    "grad_phi": r"$\sup_{s,\,|z| \leq R}\,\Vert \nabla\phi_s(z) - \nabla\hat{\phi}_s(z)\Vert$",
}


def _panels(fits):
    panels = [
        ("attention", q) for q in QUANTITIES if any(f["quantity"] == q and f["field"] == "attention" for f in fits)
    ]
    panels += [
        ("control", q) for q in ("token", "w1") if any(f["quantity"] == q and f["field"] == "control" for f in fits)
    ]
    return panels


def plot_rates(fits: list[dict], path) -> Path:
    """:func:`rates_figure` saved to ``path``."""
    return save(rates_figure(fits), path)


def rates_figure(fits: list[dict]):
    """Log-log deviation vs n, one panel per (field, quantity) in :func:`fit_rates`.

    Solid lines with markers: mean over seeds, with the Student-t 95 % interval over seeds;
    dashed, same colour: the expected slope drawn through the curve's last point; dotted, same
    colour: the reference floor (none where the reference is exact). The panel title names the
    references of its rows other than ``sample``.
    """
    panels = _panels(fits)
    # one colour per (population, d) in every panel, so a curve keeps its colour across panels
    rows = list(dict.fromkeys((f["population"], f["dim"]) for f in fits))
    colour = {r: COLORS[i % len(COLORS)] for i, r in enumerate(rows)}
    fig, axes = figure(len(panels), ncols=min(4, len(panels)), width=4.0, height=4.8)
    for ax, (field, q) in zip(axes, panels):
        sel = [f for f in fits if f["field"] == field and f["quantity"] == q]
        all_ns = sorted({n for f in sel for n in f["ns"]})
        floors = False
        for f in sel:
            color = colour[(f["population"], f["dim"])]
            ns, m = np.array(f["ns"]), np.array(f["mean"])
            lab = f"d={f['dim']}" + (f" ($d'$={f['intrinsic_dim']})" if f["intrinsic_dim"] != f["dim"] else "")
            lab += f": {f['slope']:+.2f}" + ("" if f["meaningful"] else " (floor-limited)")
            ci = np.array(f.get("ci_halfwidth", np.full(len(ns), np.nan)), dtype=np.float64)
            # Student-t 95 % interval over seeds, clipped at the axis floor on a log scale
            ax.errorbar(
                ns,
                m,
                yerr=[np.minimum(np.nan_to_num(ci), 0.9 * m), np.nan_to_num(ci)],
                fmt="o-",
                color=color,
                label=lab,
                lw=1.4,
                capsize=2.5,
                ms=4,
            )
            ax.plot(ns, m[-1] * (ns / ns[-1]) ** f["expected"], "--", color=color, lw=1.0)
            if f["floor"] is not None and np.isfinite(f["floor"]) and f["floor"] > 0:  # exact references: 0
                ax.axhline(f["floor"], color=color, ls=":", lw=1.0)
                floors = True
        log_values(ax, "y")
        log_ticks(ax, all_ns, "x")
        refs = sorted({f.get("reference", "sample") for f in sel} - {"sample"})
        ax.set_title(f"{field}: {q}" + (f" (vs {', '.join(refs)})" if refs else ""), fontsize=10)
        ax.set_xlabel("context size n")
        ax.set_ylabel(LABELS[q] + " (token units)", fontsize=9)
        handles, labels = ax.get_legend_handles_labels()
        handles.append(Line2D([], [], color="0.3", ls="--"))
        labels.append("expected slope (same colour)")
        if floors:  # the coupled context has no floor
            handles.append(Line2D([], [], color="0.3", ls=":"))
            labels.append("reference floor (same colour)")
        handles.append(Line2D([], [], color="0.3", marker="|", ls="none"))
        labels.append("95 % CI over seeds")
        # outside the axes (below), so no data point is ever covered
        ax.legend(
            handles,
            labels,
            fontsize=7,
            title="fitted slope",
            title_fontsize=7,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.2),
            ncol=2,
            frameon=False,
        )
    fig.suptitle("finite vs infinite context: deviation (sup over depth, mean over seeds) vs n", fontsize=11)
    fig.tight_layout()
    return fig


__all__ = ["LABELS", "plot_rates", "rates_figure"]
