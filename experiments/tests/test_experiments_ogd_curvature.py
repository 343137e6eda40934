"""The curvature part's summary on synthetic rows with known rates: the statistics, the verdicts
that follow the data, the ridge rule's code check, and the options."""

import numpy as np
import pytest

from cfm_experiments.ogd import curvature as cv, saddle as sd
from cfm_experiments.protocol import resolve
from cfm_experiments.verdicts import DIFFERENT, HOLDS, NOT_MEASURED, NOT_OBSERVED, REFUTED, UNDECIDED, ogd as V

TINY = dict(curvature_ns=[64], curvature_ratios=[0.0, 4.0], curvature_steps=100, curvature_seeds=2, curvature_eta=0.5)
ETA = 0.5


def _synthetic_rows(rates_by_ratio, C=0.25, S=5, K=200, n=(16, 64), saturate=0.5, rule=2.0):
    """Rows whose deviations have known per-step rates r: 10⁻⁴·e^{rk} (r > 0, saturating at 0.5),
    flat (r = 0) or settling at 10⁻⁴/|r| (r < 0); FTLE log σ = r·k; ridges ρ·rule·C (rule 2: the
    paper's λ_c = 2C)."""
    rng = np.random.default_rng(0)
    k = np.arange(1, K + 1)
    rows = []
    for ratio, r in rates_by_ratio.items():
        Cs = C * np.exp(0.05 * rng.standard_normal(S))
        lam = np.minimum(ratio * rule * Cs, 0.9 / ETA) if ratio >= 1 else ratio * rule * Cs
        shape = np.exp(r * k) if r > 0 else np.ones(K) if r == 0 else -np.expm1(r * k) / -r  # grows / flat / settles
        dev = np.minimum(1e-4 * shape[None, :, None] * np.exp(0.05 * rng.standard_normal((S, K, len(n)))), saturate)
        delta = np.full((S, len(n)), 1e-4 / ETA)
        cfg = dict(ratio=ratio, ns=list(n), eta=ETA, steps=K, seeds=S, seed=0, **sd.FIXED)
        rows.append(
            {
                "config": cfg,
                "lam": lam.tolist(),
                "C_pilot": Cs.tolist(),
                "region_C": Cs.tolist(),
                "deviations": dev.tolist(),
                "log_growth": np.outer(np.ones(S), r * k).tolist(),
                "delta": delta.tolist(),
                "bound": sd.bound_trajectory(K, ETA, Cs, lam, delta).tolist(),
                "ref_norm_final": [1.0] * S,
            }
        )
    return rows


def _verdicts(rows):
    t = cv.table(rows)
    return t, [c.verdict for c in cv.claim_lines(rows, t)]


def test_summary_of_rows_with_known_rates():
    """λ = 0 grows at 0.7·log(1 + ηC), λ_c/4 at a small rate, the ridges above λ_c settle: every line
    holds, the measured rates are the planted ones, the ridge rule's code check passes."""
    b = np.log1p(ETA * 0.25)
    rows = _synthetic_rows({0.0: 0.7 * b, 0.25: 0.01, 1.0: -0.02, 4.0: -0.1})
    t, verdicts = _verdicts(rows)
    assert t["0"]["rate"]["ci_low"] <= 0.7 * b <= t["0"]["rate"]["ci_high"]
    assert t["0"]["ftle_rate"]["value"] == pytest.approx(0.7 * b)
    assert t["0"]["fitted_steps"][1] < 200  # stopped before saturation
    assert t["4"]["late_growth"]["value"] == pytest.approx(1.0, rel=0.05)
    assert t["0.25"]["late_growth"]["ci_low"] > 1
    assert verdicts[:3] == [HOLDS] * 3 and verdicts[-1] == "code check passed"
    assert cv.PART.summarize(rows, resolve((cv.PART,), quick=True, **TINY)).passed


