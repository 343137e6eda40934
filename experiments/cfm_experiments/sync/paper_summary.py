"""The summary of part ``paper``: the kernel table, the measured decay against the theorem's bound, the
width check, their claim lines (the rules are in :mod:`.paper`'s docstring) and the printed tables."""

from __future__ import annotations

import numpy as np

from cfm_jax.stats import Interval, bootstrap

from ..protocol import Claim
from ..verdicts import HOLDS, NOT_MEASURED, NOT_OBSERVED, UNDECIDED, code_check
from ..verdicts.sync import coverage_verdict, miss_probability
from .common import interval_text


def log_mean_slope(ts):
    """The least-squares slope in t of log of the mean over realisations of ``energy (R, S)``, as a
    function of ``energy`` (the statistic every rate interval of the part resamples)."""
    tc = np.asarray(ts, np.float64) - np.mean(ts)

    def slope(energy) -> float:
        return float((np.log(np.maximum(np.asarray(energy).mean(0), 1e-300)) * tc).sum() / (tc**2).sum())

    return slope


def kernel_table(cells: list[dict]) -> list[dict]:
    """κ(1), κ'(1), λ₁, λ̄, λ̄' and Assumption 1 once per (activation, d, σ) with an MLP."""
    seen, table = set(), []
    for r in cells:
        c = r["config"]
        if c["act"] == "none" or (c["act"], c["d"], c["sigma"]) in seen:
            continue
        seen.add((c["act"], c["d"], c["sigma"]))
        keys = ("kappa1", "dkappa1", "lambda1", "lambda_bar", "lambda_bar_prime")
        table.append(
            {
                "act": c["act"],
                "d": c["d"],
                "sigma": c["sigma"],
                **{k: r[k] for k in keys},
                "assumption1": r["assumption1"],
            }
        )
    return table


def comparison(cells: list[dict], eps: dict) -> list[dict]:
    """Measured rate against the bound ε + λ̄' for every cell with an MLP (checks only where Assumption 1 holds)."""
    out = []
    for r in cells:
        c = r["config"]
        if c["act"] == "none":
            continue
        a1 = r["assumption1"]
        e = eps[(c["scale"], c["d"])]
        bound = e + r["lambda_bar_prime"]
        lo, hi = r["rate_ci"]
        below = np.asarray(r["log_ratio"], float) <= bound * np.asarray(r["t"], float) + 1e-12
        rec = {k: c[k] for k in ("act", "d", "sigma", "scale", "width")}
        rec.update(assumption1=a1, epsilon=e, lambda_bar_prime=r["lambda_bar_prime"], bound=bound)
        rec.update(rate=r["rate"], rate_ci=[lo, hi])
        rec["holds_pointwise"] = bool(np.all(below)) if a1 else None
        rec["rate_below_bound"] = bool(lo <= bound) if a1 else None  # the interval reaches under the bound
        rec["rate_ci_below_bound"] = bool(hi <= bound) if a1 else None  # the whole interval is under it
        rec["bound_over_rate"] = bound / r["rate"] if (a1 and r["rate"] != 0) else None
        out.append(rec)
    return out


def width_checks(cells: list[dict], width: int) -> list[dict]:
    """For each cell at a width other than ``width``, its rate, that of the same cell at ``width``
    and the interval of their difference, paired over realisations (the same starts)."""
    same = lambda c: (c["act"], c["d"], c["sigma"], c["scale"])  # noqa: E731
    main = {same(r["config"]): r for r in cells if r["config"]["width"] == width}
    out = []
    for r in cells:
        c = r["config"]
        ref = main.get(same(c))
        if c["width"] == width or ref is None:
            continue
        slope = log_mean_slope(r["t"])
        diff = bootstrap(lambda a, b: slope(a) - slope(b), r["energy"], ref["energy"], paired=True)
        out.append(
            {
                **{k: c[k] for k in ("act", "d", "sigma", "scale", "width")},
                "rate": r["rate"],
                "rate_ci": r["rate_ci"],
                "main_width": width,
                "main_rate": ref["rate"],
                "main_rate_ci": ref["rate_ci"],
                "difference": diff.as_dict(),
            }
        )
    return out


def bound_claim(comp: list[dict], width: int) -> Claim:
    cells = [c for c in comp if c["assumption1"] and c["width"] == width]
    pointwise = sum(c["holds_pointwise"] for c in cells)
    under = sum(c["rate_ci_below_bound"] for c in cells)
    above = sum(c["rate_ci"][0] > c["bound"] for c in cells)
    if not cells:
        verdict = NOT_MEASURED
    elif above:
        verdict = NOT_OBSERVED
    elif pointwise == under == len(cells):
        verdict = HOLDS
    else:  # no rate wholly above the bound, but some not wholly under it
        verdict = UNDECIDED
    ratios = [c["bound_over_rate"] for c in cells if c["bound_over_rate"] is not None and c["bound"] < 0]
    tight = f"; bound/rate {min(ratios):.2f}–{max(ratios):.2f} where the bound is negative" if ratios else ""
    return Claim(
        claim="theorem: E[E_β(μ_t)] ≤ exp((ε + λ̄')t) E[E_β(μ_0)] where Assumption 1 holds (ε: a lower estimate)",
        measured=f"{len(cells)} cells: under the bound at every saved layer in {pointwise}, rate's 95% CI under "
        f"ε + λ̄' in {under}, wholly above it in {above}{tight}",
        verdict=verdict,
        figure="paper_<act>.png",
        sizes=_grid_sizes(comp, width),
    )


