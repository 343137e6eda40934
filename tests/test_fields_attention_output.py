"""One attention layer's output and its output law's moments: the exact Gaussian values against
sampled contexts (n^{-1/2}), the 1/√d scale against folding it by hand, the residual layer's update,
the weights, and the refusals."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax import AttentionField, EmpiricalMeasure, GaussianMeasure, attention_output, attention_output_moments
from cfm_jax.stats import fit_loglog

D, H = 3, 2


def _layer(qk=0.6):
    """Two heads, Q and K of entries N(0, qk²): ρ well below 1 at the context below (a light regime)."""
    kq, kk, kv = jax.random.split(jax.random.key(4), 3)
    draw = lambda k, s: s * jax.random.normal(k, (H, D, D), jnp.float64)  # noqa: E731
    return {"Q": draw(kq, qk), "K": draw(kk, qk), "V": draw(kv, 1 / math.sqrt(H * D))}


def _mu():
    A = jnp.array([[0.5, 0.1, 0.0], [0.0, 0.4, 0.2], [0.1, 0.0, 0.45]])
    return GaussianMeasure(jnp.array([0.2, -0.1, 0.1]), A @ A.T + 0.05 * jnp.eye(D))


def _x():
    return 0.6 * jax.random.normal(jax.random.key(3), (4, D), jnp.float64)


def _deviations(distance, ns, seeds=8):
    """``(len(ns), seeds)``: ``distance(points)`` at the first n of one sample of max(ns) points per seed."""
    mu, N = _mu(), max(ns)
    keys = jax.random.split(jax.random.key(11), seeds)
    z = jax.vmap(lambda k: mu.sample(k, N))(keys)
    return np.stack([np.asarray(jax.jit(jax.vmap(distance))(z[:, :n])) for n in ns])


NS = [500, 2000, 8000, 32000]


def test_the_exact_output_is_the_limit_of_sampled_contexts():
    """At N(m, Σ) the sampled layer's output approaches the exact c + Mx as n^{-1/2} (float64)."""
    params, mu, x = _layer(), _mu(), _x()
    exact = attention_output(params, x, mu)

    def rms(z):
        return jnp.sqrt(jnp.mean(jnp.sum((attention_output(params, x, z) - exact) ** 2, -1)))

    fit = fit_loglog(NS, _deviations(rms, NS))
    assert fit.contains(-0.5), fit
    assert -0.7 < fit.ci_low and fit.ci_high < -0.3, fit


@pytest.mark.slow  # a rate fitted over many sampled contexts
def test_the_exact_moments_are_the_limit_of_the_sampled_output_law():
    """The mean and covariance of the n output tokens approach (c + Mm, MΣMᵀ) as n^{-1/2}."""
    params, mu = _layer(), _mu()
    mean, cov = attention_output_moments(params, mu)

    def errors(z):
        m, c = attention_output_moments(params, z)
        return jnp.stack([jnp.linalg.norm(m - mean), jnp.linalg.norm(c - cov)])

    ns = [200, 800, 3200]  # n² per context: self-attention
    dev = _deviations(errors, ns, seeds=12)  # (K, seeds, 2)
    for j, name in enumerate(("mean", "cov")):
        fit = fit_loglog(ns, dev[..., j])
        assert fit.contains(-0.5), (name, fit)
        assert -0.7 < fit.ci_low and fit.ci_high < -0.3, (name, fit)


