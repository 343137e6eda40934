"""verdicts.tails: the tail rule's thresholds as the claim gives them, and counterfactual models just past
each edge (the rest of each model at the limit)."""

import numpy as np
import pytest
from _tail_rows import decaying as _decaying, model as _model

from cfm_experiments.claims import tail_exponent as T
from cfm_experiments.verdicts import HOLDS, NOT_MEASURED, NOT_TESTED, REFUTED, tails as TR


def test_the_decay_bound_follows_from_the_claim():
    """−½ plus the exponent of a relative correction 1 − 1/√n from n0 to n1: −0.389 from 16 to 64, nearer
    −½ over a wider span, no bound where the correction is not bounded."""
    assert TR.decay_bound(16, 64) == pytest.approx(-0.5 + np.log(0.875 / 0.75) / np.log(4))
    assert TR.decay_bound(16, 64) == pytest.approx(-0.389, abs=5e-4)
    assert -0.5 < TR.decay_bound(16, 1024) < TR.decay_bound(16, 64)
    assert TR.decay_bound(1, 64) == float("inf")
    assert TR.limit_band(64) == (0.875, 1.125)
    tol = TR.gamma_tolerance(64, T.TAIL_DELTAS)
    assert tol == pytest.approx(np.log(1.125 / 0.875) / np.log(4))


def test_a_median_decaying_like_n_to_the_minus_0_3_is_a_rate_failure():
    """The rule refutes n^{-0.3} (the −¼ it replaces let it pass), and n^{-0.31}."""
    assert TR.model_verdict(_decaying(-0.3)) == REFUTED
    assert TR.model_verdict(_decaying(-0.31)) == REFUTED
    assert TR.model_verdict(_decaying(-0.5)) == HOLDS


def test_counterfactuals_just_past_each_edge():
    """Each threshold of the rule with a model on either side of it, everything else at the limit."""
    edge = TR.decay_bound(16, 64)
    assert TR.model_verdict(_decaying(edge - 0.01)) == HOLDS
    assert TR.model_verdict(_decaying(edge + 0.01)) == REFUTED
    lo, hi = TR.limit_band(64)
    for e, verdict in ((hi - 0.01, HOLDS), (hi + 0.01, REFUTED), (lo + 0.01, HOLDS), (lo - 0.01, REFUTED)):
        assert TR.model_verdict(_model(ratio=(e, e - 0.005, e + 0.005))) == verdict, (e, verdict)
    bound = TR.gamma_bound(_model()["sizes"][-1], T.TAIL_DELTAS)  # ½ and the limit's 0.52, plus the tolerance
    assert TR.model_verdict(_model(gamma=bound + 0.04)) == REFUTED  # γ ± 0.03 wholly above
    assert TR.model_verdict(_model(gamma=bound - 0.02)) == HOLDS  # reaches the bound, excludes 1


def test_the_gamma_bound_is_the_larger_of_one_half_and_the_limits():
    """A limit whose own exponent is 0.75 (heavier than ½): a sample at 0.85 is that limit's tail; against
    ½ (the smaller of the two) it would be refuted."""
    row = _model(gamma=0.85, gamma_lin=0.75)
    last = row["sizes"][-1]
    assert TR.gamma_bound(last, T.TAIL_DELTAS) == pytest.approx(0.75 + TR.gamma_tolerance(64, T.TAIL_DELTAS))
    assert TR.gamma_verdict(last, T.TAIL_DELTAS) == HOLDS
    assert TR.model_verdict(row) == HOLDS
    assert TR.gamma_verdict(_model(gamma=0.85, gamma_lin=0.4)["sizes"][-1], T.TAIL_DELTAS) == REFUTED


def test_one_size_cannot_show_a_decay():
    row = _model()
    row["sizes"] = row["sizes"][1:]
    assert TR.model_verdict(row) == NOT_MEASURED


