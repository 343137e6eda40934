"""Stochastic transformer (docs/theory.md): kernels, sphere invariance, exact sampler, SDE integrators."""

import math

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cfm_jax.stochastic import (
    NoiseKernel,
    SphereAttention,
    SphereSDE,
    StochasticTransformer,
    brownian_increments,
    brownian_path,
    energy_deficit,
    exact_increment,
    integrate_increments,
    interaction_energy,
    kappa_monte_carlo,
    kernel_matrix,
    observables,
    random_tokens,
    sample_mlp,
    simulate,
    simulate_many,
    solve_diffrax,
)
from cfm_jax.stochastic.noise import mlp_noise

RHO = jnp.linspace(-0.95, 1.0, 9)


# ----------------------------------------------------------------------------- kernels
@pytest.mark.parametrize("act,s_c", [("relu", 0.0), ("relu", 0.7), ("linear", 0.0), ("linear", 0.4)])
def test_closed_form_vs_quadrature(act, s_c):
    k = NoiseKernel(act, 1.3, 0.9, s_c)
    kq = NoiseKernel(act, 1.3, 0.9, s_c, method="quadrature", order=160)
    # Gauss–Hermite converges slowly across the ReLU kink (~1e-3 at this order); exact for linear.
    tol = 3e-3 if act == "relu" else 1e-12
    np.testing.assert_allclose(k(RHO), kq(RHO), atol=tol * k.kappa1)
    if act == "linear":  # σ' is a step for ReLU: quadrature of σ'σ' is too rough (FD test below)
        np.testing.assert_allclose(k.derivative(RHO), kq.derivative(RHO), atol=1e-12)
    # κ(1), κ'(1) closed forms vs 1-D quadrature (through the generic path of a "table" kernel).
    kt = NoiseKernel(act, 1.3, 0.9, s_c, method="table", grid=9)
    assert not kt.closed_form
    np.testing.assert_allclose([kt.kappa1, kt.dkappa1], [k.kappa1, k.dkappa1], rtol=1e-6)
    assert float(k(1.0)) == pytest.approx(k.kappa1, rel=1e-12)


@pytest.mark.parametrize("act", ["relu", "tanh", "linear"])
def test_kernel_vs_monte_carlo(act):
    k = NoiseKernel(act, 1.0, 1.0, 0.5)
    rho = RHO[:-1]
    mean, se = kappa_monte_carlo(jax.random.key(0), k, rho, samples=200_000)
    z = np.abs((np.asarray(mean) - np.asarray(k(rho))) / np.asarray(se))
    assert z.max() < 5.0, z


def test_mlp_covariance_is_kappa_for_every_width():
    """E[ξ(x)·ξ(y)]/d = κ(<x,y>) for the actual random MLP, even at width m = 3."""
    k = NoiseKernel("tanh", 1.2, 0.8, 0.3)
    d, m, R = 4, 3, 20_000
    x = random_tokens(jax.random.key(1), 3, d)
    xi = jax.vmap(lambda kk: mlp_noise(sample_mlp(kk, k, d, m), x, k.activation))(jax.random.split(jax.random.key(2), R))
    prods = jnp.einsum("rid,rjd->rij", xi, xi) / d  # (R, 3, 3)
    mean, se = prods.mean(0), prods.std(0) / math.sqrt(R)
    z = np.abs(np.asarray((mean - kernel_matrix(x, k)) / se))
    assert z.max() < 5.0, z


def test_table_kernel_matches_quadrature_and_derivative():
    k = NoiseKernel("tanh", 1.1, 1.0, 0.2)
    kq = NoiseKernel("tanh", 1.1, 1.0, 0.2, method="quadrature")
    r = jnp.linspace(-1, 1, 301)
    np.testing.assert_allclose(k(r), kq(r), atol=1e-8)
    np.testing.assert_allclose(k.derivative(r), kq.derivative(r), atol=1e-5)
    # κ' against central finite differences of κ (independent of Price's theorem).
    h = 1e-5
    r = jnp.linspace(-0.9, 0.9, 7)
    np.testing.assert_allclose(k.derivative(r), (k(r + h) - k(r - h)) / (2 * h), rtol=1e-6)
    kr = NoiseKernel("relu", 1.0, 1.0, 0.3)
    np.testing.assert_allclose(kr.derivative(r), (kr(r + h) - kr(r - h)) / (2 * h), rtol=1e-6)


