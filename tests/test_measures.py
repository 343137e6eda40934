"""Context measures: validation at the boundary (eagerly and inside jit), pad_to and unchecked
construction, the Gaussian context and its samples."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax import EmpiricalMeasure, GaussianMeasure, split_atom


@pytest.mark.parametrize(
    "points,weights,match,error",
    [  # shapes are refused when traced (ValueError), values by the one value check (EquinoxRuntimeError)
        (np.zeros(3), None, "points", ValueError),
        (np.zeros((0, 2)), None, "points", ValueError),
        (np.array([[0.0, np.nan]]), None, "points", eqx.EquinoxRuntimeError),
        (np.zeros((3, 2)), np.array([0.5, 0.7, -0.2]), "weights", eqx.EquinoxRuntimeError),
        (np.zeros((3, 2)), np.array([0.5, 0.5, 0.5]), "weights", eqx.EquinoxRuntimeError),
        (np.zeros((3, 2)), np.array([0.5, 0.5]), "weights", ValueError),
        (np.zeros((2, 2)), np.array([0.5, np.inf]), "weights", eqx.EquinoxRuntimeError),
    ],
)
def test_measure_validation(points, weights, match, error):
    with pytest.raises(error, match=match):
        EmpiricalMeasure(points, weights)


def test_measure_inside_jit_skips_value_checks_but_works():
    f = jax.jit(lambda z: EmpiricalMeasure(z).mean)
    np.testing.assert_allclose(f(jnp.ones((4, 2))), jnp.ones(2))


def test_both_kinds_of_context_have_their_mean_as_an_attribute():
    """``measure.mean`` reads the same way for either kind (a metric written for one runs on the other):
    the barycentre Σ_j w_j z_j of the atoms, the Gaussian's m; a sample of the Gaussian agrees."""
    z, w = np.array([[1.0, 2.0], [3.0, -1.0], [0.0, 4.0]]), np.array([0.5, 0.25, 0.25])
    mu = EmpiricalMeasure(z, w)
    np.testing.assert_allclose(mu.mean, [0.5 * 1 + 0.25 * 3 + 0.25 * 0, 0.5 * 2 - 0.25 + 0.25 * 4], rtol=1e-15)
    gauss = GaussianMeasure(jnp.array([0.3, -0.7]), jnp.eye(2))
    sample = EmpiricalMeasure(gauss.sample(jax.random.key(0), 4096, qmc=True))
    for m in (mu, gauss, sample):
        assert m.mean.shape == (2,)
    np.testing.assert_allclose(sample.mean, gauss.mean, atol=0.02)


def test_pad_to_adds_zero_mass_atoms_and_unchecked_skips_validation():
    mu = EmpiricalMeasure(jnp.arange(6.0).reshape(3, 2), jnp.array([0.5, 0.25, 0.25]))
    padded = mu.pad_to(5)
    assert padded.size == 5 and float(padded.weights[3:].max()) == 0.0
    np.testing.assert_array_equal(padded.points[:3], mu.points)
    np.testing.assert_allclose(padded.mean, mu.mean)
    with pytest.raises(ValueError, match="`size`"):
        mu.pad_to(2)
    # one rule for the weights: zero-weight atoms are allowed everywhere (padding), negative ones never
    again = EmpiricalMeasure(padded.points, padded.weights)
    np.testing.assert_array_equal(again.weights, padded.weights)
    with pytest.raises(eqx.EquinoxRuntimeError, match="non-negative"):
        EmpiricalMeasure(padded.points, padded.weights.at[3].set(-0.1).at[0].add(0.1))
    raw = EmpiricalMeasure.unchecked(padded.points, padded.weights)
    np.testing.assert_array_equal(raw.weights, padded.weights)


@pytest.mark.parametrize(
    "index,fraction,match",
    [
        (4, 0.5, "index"),
        (-5, 0.5, "index"),
        (1.0, 0.5, "index"),
        (True, 0.5, "index"),
        (0, 0.0, "fraction"),
        (0, 1.0, "fraction"),
    ],
)
def test_split_atom_rejects_an_index_outside_the_measure(index, fraction, match):
    mu = EmpiricalMeasure(jnp.zeros((4, 2)))
    with pytest.raises(ValueError, match=match):
        split_atom(mu, index, fraction)


def test_split_atom_negative_index_splits_from_the_end():
    mu = EmpiricalMeasure(jnp.arange(8.0).reshape(4, 2))
    nu = split_atom(mu, -1, 0.25)
    np.testing.assert_array_equal(nu.points[-1], mu.points[-1])
    np.testing.assert_allclose(nu.weights[3] + nu.weights[4], mu.weights[3])


