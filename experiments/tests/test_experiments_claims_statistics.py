"""claims.statistics on synthetic data with known answers (prefactors, ratios, growth laws, slopes,
quantiles, the affine tail form and the tail exponent)."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from cfm_experiments.claims import statistics as T


def test_prefactor_ratio_and_growth_on_a_known_law():
    """dev = C n^{-1/2} × lognormal noise: C's CI covers the truth, the ratio of two constants too, and a
    flat growth law's exponent interval contains 0 while a d^{1/2} law's contains 1/2."""
    rng = np.random.default_rng(1)
    ns = np.array([10, 100, 1000])
    a = 0.3 * ns**-0.5 * np.exp(0.3 * rng.standard_normal((64, 3)))
    b = 0.6 * ns**-0.5 * np.exp(0.3 * rng.standard_normal((64, 3)))
    pa = T.prefactor(ns, a)
    assert pa.ci_low <= 0.3 <= pa.ci_high and pa.ci_high < 0.4, pa
    q = T.ratio(ns, b, a)
    assert q.ci_low <= 2.0 <= q.ci_high and q.ci_low > 1.5, q
    xs = np.log([1.0, 2.0, 4.0, 8.0])
    flat = T.growth(xs, [np.log(0.3) + 0.1 * rng.standard_normal(64) for _ in xs])[0]
    assert flat.contains(0.0) and flat.ci_high - flat.ci_low < 0.2
    half = T.growth(xs, [np.log(0.3) + 0.5 * x + 0.1 * rng.standard_normal(64) for x in xs])[0]
    assert abs(half.value - 0.5) < 0.05 and half.ci_low > 0.4


NS = np.array([10.0, 100.0, 1000.0])


def _models(rng, C, seeds, reps=1, spread=0.3, noise=0.05):
    """``(reps, seeds, len(NS))`` deviations C·e^{a_s}·n^{-1/2}·e^{noise}: a model's own constant a_s ~
    N(0, spread²), shared by its sizes, dominates; the known typical constant is C = exp(E log prefactor)."""
    a = spread * rng.standard_normal((reps, seeds, 1))
    return C * np.exp(a + noise * rng.standard_normal((reps, seeds, NS.size))) * NS**-0.5


def test_prefactor_interval_covers_the_known_constant_at_its_level():
    """Over 400 simulated sweeps of 32 models the 95 % interval of C holds the known C as often as a
    percentile bootstrap of 32 seeds can: P(|t_31| <= z·√(31/32)) = 0.937, the nominal level less the
    bootstrap's small-sample deficit (two-sided binomial band). So it reflects the model-to-model
    spread, not the sizes' (an interval resampling the sizes of seed-averaged values is over ten
    times too narrow and seldom covers)."""
    rng = np.random.default_rng(7)
    reps, seeds, C = 400, 32, 0.3
    covered = [T.prefactor(NS, v, n_boot=500).contains(C) for v in _models(rng, C, seeds, reps)]
    z = sps.norm.ppf(0.975)
    expected = 2 * sps.t.cdf(z * np.sqrt((seeds - 1) / seeds), seeds - 1) - 1
    lo, hi = (q / reps for q in sps.binom.interval(0.999, reps, expected))
    assert lo <= np.mean(covered) <= hi, (np.mean(covered), expected)


def test_prefactor_and_ratio_widths_are_the_seed_to_seed_spread():
    """One sweep: log(high/low) of C is 2·z·sd/√S over the S per-model log prefactors, and that of a
    ratio of two sweeps the same over both, to within the bootstrap's (S − 1)/S and Monte Carlo error."""
    rng = np.random.default_rng(8)
    a, b = _models(rng, 0.3, 32)[0], _models(rng, 0.6, 24, spread=0.5)[0]
    la, lb = T.log_prefactors(NS, a), T.log_prefactors(NS, b)
    z = sps.norm.ppf(0.975)
    c, q = T.prefactor(NS, a, n_boot=2000), T.ratio(NS, b, a, n_boot=2000)
    want_c = 2 * z * la.std(ddof=1) / np.sqrt(la.size)
    want_q = 2 * z * np.sqrt(la.var(ddof=1) / la.size + lb.var(ddof=1) / lb.size)
    assert 0.8 < np.log(c.ci_high / c.ci_low) / want_c < 1.2, (c, want_c)
    assert 0.8 < np.log(q.ci_high / q.ci_low) / want_q < 1.2, (q, want_q)


