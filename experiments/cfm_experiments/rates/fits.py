"""The rates of ``cfm-jax rates``: log-log fits over seeds, the floor flag, the expected exponents, the table.

Every interval comes from :mod:`cfm_jax.stats` (:func:`~cfm_jax.stats.fit_loglog`: percentile
bootstrap over seeds, or below 8 seeds the Student-t interval of the per-seed slopes;
:func:`~cfm_jax.stats.mean_ci`: Student-t over seeds).
"""

from __future__ import annotations

import math

import numpy as np

from cfm_jax.chaos import QUANTITIES, expected_slope, quantity_reference
from cfm_jax.stats import fit_loglog, mean_ci

from .grid import spec_from_config

#: short column names of the table, with their meaning (printed under it).
COLUMNS = {
    "slope": "fitted exponent of deviation ≈ C·n^slope (least squares on the seed-mean of log deviation)",
    "95% CI": "95 % interval of the slope over seeds (percentile bootstrap resampling seeds; below 8 seeds "
    "the Student-t interval of the per-seed slopes)",
    "expected": "the paper's exponent (−1/2 for attention, −1/dʹ for W1 and the control field)",
    "C": "fitted prefactor C",
    "floor/dev": "reference floor (two independent references) / mean deviation at the largest n",
    "n": "the context sizes the slope is fitted over (each quantity over its own, see the W1 policy)",
    "reference": "what n is compared with: gaussian (the exact Gaussian limit, floor 0; those rows' MLP is "
    "declared linear so that the limit is Gaussian), qmc (scrambled-Sobol points: n_ref of them, w1_size for W1), "
    "sample (i.i.d. n_ref points)",
}

#: the W1 / ∇φ policy, printed under the table of exact references (see ``sweep_configs``).
POLICY = (
    "  W1 is computed only where dʹ <= 3. dʹ = 1: at every n, exactly (Gaussian rows: the quantile formula "
    "against the limit's law N(m_s, Σ_s), floor 0; control rows: the sorted formula against n_ref QMC points). "
    "dʹ = 2: Sinkhorn (ε = 2 % of the cost scale) over its own n (reference of 512 QMC points >= 4n). "
    "∇φ has no closed form in the Gaussian limit: compared with a QMC reference of n_ref points for "
    "n <= grad_phi_max_n."
)

#: printed under every table.
W1_NOTE = (
    "W1 between measures is computed only where the intrinsic dimension dʹ <= 3: in higher d a CPU-size "
    "reference is too coarse (n_ref^(-1/d) is not << n^(-1/d)), and the control field's slope shows the "
    "curse of dimension instead (policy under the table)."
)


def expected_band(field: str, quantity: str, intrinsic_dim: int, ns) -> tuple[float, float]:
    """The exponents the paper's rate allows over the fitted sizes ``ns``: the exponent itself,
    except for W1 (and the control field, whose deviation is a W1) at dʹ = 2, where the rate is
    n^{-1/2} up to a log (E W1(μ_n, P) ~ √(log n / n)): from −1/2 to the least-squares slope of
    √(log n / n) over ``ns`` (−0.36 over 16…128)."""
    slope = expected_slope(field, quantity, intrinsic_dim)  # pyright: ignore[reportArgumentType]  (a field name)
    if intrinsic_dim == 2 and (quantity == "w1" or field == "control"):
        lx = np.log(np.asarray(ns, dtype=np.float64))
        logged = float(np.polyfit(lx, 0.5 * np.log(lx) - 0.5 * lx, 1)[0])
        return (min(slope, logged), max(slope, logged))
    return (slope, slope)


