"""cfm_jax.stats: rate fits, bootstrap and mean intervals against independent computations, the
levels and coverages their intervals claim, and the argument checks of every public function."""

import json
import math

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats as sps

from cfm_jax.stats import MIN_BOOTSTRAP_SEEDS, Interval, RateFit, bootstrap, fit_loglog, fit_polynomial, mean_ci

NS = np.array([16.0, 32.0, 64.0, 128.0])


def _binomial_band(reps: int, level: float = 0.95) -> tuple[float, float]:
    """Two-sided 99.9 % band of an empirical coverage over ``reps`` replications of a ``level`` interval."""
    lo, hi = sps.binom.interval(0.999, reps, level)
    return lo / reps, hi / reps


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


def test_two_seeds_give_an_interval():
    """Two seeds, the options' minimum, give a finite interval around the slope."""
    y = np.stack([2.0 * NS**-0.5, 3.0 * NS**-0.6], axis=1)
    fit = fit_loglog(NS, y)
    assert np.isfinite([fit.ci_low, fit.ci_high]).all(), fit
    assert fit.ci_low < fit.slope < fit.ci_high


@pytest.mark.parametrize("seeds", [2, 3, 5])
def test_small_seed_slope_interval_covers_at_its_level(seeds):
    """log y = log C_s − n-slope·log n + noise, C_s a model's own constant (shared by its sizes): over
    1000 simulations the 95 % interval of a few-seed fit holds the true slope 95 % of the time (two-sided
    binomial band). The bootstrap resampling each size's seeds independently misses both ways here:
    too narrow with 2 seeds, too wide with 5 (a model's sizes are correlated)."""
    rng = np.random.default_rng(seeds)
    reps, truth = 1000, -0.5
    log_c = 0.5 * rng.standard_normal((reps, 1, seeds))
    logy = log_c + truth * np.log(NS)[:, None] + 0.3 * rng.standard_normal((reps, NS.size, seeds))
    covered = [fit_loglog(NS, np.exp(v)).contains(truth) for v in logy]
    lo, hi = _binomial_band(reps)
    assert lo <= np.mean(covered) <= hi, np.mean(covered)


@settings(max_examples=40, deadline=None)
@given(
    seeds=st.integers(2, 4),
    scale=st.floats(1e-3, 3.0),
    data=st.integers(0, 2**32 - 1),
)
def test_few_seeds_never_give_an_interval_narrower_than_their_data(seeds, scale, data):
    """With 2–4 seeds the interval holds every seed's own slope (t_{S−1}·sd/√S exceeds the largest
    deviation of S values from their mean, (S − 1)/√S·sd): a few seeds cannot look surer than they disagree."""
    rng = np.random.default_rng(data)
    y = np.exp(scale * rng.standard_normal((NS.size, seeds))) * NS[:, None] ** -0.5
    fit = fit_loglog(NS, y)
    own = np.polyfit(np.log(NS), np.log(y), 1)[0]
    assert fit.ci_low <= own.min() and own.max() <= fit.ci_high, (fit, own)


@settings(max_examples=30, deadline=None)
@given(
    sizes=st.lists(st.floats(1e-3, 1e6), min_size=2, max_size=5, unique=True),
    seeds=st.integers(1, MIN_BOOTSTRAP_SEEDS + 2),
    slope=st.floats(-2.0, 2.0),
    scale=st.floats(1e-2, 2.0),
    level=st.floats(0.5, 0.99),
    data=st.integers(0, 2**32 - 1),
)
def test_valid_fits_give_an_ordered_interval_around_the_slope(sizes, seeds, slope, scale, level, data):
    """Either path (t below MIN_BOOTSTRAP_SEEDS seeds, bootstrap from there): finite, lo <= slope <= hi;
    one seed: no interval."""
    x = np.asarray(sizes)
    if np.ptp(np.log(x)) < 1e-3:
        return  # sizes this close make the slope ill-conditioned, not the interval wrong
    rng = np.random.default_rng(data)
    y = x[:, None] ** slope * np.exp(scale * rng.standard_normal((x.size, seeds)))
    fit = fit_loglog(x, y, n_boot=200, level=level, seed=data % 1000)
    if seeds == 1:
        assert np.isnan(fit.ci_low) and np.isnan(fit.ci_high)
    else:
        assert np.isfinite([fit.ci_low, fit.ci_high]).all()
        assert fit.ci_low <= fit.slope <= fit.ci_high, fit


