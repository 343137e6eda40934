"""Part ``tail_exponent``: the shape of the deviation's tail over models spanning ρ, δ down to 10/contexts.

Several random models (d = 4), one per ρ of ``--tail-rhos``: model i's Q, K, V are drawn at unit
norms and its Q and K rescaled so that ρ = 2‖QᵀK‖σ²/d at N(0, I/d) (the ``rho`` part's, by
:func:`cfm_jax.attention_regime`) is the i-th value: from the mild regime (ρ ≤ ½) to the heavy one
(ρ ≈ 4), where the Gaussian context's own attention weights have an infinite mean. The same
models run on both laws. Per model and n, ``tail_samples`` independent contexts; the
(1 − δ)-quantile q_δ of the sup deviation (an order statistic) at every δ of
{10⁻¹, 3·10⁻², …, 10⁻⁴} with ≥ :data:`MIN_BEYOND` contexts beyond it (:func:`deltas_for`: down to
10⁻³ at 25 000 contexts, 10⁻⁴ at 10⁵) is fitted as log q_δ ≈ c + γ log log(1/δ): γ = ½ for a
sub-Gaussian tail (the paper's √(log(1/δ)/n)), γ = 1 for a sub-exponential one.

A finite range of δ and a non-zero centre bias γ below its asymptotic value, so the measured γ is
set next to that of the **linearised limiting Gaussian process**, computed the same way: as
n → ∞, √n(x_s − x̂_s) → G_s, a centred Gaussian process with the covariance of the first
variation f_s(z) = δx_s/δμ(z) under the context law. f is the derivative of the token trajectory
with respect to the weights of a reference sample of ``n_lin`` points (``jax.jacrev`` through
``cfm_jax.forward``: the flow's derivative in the measure, at the sample's atoms), its
covariance over the atoms is Σ, and sup_s ‖G_s‖ is drawn 10⁵ times (once per model and law). The
laws: the uniform ball (the paper's compact support; QMC reference of ``n_ref`` points) and the
Gaussian (exact limit; unbounded, outside the bound's assumption).

The verdict is two-sided and per model (:func:`cfm_experiments.verdicts.tails.model_verdict`): a light tail alone
does not hold. The deviation must also decay in n at the claimed rate and sit near its limit at
the largest n, each threshold derived from the claim (:mod:`cfm_experiments.verdicts.tails`): a sample that is
light-tailed but does not decay like n^{−½}, or is far from the linearised limit, is not the
limit's tail. A law's line is the worst of its models' verdicts
(:func:`cfm_experiments.verdicts.worst`), each model's stated in the line.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from matplotlib.ticker import NullLocator

from cfm_jax import EmpiricalMeasure
from cfm_jax.stats import bootstrap

from ..declarations.claims import TAIL_EXPONENT
from ..draws import redrawn
from ..plotting import COLORS, figure, log_values, save
from ..protocol import Claim, Part, Settings, Summary
from ..verdicts import claims as V, worst
from ..verdicts.tails import (
    COEFFICIENT,
    coefficient_seen,
    decay,
    decay_band,
    gamma_of,
    limit_band,
    model_checks,
    model_verdict,
    refuting_span,
)
from .deviation import deviations_program, references, token_trajectory
from .rho_models import rho_of
from .sampling import DRAW_OPTIONS, fixed_norm_params, sample_law, transformer
from .statistics import ci, exponent_of, tail_exponent, upper_quantiles

#: the tail levels δ of the exponent fit (those with ≥ MIN_BEYOND contexts beyond: :func:`deltas_for`).
TAIL_DELTAS = (1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4)
#: contexts beyond the smallest δ: the extreme quantile is not a handful of points.
MIN_BEYOND = 10
DIM = 4
#: contexts per compiled call.
CHUNK = 4096
#: draws of the linearised limit's sup_s ‖G_s‖.
GAUSSIAN_DRAWS = 100_000
RATIO_KEYS = ("value", "ci_low", "ci_high")
#: bootstrap resamples of a row's intervals (the sorts dominate).
TAIL_BOOT = 200
#: the laws and what the lines call them.
LAWS = {
    "ball": "uniform ball (the paper's compact support)",
    "gaussian": "Gaussian context (unbounded: outside the bound's assumption)",
}


def deltas_for(contexts: int) -> tuple[float, ...]:
    """The δ of :data:`TAIL_DELTAS` with at least :data:`MIN_BEYOND` of ``contexts`` beyond q_δ."""
    out = tuple(d for d in TAIL_DELTAS if d * contexts >= MIN_BEYOND - 1e-9)
    if len(out) < 2:
        raise ValueError(f"--tail-samples {contexts}: a tail exponent needs two δ with {MIN_BEYOND} contexts beyond.")
    return out


def _fixed(model_key, law_key, *, law, dim, layers, n_ref, n_lin):
    k_x, k_r1, k_r2, k_lin = jax.random.split(law_key, 4)
    params = fixed_norm_params(model_key, dim, heads=1, width=0, layers=layers, qk=1.0, v=1.0)
    out = {"params": params, "x0": sample_law(law, k_x, 1, dim, 1.0)}
    out["lin"] = sample_law(law, k_lin, n_lin, dim, 1.0, qmc=True)
    if law == "ball":
        out["refs"] = jnp.stack([sample_law(law, k, n_ref, dim, 1.0, qmc=True) for k in (k_r1, k_r2)])
    return out


#: ``fixed_inputs(model_key, law_key, *, law, dim, layers, n_ref, n_lin)``: a unit-norm model
#: (‖Q‖‖K‖ = 1, from ``model_key``), the token, references and linearisation sample of the law
#: (from ``law_key``). Random numbers only.
fixed_inputs = jax.jit(
    _fixed, static_argnames=("law", "dim", "layers", "n_ref", "n_lin"), compiler_options=DRAW_OPTIONS
)


def at_rho(params: dict, rho: float) -> dict:
    """``params`` with Q and K rescaled (each by the same factor) so that :func:`~.rho_models.rho_of` is ``rho``."""
    factor = np.sqrt(rho / rho_of(jax.tree.map(lambda a: np.asarray(a)[None], params))[0])
    return {**params, "Q": np.asarray(params["Q"]) * factor, "K": np.asarray(params["K"]) * factor}


def model_inputs(config: dict) -> dict:
    """A row's model at its ρ (:func:`at_rho`), token, references and linearisation sample, as NumPy:
    model ``i``'s key depends on the seed and ``i`` only, so both laws run the same models."""
    root = jax.random.key(int(config["seed"]))
    model_key = jax.random.fold_in(jax.random.fold_in(root, 23), int(config["model"]))
    law_key = jax.random.fold_in(root, 17 if config["law"] == "ball" else 19)
    fixed = fixed_inputs(
        model_key,
        law_key,
        law=config["law"],
        dim=DIM,
        layers=int(config["layers"]),
        n_ref=int(config["tail_n_ref"]),
        n_lin=int(config["n_lin"]),
    )
    fixed = jax.tree.map(np.asarray, fixed)
    return {**fixed, "params": at_rho(fixed["params"], float(config["rho"]))}


