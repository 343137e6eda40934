"""The summary of part `paper` on synthetic rows with known answers: the bound's pointwise check, the three
claim lines' verdict rules, the paired width comparison, and the printed tables."""

import math

import numpy as np
import pytest

from cfm_experiments.sync import paper_summary as ps

T = np.linspace(0.0, 5.0, 11)


def _cell(rate, *, width=256, act="sigmoid", a1=True, lbp=-0.3, scale=1.0, d=5, sigma=0.1, ci=0.05, energy=None):
    """A cell row whose mean energy decays exactly at ``rate`` (interval ± ``ci``)."""
    config = dict(kind="cell", act=act, d=d, sigma=sigma, scale=scale, width=width)
    row = {
        "config": config,
        "t": T,
        "rate": rate,
        "rate_ci": [rate - ci, rate + ci],
        "log_ratio": rate * T,
        "assumption1": a1,
        "kappa1": 0.27,
        "dkappa1": 0.011,
        "lambda1": -0.53,
        "lambda_bar": -0.5,
        "lambda_bar_prime": lbp,
    }
    if energy is not None:
        row["energy"] = energy
    return row


def test_pointwise_check_flags_a_decay_slower_than_the_bound():
    """log(E[E_t]/E[E_0]) ≤ (ε + λ̄')t at every saved layer: a decay at the bound's rate holds (round-off
    allowed), one at half of it fails after t = 0; cells without Assumption 1 are not checked."""
    eps = {(1.0, 5): -0.01}
    bound = -0.01 - 0.3
    (at,) = ps.comparison([_cell(bound)], eps)
    assert at["holds_pointwise"] and at["bound"] == pytest.approx(bound)
    (slow,) = ps.comparison([_cell(0.5 * bound)], eps)
    assert slow["holds_pointwise"] is False and slow["rate_below_bound"] is False and not slow["rate_ci_below_bound"]
    (free,) = ps.comparison([_cell(0.5 * bound, a1=False)], eps)
    assert free["holds_pointwise"] is None and free["bound_over_rate"] is None
    assert ps.comparison([_cell(-1.0, act="none")], eps) == []


@pytest.mark.parametrize(
    "rates,verdict",
    [
        ([-1.0, -2.0], "holds"),  # well under the bound -0.31 at every layer
        ([-1.0, -0.32], "undecided: interval straddles the boundary"),  # the second interval straddles the bound
        ([-1.0, -0.2], "not observed at these sizes"),  # the second wholly above it
    ],
)
def test_bound_claim_verdicts(rates, verdict):
    comp = ps.comparison([_cell(r, act=a) for r, a in zip(rates, ("relu", "tanh"))], {(1.0, 5): -0.01})
    line = ps.bound_claim(comp, 256)
    assert line.verdict == verdict and line.measured.startswith("2 cells")


def test_bound_claim_ignores_other_widths_and_cells_outside_assumption_one():
    comp = ps.comparison([_cell(-1.0), _cell(0.5, width=64), _cell(0.5, a1=False)], {(1.0, 5): 0.0})
    line = ps.bound_claim(comp, 256)
    assert line.verdict == "holds" and line.measured.startswith("1 cells")


def test_width_claim_compares_paired_rates():
    """The same realisations' curves at two widths: equal curves give a difference of exactly 0 (holds);
    a width whose every curve decays faster by 0.5 gives a difference interval at −0.5 (a miss), and
    two misses of two are refuted."""
    rng = np.random.default_rng(1)
    base = np.exp(rng.normal(0, 0.3, (16, 1)) - 1.0 * T + rng.normal(0, 0.05, (16, T.size)))
    same = [_cell(-1.0, energy=base), _cell(-1.0, width=64, energy=base.copy())]
    (check,) = ps.width_checks(same, 256)
    assert check["difference"]["value"] == 0.0 and check["difference"]["ci_low"] == 0.0
    assert ps.width_claim([check]).verdict == "holds"
    faster = base * np.exp(-0.5 * T)
    cells = [
        _cell(-1.0, energy=base),
        _cell(-1.5, width=64, energy=faster),
        _cell(-1.0, act="tanh", energy=base),
        _cell(-1.5, act="tanh", width=64, energy=faster),
    ]
    checks = ps.width_checks(cells, 256)
    assert [c["act"] for c in checks] == ["sigmoid", "tanh"]
    assert all(c["difference"]["value"] == pytest.approx(-0.5, abs=1e-12) for c in checks)
    line = ps.width_claim(checks)
    assert line.verdict == "refuted at these sizes" and "0 of 2 contain 0" in line.measured
    assert ps.width_claim([]).verdict == "not measured: no usable rows"


def test_width_claim_is_two_sided():
    """Twelve width comparisons, three of whose difference intervals miss 0: split between the sides they
    are what a true claim produces, all on one side (every other width decaying faster, or slower) not."""

    def checks(below, above):
        shifts = [-0.5] * below + [0.5] * above + [0.0] * (12 - below - above)
        return [
            {"act": "sigmoid", "d": 5, "sigma": 0.1, "scale": 1.0, "width": 64 + i, "main_width": 256,
             "difference": {"value": s, "ci_low": s - 0.1, "ci_high": s + 0.1, "level": 0.95}}
            for i, s in enumerate(shifts)
        ]  # fmt: skip

    assert ps.width_claim(checks(2, 1)).verdict == ps.width_claim(checks(1, 2)).verdict == "holds"
    assert ps.width_claim(checks(3, 0)).verdict == "refuted at these sizes"
    assert ps.width_claim(checks(0, 3)).verdict == "refuted at these sizes"


def test_relu_code_check_against_the_papers_closed_forms():
    d, s = 64, 0.1
    good = {"act": "relu", "d": d, "sigma": s, "lambda1": -1 / (2 * d) - 3 * s**2 * (d - 1) / 4}
    good["lambda_bar"] = 1 / d - 3 * s**2 * (d - 3) / 2
    passed, failed = ps.relu_claim([good]), ps.relu_claim([{**good, "lambda1": good["lambda1"] + 1e-9}])
    assert passed is not None and passed.verdict == "code check passed"
    assert failed is not None and failed.verdict == "code check failed"
    assert ps.relu_claim([{**good, "act": "tanh"}]) is None


def test_tables_and_kernel_rows():
    cells = [_cell(-1.0), _cell(2.0, scale=-1.0), _cell(-2.0, act="none")]
    table = ps.kernel_table(cells)
    assert len(table) == 1 and table[0]["act"] == "sigmoid" and table[0]["assumption1"]
    lines = ps.kernel_lines(table)
    assert lines[-1].split()[:3] == ["sigmoid", "5", "0.1"] and lines[-1].split()[-1] == "yes"
    comp = ps.comparison(cells, {(1.0, 5): 0.0, (-1.0, 5): 2.0})
    text = ps.comparison_lines(comp, 256)
    assert text[-1].split()[-1] == "ABOVE" and text[-2].split()[-1] == "under"  # repulsive: rate 2 > bound 1.7
    assert ps.width_lines([])[1:] == []
    assert math.isclose(ps.log_mean_slope(T)(np.exp(-0.7 * T)[None]), -0.7, rel_tol=1e-12)
