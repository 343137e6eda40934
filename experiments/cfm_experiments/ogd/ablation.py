"""The ridge ablation (part ``ablation`` of ``cfm-jax ogd``): λ = 0, λ_c/8 and 1.5·λ_c over n.

Teacher–student stream with a GELU MLP (d = 3, L = 4, m = 8 by default), contexts of n_ref = 512
i.i.d. points uniform on the unit sphere (the compact support the paper assumes); θ̂ sees all
n_ref points (a sampled population), θ^{(n)} the first n. One row per regime (the seeds vmapped,
each seed its own stream, one teacher and student): the λ = 0 row is the pilot, each seed's
λ_c = 2C from the region its λ = 0 run visited (:mod:`.measure`), and the weak and strong rows
run at λ_c/8 and min(1.5·λ_c, 0.9/η) of that seed. Summary: sup_k deviation per (regime, n) with
95 % t intervals over seeds, fitted n-slopes (``fit_loglog``'s interval over seeds), the late level and the growth
dev(K)/dev(K/2); figure ``ogd_ablation.png`` (deviation against k per regime, sup_k against n).
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

from cfm_jax.stats import MIN_BOOTSTRAP_SEEDS, RateFit, fit_loglog, mean_ci

from ..declarations.ogd import ABLATION
from ..plotting import COLORS, figure, log_ticks, log_values, reference_slope, save
from ..protocol import Part, Settings, Summary
from . import measure
from .measure import REGIMES, SampledTask

#: at most this many points of each deviation curve are stored (for the figure).
MAX_CURVE_POINTS = 300
PROBLEM = ("dim", "layers", "mlp_width", "n_ref", "ns", "eta", "steps", "seeds", "population")


def task_of(config: dict) -> SampledTask:
    """The ablation's task for a configuration (H = 1, B = 4)."""
    return SampledTask(
        dim=config["dim"],
        layers=config["layers"],
        batch=4,
        ns=tuple(config["ns"]),
        eta=config["eta"],
        steps=config["steps"],
        seeds=config["seeds"],
        heads=1,
        mlp_width=config["mlp_width"],
        n_ref=config["n_ref"],
        law=config["population"],
    )


