"""The figures of the claims and curvature parts (the ablation draws its own)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.lines import Line2D

from cfm_jax.stats import fit_loglog

from ..plotting import COLORS, figure, log_ticks, log_values, reference_slope, save
from .measure import REGIMES, k_c

CLAIMS_FIGURES = ("ogd_claims_n.png", "ogd_claims_d.png", "ogd_claims_k.png")
CURVATURE_FIGURE = "ogd_curvature.png"


def _rows(rows, regime, dim=None):
    return [r for r in rows if r["config"]["regime"] == regime and (dim is None or r["config"]["dim"] == dim)]


def _geo(a, axis=0):
    a = np.asarray(a, float)
    return np.exp(np.log(np.maximum(a, 1e-300)).mean(axis))


def claims_figures(rows: list[dict], out: Path) -> list[Path]:
    """``ogd_claims_n.png`` (sup deviation against n per regime), ``ogd_claims_d.png`` (against d
    per n, and C against d), ``ogd_claims_k.png`` (deviation against k per regime)."""
    zero = _rows(rows, "zero")
    if not zero:
        return []
    cfg = zero[0]["config"]
    paths = [save(_figure_n(rows, cfg), Path(out) / CLAIMS_FIGURES[0])]
    if len({r["config"]["dim"] for r in _rows(rows, "strong")}) >= 2:
        paths.append(save(_figure_d(rows, cfg), Path(out) / CLAIMS_FIGURES[1]))
    paths.append(save(_figure_k(rows, cfg), Path(out) / CLAIMS_FIGURES[2]))
    return paths


def _figure_n(rows, cfg):
    ns = np.asarray(cfg["ns"], float)
    kc = k_c(cfg["eta"])
    fig, (ax,) = figure(1, ncols=1, width=6.4, height=4.4)
    series = [
        ("strong", "sup_dev", "λ > λ$_c$, sup over all k", "o"),
        ("weak", "sup_dev", "0 < λ < λ$_c$, sup over all k", "s"),
        ("zero", "sup_dev_kc", f"λ = 0, sup over k ≤ k$_c$ = 1/η = {kc}", "^"),
        ("zero", "sup_dev_kC", "λ = 0, sup over k ≤ 1/(ηC)", "D"),
        ("zero", "sup_dev", "λ = 0, sup over all k", "v"),
    ]
    anchor = None
    for i, (reg, key, label, marker) in enumerate(series):
        rs = _rows(rows, reg, cfg["d0"])
        if not rs:
            continue
        sup = np.asarray(rs[0][key])  # (S, len(ns))
        y = _geo(sup)
        fit = fit_loglog(ns, sup.T)
        ax.errorbar(
            ns, y, yerr=np.stack([y - sup.min(0), sup.max(0) - y]), marker=marker, ls="none", capsize=2, color=COLORS[i]
        )
        ax.plot(
            ns,
            fit.prefactor * ns**fit.slope,
            color=COLORS[i],
            lw=1.2,
            marker=marker,
            markevery=[],
            label=f"{label}: slope {fit:+.2f}",
        )
        anchor = anchor or (ns[0], y[0])
    if anchor is not None:
        reference_slope(ax, ns, anchor, -0.5, label="reference slope $n^{-1/2}$")
    log_values(ax, "y")
    log_ticks(ax, ns, "x")
    ax.set_xlabel("context size n")
    ax.set_ylabel("sup ‖$\\theta_k^{(n)}$ − $\\hat{\\theta}_k$‖$_{L^∞}$ (bars: range over seeds)")
    ax.set_title(f"OGD against the exact population gradient, d = {cfg['d0']}")
    ax.legend(fontsize=7, title="markers: data; lines: fits [95 % CI]", title_fontsize=7)
    fig.tight_layout()
    return fig


def _figure_d(rows, cfg):
    ns = cfg["ns"]
    strong = {r["config"]["dim"]: r for r in _rows(rows, "strong")}
    dims = np.asarray(sorted(strong), float)
    fig, (ax, ax2) = figure(2, ncols=2, width=5.2, height=4.2)
    sup = np.asarray([strong[int(d)]["sup_dev"] for d in dims])  # (D, S, len(ns))
    for i, n in enumerate(ns):
        color = COLORS[i % len(COLORS)]
        y = _geo(sup[:, :, i], axis=1)
        fit = fit_loglog(dims, sup[:, :, i])
        ax.plot(dims, y, marker="o", ls="none", color=color)
        ax.plot(dims, fit.prefactor * dims**fit.slope, color=color, lw=1.2, label=f"n = {n}: d-exponent {fit:+.2f}")
        if i == 0:
            reference_slope(ax, dims, (dims[0], y[0]), 0.5, label="reference slope $d^{1/2}$")
    log_values(ax, "y")
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi * (hi / lo) ** 0.6)  # head room: the legend sits above the data
    log_ticks(ax, dims, "x")
    ax.set_xlabel("dimension d")
    ax.set_ylabel("sup$_k$ ‖$\\theta_k^{(n)}$ − $\\hat{\\theta}_k$‖$_{L^∞}$ (geometric mean)")
    ax.set_title(f"λ = {REGIMES['strong']:g}·λ$_c$: d-dependence at fixed n (dots: data, lines: fits)", fontsize=9)
    ax.legend(fontsize=7)
    zero = {r["config"]["dim"]: r for r in _rows(rows, "zero")}
    dz = np.asarray(sorted(zero), float)
    C = [np.asarray(zero[int(d)]["C_seeds"]) for d in dz]
    ax2.errorbar(
        dz,
        [c.mean() for c in C],
        yerr=np.stack([[c.mean() - c.min() for c in C], [c.max() - c.mean() for c in C]]),
        marker="o",
        capsize=3,
        color=COLORS[0],
        label="C on the λ = 0 region (mean; bars: range over seeds)",
    )
    log_values(ax2, "y")
    log_ticks(ax2, dz, "x")
    ax2.set_xlabel("dimension d")
    ax2.set_ylabel("Lipschitz estimate C (λ$_c$ = 2C)")
    ax2.set_title("C of the exact population gradient map")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _figure_k(rows, cfg):
    regs = [reg for reg in REGIMES if _rows(rows, reg, cfg["d0"])]
    fig, axes = figure(len(regs), ncols=len(regs), width=4.2, height=3.8)
    for ax in axes[1:]:
        ax.sharey(axes[0])
    for ax, reg in zip(axes, regs):
        r = _rows(rows, reg, cfg["d0"])[0]
        k, curve = np.asarray(r["curve_k"]), np.asarray(r["curve"])
        for i, n in enumerate(cfg["ns"]):
            ax.plot(k, curve[:, i], color=COLORS[i % len(COLORS)], lw=1.3, label=f"n = {n}")
        ax.axvline(1 / cfg["eta"], color="0.3", ls=":", lw=1.2, label="k$_c$ = 1/η")
        ax.axvline(
            np.exp(np.mean(np.log(r["k_C"]))), color="0.3", ls="--", lw=1.0, label="1/(ηC) (geometric mean over seeds)"
        )
        log_values(ax, "y")
        ratio = np.asarray(r["lam"]) / (2 * np.asarray(r["C_seeds"]))
        lam = "λ = 0" if reg == "zero" else f"λ = {ratio.mean():.3g}·λ$_c$ (λ$_c$ = 2C per seed)"
        ax.set_title(f"{reg}: {lam}, d = {cfg['d0']}", fontsize=9)
        ax.set_xlabel("OGD step k")
    axes[0].legend(fontsize=7, loc="lower right")  # the same line styles in every panel
    axes[0].set_ylabel("‖$\\theta_k^{(n)}$ − $\\hat{\\theta}_k$‖$_{L^∞}$ (geometric mean over seeds)")
    fig.tight_layout()
    return fig


def curvature_figure(rows: list[dict], table: dict):
    """(a) deviation against k for every λ (largest n; dashed: the bound's own trajectory);
    (b) the deviation against the finite-time Lyapunov growth log σ_max(P_k) for the ridges below
    λ_c; (c) growth rates per step against λ/λ_c: measured, the FTLE's and the bound's
    log(1 + η(C − λ)); (d) λ over 2C of the region each λ visited, and e_K/e_kc."""
    cfg = rows[0]["config"]
    rows = sorted(rows, key=lambda r: r["config"]["ratio"])
    i_n = len(cfg["ns"]) - 1
    fig, axes = figure(4, ncols=2, width=5.4, height=4.0)
    ax = axes[0]
    lo, hi = np.inf, 0.0
    for j, r in enumerate(rows):
        color = COLORS[j % len(COLORS)]
        dev = _geo(np.asarray(r["deviations"])[:, :, i_n])  # (K,)
        k = np.arange(1, dev.size + 1)
        ax.plot(k, dev, color=color, lw=1.4, label=f"λ = {r['config']['ratio']:g}·λ$_c$")
        ax.plot(k, _geo(np.asarray(r["bound"])[:, :, i_n]), color=color, lw=1.0, ls="--")
        lo, hi = min(lo, dev.min()), max(hi, dev.max())
    ax.set_yscale("log")
    ax.set_ylim(lo / 2, hi * 30)  # the bound's trajectories run far above the data: clipped
    ax.set_xlabel("OGD step k")
    ax.set_ylabel(f"‖$\\theta_k^{{(n)}}$ − $\\hat{{\\theta}}_k$‖$_{{L^∞}}$, n = {cfg['ns'][i_n]} (geometric mean)")
    ax.set_title("deviation (solid) and the bound's own trajectory (dashed)")
    handles, _ = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], color="0.3", ls="--", label="bound ((1+η(C−λ))$^k$ − 1)·δ$_n$/(C − λ)"))
    ax.legend(handles=handles, fontsize=7, ncols=2, loc="upper left")
    ax = axes[1]
    below = [(j, r) for j, r in enumerate(rows) if r["config"]["ratio"] < 1]
    for j, r in below:
        dev = np.log(_geo(np.asarray(r["deviations"])[:, :, i_n]))
        ax.plot(
            np.asarray(r["log_growth"]).mean(0),
            dev,
            color=COLORS[j % len(COLORS)],
            lw=1.3,
            label=f"λ = {r['config']['ratio']:g}·λ$_c$",
        )
    if below:
        x = np.asarray(below[0][1]["log_growth"]).mean(0)
        y = np.log(_geo(np.asarray(below[0][1]["deviations"])[:, :, i_n]))
        x0, y0 = x[len(x) // 4], y[len(x) // 4]
        ax.plot(
            [x.min(), x.max()],
            [y0 + x.min() - x0, y0 + x.max() - x0],
            color="0.3",
            ls=":",
            lw=1.2,
            label="slope 1: deviation ∝ σ$_{max}$",
        )
    ax.set_xlabel("log σ$_{max}$(J$_{k-1}$ ⋯ J$_0$) along the population trajectory (mean over seeds)")
    ax.set_ylabel("log deviation (geometric mean over seeds)")
    ax.set_title("deviation against the finite-time Lyapunov growth (λ < λ$_c$)")
    ax.legend(fontsize=7)
    x = np.arange(len(table))
    ticks = [f"{t['ratio']:g}" for t in table.values()]
    ax = axes[2]
    for shift, (key, label, marker, color) in zip(
        (-0.12, 0.0, 0.12),
        (
            ("rate", "the deviation's growth rate (0 once stationary; 95 % CI)", "o", COLORS[0]),
            ("ftle_rate", "finite-time Lyapunov exponent", "s", COLORS[1]),
            ("bound_rate", "bound: log(1 + η(C − λ))", "^", COLORS[2]),
        ),
    ):
        v = np.asarray([t[key]["value"] for t in table.values()])
        ci = np.asarray([[t[key]["ci_low"], t[key]["ci_high"]] for t in table.values()]).T
        ax.errorbar(x + shift, v, yerr=np.abs(ci - v), marker=marker, ls="none", capsize=2, color=color, label=label)
    ax.axhline(0, color="0.3", lw=0.8)
    ax.set_xticks(x, ticks)
    ax.set_xlabel("λ / λ$_c$ (λ$_c$ = 2C from each seed's λ = 0 pilot; λ = C at ½)")
    ax.set_ylabel("growth rate per step (log of the step factor)")
    ax.set_title("growth rate against the ridge")
    ax.legend(fontsize=7)
    ax = axes[3]
    own = [t["lambda_over_2C_region"] for t in table.values()]
    ratio_end = [t["e_K_over_e_kc"]["value"] for t in table.values()]
    late = [t["late_growth"]["value"] for t in table.values()]
    ax.plot(x[1:], own[1:], "o-", color=COLORS[3], label="λ / 2C, C on the region visited at that λ")
    ax.plot(x, ratio_end, "s-", color=COLORS[4], label="e$_K$ / e$_{k_c}$ (geometric mean over seeds)")
    ax.plot(x, late, "^-", color=COLORS[5], label="last over second quarter of the steps")
    ax.axhline(1, color="0.3", lw=0.8)
    ax.set_yscale("log")
    ax.set_xticks(x, ticks)
    ax.set_xlabel("λ / λ$_c$")
    ax.set_ylabel("ratio")
    ax.set_title("the ridge on each λ's own region; growth after k$_c$")
    ax.legend(fontsize=7)
    fig.suptitle(f"OGD near an unstable stationary point (d = {cfg['dim']}, L = {cfg['layers']}, η = {cfg['eta']:g})")
    fig.tight_layout()
    return fig


__all__ = ["CLAIMS_FIGURES", "CURVATURE_FIGURE", "claims_figures", "curvature_figure"]
