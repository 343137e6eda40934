"""Part ``sync``: synchronisation by common noise (the exact-noise limit SDE with softmax attention).

N tokens on S^{d−1} (d = 5) with softmax attention (β = 1) and the common noise of a ReLU MLP
at several strengths s_a, without input bias (s_c = 0: decay in mean fails under the noise
alone) and with one (s_c = 1.5: it holds). Each configuration (s_c, s_a) is one row: over
realisations, the mean, median and log-mean (exp of the mean log) of the paper's energy
E_β = ½∬(e^β − e^{β⟨x,y⟩}), of ∬‖x − y‖^{2p} (p = ¼, 1), of the order parameter and of the
diameter, every ~T/40; their exponential rates fitted over t >= T/4 (above the float64 floor of
merged tokens); the fraction of runs synchronised (diameter < 1e-6). The closed forms beside
them: λ₁ and the growth rate of E r under the noise alone (``NoiseKernel.moment_rate``).

The rows are descriptive (no claim line): the docs read them against λ₁.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
from matplotlib.lines import Line2D

from cfm_jax import compiled
from cfm_jax.stochastic import (
    NoiseKernel,
    SphereAttention,
    SphereSDE,
    fit_exponential_rate,
    realisation_stats,
    simulate_many,
    trajectory_observables,
)

from ..declarations.sync import SYNC
from ..plotting import COLORS, figure, save
from ..protocol import Part, Settings, Summary
from .common import random_starts

#: the observables whose statistics over runs a row stores, and those whose rates it fits.
OBSERVABLES = ("deficit", "dist_energy_p0.25", "dist_energy_p1", "order", "diameter")
FITTED = ("deficit", "dist_energy_p0.25", "dist_energy_p1")


@compiled
def trajectories(model, x0, keys, save_every: int, beta: float):
    """``(ts, observables)``: every ``save_every`` steps of one run per key (one start per run in
    ``x0 (R, N, d)``), the observables of each saved state (``trajectory_observables``, ``(R, S)``
    each). One program per model structure and shape, reused for every seed."""
    ts, xs = simulate_many(model, x0, keys, save_every=save_every)
    return ts, trajectory_observables(xs, beta)


class Synchronisation(Part):
    declaration = SYNC
    title = (
        "Synchronisation (exact-noise SDE, softmax attention β = 1): exponential rates (t ≥ T/4) of the paper's "
        "energy E_β = ½∬(e^β − e^{β<x,y>}),\nof its mean, median and log-mean over runs; 'sync frac': the fraction "
        "of runs with diameter < 1e-6 at T"
    )
    float64 = True  # nearly merged tokens: E_β falls to ~1e-30

    def configs(self, settings: Settings) -> list[dict]:
        quick = settings.quick
        runs = settings["realisations"] or (16 if quick else 64)
        return [
            dict(
                s_a=s_a,
                s_c=bias,
                d=5,
                N=16 if quick else 32,
                T=4.0 if quick else 8.0,
                dt=0.02 if quick else 0.01,
                beta=1.0,
                R=runs,
                seed=settings.seed,
            )
            for bias in (0.0, 1.5)
            for s_a in ((0.0, 0.5, 1.0) if quick else (0.0, 0.25, 0.5, 1.0))
        ]

    def run(self, config: dict) -> dict:
        c = config
        k = NoiseKernel("relu", c["s_a"], 1.0, c["s_c"])  # s_a = 0: attention only
        steps = int(round(c["T"] / c["dt"]))
        sde = SphereSDE(k, steps=steps, horizon=c["T"], attention=SphereAttention("SA", c["beta"]))
        kx, kr = jax.random.split(jax.random.key(c["seed"]))
        x0 = random_starts(kx, c["R"], c["N"], c["d"])
        ts, obs = trajectories(sde, x0, jax.random.split(kr, c["R"]), max(1, steps // 40), c["beta"])
        ts = np.asarray(ts)
        out: dict = {"t": ts, "lambda1": k.lyapunov(c["d"]), "mean_rate_theory_noise_only": k.moment_rate(c["d"], 1.0)}
        for name in OBSERVABLES:
            st = realisation_stats(obs[name])
            out[name] = dict(st)
            if name in FITTED:
                # over t ≥ T/4 and above the float64 floor of merged tokens (r ~ 1e-32)
                out[name]["rates"] = {
                    s: fit_exponential_rate(ts, v, t_min=ts[-1] / 4, floor=1e-28) for s, v in st.items()
                }
        out["frac_synchronised"] = np.mean(np.asarray(obs["diameter"]) < 1e-6, axis=0)
        return out

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        if not rows:
            return Summary()
        head = f"{'s_c':>4} {'s_a':>5} {'λ₁':>8} {'mean':>9} {'median':>9} {'log-mean':>9} {'sync frac':>9}"
        lines, records = [head], []
        for r in rows:
            c, rates = r["config"], r["deficit"]["rates"]
            frac = float(np.asarray(r["frac_synchronised"])[-1])
            lines.append(
                f"{c['s_c']:>4g} {c['s_a']:>5g} {r['lambda1']:>8.3f} {_f(rates['mean'])} {_f(rates['median'])} "
                f"{_f(rates['logmean'])} {frac:>9.2f}"
            )
            records.append(
                {
                    "s_a": c["s_a"],
                    "s_c": c["s_c"],
                    "lambda1": r["lambda1"],
                    "deficit_rates": rates,
                    "dist_energy_p0.25_rates": r["dist_energy_p0.25"]["rates"],
                    "final_frac_synchronised": frac,
                }
            )
        return Summary(text="\n".join(lines), data={"synchronisation": records})

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        return [save(energy_figure(rows), out / "energy_deficit.png")] if rows else []


def _f(rate) -> str:
    """A fitted rate (None in a stored row when too few points were above the floor)."""
    return f"{'—':>9}" if rate is None else f"{rate:>9.3f}"


def energy_figure(rows: list[dict]):
    """One panel per bias s_c: E_β over time for each noise strength s_a, mean, median and log-mean over runs."""
    biases = sorted({r["config"]["s_c"] for r in rows})
    fig, axes = figure(len(biases), ncols=2, width=5.2, height=4.0)
    styles = (("mean", "-", "mean over runs"), ("median", "--", "median over runs"))
    styles += (("logmean", ":", "log-mean over runs (exp of mean log)"),)
    for ax, b in zip(axes, biases):
        cells = [r for r in rows if r["config"]["s_c"] == b]
        for i, r in enumerate(cells):
            for stat, ls, _ in styles:
                ax.semilogy(r["t"], np.maximum(np.asarray(r["deficit"][stat], float), 1e-300), color=COLORS[i], ls=ls)
        handles = [
            Line2D([], [], color=COLORS[i], label=f"noise $s_a$ = {r['config']['s_a']:g}") for i, r in enumerate(cells)
        ]
        handles += [Line2D([], [], color="0.3", ls=ls, label=label) for _, ls, label in styles]
        ax.legend(handles=handles, fontsize=7)
        c = cells[0]["config"]
        ax.set_title(
            f"ReLU noise, $s_b$ = 1, bias $s_c$ = {b:g}; softmax attention $\\beta$ = {c['beta']:g}\n"
            f"$N$ = {c['N']} tokens, $d$ = {c['d']}, {c['R']} runs",
            fontsize=9,
        )
        ax.set_xlabel("time $t$")
        ax.set_ylabel(r"energy $E_\beta = \frac{1}{2}\iint (e^\beta - e^{\beta\langle x,y\rangle})$")
    return fig


__all__ = ["FITTED", "OBSERVABLES", "Synchronisation", "energy_figure", "trajectories"]