def test_lyapunov_closed_form_special_cases():
    # ReLU without bias: κ(1) = κ'(1) = s_a² s_b²/2, so λ₁ = −s_a² s_b²/2 in every dimension.
    for d in (2, 3, 5, 10):
        assert NoiseKernel("relu", 2.0, 0.5).lyapunov(d) == pytest.approx(-0.5)
    # Linear without bias: κ(ρ) = s²ρ, λ₁ = −s².
    assert NoiseKernel("linear", 1.5, 1.0).lyapunov(7) == pytest.approx(-2.25)
    # p → 0 limit of the moment rate is 2λ₁.
    k = NoiseKernel("tanh")
    assert k.moment_rate(5, 1e-7) / 1e-7 == pytest.approx(2 * k.lyapunov(5), rel=1e-5)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="activation"):
        NoiseKernel("swish!")
    with pytest.raises(ValueError, match="s_a"):
        NoiseKernel("relu", -1.0)
    with pytest.raises(ValueError, match="attention"):
        SphereAttention("softmax")
    with pytest.raises(ValueError, match="layers"):
        StochasticTransformer(layers=0)
    with pytest.raises(ValueError, match="noise"):
        SphereSDE(noise="gaussian")
    with pytest.raises(ValueError, match="x0"):
        simulate(StochasticTransformer(layers=2), jnp.ones((3, 2)), jax.random.key(0))
    with pytest.raises(ValueError, match="save_every"):
        simulate(StochasticTransformer(layers=5), random_tokens(jax.random.key(0), 2, 3), jax.random.key(0), save_every=2)


# ----------------------------------------------------------------------- sphere & scheme
@pytest.mark.parametrize("kind,dtype,tol", [("SA", jnp.float64, 1e-13), ("USA", jnp.float32, 2e-6)])
def test_tokens_stay_on_sphere(kind, dtype, tol):
    x0 = random_tokens(jax.random.key(0), 6, 4, dtype)
    att = SphereAttention(kind, beta=2.0)
    for model in (
        StochasticTransformer(NoiseKernel("tanh", 2.0), width=8, layers=200, horizon=5.0, attention=att),
        SphereSDE(NoiseKernel("tanh", 2.0, 1.0, 0.5), steps=200, horizon=5.0, attention=att),
        SphereSDE(NoiseKernel("relu", 2.0, 1.0, 0.5), steps=200, horizon=5.0, attention=att, noise="features", width=8),
    ):
        _, xs = jax.jit(lambda k: simulate(model, x0, k, save_every=20))(jax.random.key(1))
        assert xs.dtype == dtype
        assert float(jnp.abs(jnp.linalg.norm(xs, axis=-1) - 1).max()) < tol


@pytest.mark.parametrize("eps", [1e-6, 1e-12])
def test_exact_increment_covariance_including_nearly_equal_tokens(eps):
    """Cov(ΔW_i^a, ΔW_j^b) = Δt κ(<x_i,x_j>) δ_ab, and Var(ΔW_1 − ΔW_4) = 2Δt(κ(1) − κ(ρ₁₄)) for
    two tokens at distance ``eps`` (C is numerically singular; at 1e-12 an eigendecomposition of
    C itself would return a difference of spurious size √(eps_machine) ≈ 1e-8 instead of ~1e-12)."""
    k = NoiseKernel("relu", 1.0, 1.0, 0.0)
    d, dt, R = 3, 0.1, 20_000
    x = random_tokens(jax.random.key(3), 3, d)
    x = jnp.concatenate([x, (x[:1] + eps * jnp.array([[0.0, 1.0, -1.0]]))], axis=0)
    x = x / jnp.linalg.norm(x, axis=-1, keepdims=True)
    C = kernel_matrix(x, k)
    assert np.linalg.eigvalsh(np.asarray(C)).min() < 1e-11  # numerically rank-deficient
    dW = jax.vmap(lambda kk: exact_increment(kk, x, k, dt))(jax.random.split(jax.random.key(4), R))
    emp = jnp.einsum("ria,rja->ij", dW, dW) / (R * d)
    se = dt * jnp.sqrt((jnp.outer(jnp.diag(C), jnp.diag(C)) + C**2) / (R * d))
    z = np.abs(np.asarray((emp - dt * C) / se))
    assert z.max() < 5.0, z
    # cross-coordinate covariances vanish
    cross = jnp.einsum("ria,rib->ab", dW, dW) / (R * x.shape[0])
    off = cross - jnp.diag(jnp.diag(cross))
    assert float(jnp.abs(off).max()) < 5 * dt * k.kappa1 * math.sqrt(2 / R)
    # the tiny difference of the two nearly equal tokens has the right variance (χ² test)
    diff = dW[:, 0] - dW[:, 3]
    r = 0.5 * float(jnp.sum((x[0] - x[3]) ** 2))
    expected = 2 * dt * float(k.deficit(r))
    ratio = float(jnp.mean(diff**2)) / expected
    assert abs(ratio - 1) < 5 * math.sqrt(2 / (R * d)), ratio


