"""The OGD loop: coupled finite/population-context runs, the ridge regimes, the n-rate and input
validation.

One tiny configuration is shared (d = 2, L = 2, H = 1, m = 4, B = 4, contexts uniform on the
unit circle, n_ref = 256) so that JAX compiles each loop once. The regimes use λ_c = 2C with C
*estimated* on the λ = 0 trajectory (nothing about the expected behaviour is hard-coded); the
measured numbers are printed (``pytest -s``).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _ogd_problem import CK_LAM, ETA, N_REF, NS, D, K, L, M, _short_run

import cfm_jax
from cfm_jax import isotropic_gaussian, ogd
from cfm_jax._streams import ArrayStream, TeacherStudentStream
from cfm_jax.stats import fit_loglog

# --- the optax step -------------------------------------------------------------------------------


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
    return dict(
        C=float(est.C), lam=lam, free=np.asarray(free.deviations), strong=np.asarray(devs), C_strong=float(est_strong.C)
    )


def _windows(dev):
    """max over k in thirds of the horizon: (early, middle, late)."""
    return [dev[i * K // 3 : (i + 1) * K // 3].max(0) for i in range(3)]


@pytest.mark.slow  # the regimes: K steps of three coupled runs over every n (~20 s)
def test_strong_ridge_keeps_the_coupled_deviation_bounded(regimes):
    early, mid, late = _windows(regimes["strong"][0])
    print(
        f"\nC = {regimes['C']:.3f} (λ=0 region), λ = {regimes['lam']:.3f}, C on the λ region = "
        f"{regimes['C_strong']:.3f}; windows (n = {NS}): early {early}, middle {mid}, late {late}"
    )
    # the ridge regime really is λ > 2C also on the region it visits
    assert regimes["lam"] > 2 * regimes["C_strong"]
    # bounded: no upward trend (window means) and never above the initial transient (window maxima)
    dev = regimes["strong"][0]
    m_mid, m_late = dev[K // 3 : 2 * K // 3].mean(0), dev[2 * K // 3 :].mean(0)
    print(f"window means: middle {m_mid}, late {m_late}")
    assert np.all(m_late <= 1.5 * m_mid)
    assert np.all(late <= early)
    assert np.all(np.isfinite(regimes["strong"]))


@pytest.mark.slow  # the regimes: K steps of three coupled runs over every n (~20 s)
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
    print(
        f"\nλ = 0 windows (n = {NS}): early {early}, middle {mid}, late {late}; dev(K)/dev(K/2) = {growth} "
        f"(ridge: {growth_strong}; worst case (1+ηC)^(K/2) = {worst:.3g}); λ>λ_c late {s_late}"
    )
    assert np.all(late > s_late)
    assert np.all(growth > growth_strong)
    assert np.all(growth <= worst)


@pytest.mark.slow  # the regimes: K steps of three coupled runs over every n (~20 s)
def test_sup_deviation_rate_in_n(regimes):
    """The bounded ridge-regime deviation ~ n^{-1/2}: the bootstrap CI over seeds of the late-window
    (last third of the horizon, past the initial transient) sup's slope contains −1/2.

    The n-point context is the first n points of the n_ref-point reference, so the fluctuation
    law is (1/n − 1/n_ref)^{1/2} (zero at n = n_ref): the fit uses n_eff = (1/n − 1/n_ref)^{-1}."""
    sup = regimes["strong"][:, 2 * K // 3 :].max(axis=1)  # (seeds, len(NS))
    n_eff = 1.0 / (1.0 / np.asarray(NS, float) - 1.0 / N_REF)
    fit = fit_loglog(n_eff, sup.T)
    print(
        f"\nsup_k deviation (λ > λ_c) vs n = {NS}: {sup.mean(0)}; slope {fit.slope:.3f} "
        f"[{fit.ci_low:.3f}, {fit.ci_high:.3f}]"
    )
    assert fit.contains(-0.5), fit


def test_coupled_run_with_the_whole_reference_is_the_reference_to_round_off(setup):
    """n = n_ref: the n-context trajectory sees exactly the reference context, so it is the reference.

    Both are copies of one computation in one program, which XLA may fuse differently (on JAX 0.10.0
    they differ in the last bit of some entries, on 0.10.2 not at all): equal to a few ulps of the
    parameters' scale, which no wrong context (one point fewer, another order) comes near."""
    _, student, stream = setup
    res = ogd.coupled_run(student, stream, (N_REF,), ogd.ridge_sgd(ETA, CK_LAM), 4, record_params=True)
    ulps = lambda ref: 8 * np.finfo(np.asarray(ref).dtype).eps * float(np.max(np.abs(ref)))  # noqa: E731
    leaves = list(zip(jax.tree.leaves(res.state.params[0]), jax.tree.leaves(res.state.params[-1])))
    assert float(jnp.max(res.deviations)) <= max(ulps(b) for _, b in leaves)
    for a, b in leaves:
        np.testing.assert_allclose(a, b, rtol=0, atol=ulps(b))
    np.testing.assert_allclose(res.losses[:, 0], res.losses[:, -1], rtol=0, atol=ulps(res.losses[:, -1]))


# --- the exact population reference ----------------------------------------------------------------------