def record(config: dict, m: dict, lams, pilot_C) -> dict:
    """One regime's row from the measurement ``m`` (per-seed lists)."""
    dev = m["deviations"]  # (S, K, len(ns))
    K = dev.shape[1]
    stride = max(1, K // MAX_CURVE_POINTS)
    third = K // 3
    return {
        "lam": np.asarray(lams).tolist(),
        "C_pilot": np.asarray(pilot_C).tolist(),
        "region_C": m["C"].tolist(),
        "sup_dev": dev.max(1).tolist(),
        "argmax_k": (dev.argmax(1) + 1).tolist(),
        "late_dev": dev[:, -third:].max(1).tolist(),
        "growth": (dev[:, -1] / np.maximum(dev[:, K // 2 - 1], 1e-300)).tolist(),
        "curve_k": np.arange(1, K + 1)[::stride].tolist(),
        "curve": dev[:, ::stride].tolist(),
        "ref_norm_final": m["ref_norms"][:, -1].tolist(),
        "ref_norm_max": m["ref_norms"].max(1).tolist(),
        "loss_late": m["losses"][:, -third:].mean(1).tolist(),  # per seed and trajectory (ns..., reference)
    }


class Ablation(Part):
    declaration = ABLATION
    title = "OGD ridge ablation: sup_k ‖θ_k^(n) − θ̂_k‖_L∞ per regime and n (sampled population of n_ref points)"

    def check(self, settings: Settings) -> None:
        if max(settings["ns"]) > settings["n_ref"]:
            raise ValueError(f"--ns must not exceed --n-ref={settings['n_ref']}, got {list(settings['ns'])}.")

    def configs(self, settings: Settings) -> list[dict]:
        problem = {k: list(settings[k]) if k == "ns" else settings[k] for k in PROBLEM}
        return [{"regime": r, "ratio": REGIMES[r], **problem, "seed": settings.seed} for r in REGIMES]

    def run(self, config: dict) -> dict:
        task = task_of(config)
        base = jax.random.key(config["seed"])
        identity = {k: v for k, v in config.items() if k not in ("regime", "ratio")}
        return record(config, *measure.at_ratio(task, base, identity, config["ratio"]))

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        if not rows:
            return Summary()
        table = regimes_table(rows)
        ns = rows[0]["config"]["ns"]
        return Summary(text=format_table(ns, table), data={"regimes": table})

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        if not rows:
            return []
        return [save(ablation_figure(rows, summary.data["regimes"]), out / "ogd_ablation.png")]


def regimes_table(rows: list[dict]) -> dict:
    """Per regime: λ (mean over seeds), λ/λ_c, λ/2C on the region the regime visited (C the max
    over seeds), sup_k and late deviations (mean ± 95 % t half-width), the n-slopes, growth."""
    ns = np.asarray(rows[0]["config"]["ns"])
    out = {}
    for r in rows:
        name = r["config"]["regime"]
        lam, lam_c = np.asarray(r["lam"]), 2 * np.asarray(r["C_pilot"])
        sup, late, growth = (np.asarray(r[k]) for k in ("sup_dev", "late_dev", "growth"))  # (S, len(ns))
        C_reg = max(r["region_C"])
        out[name] = {
            "lambda": float(lam.mean()),
            "lambda_over_lambda_c": float(np.mean(lam / lam_c)),
            "lambda_over_2C_region": float(lam.mean() / (2 * C_reg)),
            "lambda_c": float(lam_c.mean()),
            "C_region": C_reg,
            "sup_dev": {int(n): mean_ci(sup[:, i]) for i, n in enumerate(ns)},
            "late_dev": {int(n): mean_ci(late[:, i]) for i, n in enumerate(ns)},
            "growth_K_over_K2": {int(n): float(growth[:, i].mean()) for i, n in enumerate(ns)},
            "argmax_k_median": {int(n): float(np.median(np.asarray(r["argmax_k"])[:, i])) for i, n in enumerate(ns)},
            "slope_sup": fit_loglog(ns, sup.T).as_dict(),
            "slope_late": fit_loglog(ns, late.T).as_dict(),
            "loss_late_reference": float(np.mean(np.asarray(r["loss_late"])[:, -1])),
            "ref_norm_final": float(np.mean(r["ref_norm_final"])),
            "seeds": int(sup.shape[0]),
        }
    return out


def _slope_interval(seeds: int) -> str:
    """How ``fit_loglog`` takes a slope's interval over this many seeds."""
    if seeds >= MIN_BOOTSTRAP_SEEDS:
        return "bootstrap interval resampling seeds"
    return "Student-t interval of the per-seed slopes"


def format_table(ns, table: dict) -> str:
    """One line per regime: λ, its ratios, sup_k deviation per n (mean ± 95 % t half-width over
    seeds), the fitted n-slope with its 95 % interval over seeds and the late growth; then a key."""
    seeds = max(t["seeds"] for t in table.values())
    lines = [
        f"{'regime':8s} {'λ':>8s} {'λ/λ_c':>6s} {'λ/2C,run':>8s} "
        + " ".join(f"{'n=' + str(n):>17s}" for n in ns)
        + f" {'slope [95% CI]':>22s} {'growth':>7s}"
    ]
    for name, t in table.items():
        cells = " ".join(f"{t['sup_dev'][n][0]:9.3g} ± {t['sup_dev'][n][1]:<5.2g}" for n in ns)
        s = t["slope_sup"]
        lines.append(
            f"{name:8s} {t['lambda']:8.3g} {t['lambda_over_lambda_c']:6.2f} {t['lambda_over_2C_region']:8.2f} "
            f"{cells} {s['slope']:7.2f} [{s['ci_low']:5.2f}, {s['ci_high']:5.2f}] {t['growth_K_over_K2'][ns[0]]:7.3g}"
        )
    lines += [
        "",
        f"  n=…       sup over steps k of ‖θ_k^(n) − θ̂_k‖_∞: mean ± 95 % t half-width over {seeds} seeds",
        "  λ         mean over seeds; each seed's λ_c = 2C, C on the region its λ = 0 run visited",
        "  λ/2C,run  λ over 2C with C re-estimated on the region this regime visited (max over seeds)",
        f"  slope     fitted exponent of sup_k deviation ≈ C·n^slope; 95 % {_slope_interval(seeds)}",
        f"  growth    deviation at the last step / at step K/2, n = {ns[0]} (> 1: still growing)",
    ]
    return "\n".join(lines)


def ablation_figure(rows: list[dict], table: dict):
    """Deviation against k per regime (one shared y scale) and sup_k deviation against n with fits."""
    cfg = rows[0]["config"]
    ns = np.asarray(cfg["ns"], dtype=float)
    by = {r["config"]["regime"]: r for r in rows}
    names = [n for n in REGIMES if n in by]
    fig, axes = figure(len(names) + 1, ncols=len(names) + 1, width=4.0, height=3.6)
    for ax in axes[1 : len(names)]:
        ax.sharey(axes[0])  # one scale for the regimes
    for ax, name in zip(axes, names):
        r = by[name]
        k = np.asarray(r["curve_k"])
        curves = np.asarray(r["curve"])  # (S, P, len(ns))
        for i, n in enumerate(cfg["ns"]):
            ax.plot(k, np.exp(np.log(curves[:, :, i]).mean(0)), color=COLORS[i], lw=1.4, label=f"n = {n}")
        log_values(ax, "y")
        t = table[name]
        ax.set_title(f"{name}: λ = {t['lambda']:.3g} = {t['lambda_over_lambda_c']:.2g}·λ$_c$")
        ax.axvline(1 / cfg["eta"], color="0.3", ls=":", lw=1.2, label="k = 1/η")
        ax.set_xlabel("OGD step k")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("‖$\\theta_k$ − $\\hat{\\theta}_k$‖$_∞$ (geometric mean over seeds)")
    ax = axes[-1]
    y = np.ones_like(ns)
    for i, (name, marker) in enumerate(zip(names, "os^")):
        sup = np.asarray(by[name]["sup_dev"])  # (S, len(ns))
        y = np.exp(np.log(sup).mean(0))
        fit = table[name]["slope_sup"]
        ax.errorbar(
            ns,
            y,
            yerr=np.stack([y - sup.min(0), sup.max(0) - y]),
            marker=marker,
            ls="none",
            capsize=2,
            color=COLORS[i],
            label=f"{name}: data (bars: range over seeds)",
        )
        ax.plot(
            ns,
            fit["prefactor"] * ns ** fit["slope"],
            color=COLORS[i],
            lw=1.2,
            label=f"{name}: fit, slope {RateFit.from_dict(fit):+.2f}",
        )
    reference_slope(ax, ns, (ns[0], y[0]), -0.5, label="reference slope $n^{-1/2}$")
    log_values(ax, "y")
    log_ticks(ax, ns, "x")
    ax.set_xlabel("context size n")
    ax.set_ylabel("sup$_k$ ‖$\\theta_k$ − $\\hat{\\theta}_k$‖$_∞$ (geometric mean)")
    lam_c = table[names[0]]["lambda_c"]
    ax.set_title(f"sup over k against n (λ$_c$ = 2C = {lam_c:.3g}, mean over seeds)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))  # outside: the points fill the panel
    fig.tight_layout()
    return fig


PART = Ablation()

__all__ = [
    "MAX_CURVE_POINTS",
    "PART",
    "Ablation",
    "ablation_figure",
    "format_table",
    "record",
    "regimes_table",
    "task_of",
]
