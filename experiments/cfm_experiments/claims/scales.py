"""Part ``scales``: C against the context scale and ‖Q‖‖K‖, through the effective inverse temperature β.

Attention with no bias is homogeneous: scaling tokens and context by σ scales every logit by σ², so
x_s(σx, σμ; b) = σ x_s(x, μ; bσ²) and C/σ is a function of β = bσ² alone (β = bR² on the ball of
radius R). The σ sweep and the ‖Q‖‖K‖ sweep at equal β check that identity (a code check: it is
algebra evaluated on the same random numbers). The growth of C/σ in β is fitted, log(C/σ) ≈ a + κβ,
and compared with the bound's form: the softmax weights on the ball of radius R differ by at most
e^{2β}, and every Lipschitz constant of the proof carries that factor (κ = 2). The slopes in n at
each β are reported too, and the n^{−½} line pools them, every β of every draw, into one slope
judged against a band of finite-n corrections (:mod:`cfm_experiments.verdicts.slopes`; the
:meth:`Scales.pooled` line); the ``rho`` part follows the Gaussian's slow rate at large β to n ≥ 10⁴.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from cfm_jax.stats import bootstrap

from ..declarations.claims import SCALES
from ..draws import redrawn
from ..plotting import COLORS, figure, log_ticks, log_values, save
from ..protocol import Claim, Part, Settings, Summary
from ..verdicts import claims as V, slopes as SL
from .common import base_config, select
from .deviation import deviations
from .statistics import LARGE_N, ci, growth, large_n_slope, log_prefactors, slope_fit

#: the growth exponent of the bound's constant in β (the softmax weight ratio e^{2β} on the ball).
BOUND_KAPPA = 2.0
#: relative agreement of the homogeneity code check (float32 round-off, with margin).
IDENTITY_TOLERANCE = 1e-4


def beta(row) -> float:
    """β = ‖Q‖‖K‖ · scale²."""
    return row["config"]["qk"] * row["config"]["scale"] ** 2


def scaled_logs(row) -> np.ndarray:
    """Per-seed log(C/scale): the prefactor in units of the context scale."""
    return log_prefactors(row["config"]["ns"], row["values"]) - math.log(row["config"]["scale"])


@redrawn  # samples models or contexts: a verdict only where independent draws agree
class Scales(Part):
    declaration = SCALES
    title = "C vs the context scale and ‖Q‖‖K‖: the effective inverse temperature β"

    def check(self, settings: Settings) -> None:
        if 1.0 not in settings["betas"]:
            raise ValueError(
                "--betas must include 1 (the σ sweep is compared with the ‖Q‖‖K‖ sweep there), "
                f"got {list(settings['betas'])}."
            )

    def configs(self, settings: Settings) -> list[dict]:
        seed = settings.seed
        base = dict(ns=settings["ns"], seeds=settings["seeds"], layers=settings["layers"], sweep="qk")
        out = [base_config(seed, qk=b, **base) for b in settings["betas"]]
        base["sweep"] = "scale"
        out += [base_config(seed, scale=math.sqrt(b), **base) for b in settings["betas"] if b != 1.0]
        ball = dict(
            ns=settings["ball_ns"],
            seeds=settings["seeds"],
            layers=settings["layers"],
            law="ball",
            n_ref=settings["n_ref"],
            sweep="ball",
        )
        out += [base_config(seed, scale=math.sqrt(b), **ball) for b in settings["ball_betas"]]
        return out

    def run(self, config: dict) -> dict:
        return deviations(config)

    @staticmethod
    def groups(rows):
        """(‖Q‖‖K‖ sweep, σ sweep with the ‖Q‖‖K‖ = 1 row, ball sweep), each sorted by β."""
        gq = sorted(select(rows, sweep="qk"), key=beta)
        gs = sorted([r for r in gq if r["config"]["qk"] == 1.0] + select(rows, sweep="scale"), key=beta)
        return gq, gs, sorted(select(rows, sweep="ball"), key=beta)

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        gq, gs, gb = self.groups(rows)
        claims = []
        if len(gq) >= 2 and len(gs) >= 2:
            claims.append(identity_line(gq, gs))
        have = {"seeds": settings["seeds"], "largest n": max(settings["ns"]), "betas": len(settings["betas"])}
        have_ball = {
            "seeds": settings["seeds"],
            "largest n": max(settings["ball_ns"]),
            "betas": len(settings["ball_betas"]),
        }
        for group, what, hv in (
            (gq, "Gaussian context (unbounded: outside the bound's assumption)", have),
            (gb, "uniform ball", have_ball),
        ):
            if len(group) >= 3:
                claims.append(growth_line(group, what, {"seeds": 16, "betas": 4}, hv))
        for line in self.rate_lines([rows], settings):
            claims.append(rate_at_every_beta_line(*line))
        lines = []
        for r in gq + [r for r in gs if r["config"]["scale"] != 1.0] + gb:
            f = slope_fit(r["config"]["ns"], r["values"])
            lines.append(
                f"{r['config']['sweep']:5s} β={beta(r):6g}: C/scale = {np.exp(scaled_logs(r).mean()):.3f}, "
                f"slope {f:+.2f}"
            )
        text = "\n".join(lines)
        return Summary(text=text, claims=tuple(claims))

    @classmethod
    def rate_lines(cls, rows: list[list[dict]], settings: Settings):
        """Per rate line (Gaussian, ball) with two β or more in the first draw: (its group in each
        draw of ``rows``, its name, the run's sizes, the sizes at which its verdict is stable)."""
        have = {"seeds": settings["seeds"], "largest n": max(settings["ns"]), "betas": len(settings["betas"])}
        have_ball = {
            "seeds": settings["seeds"],
            "largest n": max(settings["ball_ns"]),
            "betas": len(settings["ball_betas"]),
        }
        grouped = [cls.groups(r) for r in rows]
        out = []
        for k, what, hv, need in (
            (0, "Gaussian", have, {"seeds": 16, "largest n": 500, "betas": 4}),
            (2, "ball", have_ball, {"seeds": 16, "largest n": 400, "betas": 4}),
        ):
            if len(grouped[0][k]) >= 2:
                out.append(([g[k] for g in grouped], what, need, hv))
        return out

    def pooled(self, rows: list[list[dict]], settings: Settings) -> list[Claim]:
        """The n^{−½} lines, one slope pooled over every β of every draw."""
        return [rate_at_every_beta_line(*line) for line in self.rate_lines(rows, settings)]

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        gq, gs, gb = self.groups(rows)
        return [save(scales_figure(gq, gs, gb), out / "scales.png")] if (gq or gb) else []


def identity_line(gq, gs) -> Claim:
    """Code check: C/σ of the σ sweep equals C of the ‖Q‖‖K‖ sweep at equal β."""
    by_beta = {round(beta(r), 9): r for r in gq}
    pairs = [
        (a, by_beta[round(beta(a), 9)]) for a in gs if a["config"]["scale"] != 1.0 and round(beta(a), 9) in by_beta
    ]
    rs = [(beta(a), float(np.exp(scaled_logs(a).mean() - scaled_logs(b).mean()))) for a, b in pairs]
    worst = max((abs(q - 1) for _, q in rs), default=float("nan"))
    return Claim(
        claim="C depends on the context scale and ‖Q‖‖K‖ only through β = ‖Q‖‖K‖σ² (the homogeneity of bias-free "
        "attention: a check of the code, not of the paper)",
        measured="C/σ of the σ sweep over C of the ‖Q‖‖K‖ sweep at equal β: "
        + ", ".join(f"β={b:g}: {q:.4f}" for b, q in rs)
        + f" (largest |ratio − 1| {worst:.1e}, tolerance {IDENTITY_TOLERANCE:g})",
        verdict=V.code_check(bool(worst <= IDENTITY_TOLERANCE)),
        figure="scales.png",
        sizes="any size (an identity)",
    )


def growth_line(group, what, need, have) -> Claim:
    """log(C/σ) ≈ a + κβ against the bound's κ = 2, with the quadratic term beside it."""
    bs = [beta(r) for r in group]
    logs = [scaled_logs(r) for r in group]
    kappa = growth(bs, logs, deg=1)[0]
    quad = growth(bs, logs, deg=2)[0]
    c = [float(np.exp(v.mean())) for v in logs]
    floors = ""
    if group[0]["config"]["law"] == "ball":
        fl = [
            np.median(r["floor"]) / math.sqrt(2) / np.exp(np.log(np.asarray(r["values"])[:, -1]).mean()) for r in group
        ]
        floors = f"; QMC reference error / deviation at the largest n ≤ {max(fl):.2f}"
    measured = (
        f"C/σ = {c[0]:.3g} … {c[-1]:.3g} for β = {bs[0]:g} … {bs[-1]:g}; log(C/σ) ≈ a + κβ, "
        f"κ = {ci(kappa, fmt='.3f')} (the bound's form: κ ≥ {BOUND_KAPPA:g}); "
        f"quadratic term {ci(quad, fmt='+.3f')}{floors}"
    )
    verdict, sizes = V.judge(V.bounded_growth(kappa, BOUND_KAPPA), need, have)
    return Claim(
        claim=f"C grows at most exponentially in β, like the bound's $e^{{{BOUND_KAPPA:g}\\beta}}$ ({what})",
        measured=measured,
        verdict=verdict,
        figure="scales.png",
        sizes=sizes,
    )


def rate_at_every_beta_line(groups, what, need, have) -> Claim:
    """The n^{−½} rate at every β: each β's slope over all n (and over the :data:`LARGE_N` largest, for
    the reader) in the first of ``groups`` (one group of rows per draw); the verdict pools every β of
    every draw into one slope against the band of finite-n corrections
    (:func:`~cfm_experiments.verdicts.slopes.slope_verdict`: a β whose own slope lies beyond it, with
    multiplicity accounted for, refutes the line)."""
    rows = [r for group in groups for r in group]
    fits = [slope_fit(r["config"]["ns"], r["values"]) for r in rows]
    ns = sorted(rows[0]["config"]["ns"])
    low, high = SL.band(ns)
    first = groups[0]
    shown = [(beta(r), f, large_n_slope(r["config"]["ns"], r["values"])) for r, f in zip(first, fits)]
    off = [b for b, f, _ in shown if f.ci_high < low or f.ci_low > high]
    measured = f"slope over all n / over n ≥ {ns[-LARGE_N]}: " + "; ".join(
        f"β={b:g}: {f:+.2f} / {g:+.2f}" for b, f, g in shown
    )
    measured += (
        f"; the slope's CI lies outside the band at β = {', '.join(f'{b:g}' for b in off)}"
        if off
        else "; every slope's CI meets the band"
    )
    measured += f"; {SL.describe(fits, ns)}"
    verdict, sizes = V.judge(SL.slope_verdict(fits, ns), need, have)
    return Claim(
        claim=f"$n^{{-1/2}}$ rate at every inverse temperature ({what} context)",
        measured=measured,
        verdict=verdict,
        figure="scales.png",
        sizes=sizes,
    )


def scales_figure(gq, gs, gb):
    """C/scale vs β (three sweeps, fitted exponential laws, the bound's e^{2β}); deviation vs n per β."""
    fig, (a0, a1, a2) = figure(3, ncols=3, width=4.4, height=3.9)
    for group, color, marker, label in (
        (gq, COLORS[0], "o", r"Gaussian, $\|Q\|\|K\|$ sweep ($\sigma = 1$)"),
        (gs, COLORS[1], "x", r"Gaussian, $\sigma$ sweep ($\|Q\|\|K\| = 1$)"),
        (gb, COLORS[2], "s", r"uniform ball, $R$ sweep ($\beta = \|Q\|\|K\|R^2$)"),
    ):
        if not group:
            continue
        bs = np.array([beta(r) for r in group])
        logs = [scaled_logs(r) for r in group]
        c = np.exp([v.mean() for v in logs])
        cis = [bootstrap(np.mean, v) for v in logs]
        err = [c - np.exp([q.ci_low for q in cis]), np.exp([q.ci_high for q in cis]) - c]
        a0.errorbar(bs, c, yerr=err, fmt=marker, color=color, capsize=3, ms=6, label=label)
        if group is not gs and len(group) >= 3:
            k, a = np.polyfit(bs, [v.mean() for v in logs], 1)
            grid = np.linspace(bs.min(), bs.max(), 50)
            a0.plot(
                grid,
                np.exp(a + k * grid),
                "--",
                color=color,
                lw=1.0,
                label=f"fit $e^{{\\kappa\\beta}}$, $\\kappa$ = {k:.2f}",
            )
    anchor = gq[0] if gq else gb[0]
    b0, c0 = beta(anchor), float(np.exp(scaled_logs(anchor).mean()))
    grid = np.linspace(b0, max(beta(r) for r in gq + gb), 50)
    a0.plot(
        grid, c0 * np.exp(BOUND_KAPPA * (grid - b0)), ":", color="0.3", label=r"bound's form $e^{2\beta}$, same start"
    )
    a0.set_yscale("log")
    log_values(a0, "y")
    top = max(float(np.exp(scaled_logs(r).mean())) for r in gq + gb)
    a0.set_ylim(0.5 * c0, 30 * top)  # the bound's form runs off the top: it is far steeper
    a0.set_xlabel(r"effective inverse temperature $\beta = \|Q\|\|K\|\cdot$scale$^2$")
    a0.set_ylabel(r"$C$ / scale (scale: $\sigma$ or $R$)")
    a0.set_title(r"prefactor vs $\beta$")
    a0.legend(fontsize=7)
    for ax, group, title in ((a1, gq, "Gaussian (exact limit)"), (a2, gb, "uniform ball (QMC reference)")):
        if not group:
            ax.set_visible(False)
            continue
        ns = np.asarray(group[0]["config"]["ns"], np.float64)
        for i, r in enumerate(group):
            m = np.exp(np.log(np.asarray(r["values"])).mean(axis=0)) / r["config"]["scale"]
            ax.plot(ns, m, "o-", color=COLORS[i % 8], label=f"β = {beta(r):g}")
            if r["config"]["law"] == "ball":
                ax.axhline(
                    np.median(r["floor"]) / math.sqrt(2) / r["config"]["scale"], color=COLORS[i % 8], ls=":", lw=1.0
                )
        m0 = np.exp(np.log(np.asarray(group[0]["values"])).mean(axis=0)) / group[0]["config"]["scale"]
        ax.plot(ns, m0[0] * (ns / ns[0]) ** -0.5, "--", color="0.35", lw=1.0, label="slope $-1/2$")
        if group[0]["config"]["law"] == "ball":
            ax.plot([], [], ":", color="0.35", label="reference error (same colour)")
        log_ticks(ax, ns, "x")
        log_values(ax, "y")
        ax.set_xlabel("context size $n$")
        ax.set_ylabel(r"$\sup_s\,\|x_s-\hat x_s\|$ / scale (geometric mean)")
        ax.set_title(title)
        ax.legend(fontsize=7, ncol=2)
    return fig


__all__ = [
    "BOUND_KAPPA",
    "IDENTITY_TOLERANCE",
    "Scales",
    "beta",
    "growth_line",
    "identity_line",
    "rate_at_every_beta_line",
    "scaled_logs",
    "scales_figure",
]