def test_decay_joins_the_medians_intervals_at_their_far_ends():
    sizes = _model(growth=2.0)["sizes"]
    d = TR.decay(sizes[::-1])  # in any order: from the smallest n to the largest
    assert d is not None
    assert d.value == pytest.approx(0.0, abs=1e-12)
    assert d.ci_low == pytest.approx(np.log(2 * 0.98 / 1.02) / np.log(4) - 0.5)
    assert d.ci_high == pytest.approx(np.log(2 * 1.02 / 0.98) / np.log(4) - 0.5)


def test_a_gamma_bound_exactly_at_the_alternative_is_not_tested():
    """A limit's γ whose bound (plus the tolerance) is exactly 1, the sub-exponential alternative: the
    bound cannot tell the tails apart (*not tested*), though γ lies below it; a hair below 1 it can."""
    tol = TR.gamma_tolerance(64, T.TAIL_DELTAS)
    last = _model(gamma=0.6, gamma_lin=1.0 - tol)["sizes"][-1]
    assert TR.gamma_bound(last, T.TAIL_DELTAS) == 1.0  # exactly (the test's premise)
    assert TR.gamma_verdict(last, T.TAIL_DELTAS) == NOT_TESTED
    below = _model(gamma=0.6, gamma_lin=1.0 - tol - 1e-6)["sizes"][-1]
    assert TR.gamma_verdict(below, T.TAIL_DELTAS) == HOLDS


def test_the_decay_check_is_two_sided_and_a_wider_span_refutes_a_slower_decay():
    """The band from 16 to 64 is [−0.576, −0.389]: a median decaying like n^{-1} (too fast) is refuted as
    n^{-0.3} is, −½ holds; n^{-0.4} passes from 16 to 64 and the span that refutes it starts past 64, the
    bound there equal to −0.4."""
    low, high = TR.decay_band(16, 64)
    assert low == pytest.approx(-0.5 + np.log(1.125 / 1.25) / np.log(4)) and high == TR.decay_bound(16, 64)
    assert TR.model_checks(_decaying(-1.0))["decay"] == REFUTED
    assert TR.model_checks(_decaying(low - 0.01))["decay"] == REFUTED
    assert TR.model_checks(_decaying(low + 0.01))["decay"] == HOLDS
    assert TR.model_checks(_decaying(-0.4))["decay"] == HOLDS
    span = TR.refuting_span(16, -0.4)
    assert span > 64 and TR.decay_bound(16, span) == pytest.approx(-0.4)
    assert TR.decay_bound(16, 1.01 * span) < -0.4 < TR.decay_bound(16, 0.99 * span)
    assert TR.refuting_span(16, -0.5) == float("inf")


def test_the_coefficient_is_a_stated_tolerance_and_the_data_show_their_own():
    """The rule's coefficient is the constant, whatever the rows; the coefficient the rows show is
    max |q_δ over the limit's − 1|·√n at the largest n (NaN when none is stored)."""
    row = _model(ratio=(1.05, 1.0, 1.1))
    assert TR.coefficient_seen(row) == pytest.approx(0.05 * 8)
    assert TR.correction(64) == TR.COEFFICIENT / 8
    row["sizes"][-1]["ratio"]["value"] = None
    assert np.isnan(TR.coefficient_seen(row))


def test_a_stored_row_with_null_fields_reads_not_measured():
    """Each field a model's checks read, set to null or removed: no exception, and the check that
    needs it does not hold."""
    needs = {"gamma": ["tail"], "gamma_lin": ["tail"], "median_ci": ["decay"], "ratio": ["limit"]}
    needs["n"] = ["tail", "decay", "limit"]
    for key, checks_needing in needs.items():
        for how in ("null", "removed"):
            row = _model()
            for s in row["sizes"]:
                if how == "null":
                    s[key] = None
                else:
                    del s[key]
            checks = TR.model_checks(row)
            assert all(checks[c] == NOT_MEASURED for c in checks_needing), (key, how, checks)
            assert TR.model_verdict(row) == NOT_MEASURED, (key, how, checks)
    row = _model()
    row["deltas"] = None
    assert TR.model_checks(row)["tail"] == NOT_MEASURED
