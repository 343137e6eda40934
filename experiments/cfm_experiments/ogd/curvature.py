"""OGD with curvature (part ``curvature``): the threshold λ_c = 2C where the first paper's mechanism acts.

The paper's step bound e_{k+1} ≤ (1 + η(C − λ)) e_k + η δ_n gives e_k ≤ ((1 + η(C − λ))^k − 1)·δ_n/(C − λ):
exponential growth below the threshold, a bounded deviation above it. The growth needs a path
along which the OGD map expands (negative curvature of size ≈ C); a teacher–student descent from
a random start has none (its gap grows like a random walk). Here it has: a student near an
unstable stationary point (:mod:`.saddle`), for λ = ρ·λ_c with ρ ∈ {0, ¼, ½, 1, 2, 4} (λ_c = 2C
from each seed's λ = 0 pilot), C re-estimated on the region visited at each λ.

Summary (:func:`table`, :func:`claim_lines`, rules in docs/ogd.md): per λ the growth rate of the
deviation over the second half of its linear regime, the FTLE's and the bound's log(1 + η(C − λ)),
the late growth G (last over second quarter), e_K/e_{k_c} and the largest e_k/B_k; claim lines for
growth at λ = 0, degradation below the threshold, boundedness above it and the bound's own
trajectory, and a code check of the ridge rule.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

from cfm_jax.stats import Interval

from ..declarations.ogd import CURVATURE
from ..draws import redrawn
from ..plotting import save
from ..protocol import Claim, Part, Settings, Summary
from ..verdicts import (
    CODE_FAILED,
    CODE_PASSED,
    NOT_MEASURED,
    code_check,
    worst,
)
from ..verdicts.ogd import ESTIMATE_FACTOR, bound_ratio_verdict, bounded_verdict, growth_verdict, rate_verdict
from . import measure
from .figures import CURVATURE_FIGURE, curvature_figure
from .measure import CAP, LAMBDA_C_FACTOR, k_c
from .saddle import FIXED, bound_trajectory, record, task_of
from .statistics import exponential_rates, geometric_mean_ci, mean_interval

#: the linear regime: deviations below this level (the saddle is O(1) away from the minima the
#: escaping runs settle in: the unit-norm maps set that scale).
LINEAR = 0.03


@redrawn  # samples models or contexts: a verdict only where independent draws agree
class Curvature(Part):
    declaration = CURVATURE
    title = "OGD near an unstable stationary point: growth below the ridge threshold, none above (exact limit)"

    def check(self, settings: Settings) -> None:
        ratios = settings["curvature_ratios"]
        if ratios[0] != 0 or list(ratios) != sorted(set(ratios)):
            raise ValueError(f"--curvature-ratios must start at 0 and increase, got {list(ratios)}.")
        if settings["curvature_steps"] < 4 * k_c(settings["curvature_eta"]):
            raise ValueError("--curvature-steps must be at least 4·k_c = 4/η (--curvature-eta) to see beyond k_c.")

    def configs(self, settings: Settings) -> list[dict]:
        base = dict(
            ns=list(settings["curvature_ns"]),
            eta=settings["curvature_eta"],
            steps=settings["curvature_steps"],
            seeds=settings["curvature_seeds"],
            **FIXED,
            seed=settings.seed,
        )
        return [{"ratio": float(r), **base} for r in settings["curvature_ratios"]]

    def run(self, config: dict) -> dict:
        task = task_of(config)
        base = jax.random.fold_in(jax.random.key(config["seed"]), 1_000_003)  # not the claims' seeds
        identity = {k: v for k, v in config.items() if k != "ratio"}
        return record(config, *measure.at_ratio(task, base, identity, config["ratio"]))

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        if not rows:
            return Summary()
        t = table(rows)
        claims = claim_lines(rows, t)
        return Summary(
            text=format_table(rows, t),
            data={"scan": t},
            claims=tuple(claims),
            passed=all(c.verdict != CODE_FAILED for c in claims),
        )

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        return [save(curvature_figure(rows, summary.data["scan"]), out / CURVATURE_FIGURE)] if rows else []


def _linear_stop(dev: np.ndarray, cap: float, kc: int) -> np.ndarray:
    """Per seed, the last step k >= k_c before ``dev (S, K)`` first exceeds ``cap`` (K if never)."""
    K = dev.shape[1]
    over = dev[:, kc - 1 :] > cap
    first = np.where(over.any(1), over.argmax(1) + kc, K + 1)  # the 1-based step where it is exceeded
    return np.minimum(first - 1, K)


def late_growth(dev) -> np.ndarray:
    """Per seed, exp(mean log e over the last quarter of the steps − over the second quarter):
    about 1 for a bounded (stationary) deviation, e^{rK/2} for growth at rate r."""
    logs = np.log(np.maximum(np.asarray(dev, float), np.finfo(float).tiny))
    q = logs.shape[1] // 4
    return np.exp(logs[:, 3 * q :].mean(1) - logs[:, q : 2 * q].mean(1))


def _rates(dev, stops) -> np.ndarray:
    """Per seed, the growth rate of ``dev (S, K)`` over steps stop/2 … stop (:func:`exponential_rates`)."""
    return np.asarray([exponential_rates(dev[s : s + 1], max(1, int(e) // 2), [e])[0] for s, e in enumerate(stops)])


def table(rows: list[dict]) -> dict:
    """Per λ (keyed ``f"{ratio:g}"``, increasing): its statistics (module docstring), intervals as
    dicts over seeds, for the largest n (``rate_per_n``: every n)."""
    rows = sorted(rows, key=lambda r: r["config"]["ratio"])
    cfg = rows[0]["config"]
    eta, K, kc, ns = cfg["eta"], cfg["steps"], k_c(cfg["eta"]), cfg["ns"]
    out = {}
    for r in rows:
        dev, lam, C = np.asarray(r["deviations"]), np.asarray(r["lam"]), np.asarray(r["region_C"])
        stops = np.stack([_linear_stop(dev[:, :, i], LINEAR, 1) for i in range(len(ns))], 1)  # (S, len(ns))
        # the second half of the linear regime: by then the most expanding direction dominates the deviation
        rates = [_rates(dev[:, :, i], stops[:, i]) for i in range(len(ns))]
        ftle = _rates(np.exp(np.asarray(r["log_growth"])), stops[:, -1])
        bound = np.log1p(eta * (C - lam))  # (S,) the bound's rate per step
        loose = bound_trajectory(K, eta, ESTIMATE_FACTOR * C, lam, ESTIMATE_FACTOR * np.asarray(r["delta"]))
        with np.errstate(divide="ignore", invalid="ignore"):
            worst_ratio = float(np.max(dev / np.asarray(r["bound"])))
            loose_ratio = float(np.max(dev / loose))
        out[f"{r['config']['ratio']:g}"] = {
            "ratio": r["config"]["ratio"],
            "lambda": float(lam.mean()),
            "lambda_over_lambda_c": float(np.mean(lam / (LAMBDA_C_FACTOR * np.asarray(r["C_pilot"])))),
            "lambda_over_2C_region": float(np.mean(lam / (2 * C))),
            "C_region": float(C.mean()),
            "rate": mean_interval(rates[-1]).as_dict(),
            "rate_per_n": {str(n): mean_interval(v).as_dict() for n, v in zip(ns, rates)},
            "fitted_steps": [int(np.median(stops[:, -1] // 2)), int(np.median(stops[:, -1]))],
            "ftle_rate": mean_interval(ftle).as_dict(),
            "bound_rate": mean_interval(bound).as_dict(),
            "rate_over_bound": mean_interval(rates[-1] / bound).as_dict() if (bound > 0).all() else None,
            "ftle_over_bound": mean_interval(ftle / bound).as_dict() if (bound > 0).all() else None,
            "ftle_K": float(np.mean(np.asarray(r["log_growth"])[:, -1]) / K),
            "late_growth": geometric_mean_ci(late_growth(dev[:, :, -1])).__dict__,
            "e_K_over_e_kc": geometric_mean_ci(dev[:, -1, -1] / dev[:, kc - 1, -1]).__dict__,
            "max_dev_over_bound": worst_ratio,
            "max_dev_over_loose_bound": loose_ratio,
            "ref_norm_final": float(np.mean(r["ref_norm_final"])),
        }
    return out


def expected_ridges(C, ratio: float, eta: float) -> np.ndarray:
    """ρ·2C, capped at 0.9/η for ρ >= 1: the ridge rule written out again, independently of
    :func:`~.measure.ridge`, for the part's code check."""
    lam = ratio * 2.0 * np.asarray(C, float)
    return np.minimum(lam, 0.9 / eta) if ratio >= 1 else lam