def _linear_student():
    """A student with a Gaussian closed form (attention + linear MLP), float64."""
    return cfm_jax.Transformer.init(
        jax.random.key(2), D, heads=1, mlp_width=M, layers=L, activation=jax.nn.identity, dtype=jnp.float64
    )


@pytest.mark.slow
def test_population_reference_follows_the_exact_gaussian_loss(setup):
    """``population=μ``: the reference trajectory is OGD on the loss at μ itself (the same as a
    single trajectory whose gradient source substitutes μ for the sample context). Slow (two
    compilations); experiments/tests/test_experiments_ogd_claims.py checks the same path against a
    hand-written moment recursion in the fast set."""
    _, _, stream = setup
    student = _linear_student()
    mu = cfm_jax.GaussianMeasure(jnp.array([0.1, -0.2]), jnp.array([[0.5, 0.1], [0.1, 0.3]]))
    opt = ogd.ridge_sgd(ETA, CK_LAM)
    res = ogd.coupled_run(student, stream, (8,), opt, 4, population=mu)
    at_mu = lambda m, x0, context, y: cfm_jax.loss_and_grad(m, x0, mu, y)  # noqa: E731
    alone = ogd.run_ogd(student, stream, opt, 4, grad_fn=at_mu)
    for a, b in zip(jax.tree.leaves(res.state.params[-1]), jax.tree.leaves(alone.state.params[0])):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(res.losses[:, -1], alone.losses[:, 0], rtol=1e-13)
    assert float(res.deviations[-1, 0]) > 1e-3  # the n = 8 trajectory sees the sample, not μ


def test_population_must_be_a_gaussian_measure_of_the_model_dimension(setup):
    _, _, stream = setup
    student = _linear_student()
    opt = ogd.ridge_sgd(ETA, CK_LAM)
    with pytest.raises(ValueError, match="population.*GaussianMeasure"):
        ogd.coupled_run(student, stream, (8,), opt, 1, population=jnp.zeros((4, D)))
    with pytest.raises(ValueError, match="population.*dimension 3"):
        ogd.coupled_run(student, stream, (8,), opt, 1, population=cfm_jax.GaussianMeasure(jnp.zeros(3), jnp.eye(3)))


# --- checkpoints ---------------------------------------------------------------------------------------


# --- user streams ----------------------------------------------------------------------------------------


# --- validation ----------------------------------------------------------------------------------------


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
        ogd.run_ogd(student, stream, "sgd", 1)  # pyright: ignore[reportArgumentType]  # bad on purpose
    with pytest.raises(ValueError, match="num_steps"):
        ogd.run_ogd(student, stream, opt, 0)
    with pytest.raises(ValueError, match="context_sizes"):
        ogd.coupled_run(student, stream, (0,), opt, 1)
    wide = cfm_jax.Transformer.init(jax.random.key(5), D, heads=2, mlp_width=M, layers=L, dtype=jnp.float64)
    with pytest.raises(ValueError, match="state.params"):
        ogd.run_ogd(wide, stream, opt, 1, state=ogd.init_state(student, opt))
    with pytest.raises(ValueError, match="population"):
        TeacherStudentStream(teacher, isotropic_gaussian(3), jax.random.key(0))
    with pytest.raises(ValueError, match="does not exist"):
        ogd.load_checkpoint("/nonexistent/ckpt.eqx", ogd.init_state(student, opt))


def test_coupled_run_below_n_ref_is_hand_steps_on_the_first_n_points(setup):
    """n = 8 < n_ref: every step of the n-context trajectory is θ ← θ − η(L·∂ℓ/∂θ + λθ) with ℓ on the
    *first* 8 points of that step's reference sample, and the reference trajectory the same on all
    256. The hand steps (eager updates, one jitted gradient per step) are another XLA program than
    the loop's scan, so they agree to the last bits (rtol 1e-13 over 4 steps), not bit for bit;
    any other choice of 8 points (a shifted or a last-n prefix) moves the loss by ~1e-2."""
    _, student, stream = setup
    res = _short_run(student, stream)
    grad = cfm_jax.loss_and_grad
    lam = CK_LAM

    def hand_step(model, sample, n):
        ctx = cfm_jax.EmpiricalMeasure(sample.context if n is None else sample.context[:n])
        loss, g = grad(model, sample.x0, ctx, sample.y)
        g = cfm_jax.functional_gradient(model, g)
        params, static = eqx.partition(model, eqx.is_inexact_array)
        g = eqx.filter(g, eqx.is_inexact_array)
        new = jax.tree.map(lambda p, gi: p + (-ETA) * (gi + lam * p), params, g)
        return eqx.combine(new, static), loss

    traj = {8: student, None: student}
    for k in range(4):
        sample = stream(k)
        for n in traj:
            traj[n], loss = hand_step(traj[n], sample, n)
            np.testing.assert_allclose(loss, res.losses[k, 0 if n == 8 else 1], rtol=1e-13, atol=0)
    for n, t in ((8, 0), (None, -1)):
        for a, b in zip(
            jax.tree.leaves(eqx.filter(res.state.model(student, t), eqx.is_inexact_array)),
            jax.tree.leaves(eqx.filter(traj[n], eqx.is_inexact_array)),
        ):
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
