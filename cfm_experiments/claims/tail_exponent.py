"""Part ``tail_exponent``: the shape of the deviation's tail, with 10⁵ contexts down to δ = 10⁻⁴.

One fixed model and token (d = 4), ``tail_samples`` independent contexts at small n. The
(1 − δ)-quantile q_δ of the sup deviation (an order statistic) at δ ∈ {10⁻¹, 3·10⁻², …, 10⁻⁴} is
fitted as log q_δ ≈ c + γ log log(1/δ): γ = ½ for a sub-Gaussian tail (the paper's
√(log(1/δ)/n)), γ = 1 for a sub-exponential one; with ≥ 10 contexts beyond the smallest δ the
extreme quantile is no longer a handful of points.

A finite range of δ and a non-zero centre bias γ below its asymptotic value, so the measured γ is
set next to that of the **linearised limiting Gaussian process**, computed the same way: as
n → ∞, √n(x_s − x̂_s) → G_s, a centred Gaussian process with the covariance of the first
variation f_s(z) = δx_s/δμ(z) under the context law. f is the derivative of the token trajectory
with respect to the weights of a reference sample of ``n_lin`` points (``jax.jacrev`` through
``cfm_jax.forward``: the flow's derivative in the measure, at the sample's atoms), its
covariance over the atoms is Σ, and sup_s ‖G_s‖ is drawn 10⁵ times. The laws: the uniform ball
(the paper's compact support; QMC reference of ``n_ref`` points) and the Gaussian (exact limit;
unbounded, outside the bound's assumption).

The verdict is two-sided (:func:`exponent_line`): a light tail alone does not hold. The deviation
must also decay in n (the median's exponent between the smallest and the largest n, interval at
or below :data:`DECAY`) and sit near its limit at the largest n (every q_δ over the limit's, interval inside
:data:`LIMIT_BAND`): a sample that is light-tailed but does not decay, or is far from the
linearised limit, is not the limit's tail.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from matplotlib.ticker import NullLocator

from cfm_jax import EmpiricalMeasure
from cfm_jax.stats import Interval, bootstrap

from ..declarations.claims import TAIL_EXPONENT
from ..plotting import COLORS, figure, log_values, save
from ..protocol import Claim, Part, Settings, Summary
from ..verdicts import NOT_MEASURED, Verdict, against_band, worst
from . import verdicts as V
from .deviation import deviations_program, references, token_trajectory
from .sampling import DRAW_OPTIONS, fixed_norm_params, sample_law, transformer
from .statistics import ci, exponent_of, tail_exponent, upper_quantiles

#: the tail levels δ of the exponent fit.
TAIL_DELTAS = (1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4)
DIM = 4
#: contexts per compiled call.
CHUNK = 4096
#: draws of the linearised limit's sup_s ‖G_s‖.
GAUSSIAN_DRAWS = 100_000
#: near the limit: q_δ of √n·dev within this factor band of the linearised limit's q_δ.
LIMIT_BAND = (0.5, 2.0)
#: decaying: the median's exponent in n at most this, half the limit's −½ (a finite-n slope may be
#: slower than the asymptotic one, but not by more than half).
DECAY = -0.25
RATIO_KEYS = ("value", "ci_low", "ci_high")
#: bootstrap resamples of a row's intervals (10⁵ contexts each: the sort dominates).
TAIL_BOOT = 200


def _fixed(key, *, law, dim, layers, n_ref, n_lin):
    k_model, k_x, k_r1, k_r2, k_lin = jax.random.split(key, 5)
    params = fixed_norm_params(k_model, dim, heads=1, width=0, layers=layers, qk=1.0, v=1.0)
    out = {"params": params, "x0": sample_law(law, k_x, 1, dim, 1.0)}
    out["lin"] = sample_law(law, k_lin, n_lin, dim, 1.0, qmc=True)
    if law == "ball":
        out["refs"] = jnp.stack([sample_law(law, k, n_ref, dim, 1.0, qmc=True) for k in (k_r1, k_r2)])
    return out


#: ``fixed_inputs(key, *, law, dim, layers, n_ref, n_lin)``: the model, token, references and the
#: linearisation sample of a tail run. Random numbers only.
fixed_inputs = jax.jit(
    _fixed, static_argnames=("law", "dim", "layers", "n_ref", "n_lin"), compiler_options=DRAW_OPTIONS
)


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


class TailExponent(Part):
    name = "tail_exponent"
    title = (
        "The tail exponent of the sup deviation ($\\log q_δ$ vs $\\log\\log(1/δ)$, δ down to 10⁻⁴) "
        "vs the linearised Gaussian limit"
    )
    options = TAIL_EXPONENT.options

    def configs(self, settings: Settings) -> list[dict]:
        keys = ("tail_samples", "n_lin", "tail_n_ref", "layers")
        return [
            {"law": law, "n": n, "seed": settings.seed, **{k: settings[k] for k in keys}}
            for law in ("ball", "gaussian")
            for n in settings["tail_ns"]
        ]

    def run(self, config: dict) -> dict:
        law, n, N, L = config["law"], int(config["n"]), int(config["tail_samples"]), int(config["layers"])
        key = jax.random.fold_in(jax.random.key(int(config["seed"])), 17 if law == "ball" else 19)
        fixed = fixed_inputs(
            key, law=law, dim=DIM, layers=L, n_ref=int(config["tail_n_ref"]), n_lin=int(config["n_lin"])
        )
        fixed = jax.tree.map(np.asarray, fixed)
        one = jax.tree.map(lambda a: a[None], {k: fixed[k] for k in ("params", "x0")})
        ref_xs, floor = references(one["params"], one["x0"], 1.0, fixed["refs"][None] if law == "ball" else None)
        B = CHUNK
        P = jax.tree.map(lambda a: np.repeat(np.asarray(a), B, axis=0), one["params"])
        X, R = np.repeat(np.asarray(one["x0"]), B, axis=0), np.repeat(np.asarray(ref_xs), B, axis=0)
        rng = np.random.default_rng([int(config["seed"]), 3, n, law == "ball"])
        devs = []
        for _ in range(0, N, B):
            z = contexts(rng, law, B, n, DIM)
            devs.append(np.asarray(deviations_program(P, X, z, R, np.asarray([n]))[:, 0], np.float64))
        f = influence(fixed["params"], fixed["x0"], fixed["lin"])
        lin = linearised_sups(f, GAUSSIAN_DRAWS, DIM, int(config["seed"]))
        return {"floor": float(floor[0]), **tail_statistics(np.sqrt(n) * np.concatenate(devs)[:N], lin)}

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        claims, text, data = [], [], {}
        for r in rows:
            data[f"{r['config']['law']} n={r['config']['n']}"] = {
                k: r[k] for k in ("gamma", "gamma_lin", "quantiles", "quantiles_lin")
            }
            text.append(
                f"{r['config']['law']:8s} n={r['config']['n']:4d}: γ = {ci(gamma_of(r), fmt='.3f')}, "
                f"linearised limit γ = {r['gamma_lin']:.3f}, reference floor {r['floor']:.2g}"
            )
        have = {"contexts": settings["tail_samples"]}
        for law, what in (
            ("ball", "uniform ball (the paper's compact support)"),
            ("gaussian", "Gaussian context (unbounded: outside the bound's assumption)"),
        ):
            sel = sorted((r for r in rows if r["config"]["law"] == law), key=lambda r: r["config"]["n"])
            if sel:
                claims.append(exponent_line(sel, what, have))
        return Summary(text="\n".join(text), data=data, claims=tuple(claims))

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        return [save(tail_figure(rows), out / "tail_exponent.png")] if rows else []


def quantile_ratios(scaled, lin, n_boot: int = TAIL_BOOT, seed: int = 0) -> dict:
    """q_δ of ``scaled`` over q_δ of ``lin`` at every :data:`TAIL_DELTAS`, with percentile-bootstrap
    intervals (the two samples resampled independently): lists ``value``, ``ci_low``, ``ci_high``."""
    a, b = np.asarray(scaled, np.float64), np.asarray(lin, np.float64)
    rng = np.random.default_rng(seed)
    reps = np.stack(
        [
            upper_quantiles(a[rng.integers(0, a.size, a.size)], TAIL_DELTAS)
            / upper_quantiles(b[rng.integers(0, b.size, b.size)], TAIL_DELTAS)
            for _ in range(n_boot)
        ]
    )
    lo, hi = np.quantile(reps, [0.025, 0.975], axis=0)
    value = upper_quantiles(a, TAIL_DELTAS) / upper_quantiles(b, TAIL_DELTAS)
    return {"value": value.tolist(), "ci_low": lo.tolist(), "ci_high": hi.tolist()}


def tail_statistics(scaled, lin) -> dict:
    """What a row keeps of its √n·dev sample and of the linearised limit's draws: the quantiles at
    :data:`TAIL_DELTAS`, γ of the sample with its bootstrap interval, γ of the limit, the median
    with its interval and the quantiles over the limit's (:func:`quantile_ratios`)."""
    return {
        "gamma": tail_exponent(scaled, TAIL_DELTAS, n_boot=TAIL_BOOT).as_dict(),
        "gamma_lin": exponent_of(upper_quantiles(lin, TAIL_DELTAS), TAIL_DELTAS),
        "quantiles": upper_quantiles(scaled, TAIL_DELTAS).tolist(),
        "quantiles_lin": upper_quantiles(lin, TAIL_DELTAS).tolist(),
        "median": float(np.median(scaled)),
        "median_ci": bootstrap(np.median, np.asarray(scaled), n_boot=TAIL_BOOT).as_dict(),
        "median_lin": float(np.median(lin)),
        "ratio": quantile_ratios(scaled, lin),
    }