def test_kernel_deficit_is_accurate_near_the_diagonal():
    for k in (NoiseKernel("relu", 1.2, 0.9, 0.5), NoiseKernel("linear", 1.0, 1.0, 0.3), NoiseKernel("tanh", 1.0, 1.0, 0.2)):
        r = jnp.array([0.002, 0.1, 0.7, 1.5])
        np.testing.assert_allclose(k.deficit(r), k.kappa1 - k(1.0 - r), rtol=1e-6)
        tiny = jnp.array([1e-20, 1e-14])  # κ(1) − κ(1 − r) ≈ κ'(1) r (ReLU: − (s²v/2π)(2√2/3) q^{3/2})
        np.testing.assert_allclose(k.deficit(tiny), k.dkappa1 * tiny, rtol=1e-6)


def test_normalisation_realises_ito_correction():
    """E<𝒩(x + ΔW), x> = 1 − ½(d − 1)κ(1)Δt + O(Δt²): the Itô correction of docs/theory.md."""
    k = NoiseKernel("linear", 1.0, 1.0)
    d, dt, R = 4, 0.005, 200_000
    x = random_tokens(jax.random.key(5), 1, d)
    model = SphereSDE(k, steps=1, horizon=dt)
    x1 = jax.vmap(lambda kk: model.step(x, kk))(jax.random.split(jax.random.key(6), R))
    c = jnp.sum(x1[:, 0] * x[0], -1)
    drift = (float(c.mean()) - 1) / dt
    se = float(c.std()) / math.sqrt(R) / dt
    assert abs(drift + 0.5 * (d - 1) * k.kappa1) < 4 * se + 0.05, (drift, se)


def test_diffrax_and_scan_agree_on_a_shared_brownian_path():
    N, d = 5, 3
    sde = SphereSDE(NoiseKernel("relu", 1.0, 1.0, 0.3), steps=16, horizon=1.0, attention=SphereAttention("SA", 1.5))
    x0 = random_tokens(jax.random.key(0), N, d)
    # the UnsafeBrownianPath variant is timed in benchmarks/bench_stochastic.py
    assert isinstance(brownian_path(jax.random.key(1), sde, (N, d)), diffrax.UnsafeBrownianPath)
    with pytest.raises(ValueError, match="path_type"):
        brownian_path(jax.random.key(1), sde, (N, d), path_type=diffrax.ControlTerm)
    for path_type in (diffrax.VirtualBrownianTree,):
        path = brownian_path(jax.random.key(1), sde, (N, d), path_type=path_type)
        ts = jnp.linspace(0.0, sde.horizon, sde.steps + 1)
        dB = jax.vmap(path.evaluate)(ts[:-1], ts[1:])
        x_scan = integrate_increments(sde, x0, dB, save_every=4)
        x_dfx = solve_diffrax(sde, x0, path, save_every=4)
        np.testing.assert_allclose(x_dfx, x_scan, atol=1e-12)


def test_strong_convergence_of_coupled_scheme():
    """Coarse and fine schemes driven by the same Brownian matrix: strong error → 0 with a
    fitted order in [0.35, 1.3] (theory: ½ for non-commutative noise, up to 1)."""
    N, d, R, fine = 3, 3, 48, 256
    k = NoiseKernel("relu", 1.0, 1.0, 0.5)
    att = SphereAttention("USA", 1.0)
    x0 = random_tokens(jax.random.key(2), N, d)
    dB = jax.vmap(lambda kk: brownian_increments(kk, fine, (N, d), 1.0))(jax.random.split(jax.random.key(3), R))
    ref = jax.vmap(lambda b: integrate_increments(SphereSDE(k, fine, 1.0, att), x0, b))(dB)
    Ls = [4, 16, 64]
    errs = []
    for L in Ls:
        xl = jax.vmap(lambda b: integrate_increments(SphereSDE(k, L, 1.0, att), x0, b))(dB)
        errs.append(float(jnp.sqrt(jnp.mean(jnp.sum((xl - ref) ** 2, axis=(-2, -1))))))
    slope = -np.polyfit(np.log(Ls), np.log(errs), 1)[0]
    assert errs[0] > errs[1] > errs[2]
    assert 0.35 < slope < 1.3, (errs, slope)