def test_fit_rejects_bad_shapes():
    with pytest.raises(ValueError, match="`x`.*distinct sizes"):
        fit_loglog([4.0], [[1.0, 2.0]])
    with pytest.raises(ValueError, match="`x`.*distinct sizes"):
        fit_loglog([4.0, 4.0], [[1.0, 2.0], [0.5, 1.0]])  # one distinct size: no slope
    with pytest.raises(ValueError, match="`x` must be one-dimensional"):
        fit_loglog([[4.0, 8.0]], [1.0, 0.5])
    with pytest.raises(ValueError, match="`y` must have shape"):
        fit_loglog([4.0, 8.0], np.ones((3, 2)))
    with pytest.raises(ValueError, match="`y` must have shape"):
        fit_loglog([4.0, 8.0], np.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="`y` has no seeds"):
        fit_loglog([4.0, 8.0], np.ones((2, 0)))


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
    rng = np.random.default_rng(1)
    a = rng.normal(size=15)
    got = bootstrap(np.mean, a, n_boot=4000, seed=3)
    hand = np.quantile(a[rng.integers(0, 15, (4000, 15))].mean(axis=1), [0.025, 0.975])
    width = hand[1] - hand[0]
    assert got.value == pytest.approx(a.mean())
    assert abs(got.ci_low - hand[0]) < 0.1 * width and abs(got.ci_high - hand[1]) < 0.1 * width
    assert got.ci_low < got.value < got.ci_high


@settings(max_examples=30, deadline=None)
@given(
    level=st.floats(0.5, 0.99),
    n_boot=st.integers(200, 800),
    seeds=st.integers(10, 30),
    paired=st.booleans(),
    data=st.integers(0, 2**32 - 1),
)
def test_bootstrap_interval_leaves_equal_tails_of_its_own_resamples(level, n_boot, seeds, paired, data):
    """The interval's ends are the (1 ∓ level)/2 quantiles of the very resampled values the statistic
    returned: ``np.percentile`` of them gives the same ends, and each tail holds (1 − level)/2 of them
    to one resample, the lower as the upper (the seeds are many enough for few ties)."""
    rng = np.random.default_rng(data)
    a, b = rng.standard_normal(seeds), rng.exponential(size=seeds)
    seen = []

    def statistic(u, v):
        seen.append(float(u.mean() - v.mean()))
        return seen[-1]

    ci = bootstrap(statistic, a, b, paired=paired, n_boot=n_boot, level=level, seed=data % 1000)
    reps = np.asarray(seen[1:])  # the first call is on the data
    assert reps.size == n_boot and ci.value == seen[0]
    tail = (1 - level) / 2
    np.testing.assert_allclose([ci.ci_low, ci.ci_high], np.percentile(reps, [100 * tail, 100 * (1 - tail)]))
    slack = 1.0 / n_boot + 1e-12  # (ties: at most the tail strictly beyond an end, at least up to it)
    assert (reps < ci.ci_low).mean() <= tail + slack and (reps <= ci.ci_low).mean() >= tail - slack
    assert (reps > ci.ci_high).mean() <= tail + slack and (reps >= ci.ci_high).mean() >= tail - slack
    assert ci.ci_low <= ci.value <= ci.ci_high


def test_bootstrap_draws_every_seed():
    """A sample whose last seed alone is nonzero: about 64 % of resamples draw it, so the upper end of
    the interval is positive and the lower one zero (a resampler that skips the last index gives 0, 0)."""
    x = np.r_[np.zeros(19), 1.0]
    ci = bootstrap(np.mean, x)
    assert ci.ci_low == 0.0 and ci.ci_high >= 0.1
    first = bootstrap(np.mean, x[::-1])  # and the first seed
    assert first.ci_high >= 0.1


def test_paired_bootstrap_draws_every_seed():
    """As above, with the shared indices of a paired bootstrap: only the last seed differs."""
    a, b = np.r_[np.zeros(19), 1.0], np.zeros(20)
    diff = lambda u, v: u.mean() - v.mean()  # noqa: E731
    ci = bootstrap(diff, a, b, paired=True)
    assert ci.ci_low == 0.0 and ci.ci_high >= 0.1
    assert bootstrap(diff, a[::-1], b, paired=True).ci_high >= 0.1  # and the first seed


