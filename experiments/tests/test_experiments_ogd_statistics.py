"""ogd.statistics: growth exponents, per-step rates and means over seeds on synthetic data with
known answers, and the intervals' coverage over few seeds."""

import numpy as np
import pytest

from cfm_experiments.ogd import statistics as V

rng = np.random.default_rng(0)


def test_growth_fits_recover_known_exponents():
    """Window maxima c_s·k^β: the log-log fit returns β per n, with a CI containing it."""
    k = np.linspace(10, 80, 8)
    betas = (0.0, 0.5, 1.0)
    w = k[None, :, None] ** np.asarray(betas)[None, None, :] * np.exp(0.01 * rng.standard_normal((6, 8, 3)))
    fits = V.growth_fits(k, w)
    for f, b in zip(fits, betas):
        assert f.slope == pytest.approx(b, abs=0.01) and f.ci_low < f.slope < f.ci_high


def test_geometric_mean_ci_and_mean_interval():
    r = np.exp(np.log(3.0) + 0.05 * rng.standard_normal(40))
    g = V.geometric_mean_ci(r)
    assert g.value == pytest.approx(3.0, rel=0.03) and g.ci_low < g.value < g.ci_high and g.contains(3.0)
    m = V.mean_interval(np.r_[rng.normal(2.0, 0.1, 30), np.nan])
    assert m.contains(2.0) and m.ci_high - m.ci_low < 0.2
    assert np.isnan(V.mean_interval([np.nan]).value)


def test_exponential_rates_window_is_inclusive_and_per_seed():
    k = np.arange(1, 61)
    devs = np.stack([np.exp(0.05 * k), np.exp(-0.02 * k + np.where(k > 30, 5.0, 0.0))])
    out = V.exponential_rates(devs, 5, [60, 30])  # seed 1 stops before its jump at k = 31
    np.testing.assert_allclose(out, [0.05, -0.02], atol=1e-12)
    assert np.isnan(V.exponential_rates(devs, 5, [6, 6])).all()  # fewer than 3 steps


@pytest.mark.parametrize("seeds", [2, 3])
def test_intervals_over_few_seeds_cover_at_their_level(seeds):
    """Over 400 independent runs of Gaussian seeds the 95 % intervals of the mean and of the geometric
    mean (of log-normal ratios) hold the true value 90–99 % of the time with two or three seeds (a
    percentile bootstrap there is about [min, max]: half the time with two)."""
    rng = np.random.default_rng(seeds)
    draws = rng.normal(1.0, 0.5, (400, seeds))
    means = [V.mean_interval(d) for d in draws]
    geos = [V.geometric_mean_ci(np.exp(d)) for d in draws]
    assert 0.90 <= np.mean([m.ci_low <= 1.0 <= m.ci_high for m in means]) <= 0.99
    assert 0.90 <= np.mean([g.ci_low <= np.e <= g.ci_high for g in geos]) <= 0.99


@pytest.mark.parametrize("seeds, method", [(7, "t"), (8, "bootstrap"), (9, "bootstrap")])
def test_the_interval_is_the_bootstrap_from_eight_seeds_on(seeds, method):
    """From MIN_BOOTSTRAP_SEEDS = 8 seeds the mean's interval is the percentile bootstrap of the mean (the
    same interval cfm_jax.stats.bootstrap gives), below it the Student-t interval; the boundary itself is
    the bootstrap's. The geometric mean follows the same rule on the logs."""
    from cfm_jax.stats import MIN_BOOTSTRAP_SEEDS, bootstrap, mean_ci

    assert MIN_BOOTSTRAP_SEEDS == 8
    values = np.random.default_rng(seeds).normal(1.0, 0.5, seeds)
    boot = bootstrap(lambda a: a.mean(), values)
    mean, half = mean_ci(values)
    expected = (boot.ci_low, boot.ci_high) if method == "bootstrap" else (mean - half, mean + half)
    other = (mean - half, mean + half) if method == "bootstrap" else (boot.ci_low, boot.ci_high)
    assert not np.allclose(expected, other)  # the two methods tell apart on these draws
    got = V.mean_interval(values)
    np.testing.assert_allclose((got.ci_low, got.ci_high), expected, rtol=1e-12)
    geo = V.geometric_mean_ci(np.exp(values))
    np.testing.assert_allclose((geo.ci_low, geo.ci_high), np.exp(expected), rtol=1e-12)
