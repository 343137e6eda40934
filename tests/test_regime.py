"""cfm_jax._regime: the attention regime at a context law against Monte Carlo, an independent spectral
computation and invariances; the d = 6 default initialisation flagged, a small one not; the warning."""

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax import EmpiricalMeasure, GaussianMeasure, Transformer
from cfm_jax._regime import AttentionRegime, HeavyTailWarning, attention_regime, warn_if_heavy_tailed

D = 3


def _model(qk_scale=0.5, d=D, seed=0, layers=2, heads=2):
    return Transformer.init(jax.random.key(seed), d, heads=heads, layers=layers, qk_scale=qk_scale, dtype=jnp.float64)


def _gaussian(d=D, seed=1):
    g = jax.random.normal(jax.random.key(seed), (d, d), jnp.float64)
    cov = 0.5 * g @ g.T / d + 0.3 * jnp.eye(d)
    return GaussianMeasure(jnp.linspace(-1.0, 1.0, d), cov)


def _queries(b=3, d=D, seed=2):
    return jax.random.normal(jax.random.key(seed), (b, d), jnp.float64)


def _logits(model, x, z):
    """⟨Q_h x_b, K_h z_j⟩ written out in NumPy: (L, H, B, n), independent of the library's A_h = Q_hᵀK_h."""
    Q, K = np.asarray(model.Q), np.asarray(model.K)
    qx = np.einsum("lhed,bd->lhbe", Q, np.asarray(x))
    kz = np.einsum("lhed,nd->lhne", K, np.asarray(z))
    return np.einsum("lhbe,lhne->lhbn", qx, kz)


def test_gaussian_closed_forms_match_monte_carlo():
    """Logit variance aᵀΣa and ESS/n = e^{−aᵀΣa} (closed forms at N(m, Σ)) against Monte Carlo over
    N = 40000 draws with the logits written out from Q and K: within 5 standard errors (delta method
    for the ratio (E w)²/E w², used where aᵀΣa < 1.2: beyond, the lognormal w² is too skewed for it),
    the errors small enough that e^{−aᵀΣa/2} (a missing factor) would be far out."""
    model, mu, x = _model(1.0), _gaussian(), _queries()
    exact = attention_regime(model, mu, x)
    N = 40_000
    z = np.asarray(mu.sample(jax.random.key(3), N))
    ell = _logits(model, x, z)
    var = ell.var(-1)
    var_se = var * np.sqrt(2 / N)  # Gaussian logits: Var of the sample variance is 2σ⁴/N
    assert np.all(np.abs(var - np.asarray(exact.logit_variance)) < 5 * var_se)
    w = np.exp(ell - ell.max(-1, keepdims=True))
    m1, m2 = w.mean(-1), (w**2).mean(-1)
    ratio = m1**2 / m2
    # delta method: ∇f = (2 m1/m2, −m1²/m2²), Cov of (w, w²) over the draws
    g1, g2 = 2 * m1 / m2, -(m1**2) / m2**2
    c11, c22 = w.var(-1), (w**2).var(-1)
    c12 = ((w - m1[..., None]) * (w**2 - m2[..., None])).mean(-1)
    se = np.sqrt((g1**2 * c11 + 2 * g1 * g2 * c12 + g2**2 * c22) / N)
    s2, ess = np.asarray(exact.logit_variance), np.asarray(exact.ess_fraction)
    used = s2 < 1.2
    assert used.sum() >= 6 and np.sum(used & (s2 > 0.2)) >= 3, s2  # tested where it is not saturated
    assert np.all(np.abs(ratio - ess)[used] < 5 * se[used]), (ratio, ess, se)
    half = np.abs(np.exp(-0.5 * s2) - ratio)
    assert np.all(half[used & (s2 > 0.2)] > 8 * se[used & (s2 > 0.2)])  # a missing factor is caught