@pytest.mark.parametrize(
    "weights,ok",
    [
        ([0.5, 0.5, 0.0], True),
        ([0.5, 0.5, 0.5], False),
        ([0.5, 0.5 - 2e-5, 0.0], False),
        ([0.7, 0.5, -0.2], False),
        ([0.5, np.nan, 0.5], False),
    ],
)
def test_checked_applies_the_same_rule_inside_jit(weights, ok):
    """``checked`` (used by the public entry points) enforces the constructor's rule on traced values."""
    f = jax.jit(lambda w: EmpiricalMeasure.unchecked(jnp.zeros((3, 2)), w).checked().weights)
    if ok:
        np.testing.assert_array_equal(f(jnp.array(weights)), jnp.array(weights))
    else:
        with pytest.raises((eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError), match="`context` weights"):
            jax.block_until_ready(f(jnp.array(weights)))


def test_split_atom_keeps_the_measure():
    from cfm_jax import split_atom

    mu = EmpiricalMeasure(jax.random.normal(jax.random.key(0), (4, 3)))
    nu = split_atom(mu, 2, 0.3)
    assert nu.size == 5
    np.testing.assert_allclose(nu.mean, mu.mean, rtol=1e-14)
    np.testing.assert_allclose(nu.weights[2] + nu.weights[4], mu.weights[2], rtol=1e-14)


@pytest.mark.parametrize("weights", [[16.0, 16.0, 32.0], [0.5, -0.25, 0.75], [0.5, np.nan, 0.5]])
def test_the_weight_rule_says_the_same_eagerly_and_inside_jit(weights):
    """One rule, one message: a measure built from given weights and one checked inside compiled code
    (``forward`` under ``jax.jit``) refuse the same weights with the same text after the name of the
    argument, the advice included (inside jit it was "must sum to 1 (within 0.0001)" alone)."""
    points = np.zeros((3, 2))
    with pytest.raises(eqx.EquinoxRuntimeError) as eager:
        EmpiricalMeasure(points, weights)
    model = cfm_jax.Transformer.init(jax.random.key(0), 2, heads=1, mlp_width=0, layers=1, dtype=jnp.float64)
    run = jax.jit(lambda w: cfm_jax.forward(model, jnp.zeros((1, 2)), EmpiricalMeasure(points, w)).x1)
    with pytest.raises((eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError)) as traced:
        jax.block_until_ready(run(jnp.asarray(weights)))
    eager_text = str(eager.value).partition("EmpiricalMeasure: `weights` ")[2].splitlines()[0]
    traced_text = str(traced.value).partition("`context` weights ")[2].splitlines()[0]
    assert eager_text and eager_text == traced_text, (str(eager.value), str(traced.value))
    if sum(weights) == 64.0:
        assert "Normalise them, e.g. weights / weights.sum()." in traced_text


@pytest.mark.parametrize("excess", [2e-5, -2e-5])
def test_weight_sum_is_checked_on_both_sides(excess):
    """Weights summing just above and just below 1 (outside the 1e-5 tolerance) are refused; sums
    inside the tolerance on either side are accepted (an absolute-value check, not a one-sided one)."""
    points = np.zeros((4, 2))
    base = np.full(4, 0.25)
    with pytest.raises(eqx.EquinoxRuntimeError, match="sum to 1"):
        EmpiricalMeasure(points, base * (1 + excess))
    mu = EmpiricalMeasure(points, base * (1 + excess / 4))
    assert float(mu.weights.sum()) == pytest.approx(1 + excess / 4, abs=1e-12)


# the Gaussian context N(mean, cov)


def _mu():
    A = jnp.array([[0.5, 0.1, 0.0], [0.0, 0.4, 0.2], [0.1, 0.0, 0.45]])
    return GaussianMeasure(jnp.array([0.2, -0.1, 0.1]), A @ A.T + 0.05 * jnp.eye(3))


def test_sample_moments_iid_and_qmc():
    mu = _mu()
    for qmc in (False, True):
        z = mu.sample(jax.random.key(2), 1 << 14, qmc=qmc)
        assert z.shape == (1 << 14, 3)
        np.testing.assert_allclose(z.mean(0), mu.mean, atol=0.02)
        np.testing.assert_allclose(jnp.cov(z.T), mu.cov, atol=0.02)
    a = mu.sample(jax.random.key(2), 64, qmc=True)
    np.testing.assert_array_equal(a, mu.sample(jax.random.key(2), 64, qmc=True))
    assert not np.allclose(a, mu.sample(jax.random.key(3), 64, qmc=True))