def fit_rates(rows: list[dict], *, floor_ratio: float = 0.5, n_boot: int = 1000) -> list[dict]:
    """Fitted log-log slopes with 95 % intervals over seeds (``fit_loglog``'s), per (field, population, d, quantity).

    The floor is the median over seeds of the deviation between two independent references,
    i.e. √2 × the reference's own error. A fit is flagged ``meaningful`` only where that error,
    floor/√2, is below ``floor_ratio`` times the mean deviation at the largest n; otherwise the
    slope reflects the proxy, not the rate.
    """
    fits = []
    for r in rows:
        cfg = r["config"]
        field, d = cfg["field"], cfg["dim"]
        dk = cfg.get("intrinsic_dim") or d
        spec = spec_from_config(cfg)
        for q in QUANTITIES:
            if q not in r["values"]:
                continue
            ns = np.asarray(spec.quantity_ns(q), dtype=np.float64)  # each quantity over its own sizes
            y = np.asarray(r["values"][q], dtype=np.float64).T  # (K, S)
            fit = fit_loglog(ns, y, n_boot=n_boot)
            floors = r.get("floor", {}).get(q)
            fl = float(np.median(np.asarray(floors, dtype=np.float64))) if floors is not None else float("nan")
            top = float(y[-1].mean())
            fits.append(
                dict(
                    field=field,
                    population=cfg["population"],
                    dim=d,
                    intrinsic_dim=dk,
                    quantity=q,
                    slope=fit.slope,
                    ci_low=fit.ci_low,
                    ci_high=fit.ci_high,
                    prefactor=fit.prefactor,
                    expected=expected_slope(field, q, dk),
                    expected_band=list(expected_band(field, q, dk, ns)),
                    floor=fl,
                    deviation_at_max_n=top,
                    meaningful=bool(not np.isfinite(fl) or fl / math.sqrt(2) < floor_ratio * top),
                    ns=ns.tolist(),
                    mean=y.mean(axis=1).tolist(),
                    ci_halfwidth=[mean_ci(v)[1] for v in y],
                    reference=quantity_reference(spec, q),
                )
            )
    return fits


def prefactors_vs_dim(fits: list[dict]) -> dict:
    """Dimension-free constants: the fitted prefactor of attention's token quantities vs d."""
    out: dict = {}
    for f in fits:
        if f["field"] == "attention" and f["population"] == "gaussian" and f["quantity"] != "w1":
            out.setdefault(f["quantity"], {})[f["dim"]] = f["prefactor"]
    return out


def _n_range(ns) -> str:
    return f"{int(ns[0])}–{int(ns[-1])}"


def format_table(fits: list[dict]) -> str:
    """Plain-text table (one line per fit) followed by the meaning of every column."""
    head = (
        f"{'quantity':9} {'field':9} {'population':17} {'d':>3} {'dʹ':>3} {'slope':>7} {'95% CI':>17} "
        f"{'expected':>8} {'C':>7} {'floor/dev':>9} {'n':>9} {'reference':>9}  note"
    )
    lines = [head, "-" * len(head)]
    for f in fits:
        floor = f["floor"] if f["floor"] is not None else float("nan")
        ratio = floor / f["deviation_at_max_n"] if np.isfinite(floor) else float("nan")
        note = "" if f["meaningful"] else "floor-limited: slope not meaningful"
        lines.append(
            f"{f['quantity']:9} {f['field']:9} {f['population']:17} {f['dim']:>3} {f['intrinsic_dim']:>3} "
            f"{f['slope']:>7.3f} [{f['ci_low']:>7.3f},{f['ci_high']:>7.3f}] {f['expected']:>8.3f} "
            f"{f['prefactor']:>7.3g} {(f'{ratio:9.2f}' if np.isfinite(ratio) else f'{chr(8212):>9}')} "
            f"{_n_range(f['ns']):>9} {f.get('reference', 'sample'):>9}  {note}"
        )
    lines.append("")
    lines += [f"  {k:9} {v}" for k, v in COLUMNS.items()]
    lines.append(
        "  floor-limited: the reference's own error (floor/√2) is not < 0.5 × the deviation at the "
        "largest n, so the slope reflects the reference, not the rate; '—': no floor for that quantity"
    )
    if any(f.get("reference") != "sample" for f in fits):
        lines.append(POLICY)
    return "\n".join(lines)


def format_prefactors(prefactors: dict) -> str:
    """The prefactor-vs-d lines of :func:`prefactors_vs_dim` ('' when there are none)."""
    if not prefactors:
        return ""
    lines = ["fitted prefactor C vs d (attention, Gaussian population; dimension-free if flat):"]
    for q, by_d in prefactors.items():
        lines.append(f"  {q:9} " + "  ".join(f"d={d}: {c:.3g}" for d, c in sorted(by_d.items())))
    return "\n".join(lines)


__all__ = [
    "COLUMNS",
    "POLICY",
    "W1_NOTE",
    "expected_band",
    "fit_rates",
    "format_prefactors",
    "format_table",
    "prefactors_vs_dim",
]
