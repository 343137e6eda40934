"""claims.supremum: the supremum's read-out (the winner by its training value, its paired gain and the
best trivial model), the search checks (a supremum that never improved on its start, judged by its
gain's interval, or that the best trivial model beats), a converged search that stays at its start,
the winner's slope read at its own sizes, and a slope with no logarithm (a mean of exactly 0)."""

import warnings

import numpy as np
from _suprema_rows import STARTS, row as _row

from cfm_experiments.claims import supremum as R


def test_supremum_reads_the_winner_its_gain_and_the_trivial_model():
    rng = np.random.default_rng(0)
    r = _row("d", 4, 1, "1", "concat", 2.0, rng)
    best = R.supremum(r)
    assert best["start"] == STARTS[0] and best["interval"].contains(2.0)
    assert best["gain"].contains(1.0) and best["trivial"].contains(0.6) and not best["problems"]
    assert R.random_mean(r).contains(0.2)
    r["train_best"] = [1.0, 5.0, 1.0, 1.0]  # the winner is the largest training value, not the held-out
    assert R.supremum(r)["start"] == STARTS[1]


def test_search_names_what_went_wrong():
    """Paired per-context values: a gain below MIN_GAIN of the start (or none) is *never improved on
    its start*; a supremum below the trivial model is *beaten by a trivial model*."""
    rng = np.random.default_rng(1)
    start = 1 + 0.1 * rng.standard_normal(32)
    assert not R.search(start + 0.5, start, 0.5 * start)["problems"]
    assert R.search(start * (1 + R.MIN_GAIN / 2), start, 0.5 * start)["problems"] == ["never improved on its start"]
    assert R.search(start, start, 0.5 * start)["problems"] == ["never improved on its start"]
    beaten = R.search(start + 0.5, start, start + 1.0)
    assert beaten["problems"] == ["beaten by a trivial model"] and beaten["margin"].contains(-0.5)


def test_a_gain_is_judged_by_its_interval_not_its_value():
    """A mean gain of 4 % of the start (above MIN_GAIN) whose paired interval reaches down to 0 is
    noise, not an improvement: the check reads the interval's lower edge."""
    rng = np.random.default_rng(3)
    start = 1 + 0.1 * rng.standard_normal(32)
    noise = rng.standard_normal(32)
    found = start + 0.04 + 0.2 * (noise - noise.mean()) / noise.std()
    out = R.search(found, start, 0.5 * start)
    assert out["gain"].value > R.MIN_GAIN * start.mean() and out["gain"].ci_low < R.MIN_GAIN * start.mean()
    assert out["problems"] == ["never improved on its start"]


def test_the_best_trivial_model_is_the_one_to_beat():
    """With two trivial starts, the margin is taken over the better one: a supremum between them is
    *beaten by a trivial model*, and the reported trivial value is the larger."""
    rng = np.random.default_rng(4)
    r = _row("d", 4, 1, "1", "concat", 2.0, rng, trivial=0.3)
    r["starts"] = [*STARTS[:3], "trivial · sphere"]
    held = np.asarray(r["held_out"])
    held[len(STARTS) + 3] = 1.5 * held[0]  # the second trivial start beats the winner
    r["held_out"] = held.tolist()
    s = R.supremum(r)
    assert s["trivial"].contains(3.0) and "beaten by a trivial model" in s["problems"], s["problems"]


def test_a_converged_search_that_stays_at_its_start_is_a_stationary_construction():
    """A converged ascent whose winner never left its start is the start's value (e.g. the aligned
    model on the corner law): not a problem; the same start without convergence is one."""
    rng = np.random.default_rng(5)
    s = R.supremum(_row("d", 4, 1, "1", "concat", 2.0, rng, start=1.0))
    assert s["stationary"] and not s["problems"]
    s = R.supremum(_row("d", 4, 1, "1", "concat", 2.0, rng, start=1.0, converged=False))
    assert not s["stationary"] and s["problems"] == ["never improved on its start", "search not converged"]


def test_the_ball_slope_is_read_at_its_own_sizes():
    """A row measured at more sizes than its slope's reads the slope at ``slope_ns`` only: a worst case
    flat in √n·dev from the ascent's n up (slope −1/2 there) whatever it does below."""
    rng = np.random.default_rng(7)
    r = _row("d", 4, 1, "1", "concat", 2.0, rng)
    ns = [32, 128, 512, 2048]
    level = np.array([0.5, 1.0, 1.0, 1.0]) * np.exp(0.05 * rng.standard_normal((32, 4)))
    r["worst_ns"], r["worst_case"] = ns, (2.0 * level).tolist()
    r["config"]["slope_ns"] = ns[1:]
    assert R.worst_slope(r).contains(-0.5) and not R.supremum(r)["problems"]
    r["config"]["slope_ns"] = ns
    assert not R.worst_slope(r).contains(-0.5)


def test_a_mean_of_zero_has_no_slope_and_no_warning():
    """Deviations exactly 0 at one size (a discrete law's shares equal to its weights): the point slope
    is undefined, the interval NaN (*not measured* by the rules), with no NumPy warning; zeros in a
    few contexts only leave the point defined and put the resamples' infinities in the interval."""
    ns = [128, 512, 2048]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        none = R.log_mean_slope(ns, [np.ones(8), np.zeros(8), np.ones(8)], paired=True)
        some = R.log_mean_slope(ns, [np.ones(8), np.r_[np.zeros(7), 1.0], np.ones(8)], paired=False)
    assert np.isnan([none.value, none.ci_low, none.ci_high]).all()
    assert np.isfinite(some.value) and not np.isfinite([some.ci_low, some.ci_high]).all()
    flat = R.log_mean_slope(ns, [np.full(8, 2.0)] * 3, paired=True)
    np.testing.assert_allclose([flat.value, flat.ci_low, flat.ci_high], 0.0, atol=1e-15)
