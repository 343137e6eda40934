"""Ridge-regularised OGD (issue 5): the optax step, coupled finite/population-context runs,
the three ridge regimes, the n-rate, checkpoints and input validation.

One tiny configuration is shared (d = 2, L = 2, H = 1, m = 4, B = 4, contexts uniform on the
unit circle, n_ref = 256) so that JAX compiles each loop once. The regimes use λ_c = 2C with C *estimated* on the λ = 0 trajectory (nothing about
the expected behaviour is hard-coded); the measured numbers are printed (``pytest -s``).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import cfm_jax
from cfm_jax import ogd
from cfm_jax.stats import fit_loglog
from cfm_jax.populations import gaussian, uniform_sphere
from cfm_jax.streams import ArrayStream, FunctionStream, TeacherStudentStream

D, L, M, B = 2, 2, 4, 4
N_REF = 256
NS = (4, 16, 64)
ETA = 0.03
K = 300  # = 9/η


@pytest.fixture(scope="module")
def setup():
    teacher = cfm_jax.Transformer.init(jax.random.key(1), D, heads=1, mlp_width=M, layers=L, dtype=jnp.float64)
    student = cfm_jax.Transformer.init(jax.random.key(2), D, heads=1, mlp_width=M, layers=L, dtype=jnp.float64)
    # compact support (the paper's assumption): contexts uniform on the unit circle
    stream = TeacherStudentStream(teacher, uniform_sphere(D), jax.random.key(3), batch=B, context_size=N_REF)
    return teacher, student, stream


# --- the optax step -------------------------------------------------------------------------------


def test_ridge_sgd_is_the_hand_written_update():
    eta, lam = 0.25, 0.5  # dyadic: every product below is exact in binary floating point
    theta = {"a": jnp.asarray([1.0, -2.0, 0.5, 3.0]), "b": jnp.asarray([[0.75, -0.125]])}
    g = {"a": jnp.asarray([0.5, 0.25, -1.0, 2.0]), "b": jnp.asarray([[-4.0, 0.0625]])}
    opt = ogd.ridge_sgd(eta, lam)
    upd, _ = opt.update(g, opt.init(theta), theta)
    new = optax.apply_updates(theta, upd)
    for k in theta:
        np.testing.assert_array_equal(new[k], (1 - eta * lam) * theta[k] - eta * g[k])
    # generic float64 values: equal to round-off (a few ulp)
    t = jax.random.normal(jax.random.key(0), (50,), jnp.float64)
    gg = jax.random.normal(jax.random.key(1), (50,), jnp.float64)
    opt = ogd.ridge_sgd(0.037, 1.9)
    upd, _ = opt.update(gg, opt.init(t), t)
    np.testing.assert_allclose(optax.apply_updates(t, upd), (1 - 0.037 * 1.9) * t - 0.037 * gg, rtol=0, atol=1e-15)


CK_LAM = 0.5


def _short_run(student, stream, **kw):
    """The 4-step coupled run (n = 8 and the reference) shared by several tests (one compile)."""
    return ogd.coupled_run(student, stream, (8,), ogd.ridge_sgd(ETA, CK_LAM), 4, record_params=True, **kw)


def test_one_ogd_step_is_ridge_update_with_functional_gradient(setup):
    _, student, stream = setup
    res = _short_run(student, stream)
    after_one = eqx.combine(jax.tree.map(lambda a: a[0], res.ref_params), student)
    s = stream(0)
    # independent gradient source: autodiff through the residual network, scaled by L by hand
    loss, g = ogd.autodiff_value_and_grad(student, s.x0, cfm_jax.EmpiricalMeasure(s.context), s.y)
    for name, a in after_one.stacked_params().items():
        expect = (1 - ETA * CK_LAM) * getattr(student, name) - ETA * L * getattr(g, name)
        np.testing.assert_allclose(a, expect, rtol=1e-12, atol=1e-13, err_msg=name)
    np.testing.assert_allclose(res.losses[0, -1], loss, rtol=1e-12)
    assert int(res.state.step) == 4


def test_functional_gradient_scales_by_depth(setup):
    _, student, stream = setup
    s = stream(0)
    ctx = cfm_jax.EmpiricalMeasure(s.context[:16])
    _, g = ogd.autodiff_value_and_grad(student, s.x0, ctx, s.y)
    fg = ogd.functional_scale(student, g)
    for a, b in zip(jax.tree.leaves(fg), jax.tree.leaves(g)):
        np.testing.assert_allclose(a, L * b, rtol=1e-14)
    # default gradient source (the adjoint library when present) agrees with autodiff
    _, g2 = ogd.default_grad_fn()(student, s.x0, ctx, s.y)
    for a, b in zip(jax.tree.leaves(g2), jax.tree.leaves(g)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


# --- the three regimes -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def regimes(setup):
    """λ = 0 run (also the pilot that estimates C), then λ = min(1.5·λ_c, 0.9/η) over 3 seeds."""
    _, student, stream = setup
    free = ogd.coupled_run(student, stream, NS, ogd.ridge_sgd(ETA, 0.0), K, record_params=True)
    visited = jax.tree.map(lambda a: a[::25], free.ref_params)
    est = ogd.estimate_lipschitz(student, visited, stream, jax.random.key(0), num_pairs=8, first_step=K)
    lam_c = float(est.lambda_c)
    lam = min(1.5 * lam_c, 0.9 / ETA)
    assert lam > lam_c, f"test precondition: λ_c = {lam_c} is out of reach with η = {ETA} (η·λ < 1)"
    opt = ogd.ridge_sgd(ETA, lam)

    @eqx.filter_jit
    def strong(keys):
        def one(key):
            r = ogd.coupled_run(student, eqx.tree_at(lambda s: s.key, stream, key), NS, opt, K, record_params=True)
            return r.deviations, r.ref_params

        return jax.vmap(one)(keys)

    keys = jnp.stack([stream.key, *jax.random.split(jax.random.key(11), 2)])
    devs, params = strong(keys)
    est_strong = ogd.estimate_lipschitz(
        student, jax.tree.map(lambda a: a[0, ::25], params), stream, jax.random.key(0), num_pairs=8, first_step=K
    )
    return dict(C=float(est.C), lam=lam, free=np.asarray(free.deviations), strong=np.asarray(devs),
                C_strong=float(est_strong.C))


def _windows(dev):
    """max over k in thirds of the horizon: (early, middle, late)."""
    return [dev[i * K // 3 : (i + 1) * K // 3].max(0) for i in range(3)]


def test_strong_ridge_keeps_the_coupled_deviation_bounded(regimes):
    early, mid, late = _windows(regimes["strong"][0])
    print(f"\nC = {regimes['C']:.3f} (λ=0 region), λ = {regimes['lam']:.3f}, C on the λ region = "
          f"{regimes['C_strong']:.3f}; windows (n = {NS}): early {early}, middle {mid}, late {late}")
    # the ridge regime really is λ > 2C also on the region it visits
    assert regimes["lam"] > 2 * regimes["C_strong"]
    # bounded: no upward trend (window means) and never above the initial transient (window maxima)
    dev = regimes["strong"][0]
    m_mid, m_late = dev[K // 3 : 2 * K // 3].mean(0), dev[2 * K // 3 :].mean(0)
    print(f"window means: middle {m_mid}, late {m_late}")
    assert np.all(m_late <= 1.5 * m_mid)
    assert np.all(late <= early)
    assert np.all(np.isfinite(regimes["strong"]))


def test_no_ridge_is_worse_than_the_ridge_and_within_the_worst_case_bound(regimes):
    """λ = 0 against λ > λ_c on the same stream and seed: the ridge regime orders below the free one
    at every n in the late window and grows less over the second half (theory: only the ridge
    contracts); the free growth stays below the Grönwall worst case (1 + ηC)^(K/2)."""
    early, mid, late = _windows(regimes["free"])
    s_late = _windows(regimes["strong"][0])[2]
    dev, strong = regimes["free"], regimes["strong"][0]
    growth = dev[-1] / dev[K // 2 - 1]
    growth_strong = strong[-1] / strong[K // 2 - 1]
    worst = (1 + ETA * regimes["C"]) ** (K // 2)
    print(f"\nλ = 0 windows (n = {NS}): early {early}, middle {mid}, late {late}; dev(K)/dev(K/2) = {growth} "
          f"(ridge: {growth_strong}; worst case (1+ηC)^(K/2) = {worst:.3g}); λ>λ_c late {s_late}")
    assert np.all(late > s_late)
    assert np.all(growth > growth_strong)
    assert np.all(growth <= worst)


def test_sup_deviation_rate_in_n(regimes):
    """The bounded ridge-regime deviation ~ n^{-1/2}: the bootstrap CI over seeds of the late-window
    (last third of the horizon, past the initial transient) sup's slope contains −1/2.

    The n-point context is the first n points of the n_ref-point reference, so the fluctuation
    law is (1/n − 1/n_ref)^{1/2} (zero at n = n_ref): the fit uses n_eff = (1/n − 1/n_ref)^{-1}."""
    sup = regimes["strong"][:, 2 * K // 3 :].max(axis=1)  # (seeds, len(NS))
    n_eff = 1.0 / (1.0 / np.asarray(NS, float) - 1.0 / N_REF)
    fit = fit_loglog(n_eff, sup.T)
    print(f"\nsup_k deviation (λ > λ_c) vs n = {NS}: {sup.mean(0)}; slope {fit.slope:.3f} "
          f"[{fit.ci_low:.3f}, {fit.ci_high:.3f}]")
    assert fit.contains(-0.5), fit


def test_coupled_run_with_the_whole_reference_is_the_reference_bit_for_bit(setup):
    """n = n_ref: the n-context trajectory sees exactly the reference context, so it is the reference."""
    _, student, stream = setup
    res = ogd.coupled_run(student, stream, (N_REF,), ogd.ridge_sgd(ETA, CK_LAM), 4, record_params=True)
    assert float(jnp.max(res.deviations)) == 0.0
    for a, b in zip(jax.tree.leaves(res.state.params[0]), jax.tree.leaves(res.state.params[-1])):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(res.losses[:, 0], res.losses[:, -1])


# --- checkpoints ---------------------------------------------------------------------------------------


def test_checkpoint_restore_is_bitwise(setup, tmp_path):
    _, student, stream = setup
    opt = ogd.ridge_sgd(ETA, CK_LAM)
    full = ogd.coupled_run(student, stream, (8,), opt, 8, record_params=True)
    first = _short_run(student, stream)
    path = ogd.save_checkpoint(tmp_path / "ckpt.eqx", first.state, stream)
    like = ogd.init_state(student, opt, (8, None))
    other = eqx.tree_at(lambda s: s.key, stream, jax.random.key(99))
    state, stream2 = ogd.load_checkpoint(path, like, other)
    assert int(state.step) == 4
    np.testing.assert_array_equal(jax.random.key_data(stream2.key), jax.random.key_data(stream.key))
    second = _short_run(student, stream2, state=state)
    for a, b in zip(jax.tree.leaves(full.state), jax.tree.leaves(second.state)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(full.deviations[4:], second.deviations)


# --- user streams ----------------------------------------------------------------------------------------


def test_user_streams_match_the_teacher_stream(setup):
    _, student, stream = setup
    samples = [stream(k) for k in range(4)]
    arrays = tuple(jnp.stack([getattr(s, f) for s in samples]) for f in ("x0", "context", "y"))
    ref = _short_run(student, stream)
    a = _short_run(student, ArrayStream(*arrays))
    for x, y in zip(jax.tree.leaves(ref.state), jax.tree.leaves(a.state)):
        np.testing.assert_allclose(x, y, rtol=1e-13, atol=1e-14)
    fs = FunctionStream(lambda k: (arrays[0][k], cfm_jax.EmpiricalMeasure(arrays[1][k]), arrays[2][k]))
    for f in ("x0", "context", "y"):
        np.testing.assert_array_equal(getattr(fs(2), f), getattr(samples[2], f))
    with pytest.raises(ValueError, match="4 samples"):
        ogd.run_ogd(student, ArrayStream(*arrays), ogd.ridge_sgd(ETA, CK_LAM), 5)


# --- validation ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "eta, lam, match",
    [(0.0, 0.1, "learning_rate"), (-1.0, 0.1, "learning_rate"), (float("nan"), 0.1, "learning_rate"),
     (0.1, -0.5, "weight_decay"), (0.5, 2.0, "η·λ"), (0.1, float("inf"), "weight_decay"), ("a", 1.0, "numbers")],
)
def test_bad_step_sizes(eta, lam, match):
    with pytest.raises(ValueError, match=match):
        ogd.ridge_sgd(eta, lam)


def test_bad_shapes_and_arguments(setup):
    teacher, student, stream = setup
    opt = ogd.ridge_sgd(ETA, 0.5)
    K3 = jnp.zeros((2, 4, 3))
    with pytest.raises(ValueError, match="x0"):  # d = 3 stream for a d = 2 model
        ogd.run_ogd(student, ArrayStream(K3, jnp.zeros((2, 8, 3)), K3), opt, 1)
    with pytest.raises(ValueError, match="ys"):
        ArrayStream(jnp.zeros((2, 4, 2)), jnp.zeros((2, 8, 2)), jnp.zeros((2, 3, 2)))
    with pytest.raises(ValueError, match="first n points"):
        ogd.coupled_run(student, stream, (N_REF + 1,), opt, 1)
    with pytest.raises(ValueError, match="optimizer"):
        ogd.run_ogd(student, stream, "sgd", 1)
    with pytest.raises(ValueError, match="num_steps"):
        ogd.run_ogd(student, stream, opt, 0)
    with pytest.raises(ValueError, match="context_sizes"):
        ogd.coupled_run(student, stream, (0,), opt, 1)
    wide = cfm_jax.Transformer.init(jax.random.key(5), D, heads=2, mlp_width=M, layers=L, dtype=jnp.float64)
    with pytest.raises(ValueError, match="state.params"):
        ogd.run_ogd(wide, stream, opt, 1, state=ogd.init_state(student, opt))
    with pytest.raises(ValueError, match="population"):
        TeacherStudentStream(teacher, gaussian(3), jax.random.key(0))
    with pytest.raises(ValueError, match="does not exist"):
        ogd.load_checkpoint("/nonexistent/ckpt.eqx", ogd.init_state(student, opt))