def test_summary_verdicts_follow_the_data():
    b = np.log1p(ETA * 0.25)
    _, v = _verdicts(_synthetic_rows({0.0: -0.05, 0.25: -0.05, 1.0: 0.02}))
    assert v[:3] == [NOT_OBSERVED, NOT_OBSERVED, REFUTED]  # no growth below (a settling deviation), growth above
    _, v = _verdicts(_synthetic_rows({0.0: 1.5 * b, 1.0: -0.02}))
    assert v[0] == DIFFERENT  # exponential, faster than (1 + ηC)^k but within an estimated C's factor 2
    _, v = _verdicts(_synthetic_rows({0.0: 3 * b, 1.0: -0.02}))
    assert v[0] == REFUTED  # three times the bound's rate: beyond what a C low by 2 explains
    _, v = _verdicts(_synthetic_rows({0.0: 0.7 * b, 0.5: 0.0}, C=0.25))
    assert v[1] == NOT_MEASURED  # λ = C exactly: no row where the bound predicts growth


def test_a_ridge_rule_with_lambda_c_equal_to_C_fails_the_code_check():
    rows = _synthetic_rows({0.0: 0.01, 0.25: 0.005, 1.0: -0.02}, rule=1.0)
    _, v = _verdicts(rows)
    assert v[-1] == "code check failed"
    assert not cv.PART.summarize(rows, resolve((cv.PART,), quick=True, **TINY)).passed


def test_options_and_their_rules():
    with pytest.raises(ValueError, match="--curvature-ratios must start at 0 and increase"):
        resolve((cv.PART,), curvature_ratios=[0.5, 1.0])
    with pytest.raises(ValueError, match="--curvature-ratios must start at 0 and increase"):
        resolve((cv.PART,), curvature_ratios=[0.0, 2.0, 1.0])
    with pytest.raises(ValueError, match=r"--curvature-steps must be at least 4·k_c"):
        resolve((cv.PART,), curvature_eta=0.01, curvature_steps=300)
    with pytest.raises(ValueError, match="--curvature-seeds must be an integer >= 2"):
        resolve((cv.PART,), curvature_seeds=1)
    configs = cv.PART.configs(resolve((cv.PART,)))
    first = [c for c in configs if c["seed"] == configs[0]["seed"]]  # one of two independent draws
    assert [c["ratio"] for c in first] == [0.0, 0.25, 0.5, 1.0, 2.0, 4.0]  # ¼ … 4·λ_c around the pilot
    assert len(configs) == 2 * len(first)


def test_above_lambda_c_every_ridge_must_settle():
    """Above λ_c the line holds only when every ridge's late growth (last over second quarter) lies below 2:
    one growing ridge beside a settling one refutes it, one straddling 2 (e^{rK/2} = 2) withholds it. The
    table's λ/2C on the region is the ridge over twice the region's C: 1 for λ = λ_c there."""
    settle, straddle = -0.02, 2 * np.log(2.0) / 200
    t, v = _verdicts(_synthetic_rows({1.0: settle, 4.0: -0.1}))
    assert v[0] == HOLDS
    assert t["1"]["lambda_over_2C_region"] == pytest.approx(1.0, rel=1e-12)
    assert _verdicts(_synthetic_rows({1.0: settle, 4.0: 0.05}))[1][0] == REFUTED
    t, v = _verdicts(_synthetic_rows({1.0: settle, 4.0: straddle}))
    assert t["4"]["late_growth"]["ci_low"] < 2.0 < t["4"]["late_growth"]["ci_high"]
    assert v[0] == UNDECIDED


def test_the_bound_trajectory_line_refutes_what_no_estimate_explains():
    """e_k/B_k: under the bound holds; above it but under the bound with C and δ_n doubled, a different
    constant; above even that (the 10⁹ a point rule would call a different constant) refuted."""
    assert V.bound_ratio_verdict(0.9, 0.4) == HOLDS
    assert V.bound_ratio_verdict(1.36, 0.59) == DIFFERENT
    assert V.bound_ratio_verdict(1e9, 4e8) == REFUTED
    assert V.bound_ratio_verdict(float("nan"), 0.5) == V.bound_ratio_verdict(float("inf"), 2.0) == NOT_MEASURED
    # from rows: a deviation 10⁴ × the planted rows' on one ridge is refuted, and the table carries both ratios
    b = np.log1p(ETA * 0.25)
    rows = _synthetic_rows({0.0: 0.7 * b, 1.0: -0.02})
    t, v = _verdicts(rows)
    assert t["0"]["max_dev_over_loose_bound"] < t["0"]["max_dev_over_bound"]
    assert v[-2] in (HOLDS, DIFFERENT)
    rows[1]["deviations"] = (1e4 * np.asarray(rows[1]["deviations"])).tolist()
    assert _verdicts(rows)[1][-2] == REFUTED
