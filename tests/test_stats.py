"""Rate fits and mean intervals (cfm_jax.stats) against independent computations."""

import numpy as np
import pytest
from scipy import stats as sps

from cfm_jax.stats import fit_loglog, mean_ci


def test_fit_recovers_an_exact_power_law():
    ns = np.array([8.0, 32.0, 128.0, 512.0])
    fit = fit_loglog(ns, 3.0 * ns**-0.5)
    assert fit.slope == pytest.approx(-0.5, abs=1e-12)
    assert fit.prefactor == pytest.approx(3.0, rel=1e-12)
    assert np.isnan(fit.ci_low) and np.isnan(fit.ci_high)  # one "seed": no interval


def test_bootstrap_ci_matches_a_hand_bootstrap_and_covers_the_truth():
    """The CI equals a plain NumPy percentile bootstrap (same resampling scheme) to Monte Carlo error."""
    rng = np.random.default_rng(0)
    ns = np.array([16.0, 64.0, 256.0, 1024.0])
    y = ns[:, None] ** -0.5 * np.exp(0.2 * rng.normal(size=(4, 12)))
    fit = fit_loglog(ns, y, n_boot=4000)
    logy, lx = np.log(y), np.log(ns)
    idx = rng.integers(0, 12, size=(4000, 4, 12))
    means = np.take_along_axis(np.broadcast_to(logy, (4000, 4, 12)), idx, axis=2).mean(-1)
    slopes = np.polyfit(lx, means.T, 1)[0]
    lo, hi = np.quantile(slopes, [0.025, 0.975])
    width = hi - lo
    assert abs(fit.ci_low - lo) < 0.1 * width and abs(fit.ci_high - hi) < 0.1 * width
    assert fit.ci_low < fit.slope < fit.ci_high
    assert fit.contains(-0.5)


def test_fit_rejects_bad_shapes():
    with pytest.raises(ValueError, match="sizes"):
        fit_loglog([4.0], [[1.0, 2.0]])
    with pytest.raises(ValueError, match="sizes"):
        fit_loglog([4.0, 8.0], np.ones((3, 2)))


def test_mean_ci_is_the_student_t_half_width():
    s = np.array([1.0, 2.5, 0.5, 3.0, 2.0])
    mean, half = mean_ci(s, level=0.9)
    assert mean == pytest.approx(s.mean())
    assert half == pytest.approx(sps.t.ppf(0.95, 4) * s.std(ddof=1) / np.sqrt(5))
    assert np.isnan(mean_ci([1.0])[1])
    assert mean_ci([2.0, 2.0, 2.0]) == (2.0, 0.0)


def test_fit_and_interval_check_their_values():
    """Sizes must be > 0 and finite, deviations finite and >= 0 (a zero deviation is allowed: it is
    clamped to the smallest float), the level in (0, 1); both sides of each bound."""
    ns = [4.0, 8.0]
    fit_loglog(ns, [[1.0, 0.5], [0.5, 0.0]])
    fit_loglog([1e-300, 8.0], [[1.0], [0.5]])
    for x, y, name in (
        ([0.0, 8.0], [[1.0], [0.5]], "`x`"),
        ([-4.0, 8.0], [[1.0], [0.5]], "`x`"),
        ([np.inf, 8.0], [[1.0], [0.5]], "`x`"),
        (ns, [[1.0], [-1e-300]], "`y`"),
        (ns, [[1.0], [np.nan]], "`y`"),
        (ns, [[1.0], [np.inf]], "`y`"),
    ):
        with pytest.raises(ValueError, match=name):
            fit_loglog(x, y)
    mean_ci([1.0, 2.0], level=1e-9)
    mean_ci([1.0, 2.0], level=1 - 1e-9)
    for level in (0.0, 1.0, np.nan):
        with pytest.raises(ValueError, match="`level`"):
            mean_ci([1.0, 2.0], level=level)
        with pytest.raises(ValueError, match="`level`"):
            fit_loglog(ns, [[1.0], [0.5]], level=level)
    with pytest.raises(ValueError, match="`samples`"):
        mean_ci([])


def test_bootstrap_matches_a_hand_percentile_bootstrap():
    from cfm_jax.stats import bootstrap

    rng = np.random.default_rng(1)
    a = rng.normal(size=15)
    got = bootstrap(np.mean, a, n_boot=4000, seed=3)
    hand = np.quantile(a[rng.integers(0, 15, (4000, 15))].mean(axis=1), [0.025, 0.975])
    width = hand[1] - hand[0]
    assert got.value == pytest.approx(a.mean())
    assert abs(got.ci_low - hand[0]) < 0.1 * width and abs(got.ci_high - hand[1]) < 0.1 * width
    assert got.ci_low < got.value < got.ci_high


def test_bootstrap_draws_every_seed():
    """A sample whose last seed alone is nonzero: about 64 % of resamples draw it, so the upper end of
    the interval is positive and the lower one zero (a resampler that skips the last index gives 0, 0)."""
    from cfm_jax.stats import bootstrap

    x = np.r_[np.zeros(19), 1.0]
    ci = bootstrap(np.mean, x)
    assert ci.ci_low == 0.0 and ci.ci_high >= 0.1
    first = bootstrap(np.mean, x[::-1])  # and the first seed
    assert first.ci_high >= 0.1


def test_paired_bootstrap_draws_every_seed():
    """As above, with the shared indices of a paired bootstrap: only the last seed differs."""
    from cfm_jax.stats import bootstrap

    a, b = np.r_[np.zeros(19), 1.0], np.zeros(20)
    diff = lambda u, v: u.mean() - v.mean()  # noqa: E731
    ci = bootstrap(diff, a, b, paired=True)
    assert ci.ci_low == 0.0 and ci.ci_high >= 0.1
    assert bootstrap(diff, a[::-1], b, paired=True).ci_high >= 0.1  # and the first seed


def test_paired_bootstrap_resamples_the_seeds_together():
    from cfm_jax.stats import bootstrap

    rng = np.random.default_rng(2)
    b = rng.normal(size=12)
    a = b + 0.3
    diff = lambda u, v: u.mean() - v.mean()  # noqa: E731
    paired = bootstrap(diff, a, b, paired=True)
    assert paired.ci_low == pytest.approx(0.3) and paired.ci_high == pytest.approx(0.3)
    unpaired = bootstrap(diff, a, b)
    assert unpaired.ci_high - unpaired.ci_low > 0.3
    assert np.isnan(bootstrap(np.mean, [1.0]).ci_low)
    with pytest.raises(ValueError, match="paired samples need the same number"):
        bootstrap(diff, a, b[:5], paired=True)


def test_fit_polynomial_recovers_coefficients_and_covers_them():
    from cfm_jax.stats import fit_polynomial

    rng = np.random.default_rng(4)
    x = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    groups = [2.0 - 0.5 * xi + 0.1 * xi**2 + 0.05 * rng.normal(size=20) for xi in x]
    quad, lin, const = fit_polynomial(x, groups, deg=2)
    assert quad.contains(0.1) and lin.contains(-0.5) and const.contains(2.0)
    assert quad.ci_high - quad.ci_low < 0.1
    exact = fit_polynomial(x, [np.full(3, 1.0 + 2.0 * xi) for xi in x], deg=1)
    assert exact[0].value == pytest.approx(2.0) and exact[0].ci_low == pytest.approx(2.0)
    with pytest.raises(ValueError, match="one sample per x"):
        fit_polynomial(x, groups[:3])