def test_empirical_context_is_the_plug_in_of_the_law():
    """For an EmpiricalMeasure the values are those of the law Σ_j π_j δ_{z_j}, written out in NumPy:
    weighted logit variance, (Σπw)²/Σπw² (= Kish's ESS/n of the softmax at uniform weights) and ρ
    of the weighted covariance. Duplicating a point equals doubling its weight."""
    model, x = _model(), _queries()
    z = jax.random.normal(jax.random.key(4), (6, D), jnp.float64)
    pi = jnp.array([0.1, 0.3, 0.2, 0.15, 0.15, 0.1])
    reg = attention_regime(model, EmpiricalMeasure(z, pi), x)
    ell = _logits(model, x, z)
    p = np.asarray(pi)
    mean = ell @ p
    np.testing.assert_allclose(reg.logit_variance, ((ell - mean[..., None]) ** 2) @ p, rtol=1e-10)
    w = np.exp(ell)
    np.testing.assert_allclose(reg.ess_fraction, (w @ p) ** 2 / ((w**2) @ p), rtol=1e-10)
    uniform = attention_regime(model, EmpiricalMeasure(z), x)
    alpha = np.asarray(jax.nn.softmax(jnp.asarray(ell), axis=-1))
    np.testing.assert_allclose(uniform.ess_fraction, 1 / (6 * (alpha**2).sum(-1)), rtol=1e-10)
    # the law, not the list of points: point 1 twice at weight 0.15 each equals it once at 0.3
    dup = EmpiricalMeasure(jnp.concatenate([z, z[1:2]]), jnp.concatenate([pi.at[1].set(0.15), jnp.array([0.15])]))
    for a, b in zip(jax.tree.leaves(attention_regime(model, dup, x)), jax.tree.leaves(reg)):
        np.testing.assert_allclose(a, b, rtol=1e-10)
    zc = np.asarray(z) - p @ np.asarray(z)
    cov = (zc * p[:, None]).T @ zc
    np.testing.assert_allclose(reg.rho, _rho_by_eigenvalues(model, cov), rtol=1e-9)


def _rho_by_eigenvalues(model, cov):
    """2‖Σ^½AΣ^½‖₂ = 2 λ_max(A Σ Aᵀ Σ)^½ (similar matrices), by NumPy's general eigensolver."""
    A = np.einsum("lhed,lhef->lhdf", np.asarray(model.Q), np.asarray(model.K))
    prod = A @ cov @ np.swapaxes(A, -1, -2) @ cov
    return 2 * np.sqrt(np.max(np.linalg.eigvals(prod).real, axis=-1))


def test_rho_is_the_second_moment_threshold_of_the_weights():
    """ρ ≥ 1 exactly when E e^{2 zᵀAz'} = ∞ (z, z' ∼ N(m, Σ) independent), i.e. when I − 4BBᵀ
    (B = Σ^½AΣ^½) stops being positive definite: ρ agrees with an eigenvalue computation that
    forms no square root, and scaling Q to put ρ at 1 ± 1e-6 puts the smallest eigenvalue of
    I − 4BBᵀ on either side of 0. In d = 1, ρ = 2|qk|σ²."""
    model, mu = _model(), _gaussian()
    reg = attention_regime(model, mu, _queries())
    cov = np.asarray(mu.cov)
    np.testing.assert_allclose(reg.rho, _rho_by_eigenvalues(model, cov), rtol=1e-9)
    np.testing.assert_allclose(reg.tail_index, 2 / np.asarray(reg.rho), rtol=1e-12)
    root = np.linalg.cholesky(cov)  # any factor LLᵀ = Σ: BBᵀ's spectrum is LᵀAΣAᵀL's
    for side in (1 - 1e-6, 1 + 1e-6):
        scaled = eqx.tree_at(lambda m: m.Q, model, model.Q * (side / float(reg.rho[0, 0])))  # ρ is linear in Q
        rho = float(attention_regime(scaled, mu, _queries()).rho[0, 0])
        assert rho == pytest.approx(side, rel=1e-12)
        A = np.asarray(scaled.Q[0, 0]).T @ np.asarray(scaled.K[0, 0])
        Bt = root.T @ A @ root
        smallest = np.linalg.eigvalsh(np.eye(D) - 4 * Bt @ Bt.T).min()
        assert (smallest > 0) == (side < 1), (side, smallest)
    one = Transformer(Q=jnp.full((1, 1, 1, 1), 0.7), K=jnp.full((1, 1, 1, 1), -1.3), V=jnp.ones((1, 1, 1, 1)))
    r1 = attention_regime(one, GaussianMeasure(jnp.array([5.0]), jnp.array([[0.4]])), jnp.ones((1, 1)))
    assert float(r1.rho[0, 0]) == pytest.approx(2 * 0.7 * 1.3 * 0.4, rel=1e-12)