# ------------------------------------------------------------------------- observables
def test_energies_at_sync_and_identities():
    """The paper's E_β = ½∬(e^β − e^{β<x,y>}) on configurations with known values."""
    x = random_tokens(jax.random.key(0), 7, 3)
    beta = 1.7
    # two tokens at angle θ: of the 4 ordered pairs two are off-diagonal, E = ¼(e^β − e^{β cos θ})
    th = 1.1
    pair = jnp.array([[1.0, 0.0, 0.0], [math.cos(th), math.sin(th), 0.0]])
    assert float(energy_deficit(pair, beta)) == pytest.approx(0.25 * (math.exp(beta) - math.exp(beta * math.cos(th))), rel=1e-12)
    assert float(interaction_energy(pair, beta)) == pytest.approx(0.25 * (math.exp(beta) + math.exp(beta * math.cos(th))), rel=1e-12)
    sync = jnp.tile(x[:1], (7, 1))
    obs = observables(sync, beta)
    assert float(obs["deficit"]) == 0.0 and float(obs["diameter"]) == 0.0
    assert float(obs["order"]) == pytest.approx(1.0)
    # ∬‖x−y‖² = 2(1 − ‖mean‖²) on the sphere
    assert float(observables(x)["dist_energy_p1"]) == pytest.approx(2 * (1 - float(observables(x)["order"]) ** 2), rel=1e-10)
    # E_β stays accurate (relative) for nearly merged tokens: E_β ≈ ½ e^β β · mean r (abs=0:
    # pytest.approx's default absolute tolerance 1e-12 would make this check vacuous)
    y = jnp.stack([x[0], (x[0] + 1e-9 * jnp.array([0.0, 1.0, 0.0])) / jnp.linalg.norm(x[0] + 1e-9 * jnp.array([0.0, 1.0, 0.0]))])
    r = 0.5 * float(jnp.sum((y[0] - y[1]) ** 2))
    assert float(energy_deficit(y, beta)) == pytest.approx(0.5 * math.exp(beta) * beta * (2 * r / 4), rel=1e-6, abs=0)


def test_zero_noise_is_the_attention_euler_scheme():
    """s_a = 0: the SDE is the retracted Euler scheme of the USA ODE, written out here."""
    beta, dt = 1.3, 0.2
    sde = SphereSDE(NoiseKernel("relu", 0.0), steps=5, horizon=5 * dt, attention=SphereAttention("USA", beta))
    x0 = random_tokens(jax.random.key(0), 4, 3)
    x = np.asarray(x0)
    for _ in range(5):
        a = (np.exp(beta * x @ x.T) @ x) / x.shape[0]
        x = x + dt * a
        x = x / np.linalg.norm(x, axis=-1, keepdims=True)
    for key in (1, 2):
        np.testing.assert_allclose(simulate(sde, x0, jax.random.key(key))[1], x, atol=1e-13)


def test_simulate_many_shapes_and_shared_noise():
    model = StochasticTransformer(NoiseKernel("relu"), width=4, layers=6, horizon=1.0)
    x0 = random_tokens(jax.random.key(0), 3, 2)
    ts, xs = simulate_many(model, x0, jax.random.split(jax.random.key(1), 5), save_every=2)
    assert ts.shape == (4,) and xs.shape == (5, 4, 3, 2)
    np.testing.assert_allclose(xs[:, 0], np.broadcast_to(np.asarray(x0), (5, 3, 2)))
    np.testing.assert_allclose(ts, [0.0, 1 / 3, 2 / 3, 1.0], atol=1e-15)