def gamma_of(row) -> Interval:
    return Interval(**row["gamma"])


def decay(rows) -> Interval | None:
    """The exponent in n of the deviation's median (√n·dev's over √n) from the smallest to the
    largest n: −½ for the limit's decay, 0 for none. Its interval joins the two medians' intervals at their far ends
    (the samples are independent); None without two sizes or the medians' intervals."""
    if len(rows) < 2 or not all("median_ci" in r for r in (rows[0], rows[-1])):
        return None
    (a, b), m = (rows[0], rows[-1]), (Interval(**rows[0]["median_ci"]), Interval(**rows[-1]["median_ci"]))
    span = np.log(b["config"]["n"] / a["config"]["n"])
    slope = lambda hi, lo: float(np.log(hi / lo) / span - 0.5)  # noqa: E731
    return Interval(slope(m[1].value, m[0].value), slope(m[1].ci_low, m[0].ci_high), slope(m[1].ci_high, m[0].ci_low))


def near_limit(row) -> list[Verdict]:
    """Per δ, q_δ over the limit's against :data:`LIMIT_BAND` (inside holds, outside refuted)."""
    r = row.get("ratio")
    if r is None:
        return [NOT_MEASURED]
    return [against_band(lo, hi, *LIMIT_BAND) for lo, hi in zip(r["ci_low"], r["ci_high"])]