def test_paired_bootstrap_resamples_the_seeds_together():
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
    rng = np.random.default_rng(4)
    x = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    groups = [2.0 - 0.5 * xi + 0.1 * xi**2 + 0.05 * rng.normal(size=20) for xi in x]
    quad, lin, const = fit_polynomial(x, groups, deg=2)
    assert quad.contains(0.1) and lin.contains(-0.5) and const.contains(2.0)
    assert quad.ci_high - quad.ci_low < 0.1
    exact = fit_polynomial(x, [np.full(3, 1.0 + 2.0 * xi) for xi in x], deg=1)
    assert exact[0].value == pytest.approx(2.0) and exact[0].ci_low == pytest.approx(2.0)
    with pytest.raises(ValueError, match="`samples` needs one sample per x"):
        fit_polynomial(x, groups[:3])


@settings(max_examples=20, deadline=None)
@given(
    deg=st.integers(0, 2),
    extra=st.integers(0, 2),
    seeds=st.integers(2, 6),
    data=st.integers(0, 2**32 - 1),
)
def test_valid_polynomial_fits_give_ordered_intervals(deg, extra, seeds, data):
    """Any degree with enough distinct abscissae: deg + 1 finite intervals, lo <= value <= hi up to round-off."""
    rng = np.random.default_rng(data)
    x = np.arange(deg + 1 + extra, dtype=float)
    coefs = fit_polynomial(x, [rng.standard_normal(seeds) for _ in x], deg, n_boot=100, seed=data % 1000)
    assert len(coefs) == deg + 1
    for c in coefs:
        tol = 1e-9 * (1 + abs(c.value))
        assert np.isfinite([c.ci_low, c.ci_high]).all() and c.ci_low - tol <= c.value <= c.ci_high + tol, c


# -- argument checks -------------------------------------------------------------------------------

_Y = np.exp(np.random.default_rng(5).standard_normal((3, 3)))
_X = [4.0, 8.0, 16.0]
_RESAMPLED = {
    "fit_loglog": lambda **kw: fit_loglog(_X, _Y, **kw),
    "bootstrap": lambda **kw: bootstrap(np.mean, [1.0, 2.0, 4.0], **kw),
    "fit_polynomial": lambda **kw: fit_polynomial(_X, list(_Y), 1, **kw),
}
_LEVELLED = {**_RESAMPLED, "mean_ci": lambda **kw: mean_ci([1.0, 2.0, 4.0], **kw)}


@settings(max_examples=40, deadline=None)
@given(
    fn=st.sampled_from(sorted(_RESAMPLED)),
    bad=st.one_of(
        st.tuples(st.just("n_boot"), st.integers(max_value=0), st.just(ValueError)),
        st.tuples(st.just("seed"), st.integers(max_value=-1), st.just(ValueError)),
        st.tuples(
            st.sampled_from(["n_boot", "seed"]),
            st.one_of(st.floats(allow_nan=True), st.none(), st.text(max_size=3), st.booleans()),
            st.just(TypeError),
        ),
    ),
)
def test_bad_resampling_counts_and_seeds_raise_naming_them(fn, bad):
    name, value, error = bad
    with pytest.raises(error, match=f"`{name}` must be a"):
        _RESAMPLED[fn](**{name: value})


@pytest.mark.parametrize("fn", sorted(_RESAMPLED))
def test_too_few_resamples_for_the_level_raise(fn):
    """A percentile interval needs a resample in each tail beyond it: n_boot >= 2 / (1 − level)."""
    _RESAMPLED[fn](n_boot=40)
    _RESAMPLED[fn](n_boot=200, level=0.99)
    for n_boot, level in ((39, 0.95), (199, 0.99), (1, 0.5)):
        with pytest.raises(ValueError, match="`n_boot` must be at least 2 / \\(1 - level\\)"):
            _RESAMPLED[fn](n_boot=n_boot, level=level)


@settings(max_examples=40, deadline=None)
@given(
    fn=st.sampled_from(sorted(_LEVELLED)),
    bad=st.one_of(
        st.tuples(
            st.one_of(st.floats(max_value=0.0), st.floats(min_value=1.0), st.just(float("nan"))),
            st.just(ValueError),
        ),
        st.tuples(st.one_of(st.none(), st.text(max_size=3), st.booleans(), st.just([0.9])), st.just(TypeError)),
    ),
)
def test_bad_levels_raise_naming_the_level(fn, bad):
    value, error = bad
    with pytest.raises(error, match="`level` must be a real number in \\(0, 1\\)"):
        _LEVELLED[fn](level=value)