def contexts(rng, law: str, count: int, n: int, dim: int) -> np.ndarray:
    """``(count, n, dim)`` i.i.d. points of the law (``sample_law``'s, scale 1), drawn by NumPy:
    nothing to compile, and these contexts have no old numbers to reproduce."""
    g = rng.standard_normal((count, n, dim))
    if law == "gaussian":
        return g / np.sqrt(dim)
    r = rng.uniform(size=(count, n, 1)) ** (1.0 / dim)
    return g * (r / np.linalg.norm(g, axis=-1, keepdims=True))


def _influence(params, x0, points):
    """``(N, (L + 1)·d)``: the first variation of the token trajectory at each atom of ``points``,
    centred (the derivative in the atom's weight at uniform weights, minus its weighted mean)."""
    model = transformer(params)
    N = points.shape[0]
    flat = lambda w: token_trajectory(model, x0, EmpiricalMeasure.unchecked(points, w)).ravel()  # noqa: E731
    J = jax.jacrev(flat)(jnp.full((N,), 1.0 / N, points.dtype)).T  # (N, (L + 1)·d)
    return J - J.mean(axis=0)


influence = jax.jit(_influence)


def linearised_sups(f, draws: int, dim: int, seed: int) -> np.ndarray:
    """``(draws,)`` samples of sup_s ‖G_s‖, G ~ N(0, Cov f) (f: ``(N, (L + 1)·d)`` centred first variations)."""
    f = np.asarray(f, np.float64)
    cov = f.T @ f / f.shape[0]
    vals, vecs = np.linalg.eigh(cov)
    root = vecs * np.sqrt(np.clip(vals, 0, None))
    g = np.random.default_rng(seed).standard_normal((draws, cov.shape[0])) @ root.T
    return np.linalg.norm(g.reshape(draws, -1, dim), axis=-1).max(axis=1)