def test_the_gaussian_moments_are_the_affine_image_of_the_context():
    """(c + Mm, MΣMᵀ) by another route: the exact output's value at m and its Jacobian in x."""
    params, mu = _layer(), _mu()
    mean, cov = attention_output_moments(params, mu, scale=0.8)
    T = lambda x: attention_output(params, x, mu, scale=0.8)  # noqa: E731
    J = jax.jacfwd(T)(mu.mean)
    np.testing.assert_allclose(mean, T(mu.mean), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(cov, J @ mu.cov @ J.T, rtol=1e-12, atol=1e-14)


def test_the_default_scale_is_one_over_root_d_folded_by_hand():
    """scale=None is standard attention's 1/√d: equal to the library's field with Q/√d (scale=1), at
    both kinds of context; and a one-head (d, d) layer is the (1, d, d) one."""
    params, x, mu = _layer(), _x(), _mu()
    z = mu.sample(jax.random.key(5), 64)
    folded = dict(params, Q=params["Q"] / math.sqrt(D))
    by_hand = AttentionField()(x, EmpiricalMeasure(z), folded)
    np.testing.assert_allclose(attention_output(params, x, z), by_hand, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(attention_output(folded, x, z, scale=1.0), by_hand, rtol=1e-13, atol=1e-15)
    c, M = AttentionField().gaussian_affine(folded, mu.mean, mu.cov)
    np.testing.assert_allclose(attention_output(params, x, mu), c + x @ M.T, rtol=1e-13, atol=1e-15)
    # another scale: its factor on the logits, not on the output
    twice = dict(params, Q=2.0 * params["Q"])
    np.testing.assert_allclose(
        attention_output(params, x, z, scale=2.0), attention_output(twice, x, z, scale=1.0), rtol=1e-13
    )
    one = {k: v[0] for k, v in params.items()}
    np.testing.assert_allclose(
        attention_output(one, x, mu), attention_output({k: v[:1] for k, v in params.items()}, x, mu), rtol=1e-14
    )


@pytest.mark.parametrize("gaussian", [False, True], ids=["empirical", "gaussian"])
def test_the_output_is_the_residual_layers_update(gaussian):
    """forward through a one-layer Transformer with Q = Q/√d moves x by exactly the layer's output."""
    params, x, mu = _layer(), _x(), _mu()
    model = cfm_jax.Transformer(Q=params["Q"][None] / math.sqrt(D), K=params["K"][None], V=params["V"][None])
    if gaussian:
        moved, output = cfm_jax.forward(model, x, mu).x1 - x, attention_output(params, x, mu)
    else:
        z = EmpiricalMeasure(mu.sample(jax.random.key(6), 32))
        moved, output = cfm_jax.forward(model, x, z).x1 - x, attention_output(params, x, z)
    np.testing.assert_allclose(output, moved, rtol=1e-12, atol=1e-14)


def test_the_moments_weigh_the_tokens_by_the_context():
    """A weighted context's output law: splitting an atom (the same measure) changes nothing, and
    integer weights are the tokens repeated."""
    params = _layer()
    z = _mu().sample(jax.random.key(7), 6)
    w = jnp.array([1.0, 2.0, 1.0, 3.0, 1.0, 2.0]) / 10.0
    mu = EmpiricalMeasure(z, w)
    got = attention_output_moments(params, mu)
    for a, b in zip(got, attention_output_moments(params, cfm_jax.split_atom(mu, 3, 0.3))):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    repeated = jnp.repeat(z, jnp.array([1, 2, 1, 3, 1, 2]), axis=0, total_repeat_length=10)
    for a, b in zip(got, attention_output_moments(params, repeated)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def test_transformations_and_dtypes():
    params, x, mu = _layer(), _x(), _mu()
    z = np.asarray(mu.sample(jax.random.key(8), 16))  # NumPy points
    out = jax.jit(lambda p, c: attention_output(p, x, c))(params, z)
    np.testing.assert_allclose(out, attention_output(params, x, z), rtol=1e-13)
    rows = jax.vmap(lambda xi: attention_output(params, xi, mu))(x)
    np.testing.assert_allclose(rows, attention_output(params, x, mu), rtol=1e-13)
    g = jax.grad(lambda s: attention_output_moments(params, z, scale=s)[1].sum())(0.7)
    assert np.isfinite(g)
    f32 = jax.tree.map(lambda a: a.astype(jnp.float32), params)
    assert attention_output(f32, x.astype(jnp.float32), z.astype(np.float32)).dtype == jnp.float32


def test_bad_inputs_are_refused_naming_the_argument():
    params, x, mu = _layer(), _x(), _mu()
    with pytest.raises(ValueError, match="`params`"):
        attention_output({"Q": params["Q"], "K": params["K"]}, x, mu)
    with pytest.raises(ValueError, match="`params`"):
        attention_output(dict(params, V=params["V"][:, :2]), x, mu)
    with pytest.raises(ValueError, match="`x`"):
        attention_output(params, x[:, :2], mu)
    with pytest.raises(ValueError, match="`context`"):
        attention_output_moments(params, np.zeros((4, 2)))
    for bad in (True, np.ones(2), "a", 1j):
        with pytest.raises(ValueError, match="`scale`"):
            attention_output_moments(params, mu, scale=bad)  # pyright: ignore[reportArgumentType]
    for bad in (0.0, -1.0, float("nan")):  # a value: checked in the compiled program
        with pytest.raises(eqx.EquinoxRuntimeError, match="`scale` must be"):
            attention_output_moments(params, mu, scale=bad)
    with pytest.raises(eqx.EquinoxRuntimeError, match="`x`"):
        attention_output(params, x.at[0, 0].set(jnp.nan), mu)


def test_a_non_square_layer_is_refused_naming_params():
    """Q, K, V of shape (H, d, e) with e ≠ d, or of a shape other than Q's, are refused at trace time."""
    params, x, mu = _layer(), _x(), _mu()
    wide = {k: jnp.concatenate([a, a[:, :, :1]], axis=2) for k, a in params.items()}  # (H, 3, 4)
    tall = {k: a[:, :2] for k, a in params.items()}  # (H, 2, 3)
    for bad in (wide, tall, {k: a[0, :2] for k, a in params.items()}):
        with pytest.raises(ValueError, match=r'`params`: "Q" must have shape \(H, d, d\)'):
            attention_output(bad, x, mu)
        with pytest.raises(ValueError, match=r'`params`: "Q" must have shape \(H, d, d\)'):
            attention_output_moments(bad, mu)


@pytest.mark.parametrize("entry", ["Q", "K", "V"])
def test_a_nan_in_params_names_params(entry):
    """A NaN parameter names ``params`` and the entry (there is no ``model`` argument), eagerly and
    inside a caller's jit."""
    params, x, z = _layer(), _x(), np.asarray(_mu().sample(jax.random.key(8), 8))
    bad = dict(params, **{entry: params[entry].at[0, 1, 2].set(jnp.nan)})
    match = f'`params\\["{entry}"\\]` contains non-finite'
    with pytest.raises(eqx.EquinoxRuntimeError, match=match):
        attention_output(bad, x, z)
    with pytest.raises(eqx.EquinoxRuntimeError, match=match):
        attention_output_moments(bad, z)
    with pytest.raises(eqx.EquinoxRuntimeError, match=match):
        eqx.filter_jit(attention_output)(bad, x, z)


@pytest.mark.parametrize("bad", [float("nan"), 0.0, -0.5, float("inf")])
def test_a_traced_bad_scale_raises_instead_of_returning_nan(bad):
    """A traced scale (a caller's jit, vmap or grad) is checked like a concrete one: no all-NaN output."""
    params, x, z = _layer(), _x(), np.asarray(_mu().sample(jax.random.key(8), 8))
    match = "`scale` must be None"
    with pytest.raises(eqx.EquinoxRuntimeError, match=match):
        eqx.filter_jit(lambda s: attention_output(params, x, z, scale=s))(jnp.asarray(bad))
    with pytest.raises(Exception, match=match):  # a plain jax.jit reports it as JaxRuntimeError
        jax.jit(lambda s: attention_output(params, x, z, scale=s))(bad)
    with pytest.raises(eqx.EquinoxRuntimeError, match=match):
        eqx.filter_jit(jax.grad(lambda s: attention_output_moments(params, z, scale=s)[1].sum()))(jnp.asarray(bad))
    with pytest.raises(Exception, match=match):
        jax.vmap(lambda s: attention_output(params, x, z, scale=s))(jnp.array([0.5, bad]))
    good = jax.jit(lambda s: attention_output(params, x, z, scale=s))(0.5)
    np.testing.assert_allclose(good, attention_output(params, x, z, scale=0.5), rtol=1e-13)


def _numpy_moments(params, points, weights, scale):
    """The output law's mean and covariance, computed head by head in float64 NumPy."""
    Q, K, V = (np.asarray(params[k], np.float64) for k in ("Q", "K", "V"))
    z, w = np.asarray(points, np.float64), np.asarray(weights, np.float64)
    y = np.zeros_like(z)
    for h in range(Q.shape[0]):
        logits = scale * (z @ Q[h].T) @ (z @ K[h].T).T  # (n, n): ⟨Q z_i, K z_j⟩
        a = w * np.exp(logits - logits.max(axis=1, keepdims=True))
        a /= a.sum(axis=1, keepdims=True)
        y += (a @ z) @ V[h].T
    mean = w @ y
    cov = ((y - mean).T * w) @ (y - mean)
    return mean, cov


def test_the_empirical_moments_are_the_covariance_of_outputs_with_a_mean():
    """Outputs far from zero mean (a context centred at (3, −2, 1) and V near the identity): the
    covariance, not the second moment, against an independent NumPy computation, at uniform and
    non-uniform weights."""
    params = _layer()
    params = dict(params, V=params["V"] + jnp.eye(D) / H)
    z = jnp.array([3.0, -2.0, 1.0]) + 0.5 * jax.random.normal(jax.random.key(9), (7, D), jnp.float64)
    w = jnp.array([1.0, 2.0, 1.0, 3.0, 1.0, 2.0, 2.0]) / 12.0
    for context, weights in ((z, jnp.full(7, 1 / 7)), (EmpiricalMeasure(z, w), w)):
        mean, cov = attention_output_moments(params, context, scale=0.7)
        ref_mean, ref_cov = _numpy_moments(params, z, weights, 0.7)
        assert np.linalg.norm(ref_mean) > 1.0 and np.abs(ref_cov).max() < 0.5 * np.linalg.norm(ref_mean) ** 2
        np.testing.assert_allclose(mean, ref_mean, rtol=1e-12)
        np.testing.assert_allclose(cov, ref_cov, rtol=1e-10, atol=1e-13)