def exponent_line(rows, what, have) -> Claim:
    """The largest n's γ against max(½, the linearised limit's γ), and the deviation's decay in n
    (:func:`decay`, at most :data:`DECAY`) and its agreement with the limit at the largest n (:func:`near_limit`):
    the line holds only when all three do."""
    last = rows[-1]
    limit = max(0.5, last["gamma_lin"])
    parts = "; ".join(
        f"n = {r['config']['n']}: γ = {ci(gamma_of(r), fmt='.3f')}, $q_δ$ over the limit's at δ = 10⁻¹ … 10⁻⁴: "
        + (
            ", ".join(f"{v:.2f} [{lo:.2f}, {hi:.2f}]" for v, lo, hi in zip(*(r["ratio"][k] for k in RATIO_KEYS)))
            if "ratio" in r
            else f"{r['quantiles'][-1] / r['quantiles_lin'][-1]:.2f} (at 10⁻⁴)"
        )
        for r in rows
    )
    slope = decay(rows)
    checks = [V.at_most(gamma_of(last), limit), *near_limit(last)]
    checks.append(NOT_MEASURED if slope is None else against_band(slope.ci_low, slope.ci_high, high=DECAY))
    trend = "no two sizes" if slope is None else ci(slope, fmt="+.2f")
    verdict, sizes = V.judge(worst(checks), {"contexts": 100_000}, have)
    lo, hi = LIMIT_BAND
    return Claim(
        claim=r"the sup deviation has a sub-Gaussian tail, $q_\delta \propto \sqrt{\log(1/\delta)}$ "
        f"(exponent ½, as the linearised limiting Gaussian process), not a sub-exponential one (exponent 1), "
        f"and is that limit's: it decays in n (exponent ≤ {DECAY:g}) and its quantiles are within "
        f"[{lo:g}, {hi:g}] × the limit's: {what}",
        measured=f"{last['config']['tail_samples']} contexts, δ = 10⁻¹ … 10⁻⁴, $\\log q_δ ≈ c + γ\\log\\log(1/δ)$: "
        f"{parts}; linearised limit γ = {last['gamma_lin']:.3f} (its centre moves it off ½ over this δ range); "
        f"the median's exponent in n: {trend}",
        verdict=verdict,
        figure="tail_exponent.png",
        sizes=sizes,
    )