@redrawn  # samples models or contexts: a verdict only where independent draws agree
class TailExponent(Part):
    declaration = TAIL_EXPONENT
    title = (
        "The tail exponent of the sup deviation ($\\log q_δ$ vs $\\log\\log(1/δ)$) vs the linearised "
        "Gaussian limit, per model over ρ"
    )

    def configs(self, settings: Settings) -> list[dict]:
        deltas_for(settings["tail_samples"])  # a clear error before any row
        keys = ("tail_ns", "tail_samples", "n_lin", "tail_n_ref", "layers")
        return [
            {"law": law, "model": i, "rho": rho, "seed": settings.seed, **{k: settings[k] for k in keys}}
            for law in LAWS
            for i, rho in enumerate(settings["tail_rhos"])
        ]

    def run(self, config: dict) -> dict:
        law, N, seed = config["law"], int(config["tail_samples"]), int(config["seed"])
        inp = model_inputs(config)
        one = {"params": jax.tree.map(lambda a: a[None], inp["params"]), "x0": inp["x0"][None]}
        ref_xs, floor = references(one["params"], one["x0"], 1.0, inp["refs"][None] if law == "ball" else None)
        B = CHUNK
        P = jax.tree.map(lambda a: np.repeat(a, B, axis=0), one["params"])
        X, R = np.repeat(one["x0"], B, axis=0), np.repeat(np.asarray(ref_xs), B, axis=0)
        lin = linearised_sups(influence(inp["params"], inp["x0"], inp["lin"]), GAUSSIAN_DRAWS, DIM, seed)
        deltas = deltas_for(N)
        sizes = []
        for n in sorted(int(n) for n in config["tail_ns"]):
            rng = np.random.default_rng([seed, 3, n, law == "ball", int(config["model"])])
            devs = [
                np.asarray(deviations_program(P, X, contexts(rng, law, B, n, DIM), R, np.asarray([n]))[:, 0])
                for _ in range(0, N, B)
            ]
            scaled = np.sqrt(n) * np.concatenate(devs).astype(np.float64)[:N]
            sizes.append({"n": n, **tail_statistics(scaled, lin, deltas)})
        return {
            "rho": float(rho_of(one["params"])[0]),
            "floor": float(floor[0]),
            "deltas": list(deltas),
            "sizes": sizes,
        }

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        claims, text, data = [], [], {}
        have = {"contexts per model": settings["tail_samples"]}
        for law, what in LAWS.items():
            sel = sorted((r for r in rows if r["config"]["law"] == law), key=lambda r: r["rho"])
            for r in sel:
                data[f"{law} rho={r['rho']:.3g}"] = {
                    "verdict": str(model_verdict(r)),
                    "sizes": [
                        {k: s[k] for k in ("n", "gamma", "gamma_lin", "quantiles", "quantiles_lin")} for s in r["sizes"]
                    ],
                }
                text.append(
                    f"{law:8s} ρ={r['rho']:4.2f}: "
                    + ", ".join(f"n={s['n']} γ = {ci(gamma_of(s), fmt='.3f')}" for s in r["sizes"])
                    + f"; limit γ = {r['sizes'][-1]['gamma_lin']:.3f}; floor {r['floor']:.2g}: {model_verdict(r)}"
                )
            if sel:
                claims.append(exponent_line(sel, what, have))
        return Summary(text="\n".join(text), data=data, claims=tuple(claims))

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        return [save(tail_figure(rows), out / "tail_exponent.png")] if rows else []