@settings(max_examples=25, deadline=None)
@given(
    bad=st.one_of(
        st.tuples(st.integers(max_value=-1), st.just(ValueError)),
        st.tuples(
            st.one_of(st.floats().filter(lambda v: not float(v).is_integer()), st.none(), st.booleans()),
            st.just(TypeError),
        ),
    )
)
def test_bad_degrees_raise_naming_the_degree(bad):
    value, error = bad
    with pytest.raises(error, match="`deg` must be a non-negative integer"):
        fit_polynomial(_X, list(_Y), value)


@settings(max_examples=25, deadline=None)
@given(
    n_boot=st.integers(250, 400),  # >= 2 / (1 - level) up to level 0.99
    seed=st.integers(0, 2**63 - 1),
    level=st.floats(0.5, 0.99),  # a central interval this wide holds the value
    as_type=st.sampled_from(["python", "numpy", "jax"]),
)
def test_what_a_user_reasonably_passes_is_accepted(n_boot, seed, level, as_type):
    """Python, NumPy or JAX scalars for the counts, seed and level; lists, NumPy and JAX (float32)
    arrays for the data: every function runs and its interval is ordered."""
    if as_type == "numpy":
        n_boot, seed, level = np.int64(n_boot), np.uint64(seed), np.float32(level)
    elif as_type == "jax":
        n_boot, seed, level = jnp.int32(n_boot), seed % 2**31, jnp.float32(level)
    y32 = jnp.asarray(_Y, jnp.float32)
    for x, y in ((_X, _Y.tolist()), (jnp.asarray(_X), y32)):
        fit = fit_loglog(x, y, n_boot=n_boot, level=level, seed=seed)
        assert fit.ci_low <= fit.slope <= fit.ci_high
    boot = bootstrap(np.mean, y32[0], n_boot=n_boot, level=level, seed=seed)
    poly = fit_polynomial(np.asarray(_X), y32, np.int64(1), n_boot=n_boot, level=level, seed=seed)
    for iv in (boot, *poly):
        assert iv.ci_low <= iv.value + 1e-6 and iv.value - 1e-6 <= iv.ci_high
    assert np.isfinite(mean_ci(y32.ravel(), level=level)[1])


def test_bad_data_raise_naming_the_argument():
    with pytest.raises(TypeError, match="`x` must hold real numbers"):
        fit_loglog(["a", "b"], [1.0, 2.0])
    with pytest.raises(TypeError, match="`y` must hold real numbers"):
        fit_loglog([1.0, 2.0], [1.0 + 1j, 2.0])
    with pytest.raises(ValueError, match="`y` must be a rectangular array"):
        fit_loglog([1.0, 2.0], [[1.0, 2.0], [3.0]])
    with pytest.raises(TypeError, match="`statistic` must be callable"):
        bootstrap([1.0, 2.0])  # pyright: ignore[reportArgumentType]  (the mistake under test)
    with pytest.raises(ValueError, match="`samples`: give at least one array"):
        bootstrap(np.mean)
    with pytest.raises(ValueError, match="`samples\\[1\\]` has no seeds"):
        bootstrap(lambda a, b: a.mean(), [1.0], [])
    with pytest.raises(ValueError, match="`samples\\[0\\]` must have a leading axis"):
        bootstrap(np.mean, 3.0)
    with pytest.raises(TypeError, match="`samples\\[0\\]` must hold real numbers"):
        bootstrap(np.mean, ["a"])
    with pytest.raises(TypeError, match="`paired` must be a bool"):
        bootstrap(np.mean, [1.0, 2.0], paired="yes")  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="`statistic` must return a scalar"):
        bootstrap(lambda a: a, [1.0, 2.0])
    with pytest.raises(ValueError, match="`x` needs at least 3 distinct"):
        fit_polynomial([1.0, 2.0, 2.0], [[1.0], [2.0], [3.0]], 2)
    with pytest.raises(TypeError, match="`samples` must be a sequence"):
        fit_polynomial([1.0, 2.0], 3.0)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="`samples\\[1\\]` must hold at least one seed"):
        fit_polynomial([1.0, 2.0], [[1.0], []])
    with pytest.raises(ValueError, match="`samples\\[0\\]` must hold at least one seed, all finite"):
        fit_polynomial([1.0, 2.0], [[np.nan], [1.0]])
    with pytest.raises(ValueError, match="`samples\\[0\\]` must be one-dimensional"):
        fit_polynomial([1.0, 2.0], [np.ones((2, 2)), [1.0]])
    with pytest.raises(TypeError, match="`samples` must hold real numbers"):
        mean_ci(["a", "b"])