def tail_figure(rows):
    """log q_δ vs log log(1/δ) per law and n, with the linearised limit and slopes ½ and 1."""
    fig, axes = figure(2, ncols=2, width=4.8, height=3.9)
    x = np.log(1.0 / np.asarray(TAIL_DELTAS))
    for ax, law in zip(axes, ("ball", "gaussian")):
        sel = sorted((r for r in rows if r["config"]["law"] == law), key=lambda r: r["config"]["n"])
        for i, r in enumerate(sel):
            ax.plot(
                x,
                r["quantiles"],
                "o-",
                color=COLORS[i % 8],
                label=f"n = {r['config']['n']} (γ = {r['gamma']['value']:.2f})",
            )
            ax.plot(
                x,
                r["quantiles_lin"],
                "s:",
                color=COLORS[i % 8],
                ms=3,
                label=f"linearised limit (γ = {r['gamma_lin']:.2f})",
            )
        if sel:
            q0 = sel[0]["quantiles"][0]
            ax.plot(x, q0 * (x / x[0]) ** 0.5, "--", color="0.3", lw=1.0, label="exponent ½ (sub-Gaussian)")
            ax.plot(x, q0 * (x / x[0]), "-.", color="0.5", lw=1.0, label="exponent 1 (sub-exponential)")
        ax.set_xscale("log")
        log_values(ax, "y")
        ax.set_xticks(x, [f"{d:.0e}".replace("e-0", "e-") for d in TAIL_DELTAS], fontsize=7, rotation=40)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel(r"$\log(1/\delta)$ (log scale), labelled by $\delta$")
        ax.set_ylabel(r"$q_\delta$ of $\sqrt{n}\,\sup_s\|x_s-\hat x_s\|$")
        ax.set_title("uniform ball (QMC reference)" if law == "ball" else "Gaussian (exact limit)")
        ax.legend(fontsize=6)
    return fig


__all__ = [
    "CHUNK",
    "TAIL_DELTAS",
    "contexts",
    "TailExponent",
    "DECAY",
    "LIMIT_BAND",
    "decay",
    "exponent_line",
    "near_limit",
    "quantile_ratios",
    "gamma_of",
    "tail_statistics",
    "influence",
    "linearised_sups",
    "tail_figure",
]