def quantile_ratios(scaled, lin, deltas=TAIL_DELTAS, n_boot: int = TAIL_BOOT, seed: int = 0) -> dict:
    """q_δ of ``scaled`` over q_δ of ``lin`` at every δ of ``deltas``, with percentile-bootstrap
    intervals (the two samples resampled independently): lists ``value``, ``ci_low``, ``ci_high``."""
    a, b = np.asarray(scaled, np.float64), np.asarray(lin, np.float64)
    rng = np.random.default_rng(seed)
    reps = np.stack(
        [
            upper_quantiles(a[rng.integers(0, a.size, a.size)], deltas)
            / upper_quantiles(b[rng.integers(0, b.size, b.size)], deltas)
            for _ in range(n_boot)
        ]
    )
    lo, hi = np.quantile(reps, [0.025, 0.975], axis=0)
    value = upper_quantiles(a, deltas) / upper_quantiles(b, deltas)
    return {"value": value.tolist(), "ci_low": lo.tolist(), "ci_high": hi.tolist()}


def tail_statistics(scaled, lin, deltas=TAIL_DELTAS) -> dict:
    """What a row keeps of a √n·dev sample and of the linearised limit's draws, at ``deltas``: the
    quantiles, γ of the sample with its bootstrap interval, γ of the limit, the median with its
    interval and the quantiles over the limit's (:func:`quantile_ratios`)."""
    return {
        "gamma": tail_exponent(scaled, deltas, n_boot=TAIL_BOOT).as_dict(),
        "gamma_lin": exponent_of(upper_quantiles(lin, deltas), deltas),
        "quantiles": upper_quantiles(scaled, deltas).tolist(),
        "quantiles_lin": upper_quantiles(lin, deltas).tolist(),
        "median": float(np.median(scaled)),
        "median_ci": bootstrap(np.median, np.asarray(scaled), n_boot=TAIL_BOOT).as_dict(),
        "median_lin": float(np.median(lin)),
        "ratio": quantile_ratios(scaled, lin, deltas),
    }


def _delta(d: float) -> str:
    return f"{d:.0e}".replace("e-0", "e-")


def model_text(row) -> str:
    """One model's part of the line: γ per n, the quantiles over the limit's at the largest n (their
    range over δ and the span of their intervals), the decay exponent, each check's verdict by name
    and the model's (the worst of them), labelled so that no verdict reads as another check's."""
    sizes = sorted(row["sizes"], key=lambda s: s["n"])
    last, slope = sizes[-1], decay(sizes)
    r = last["ratio"]
    checks = model_checks(row)
    return (
        f"ρ = {row['rho']:.2f}: γ = "
        + ", ".join(f"{ci(gamma_of(s), fmt='.2f')} (n = {s['n']})" for s in sizes)
        + f", limit's {last['gamma_lin']:.2f} (tail check: {checks['tail']}); $q_δ$ over the limit's at "
        f"n = {last['n']}: {min(r['value']):.2f} … {max(r['value']):.2f} "
        f"(intervals within [{min(r['ci_low']):.2f}, {max(r['ci_high']):.2f}]; limit check: {checks['limit']}; "
        f"coefficient seen {coefficient_seen(row):.2f}); "
        f"median's exponent in n {'no two sizes' if slope is None else ci(slope, fmt='+.2f')} "
        f"(decay check: {checks['decay']}); this model: {model_verdict(row)}"
    )


def exponent_line(rows, what, have) -> Claim:
    """One law's line over its models (``rows``, one per model): each model judged by
    :func:`model_verdict`, the line by the worst of them."""
    rows = sorted(rows, key=lambda r: r["rho"])
    deltas = rows[0]["deltas"]
    verdict, sizes = V.judge(worst(model_verdict(r) for r in rows), {"contexts per model": 25_000}, have)
    ns = sorted(s["n"] for s in rows[0]["sizes"])
    lo, hi = limit_band(ns[-1])
    fastest, slowest = decay_band(ns[0], ns[-1])
    span = refuting_span(ns[0], -0.4)
    return Claim(
        claim=r"the sup deviation has a sub-Gaussian tail, $q_\delta \propto \sqrt{\log(1/\delta)}$ "
        f"(exponent ½, as the linearised limiting Gaussian process), not a sub-exponential one (exponent 1), "
        f"and is that limit's up to a relative correction $c/\\sqrt n$, c = {COEFFICIENT:g} (a stated tolerance): it "
        f"decays in n (exponent in [{fastest:.3f}, {slowest:.3f}] from n = {ns[0]} to {ns[-1]}; a decay like "
        f"$n^{{-0.4}}$ lies outside only from n = {ns[0]} to {span:.0f} on) and its quantiles are within "
        f"[{lo:.3g}, {hi:.3g}] × the limit's at "
        f"n = {ns[-1]}, for every model: {what}",
        measured=f"{len(rows)} models, ρ at N(0, I/d); {rows[0]['config']['tail_samples']} contexts per model and n, "
        f"δ = {_delta(deltas[0])} … {_delta(deltas[-1])}, $\\log q_δ ≈ c + γ\\log\\log(1/δ)$: "
        + "; ".join(model_text(r) for r in rows),
        verdict=verdict,
        figure="tail_exponent.png",
        sizes=sizes,
    )