# ------------------------------------------------------------------------ common noise
class _Samplers:
    """Every sampler ``simulate`` and the experiments use, with a non-trivial kernel each."""

    def __init__(self, d):
        self.d = d

    def __getitem__(self, name):
        d = self.d
        return {
            "transformer": lambda: StochasticTransformer(NoiseKernel("tanh", 1.2, 0.8, 0.3), width=8, layers=30, horizon=1.0),
            "paper": lambda: StochasticTransformer(NoiseKernel.paper("silu", d, 0.5, 0.5), width=8, layers=30, horizon=1.0),
            "sde_exact": lambda: SphereSDE(NoiseKernel("relu", 1.0, 1.0, 0.5), steps=30, horizon=1.0),
            "sde_features": lambda: SphereSDE(NoiseKernel("relu", 1.0, 1.0, 0.5), steps=30, horizon=1.0, noise="features", width=8),
        }[name]()


_samplers = _Samplers


SAMPLERS = ("transformer", "paper", "sde_exact", "sde_features")


@pytest.mark.parametrize("name", SAMPLERS)
def test_common_noise_tokens_started_together_stay_together(name):
    """The noise is one field shared by all tokens: tokens 0 and 2 start at the same point and
    stay identical through 30 steps (with SA attention on), while token 1 moves differently;
    a token shared by two systems driven by one key (``step_systems``) moves identically."""
    d = 3
    model = _samplers(d)[name]
    model = type(model)(**{**_fields(model), "attention": SphereAttention("SA", 1.0)})
    x0 = random_tokens(jax.random.key(0), 4, d)
    x0 = x0.at[2].set(x0[0])
    _, xs = jax.jit(lambda k: simulate(model, x0, k, save_every=10))(jax.random.key(1))  # (4, N, d)
    # atol 1e-8: the exact sampler factors a rank-deficient Schur complement (repeated points),
    # whose eigen round-off is ~1e-10 here; per-token noise would separate them by ~√Δt ≈ 0.2.
    np.testing.assert_allclose(xs[:, 2], xs[:, 0], atol=1e-8)
    assert float(jnp.linalg.norm(xs[-1, 1] - xs[-1, 0])) > 1e-3
    plain = _samplers(d)[name]  # no attention: systems interact only through the shared field
    y0 = jnp.stack([x0, x0[::-1]])
    y1 = plain.step_systems(y0, jax.random.key(3))
    np.testing.assert_allclose(y1[1], y1[0][::-1], atol=1e-8)


def _fields(model):
    if isinstance(model, SphereSDE):
        return dict(kernel=model.kernel, steps=model.steps, horizon=model.horizon, noise=model.noise, width=model.width)
    return dict(kernel=model.kernel, width=model.width, layers=model.layers, horizon=model.horizon)


@pytest.mark.parametrize("name", SAMPLERS)
def test_one_step_covariance_across_tokens_is_kappa(name):
    """One step x ↦ 𝒩(x + √Δt ξ(x)) at Δt = 1e-4 from 4 clustered tokens, R = 4000 keys:
    Δ_i = (x_i' − x_i)/√Δt = P_{x_i} ξ(x_i) + O(√Δt), so E<Δ_i, Δ_j> = κ(ρ_ij) tr(P_i P_j) =
    κ(ρ_ij)(d − 2 + ρ_ij²) for every pair, i = j included, up to a relative O(Δt) bias (~1e-4).
    Band: ±4.5 Monte Carlo standard errors (two-sided; 10 pairs, false alarm < 1e-4). Noise
    drawn per token instead of shared makes the off-diagonal means 0, i.e. > 20 SE away."""
    d, dt, R = 3, 1e-4, 4000
    base = _samplers(d)[name]
    model = type(base)(**{**_fields(base), **({"steps": 1} if isinstance(base, SphereSDE) else {"layers": 1}), "horizon": dt})
    c = random_tokens(jax.random.key(5), 1, d)
    x = random_tokens(jax.random.key(6), 4, d)
    x = x.at[:2].set(jnp.concatenate([c, c + 0.4 * x[:1]]) / jnp.linalg.norm(jnp.concatenate([c, c + 0.4 * x[:1]]), axis=-1, keepdims=True))
    y = jax.jit(jax.vmap(lambda k: model.step(x, k)))(jax.random.split(jax.random.key(7), R))
    delta = (y - x) / math.sqrt(dt)
    s = np.asarray(jnp.einsum("rid,rjd->rij", delta, delta))
    rho = np.asarray(x @ x.T)
    expected = np.asarray(model.kernel(jnp.asarray(rho))) * (d - 2 + rho**2)
    z = (s.mean(0) - expected) / (s.std(0) / math.sqrt(R))
    iu = np.triu_indices(4)
    assert np.all(np.abs(z[iu]) < 4.5), (name, z[iu], expected[iu])