_reals = st.floats(allow_nan=True, allow_infinity=True, width=64)


@settings(deadline=None, max_examples=100)
@given(value=_reals, lo=_reals, hi=_reals, level=st.floats(0.01, 0.99))
def test_an_interval_read_back_from_its_json_row_is_itself(value, lo, hi, level):
    """``from_dict`` inverts ``as_dict`` through a JSON row, where NaN and ±inf are ``null``
    (read back as NaN); a row without ``level`` is at 0.95."""
    iv = Interval(value, lo, hi, level)
    row = json.loads(json.dumps({k: v if math.isfinite(v) else None for k, v in iv.as_dict().items()}))
    back = Interval.from_dict(row)
    want = [v if math.isfinite(v) else math.nan for v in (value, lo, hi)]
    np.testing.assert_array_equal([back.value, back.ci_low, back.ci_high], want)
    assert back.level == level
    del row["level"]
    assert Interval.from_dict(row).level == 0.95
    if all(map(math.isfinite, (value, lo, hi))):
        assert Interval.from_dict(iv.as_dict()) == iv
    fit = RateFit(value, 0.5, lo, hi)
    again = RateFit.from_dict(json.loads(json.dumps(fit.as_dict(), allow_nan=True)))
    np.testing.assert_array_equal([again.slope, again.intercept, again.ci_low, again.ci_high], [value, 0.5, lo, hi])


def test_a_stored_interval_with_a_bad_or_missing_number_names_the_key():
    """A row's interval whose number is not a real (a string, a bool) or is missing: a ValueError naming
    the key, not float()'s message."""
    good = {"value": 1.0, "ci_low": 0.5, "ci_high": 1.5}
    for key in good:
        for bad in ("n/a", True, [1.0]):
            with pytest.raises(ValueError, match=f"`{key}` must be a real number or null, got"):
                Interval.from_dict({**good, key: bad})
        with pytest.raises(ValueError, match=f"has no `{key}`"):
            Interval.from_dict({k: v for k, v in good.items() if k != key})
    with pytest.raises(ValueError, match="`slope` must be a real number or null"):
        RateFit.from_dict({"slope": "x", "intercept": 0.0, "ci_low": 0.0, "ci_high": 1.0})
    assert Interval.from_dict({**good, "ci_low": np.float32(0.5)}).ci_low == 0.5


@pytest.mark.parametrize(
    ("spec", "text"),
    [
        (".3g", "1.23 [1.1, 1.4]"),
        ("+.2f", "+1.23 [+1.10, +1.40]"),
        ("", "1.2345 [1.1, 1.4]"),
        ("7.2f", "   1.23 [   1.10,    1.40]"),
    ],
)
def test_an_interval_formats_each_number_with_the_spec(spec, text):
    assert f"{Interval(1.2345, 1.1, 1.4):{spec}}" == text
    assert format(RateFit(1.2345, -3.0, 1.1, 1.4), spec) == text  # the slope and its interval


@settings(deadline=None, max_examples=100)
@given(value=_reals, lo=_reals, hi=_reals, spec=st.sampled_from([".3g", "+.2f", ".4f", "+.3g", "5.2f", ""]))
def test_an_interval_is_written_as_its_numbers_are(value, lo, hi, spec):
    """Independently of how it is built: the text splits back into the three numbers, each written
    as ``format`` writes a float (``nan``, ``inf``, ``-inf`` included)."""
    text = format(Interval(value, lo, hi), spec)
    head, _, rest = text.partition(" [")
    low, _, high = rest.removesuffix("]").partition(", ")
    assert (head, low, high) == tuple(format(x, spec) for x in (value, lo, hi))
    assert text.endswith("]") and rest.count(", ") == 1


def test_nan_and_infinite_intervals_say_so():
    assert f"{Interval(math.nan, -math.inf, math.inf):.3g}" == "nan [-inf, inf]"
    assert f"{Interval(0.5, math.nan, math.nan):+.2f}" == "+0.50 [+nan, +nan]"