def test_the_moment_threshold_behind_the_tail_index():
    """The derivation ρ rests on: for z, z' ∼ N(0, Σ) independent and B = Σ^½UΣ^½,
    E e^{t zᵀUz'} = det(I − t²BBᵀ)^{−1/2}, finite iff t‖B‖₂ < 1. Monte Carlo at t‖B‖₂ = 0.3 (where
    the estimate has finite variance) within 5 standard errors of the determinant."""
    rng = np.random.default_rng(0)
    cov = np.array([[1.0, 0.4], [0.4, 0.5]])
    U = np.array([[0.8, -0.3], [0.5, 0.2]])
    lam, V = np.linalg.eigh(cov)
    root = (V * np.sqrt(lam)) @ V.T
    B = root @ U @ root
    t = 0.3 / np.linalg.norm(B, 2)
    L = np.linalg.cholesky(cov)
    z, zp = rng.normal(size=(200_000, 2)) @ L.T, rng.normal(size=(200_000, 2)) @ L.T
    w = np.exp(t * np.einsum("nd,de,ne->n", z, U, zp))
    exact = np.linalg.det(np.eye(2) - t**2 * B @ B.T) ** -0.5
    assert abs(w.mean() - exact) < 5 * w.std() / np.sqrt(len(w))


def test_invariances():
    """Every output is unchanged by a change of basis P of the tokens that keeps the logits (context
    N(Pm, PΣPᵀ), queries Px, Q P⁻¹, K P⁻¹; Σ in place of Σ^½ in ρ breaks this) and by moving the
    context's mean; scaling Q by c scales the logit variance by c² and ρ by |c|."""
    model, mu, x = _model(), _gaussian(), _queries()
    ref = attention_regime(model, mu, x)
    P = jnp.array([[2.0, 0.3, 0.0], [0.0, 0.5, -0.4], [0.1, 0.0, 1.5]])
    Pinv = jnp.linalg.inv(P)
    moved = Transformer(Q=model.Q @ Pinv, K=model.K @ Pinv, V=model.V)
    reg = attention_regime(moved, GaussianMeasure(P @ mu.mean, P @ mu.cov @ P.T), x @ P.T)
    for a, b in zip(jax.tree.leaves(reg), jax.tree.leaves(ref)):
        np.testing.assert_allclose(a, b, rtol=1e-9)
    shifted = attention_regime(model, GaussianMeasure(mu.mean + 7.0, mu.cov), x)
    for a, b in zip(jax.tree.leaves(shifted), jax.tree.leaves(ref)):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    scaled = attention_regime(eqx.tree_at(lambda m: m.Q, model, -3 * model.Q), mu, x)
    np.testing.assert_allclose(scaled.logit_variance, 9 * ref.logit_variance, rtol=1e-12)
    np.testing.assert_allclose(scaled.rho, 3 * ref.rho, rtol=1e-12)


def test_attention_beside_a_linear_mlp():
    """A transformer with a linear MLP (its field a GaussianSumField, the exact limit's case) has the
    regime of its attention alone: the MLP does not enter the logits."""
    with_mlp = Transformer.init(
        jax.random.key(0), D, heads=2, layers=2, mlp_width=4, activation=jax.nn.identity, dtype=jnp.float64
    )
    assert isinstance(with_mlp.field, cfm_jax.GaussianSumField)
    alone = Transformer(Q=with_mlp.Q, K=with_mlp.K, V=with_mlp.V)
    mu, x = _gaussian(), _queries()
    for a, b in zip(
        jax.tree.leaves(attention_regime(with_mlp, mu, x)), jax.tree.leaves(attention_regime(alone, mu, x))
    ):
        np.testing.assert_array_equal(a, b)


