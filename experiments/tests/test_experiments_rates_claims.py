"""cfm_experiments.rates.claims: the claim lines from fits and rows."""

import pytest
from _rates_rows import synthetic_rows

from cfm_experiments.rates import claims, fit_rates
from cfm_experiments.rates.claims import measured, sizes


def _fit(slope, lo, hi, *, band=(-0.5, -0.5), meaningful=True, dim=2, field="attention", quantity="token"):
    return dict(
        field=field,
        quantity=quantity,
        dim=dim,
        intrinsic_dim=dim,
        slope=slope,
        ci_low=lo,
        ci_high=hi,
        expected_band=list(band),
        meaningful=meaningful,
        ns=[16.0, 4096.0],
    )


def test_measured_names_every_fit_and_why_it_does_not_count():
    fits = [_fit(-0.5, -0.6, -0.4, dim=4), _fit(-0.3, -0.4, -0.2, dim=1), _fit(-0.2, -0.9, 0.3, dim=2)]
    fits.append(_fit(-0.1, -0.2, -0.05, dim=8, meaningful=False))
    text = measured(fits)
    assert text.split("; ") == [
        "d=4: -0.50 [-0.60, -0.40] vs -0.50",
        "d=1: -0.30 [-0.40, -0.20] vs -0.50 (outside)",
        "d=2: -0.20 [-0.90, +0.30] vs -0.50 (CI contains 0, not counted)",
        "d=8: -0.10 [-0.20, -0.05] vs -0.50 (floor-limited, not counted)",
    ]
    assert "vs -0.50…-0.36" in measured([_fit(-0.4, -0.5, -0.3, band=(-0.5, -0.36))])
    assert sizes(fits, seeds=8, layers=4) == "n = 16…4096; d = 1, 2, 4, 8; 8 seeds; L = 4"


def test_claim_lines_from_a_sweep():
    """The paper's exponents: every claim holds; attention's context made twice as steep: that line
    alone reads 'not observed'; the control field floor-limited: not measured."""
    lines = claims(fit_rates(synthetic_rows(), n_boot=300), seeds=8, layers=4, figure="rates.png")
    assert [c.verdict for c in lines] == ["holds"] * 6, [(c.claim, c.measured) for c in lines]
    assert "W1 between" in lines[4].claim and "control d=4" not in lines[4].measured  # no W1 at dʹ = 4
    assert all(c.figure == "rates.png" and "8 seeds" in c.sizes for c in lines)
    steep = claims(
        fit_rates(synthetic_rows({("attention", "context"): -1.0}), n_boot=300), seeds=8, layers=4, figure=""
    )
    assert [c.verdict for c in steep] == ["holds", "not observed at these sizes", "holds", "holds", "holds", "holds"]
    floored = claims(fit_rates(synthetic_rows(floor_ratio=1.0), n_boot=50), seeds=8, layers=4, figure="")
    unmeasured = "not measured: no usable rows"
    assert [c.verdict for c in floored] == [unmeasured, "holds"] + [unmeasured] * 4  # context: no floor


@pytest.mark.parametrize("quantity,claim", [("token", "the token deviation"), ("w1", "W1 between")])
def test_claims_cover_only_what_was_measured(quantity, claim):
    rows = [r for r in synthetic_rows() if r["config"]["field"] == "attention" and r["config"]["dim"] == 2]
    for r in rows:
        r["values"] = {quantity: r["values"][quantity]}
    lines = claims(fit_rates(rows, n_boot=50), seeds=8, layers=4, figure="")
    assert len(lines) == 1 and claim in lines[0].claim


def test_the_w1_claim_gathers_every_field():
    """W1 is one claim for attention and the control field alike; a control fit outside its band decides it."""
    attention = _fit(-0.5, -0.6, -0.4, quantity="w1", dim=1)
    control = _fit(-0.2, -0.3, -0.1, quantity="w1", field="control", dim=2, band=(-0.5, -0.36))
    (line,) = claims([attention, control], seeds=8, layers=4, figure="")
    assert line.measured.startswith("d=1: ") and "; control d=2: -0.20" in line.measured
    assert line.verdict == "not observed at these sizes"