def _times(d: dict) -> str:
    return f"×{Interval.from_dict(d):.3g}"


def claim_lines(rows: list[dict], t: dict) -> list[Claim]:
    """The part's claimed-vs-measured lines (rules in docs/ogd.md)."""
    cfg = rows[0]["config"]
    eta, K, n = cfg["eta"], cfg["steps"], cfg["ns"][-1]
    sizes = (
        f"d = {cfg['dim']}, L = {cfg['layers']}, n = {'/'.join(map(str, cfg['ns']))}, K = {K}, "
        f"η = {eta:g}, {cfg['seeds']} seeds"
    )
    fig = CURVATURE_FIGURE
    lines = []
    z = t.get("0")
    if z is not None and z["rate_over_bound"] is not None:
        q, qf = Interval.from_dict(z["rate_over_bound"]), Interval.from_dict(z["ftle_over_bound"])
        rate, ftle = Interval.from_dict(z["rate"]), Interval.from_dict(z["ftle_rate"])
        lines.append(
            Claim(
                "λ = 0 with curvature of size C along the path: beyond $k_c$ the deviation grows like $(1 + ηC)^k$",
                f"n = {n}: rate per step {rate:+.3f} "
                f"(over k = {z['fitted_steps'][0]}…{z['fitted_steps'][1]}, "
                f"the second half before saturation) = {q:+.2f} × $\\log(1 + ηC)$ (C = {z['C_region']:.3g} on the "
                f"region $\\hat θ$ visited); finite-time Lyapunov exponent {ftle:+.3f} = {qf:+.2f} "
                "× $\\log(1 + ηC)$; "
                f"$e_K/e_{{k_c}}$ = ×{z['e_K_over_e_kc']['value']:.3g}",
                rate_verdict(q),
                fig,
                sizes,
            )
        )
    below = [v for v in t.values() if 0 < v["ratio"] < 1]
    growing = [v for v in below if v["bound_rate"]["value"] > 0]
    if below:
        lines.append(
            Claim(
                "$0 < λ < λ_c$: beyond $k_c$ the bound degrades; where λ < C the deviation keeps growing",
                "; ".join(
                    f"λ = {v['ratio']:g}·$λ_c$ (= {v['lambda_over_2C_region']:.2g}·2C on its region): last over second "
                    f"quarter {_times(v['late_growth'])}, $e_K/e_{{k_c}}$ = ×{v['e_K_over_e_kc']['value']:.3g}, FTLE "
                    f"{v['ftle_rate']['value']:+.4f} against the bound's $\\log(1 + η(C − λ))$ = "
                    f"{v['bound_rate']['value']:+.4f}"
                    for v in below
                ),
                worst(
                    growth_verdict(Interval.from_dict(v["late_growth"]), Interval.from_dict(v["ftle_rate"]))
                    for v in growing
                )
                if growing
                else NOT_MEASURED,  # no row where the bound's step factor still expands
                fig,
                sizes,
            )
        )
    above = [v for v in t.values() if v["ratio"] >= 1]
    if above:
        g = [Interval.from_dict(v["late_growth"]) for v in above]
        verdict = bounded_verdict(g)
        lines.append(
            Claim(
                "$λ > λ_c = 2C$ (C re-estimated on the region each λ visits): the deviation is bounded uniformly in k",
                "; ".join(
                    f"λ = {v['ratio']:g}·$λ_c$ (= {v['lambda_over_2C_region']:.2g}·2C on its region): last over second "
                    f"quarter {_times(v['late_growth'])}, $e_K/e_{{k_c}}$ = ×{v['e_K_over_e_kc']['value']:.3g}, FTLE "
                    f"{v['ftle_rate']['value']:+.4f}"
                    for v in above
                ),
                verdict,
                fig,
                sizes,
            )
        )
    worst_ratio = max(v["max_dev_over_bound"] for v in t.values())
    loose = max(v["max_dev_over_loose_bound"] for v in t.values())
    lines.append(
        Claim(
            "$e_k ≤ ((1 + η(C − λ))^k − 1)·δ_n/(C − λ)$, the bound's own trajectory (C and $δ_n$ measured)",
            f"largest $e_k/B_k$ over λ, seeds, n and k: {worst_ratio:.3g}"
            + ("" if worst_ratio <= 1 else " (C and $δ_n$ are lower estimates of the constants the bound needs)")
            + f"; against $B_k$ with C and $δ_n$ both ×{ESTIMATE_FACTOR:g}: {loose:.3g}",
            bound_ratio_verdict(worst_ratio, loose),
            fig,
            sizes,
        )
    )
    ok = all(np.allclose(r["lam"], expected_ridges(r["C_pilot"], r["config"]["ratio"], eta), rtol=1e-6) for r in rows)
    lines.append(
        Claim(
            f"each ridge is $ρ·λ_c$, $λ_c = 2C$ of its seed's λ = 0 pilot (capped at {CAP:g}/η for ρ ≥ 1)",
            "recomputed from the rows' pilot constants",
            code_check(ok),
            "",
            sizes,
        )
    )
    return lines