def test_default_initialisation_in_d6_is_heavy_tailed_and_a_small_one_is_not():
    """The flat sampled deviations of the Gaussian limit: d = 6, unit-variance tokens, default
    initialisation. Every head has ρ > 1 and at ‖x‖ = 4 the median ESS/n is below e^{−9}; with
    qk_scale = 0.3 (ρ ∝ qk_scale²) every ρ is below 1/2 and ESS/n above e^{−2}."""
    d = 6
    mu = GaussianMeasure(jnp.zeros(d), jnp.eye(d))
    x = jax.random.normal(jax.random.key(5), (16, d), jnp.float64)
    x = 4 * x / jnp.linalg.norm(x, axis=-1, keepdims=True)
    heavy = attention_regime(_model(1.0, d, layers=4, heads=1), mu, x)
    assert bool(heavy.heavy_tailed) and float(heavy.rho.min()) > 1
    assert float(jnp.median(heavy.ess_fraction)) < np.exp(-9)
    light = attention_regime(_model(0.3, d, layers=4, heads=1), mu, x)
    assert not bool(light.heavy_tailed) and float(light.rho.max()) < 0.5
    assert float(light.ess_fraction.min()) > np.exp(-2)


def test_warns_once_with_what_to_do(monkeypatch):
    """The warning names the remedies and is shown once per process; the verdict is returned each time.
    A light regime passes at a large n and is flagged when n·ESS/n falls below the threshold."""
    import cfm_jax._regime as regime_module

    monkeypatch.setattr(regime_module, "_WARNED", False)
    d = 6
    mu = GaussianMeasure(jnp.zeros(d), jnp.eye(d))
    x = jax.random.normal(jax.random.key(5), (4, d), jnp.float64)
    light = attention_regime(_model(0.3, d, layers=2, heads=1), mu, x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_if_heavy_tailed(light) is False
        assert warn_if_heavy_tailed(light, 10_000) is False
    heavy = attention_regime(_model(1.0, d, layers=2, heads=1), mu, x)
    with pytest.warns(HeavyTailWarning) as record:
        assert warn_if_heavy_tailed(heavy, 2000) is True
    message = str(record[0].message)
    for phrase in ("Scale Q and K down", "more points", "ρ = 2‖Σ^½ QᵀK Σ^½‖", "of n = 2000 points"):
        assert phrase in message, message
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # shown once: a second flagged regime is silent
        assert warn_if_heavy_tailed(heavy) is True
        assert warn_if_heavy_tailed(light, 1, min_effective_size=2.0) is True
    monkeypatch.setattr(regime_module, "_WARNED", False)
    with pytest.warns(HeavyTailWarning, match="effective sample size"):
        warn_if_heavy_tailed(light, 1, min_effective_size=2.0)
    for bad, match in ((dict(n=0), "`n`"), (dict(n=2.5), "`n`"), (dict(min_effective_size=0.0), "min_effective_size")):
        with pytest.raises(ValueError, match=match):
            warn_if_heavy_tailed(light, **bad)  # pyright: ignore[reportArgumentType]  # bad on purpose
    with pytest.raises(ValueError, match="`regime`"):
        warn_if_heavy_tailed(light.rho)  # pyright: ignore[reportArgumentType]  # bad on purpose


def test_checks_under_jit_and_bad_arguments():
    """Non-finite queries or an invalid empirical context are refused by name inside the compiled
    program (eagerly and under jax.jit); shapes, a model without attention and a context of another
    dimension by a ValueError."""
    model, mu, x = _model(), _gaussian(), _queries()
    errors = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError, ValueError)
    z = jax.random.normal(jax.random.key(4), (5, D), jnp.float64)
    f = jax.jit(lambda q, z, w: attention_regime(model, EmpiricalMeasure.unchecked(z, w), q))
    w = jnp.full((5,), 0.2)
    assert isinstance(f(x, z, w), AttentionRegime)
    for args, match in (
        ((x.at[0, 1].set(jnp.nan), z, w), "`queries` contains non-finite"),
        ((x, z.at[2, 2].set(jnp.inf), w), "`context` points contain non-finite"),
        ((x, z, w.at[0].set(0.7)), "`context` weights must sum to 1"),
    ):
        with pytest.raises(errors, match=match):
            jax.block_until_ready(f(*args))
    with pytest.raises(eqx.EquinoxRuntimeError, match="`queries`"):
        attention_regime(model, mu, x.at[0, 0].set(jnp.inf))
    with pytest.raises(TypeError, match="throw"):  # nothing here can fail but a check: no switch
        attention_regime(model, mu, x, throw=False)  # pyright: ignore[reportCallIssue]
    mlp = cfm_jax.PiecewiseConstantCFM(
        cfm_jax.MLPField(activation=jax.nn.identity),
        {"W1": jnp.ones((2, 4, D)), "b1": jnp.zeros((2, 4)), "W2": jnp.ones((2, D, 4)), "b2": jnp.zeros((2, D))},
        D,
    )
    for args, match in (
        ((mlp, mu, x), "no softmax attention"),
        ((model, GaussianMeasure(jnp.zeros(2), jnp.eye(2)), x), "`context` has dimension 2"),
        ((model, mu, jnp.ones((2, 4))), "`queries` must have shape"),
        ((model, mu, jnp.ones((2, D), jnp.int32)), "`queries` must be a floating"),
        ((model, "gaussian", x), "`context` must be a GaussianMeasure or an EmpiricalMeasure"),
        ((mu, mu, x), "`model` must be a cfm_jax model"),
    ):
        with pytest.raises(ValueError, match=match):
            attention_regime(*args)  # pyright: ignore[reportArgumentType]  # bad on purpose
    single = attention_regime(model, mu, x[0])
    assert single.logit_variance.shape == (2, 2, 1) and single.heavy_tailed.shape == ()