def test_large_n_slope_reads_the_largest_sizes():
    """Deviations flat up to n = 100, then ∝ n^{-1/2}: the large-n slope (three largest n) contains −1/2,
    the whole-range slope does not; the same data listed in another order give the same large-n slope."""
    rng = np.random.default_rng(2)
    ns = np.array([10, 32, 100, 316, 1000, 3162])
    mean = np.where(ns <= 100, 0.1, 0.1 * (ns / 100.0) ** -0.5)
    values = mean * np.exp(0.05 * rng.standard_normal((32, ns.size)))
    large = T.large_n_slope(ns, values)
    assert large.contains(-0.5), large
    assert not T.slope_fit(ns, values).contains(-0.5)
    order = np.array([3, 0, 5, 1, 4, 2])
    assert T.large_n_slope(ns[order], values[:, order]).slope == pytest.approx(large.slope)


def test_local_slopes_of_a_known_law():
    """Seeds c·n^{-1/2}: every local slope of the mean is −1/2; a law with a kink at n = 100 (n^{-1/2}
    then n^{-1/4}) has local slopes −1/2, −1/4, −1/4."""
    ns = np.array([10.0, 100.0, 1000.0, 10000.0])
    np.testing.assert_allclose(T.local_slopes(ns, np.stack([c * ns**-0.5 for c in (1.0, 2.0, 3.0)])), -0.5)
    kink = np.where(ns <= 100, ns**-0.5, 100**-0.25 * ns**-0.25)
    np.testing.assert_allclose(T.local_slopes(ns, kink[None]), [-0.5, -0.25, -0.25])


def test_upper_quantile_is_the_order_statistic_no_fraction_above_delta():
    """q_δ of 1 … N: at most a fraction δ strictly above it, more than δ at or above it (off by one
    either way fails); the vectorised form agrees."""
    y = np.random.default_rng(3).permutation(np.arange(1, 10001, dtype=float))
    for delta in (1e-1, 1e-2, 1e-3, 1e-4, 0.37):
        q = T.upper_quantile(y, delta)
        assert (y > q).mean() <= delta < (y >= q).mean(), (delta, q)
    assert T.upper_quantile(y, 1e-4) == 9999.0 and T.upper_quantile(y, 1e-2) == 9900.0
    np.testing.assert_array_equal(T.upper_quantiles(y, (1e-1, 1e-4)), [9000.0, 9999.0])
    with pytest.raises(ValueError, match="0 < delta < 1"):
        T.upper_quantile(y, 1.0)


def test_tail_exponent_of_known_tails():
    """Rayleigh (q_δ = √(2 log(1/δ)) exactly): γ = ½; exponential (q_δ = log(1/δ)): γ = 1."""
    rng = np.random.default_rng(4)
    deltas = (1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4)
    e = rng.exponential(size=200_000)
    ray = T.tail_exponent(np.sqrt(2 * e), deltas, n_boot=100)
    assert ray.contains(0.5) and ray.ci_high < 0.6, ray
    exp = T.tail_exponent(e, deltas, n_boot=100)
    assert exp.contains(1.0) and exp.ci_low > 0.85, exp
    assert T.exponent_of([math.log(1 / d) ** 0.5 for d in deltas], deltas) == pytest.approx(0.5)


def test_tail_fits_on_known_laws():
    """Rayleigh deviations R/√n (q_δ√n = √(2 log(1/δ)): affine in t, a = 0, b = √2, slope −1/2) pass;
    exponential ones (q_δ = log(1/δ), quadratic in t) show a curvature CI excluding 0."""
    rng = np.random.default_rng(0)
    ns = np.array([10, 100, 1000])
    e = rng.exponential(size=(4000, 1))
    f = T.tail_fits(ns, np.sqrt(2 * e) / np.sqrt(ns), n_boot=300)
    assert all(lo <= 0 <= hi for lo, hi in zip(f["curvature"]["ci_low"], f["curvature"]["ci_high"])), f
    assert all(lo <= math.sqrt(2) <= hi for lo, hi in zip(f["coefficient"]["ci_low"], f["coefficient"]["ci_high"]))
    assert all(lo <= -0.5 <= hi for lo, hi in zip(f["slopes"]["ci_low"], f["slopes"]["ci_high"]))
    assert f["ordered"]
    g = T.tail_fits(ns, e / np.sqrt(ns), n_boot=300)
    assert all(lo > 0 for lo in g["curvature"]["ci_low"]), g