def format_table(rows: list[dict], t: dict) -> str:
    """One line per λ; then a key."""
    cfg = rows[0]["config"]
    head = (
        f"{'λ/λ_c':>6s} {'λ':>8s} {'λ/2C,run':>8s} {'rate [95% CI]':>25s} {'late ×':>7s} {'FTLE':>8s} "
        f"{'bound':>8s} {'e_K/e_kc':>9s} {'max e/B':>8s}"
    )
    lines = [head]
    for v in t.values():
        r = v["rate"]
        lines.append(
            f"{v['ratio']:6g} {v['lambda']:8.3g} {v['lambda_over_2C_region']:8.2f} "
            f"{r['value']:+8.4f} [{r['ci_low']:+.4f}, {r['ci_high']:+.4f}] {v['late_growth']['value']:7.3g} "
            f"{v['ftle_rate']['value']:+8.4f} {v['bound_rate']['value']:+8.4f} {v['e_K_over_e_kc']['value']:9.3g} "
            f"{v['max_dev_over_bound']:8.3g}"
        )
    lines += [
        "",
        f"  rate      growth rate per step of the deviation (n = {cfg['ns'][-1]}) over the second half of the steps "
        f"before it passes {LINEAR:g} (the linear regime)",
        "  late ×    the deviation's last quarter over its second quarter (geometric means; about 1: bounded)",
        "  FTLE      the rate of log σ_max(J_k ⋯ J_0) over the same linear steps",
        "  bound     log(1 + η(C − λ)), C on the region visited at that λ; max e/B: largest e_k over the bound's B_k",
    ]
    return "\n".join(lines)


PART = Curvature()

__all__ = [
    "CODE_FAILED",
    "CODE_PASSED",
    "LINEAR",
    "PART",
    "Curvature",
    "claim_lines",
    "expected_ridges",
    "format_table",
    "late_growth",
    "table",
]