def test_a_control_field_model_of_the_wrong_dim_is_refused_naming_the_mismatch():
    """A W1 control model asked for d = 3 with a reference sample in d = 2 is refused when it is built,
    naming ``dim`` and the field's arrays of the other dimension (no JAX broadcasting message); the
    model of the right d has no attention regime, said in words."""
    nu = jax.random.normal(jax.random.key(0), (16, 2), jnp.float64)
    field = cfm_jax.W1ControlField.create(nu)
    with pytest.raises(ValueError, match=r"`dim` = 3 is not the token dimension") as info:
        cfm_jax.PiecewiseConstantCFM(field, {"c": jnp.ones(2)}, 3)
    message = str(info.value)
    assert "field.nu_points (16, 2)" in message and "field.direction (2,)" in message, message
    assert "broadcast" not in message and "TypeError" not in message, message
    control = cfm_jax.PiecewiseConstantCFM(field, {"c": jnp.ones(2)}, 2)
    with pytest.raises(ValueError, match="no softmax attention"):
        attention_regime(control, GaussianMeasure(jnp.zeros(2), jnp.eye(2)), jnp.ones((1, 2)))


def test_no_queries_give_a_regime_without_an_effective_size(monkeypatch):
    """B = 0 queries (a Gaussian flow of no tokens): ρ is the context's, there is no softmax to sample,
    and the heavy-tail warning is given on ρ alone (no 0-size reduction error)."""
    import cfm_jax._regime as regime_module

    d, mu = 6, GaussianMeasure(jnp.zeros(6), jnp.eye(6))
    heavy, none = _model(1.0, d, layers=2, heads=1), jnp.zeros((0, d), jnp.float64)
    found = attention_regime(heavy, mu, none)
    assert found.ess_fraction.shape == (2, 1, 0)
    np.testing.assert_array_equal(found.rho, attention_regime(heavy, mu, jnp.ones((1, d))).rho)
    monkeypatch.setattr(regime_module, "_WARNED", False)
    with pytest.warns(HeavyTailWarning) as record:
        assert warn_if_heavy_tailed(found, 100) is True
    assert "effective sample size" not in str(record[0].message)
    monkeypatch.setattr(regime_module, "_WARNED", False)
    with pytest.warns(HeavyTailWarning):
        assert cfm_jax.forward(heavy, none, mu).x1.shape == (0, d)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_if_heavy_tailed(attention_regime(_model(0.3, d, layers=2, heads=1), mu, none), 100) is False