@pytest.mark.parametrize(
    "mean, cov, match",
    [
        (jnp.zeros((2, 2)), jnp.eye(2), "`mean` must have shape"),
        (jnp.zeros(2), jnp.eye(3), "`cov` must have shape"),
        (jnp.array([0.0, jnp.nan]), jnp.eye(2), "`mean` contains non-finite"),
        (jnp.zeros(2), jnp.array([[1.0, 0.5], [0.0, 1.0]]), "`cov` must be symmetric"),
        (jnp.zeros(2), jnp.array([[1.0, 2.0], [2.0, 1.0]]), "`cov` must be positive definite"),
        (jnp.zeros(2), jnp.array([[1.0, jnp.inf], [jnp.inf, 1.0]]), "`cov` contains non-finite"),
    ],
)
def test_gaussian_measure_validation(mean, cov, match):
    error = ValueError if "shape" in match else eqx.EquinoxRuntimeError  # shapes when traced, values checked
    with pytest.raises(error, match=match):
        GaussianMeasure(mean, cov)


@pytest.mark.parametrize(
    "cov, match",
    [(jnp.array([[1.0, 2.0], [2.0, 1.0]]), "positive definite"), (jnp.array([[1.0, 0.5], [0.0, 1.0]]), "symmetric")],
)
def test_gaussian_measure_validation_under_jit(cov, match):
    f = jax.jit(lambda c: GaussianMeasure(jnp.zeros(2), c).cov.sum())
    assert np.isfinite(f(jnp.eye(2)))
    # a plain jax.jit raises the check's message as JAX's runtime error (a ValueError on some paths)
    with pytest.raises((eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError, ValueError), match=match):
        jax.block_until_ready(f(cov))


@pytest.mark.parametrize("cov", [[[1.0, 1.0], [1.0, 1.0]], [[1.0, 0.0], [0.0, 0.0]]], ids=["rank one", "zero variance"])
def test_singular_covariance_is_refused_eagerly_and_under_jit(cov):
    cov = jnp.array(cov)
    with pytest.raises(eqx.EquinoxRuntimeError, match="`cov` must be positive definite"):
        GaussianMeasure(jnp.zeros(2), cov)
    f = jax.jit(lambda c: GaussianMeasure(jnp.zeros(2), c).cov.sum())
    with pytest.raises((eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError), match="positive definite"):
        jax.block_until_ready(f(cov))
    assert np.isfinite(f(cov + 1e-3 * jnp.eye(2)))  # barely definite is fine


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_a_covariance_singular_up_to_round_off_is_refused(dtype):
    """The rule stated here: the smallest eigenvalue must exceed d ulp (d·eps) of the largest. With d = 2,
    diag(1, 1.5 eps) (zero variance up to round-off) is refused, diag(1, 3 eps) accepted, eagerly and
    under jit."""
    eps = float(jnp.finfo(dtype).eps)
    singular, definite = (jnp.diag(jnp.array([1.0, k * eps], dtype)) for k in (1.5, 3.0))
    with pytest.raises(eqx.EquinoxRuntimeError, match="`cov` must be positive definite"):
        GaussianMeasure(jnp.zeros(2, dtype), singular)
    assert GaussianMeasure(jnp.zeros(2, dtype), definite).cov.dtype == dtype
    f = jax.jit(lambda c: GaussianMeasure(jnp.zeros(2, dtype), c).cov.sum())
    with pytest.raises((eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError), match="positive definite"):
        jax.block_until_ready(f(singular))
    assert np.isfinite(f(definite))


def test_checked_gaussian_names_the_argument_and_passes_good_values():
    """GaussianMeasure.checked (what forward applies) enforces the constructor's rule on values that
    bypassed it, naming the argument; good values pass unchanged."""
    mu = _mu()
    f = jax.jit(lambda m: m.checked("mu").cov)
    np.testing.assert_array_equal(f(mu), mu.cov)
    broken = jax.tree.map(lambda a: a.at[0].set(jnp.inf) if a.ndim == 1 else a, mu)
    with pytest.raises((eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError), match="`mu`: `mean` contains non-finite"):
        jax.block_until_ready(jax.jit(lambda m: m.checked("mu").mean)(broken))