def width_claim(checks: list[dict]) -> Claim:
    n = len(checks)
    misses = sum(not Interval.from_dict(c["difference"]).contains(0.0) for c in checks)
    below = sum(c["difference"]["ci_high"] < 0.0 for c in checks)  # the width's rate wholly below the main one's
    widths = sorted({c["width"] for c in checks} | {c["main_width"] for c in checks})
    diffs = ", ".join(
        f"{c['act']} m = {c['width']}: {interval_text(*(c['difference'][k] for k in ('value', 'ci_low', 'ci_high')))}"
        for c in checks
    )
    return Claim(
        claim="the energy's decay does not depend on the MLP width m (G's covariance is κ at every m)",
        measured=f"rate(m) − rate(main m) [95% CI, paired over runs]: {diffs}; {n - misses} of {n} contain 0"
        + (f", P(≥ {misses} misses | claim) = {miss_probability(misses, n):.2f}" if n else ""),
        verdict=coverage_verdict(below, misses - below, n) if n else NOT_MEASURED,
        figure="width_check.png",
        sizes=f"m ∈ {{{', '.join(map(str, widths))}}}; d = {checks[0]['d']}, σ = {checks[0]['sigma']:g}, "
        f"attention {checks[0]['scale']:+g}"
        if n
        else "",
    )


def relu_claim(table: list[dict]) -> Claim | None:
    """A code check: the ReLU rows of the kernel table against the paper's closed forms (None: no ReLU row)."""
    relu = [t for t in table if t["act"] == "relu"]
    if not relu:
        return None
    worst = 0.0
    for t in relu:
        d, s2 = t["d"], 3 * t["sigma"] ** 2
        worst = max(
            worst,
            abs(t["lambda1"] - (-1 / (2 * d) - s2 * (d - 1) / 4)),
            abs(t["lambda_bar"] - (1 / d - s2 * (d - 3) / 2)),
        )
    ok = worst <= 1e-12
    return Claim(
        claim="ReLU, σ_U = σ_W = σ: λ₁ = −1/(2d) − 3σ²(d−1)/4 and λ̄ = 1/d − 3σ²(d−3)/2 (the paper's closed forms)",
        measured=f"largest difference over {len(relu)} ReLU cells of the kernel table: {worst:.1e}",
        verdict=code_check(ok),
        sizes=", ".join(f"d = {t['d']}, σ = {t['sigma']:g}" for t in relu),
    )


def _grid_sizes(comp: list[dict], width: int) -> str:
    dims = sorted({c["d"] for c in comp})
    return f"d ∈ {{{', '.join(map(str, dims))}}}, m = {width}"


def kernel_lines(table: list[dict]) -> list[str]:
    lines = [
        "Kernel table (the paper's MLP, σ_U = σ_W = σ): κ(1), κ'(1), λ₁ = ½[(d−3)κ'(1) − (d−1)κ(1)],",
        "λ̄ = (d−1)κ'(1) − (d−3)κ(1) (Assumption 1: λ̄ < 0 and G not odd), energy rate λ̄' = −inf F",
        f"{'act':>8} {'d':>4} {'σ':>4} {'κ(1)':>9} {'κ′(1)':>9} {'λ₁':>9} {'λ̄':>9} {'λ̄′':>9} {'A1':>4}",
    ]
    for t in table:
        lines.append(
            f"{t['act']:>8} {t['d']:>4} {t['sigma']:>4g} {t['kappa1']:>9.5f} {t['dkappa1']:>9.5f} {t['lambda1']:>9.5f} "
            f"{t['lambda_bar']:>9.5f} {t['lambda_bar_prime']:>9.5f} {'yes' if t['assumption1'] else 'no':>4}"
        )
    return lines


def comparison_lines(comp: list[dict], width: int) -> list[str]:
    lines = [
        "Decay of E[E_β] (fitted rate over t ∈ [0, T], 95% bootstrap CI over realisations) vs the bound ε + λ̄'",
        "(cells where Assumption 1 holds; ε: largest observed (dE_β/dt)/E_β of the noiseless flow, a lower estimate;",
        f" 'pointwise': log(E[E_t]/E[E_0]) ≤ (ε + λ̄')t at every saved layer; m = {width})",
        f"{'act':>8} {'d':>4} {'σ':>4} {'attn':>5} {'ε':>8} {'λ̄′':>8} {'bound':>8} {'rate':>8} {'95% CI':>19} "
        f"{'pointwise':>9}",
    ]
    for c in comp:
        if c["assumption1"] and c["width"] == width:
            lo, hi = c["rate_ci"]
            lines.append(
                f"{c['act']:>8} {c['d']:>4} {c['sigma']:>4g} {c['scale']:>+5g} {c['epsilon']:>8.4f} "
                f"{c['lambda_bar_prime']:>8.4f} {c['bound']:>8.4f} {Interval(c['rate'], lo, hi):>8.4f} "
                f"{'under' if c['holds_pointwise'] else 'ABOVE':>9}"  # a table cell, not a verdict
            )
    return lines


def _rate(value: float, ci) -> str:
    return interval_text(value, ci[0], ci[1], 3)


def width_lines(checks: list[dict]) -> list[str]:
    lines = ["Width check: fitted rate of E[E_β] [95% CI] at each width"]
    for c in checks:
        lines.append(
            f"{c['act']:>8} d = {c['d']}, σ = {c['sigma']:g}, attention {c['scale']:+g}: "
            f"m = {c['width']}: {_rate(c['rate'], c['rate_ci'])}; m = {c['main_width']}: "
            f"{_rate(c['main_rate'], c['main_rate_ci'])}"
        )
    return lines


__all__ = [
    "bound_claim",
    "comparison",
    "comparison_lines",
    "kernel_lines",
    "kernel_table",
    "log_mean_slope",
    "relu_claim",
    "width_checks",
    "width_claim",
    "width_lines",
]
