"""verdicts.tails: the tail rule's thresholds as the claim gives them, and counterfactual models just past
each edge (the rest of each model at the limit)."""

import numpy as np
import pytest
from _tail_rows import decaying as _decaying, model as _model

from cfm_experiments.claims import tail_exponent as T
from cfm_experiments.verdicts import HOLDS, NOT_MEASURED, REFUTED, tails as TR


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