def test_compiled_once_and_context_points_as_an_array():
    """A second call with other queries and another context law of the same shapes compiles nothing
    (counted, not timed); an (n, d) array is read as the uniform empirical measure on its rows."""
    from _compiles import count_compilations

    model, x = _model(), _queries()
    mus = [_gaussian(seed=s) for s in (1, 7)]
    attention_regime(model, mus[0], x)
    x2 = x + 1.0
    with count_compilations() as count:
        attention_regime(model, mus[1], x2)
    assert count() == 0
    z = jax.random.normal(jax.random.key(4), (5, D), jnp.float64)
    a, b = attention_regime(model, z, x), attention_regime(model, EmpiricalMeasure(z), x)
    for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(u, v)


def _one_heavy_head(layers=3, heads=2, layer=2, head=1):
    """A light model (every ρ < 1/2 at N(0, I)) with Q of (layer, head) scaled to put that head's ρ at 2."""
    model = _model(0.2, layers=layers, heads=heads)
    mu = GaussianMeasure(jnp.zeros(D), jnp.eye(D))
    rho = attention_regime(model, mu, _queries()).rho
    assert float(rho.max()) < 0.5
    return eqx.tree_at(lambda m: m.Q, model, model.Q.at[layer, head].multiply(2 / float(rho[layer, head])))


def test_warning_names_the_heavy_layer_and_head_when_layers_and_heads_differ(monkeypatch):
    """L = 3 layers, H = 2 heads, the one heavy-tailed head at layer 2, head 1: the warning names it,
    alone and from a vmapped regime (leading axis over two context laws, the heavy one second), where
    the flag is any entry's and the entry is named too."""
    import cfm_jax._regime as regime_module

    model, x = _one_heavy_head(), _queries()
    mu = GaussianMeasure(jnp.zeros(D), jnp.eye(D))
    regime = attention_regime(model, mu, x)
    assert regime.rho.shape == (3, 2) and np.argwhere(np.asarray(regime.rho) >= 1).tolist() == [[2, 1]]
    monkeypatch.setattr(regime_module, "_WARNED", False)
    with pytest.warns(HeavyTailWarning, match=r"reaches 2 \(layer 2, head 1\)"):
        assert warn_if_heavy_tailed(regime) is True
    covs = jnp.stack([0.01 * jnp.eye(D), jnp.eye(D)])  # ρ ∝ Σ: the first law is light
    batched = jax.vmap(lambda c: attention_regime(model, GaussianMeasure(jnp.zeros(D), c), x))(covs)
    assert batched.rho.shape == (2, 3, 2) and batched.heavy_tailed.tolist() == [False, True]
    monkeypatch.setattr(regime_module, "_WARNED", False)
    with pytest.warns(HeavyTailWarning, match=r"reaches 2 \(layer 2, head 1, regime entry \(1,\)\)"):
        assert warn_if_heavy_tailed(batched, 10**6) is True
    light = jax.tree.map(lambda a: a[:1], batched)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_if_heavy_tailed(light, 10**6) is False


def test_warning_arguments_accept_numpy_integers_and_are_named():
    """``n`` and ``min_effective_size`` take numpy integers as the rest of the library does; a value
    of the wrong type is refused by a ValueError naming its argument, and a traced regime (the check
    runs on the host) naming `regime`."""
    mu = GaussianMeasure(jnp.zeros(D), jnp.eye(D))
    light = attention_regime(_model(0.3), mu, _queries())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_if_heavy_tailed(light, np.int64(10**6), min_effective_size=np.int32(2)) is False
        assert warn_if_heavy_tailed(light, np.int32(10**6), min_effective_size=np.float32(2.0)) is False
    for bad in ("100", None, True, jnp.ones(2)):
        with pytest.raises(ValueError, match="`min_effective_size`"):
            warn_if_heavy_tailed(light, 10, min_effective_size=bad)  # pyright: ignore[reportArgumentType]  # bad on purpose
    for bad in (np.float64(10.0), np.int64(0), "10"):
        with pytest.raises(ValueError, match="`n`"):
            warn_if_heavy_tailed(light, bad)  # pyright: ignore[reportArgumentType]  # bad on purpose
    with pytest.raises(ValueError, match="`regime` must hold values"):
        jax.jit(warn_if_heavy_tailed)(light)
    with pytest.raises(ValueError, match="`regime` must have `rho`"):
        warn_if_heavy_tailed(
            AttentionRegime(
                light.logit_variance, light.ess_fraction, light.rho[0], light.tail_index, light.heavy_tailed
            )
        )