def tail_figure(rows):
    """Per law (a row of panels): q_δ of √n·dev at the largest n vs log(1/δ) per model, with its
    linearised limit and slopes ½ and 1; q_δ over the limit's per model and n, with the band."""
    fig, axes = figure(4, ncols=2, width=4.8, height=3.7)
    for (a0, a1), law in zip((axes[:2], axes[2:]), LAWS):
        sel = sorted((r for r in rows if r["config"]["law"] == law), key=lambda r: r["rho"])
        for i, r in enumerate(sel):
            sizes = sorted(r["sizes"], key=lambda s: s["n"])
            x = np.log(1.0 / np.asarray(r["deltas"]))
            last = sizes[-1]
            a0.plot(x, last["quantiles"], "o-", color=COLORS[i % 8], ms=3, label=f"ρ = {r['rho']:.2g}")
            a0.plot(x, last["quantiles_lin"], ":", color=COLORS[i % 8], lw=1.2)
            for j, s in enumerate(sizes):
                v, lo, hi = (np.asarray(s["ratio"][k]) for k in RATIO_KEYS)
                a1.errorbar(
                    x * (1 + 0.02 * (j - (len(sizes) - 1) / 2)),
                    v,
                    yerr=[v - lo, hi - v],
                    fmt="os^dv"[j % 5] + ("-" if s is last else ":"),
                    color=COLORS[i % 8],
                    ms=3,
                    lw=0.8,
                    capsize=1.5,
                    label=f"ρ = {r['rho']:.2g}, n = {s['n']}",
                )
        if sel:
            x = np.log(1.0 / np.asarray(sel[0]["deltas"]))
            q0 = min(max(r["sizes"], key=lambda s: s["n"])["quantiles"][0] for r in sel)
            a0.plot(x, q0 * (x / x[0]) ** 0.5, "--", color="0.3", lw=1.0, label="exponent ½")
            a0.plot(x, q0 * (x / x[0]), "-.", color="0.5", lw=1.0, label="exponent 1")
            a0.plot([], [], ":", color="0.3", label="linearised limit (dotted)")
            for ax in (a0, a1):
                ax.set_xscale("log")
                ax.set_xticks(x, [_delta(d) for d in sel[0]["deltas"]], fontsize=7, rotation=40)
                ax.xaxis.set_minor_locator(NullLocator())
                ax.set_xlabel(r"$\log(1/\delta)$ (log scale), labelled by $\delta$")
        if sel:
            a1.axhspan(
                *limit_band(max(s["n"] for s in sel[0]["sizes"])), color="0.92", zorder=0, label="band of the rule"
            )
        a1.axhline(1.0, color="0.6", lw=0.8)
        log_values(a0, "y")
        log_values(a1, "y")
        name = "uniform ball (QMC reference)" if law == "ball" else "Gaussian (exact limit)"
        a0.set_ylabel(r"$q_\delta$ of $\sqrt{n}\,\sup_s\|x_s-\hat x_s\|$, largest n")
        a0.set_title(f"{name}: tail at the largest n")
        a1.set_ylabel(r"$q_\delta$ over the linearised limit's")
        a1.set_title(f"{name}: against the limit (95 % CI)")
        a0.legend(fontsize=6)
        a1.legend(fontsize=5, ncol=2)
    return fig


__all__ = [
    "CHUNK",
    "LAWS",
    "MIN_BEYOND",
    "TAIL_DELTAS",
    "TailExponent",
    "at_rho",
    "contexts",
    "deltas_for",
    "exponent_line",
    "influence",
    "linearised_sups",
    "model_inputs",
    "model_text",
    "quantile_ratios",
    "tail_figure",
    "tail_statistics",
]
