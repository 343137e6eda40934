"""The discrete stochastic transformer and the common noise of every sampler (discrete, paper, exact and
random-feature SDE)."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cfm_jax.stochastic import (
    AbstractSphereModel,
    NoiseKernel,
    SphereAttention,
    SphereSDE,
    StochasticTransformer,
    random_tokens,
    simulate,
    simulate_many,
)


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


class _Samplers:
    """Every sampler ``simulate`` and the experiments use, with a non-trivial kernel each."""

    def __init__(self, d):
        self.d = d

    def __getitem__(self, name):
        d = self.d
        return {
            "transformer": lambda: StochasticTransformer(
                NoiseKernel("tanh", 1.2, 0.8, 0.3), width=8, layers=30, horizon=1.0
            ),
            "paper": lambda: StochasticTransformer(
                NoiseKernel.paper("silu", d, 0.5, 0.5), width=8, layers=30, horizon=1.0
            ),
            "sde_exact": lambda: SphereSDE(NoiseKernel("relu", 1.0, 1.0, 0.5), steps=30, horizon=1.0),
            "sde_features": lambda: SphereSDE(
                NoiseKernel("relu", 1.0, 1.0, 0.5), steps=30, horizon=1.0, noise="features", width=8
            ),
        }[name]()


SAMPLERS = ("transformer", "paper", "sde_exact", "sde_features")
_samplers = _Samplers


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
    model = type(base)(
        **{**_fields(base), **({"steps": 1} if isinstance(base, SphereSDE) else {"layers": 1}), "horizon": dt}
    )
    c = random_tokens(jax.random.key(5), 1, d)
    x = random_tokens(jax.random.key(6), 4, d)
    x = x.at[:2].set(
        jnp.concatenate([c, c + 0.4 * x[:1]])
        / jnp.linalg.norm(jnp.concatenate([c, c + 0.4 * x[:1]]), axis=-1, keepdims=True)
    )
    y = jax.jit(jax.vmap(lambda k: model.step(x, k)))(jax.random.split(jax.random.key(7), R))
    delta = (y - x) / math.sqrt(dt)
    s = np.asarray(jnp.einsum("rid,rjd->rij", delta, delta))
    rho = np.asarray(x @ x.T)
    expected = np.asarray(model.kernel(jnp.asarray(rho))) * (d - 2 + rho**2)
    z = (s.mean(0) - expected) / (s.std(0) / math.sqrt(R))
    iu = np.triu_indices(4)
    assert np.all(np.abs(z[iu]) < 4.5), (name, z[iu], expected[iu])


def test_random_tokens_and_simulate_many_check_sizes():
    from cfm_jax.stochastic import StochasticTransformer, random_tokens, simulate_many

    assert random_tokens(jax.random.key(0), 1, 1).shape == (1, 1)
    for n, d in ((0, 3), (2, 0), (2.5, 3), (True, 3)):
        with pytest.raises(ValueError, match="`n` and `d`"):
            random_tokens(jax.random.key(0), n, d)  # pyright: ignore[reportArgumentType]  # bad on purpose
    model = StochasticTransformer(layers=2)
    x0 = random_tokens(jax.random.key(0), 2, 3)
    assert simulate_many(model, x0, jax.random.split(jax.random.key(0), 1))[1].shape == (1, 2, 3)
    with pytest.raises(ValueError, match="`keys`"):
        simulate_many(model, x0, jax.random.split(jax.random.key(0), 0))


def _tiny_models():
    kernel = NoiseKernel("relu", 1.0, 1.0, 0.5)
    return StochasticTransformer(kernel, width=4, layers=2, horizon=0.1), SphereSDE(kernel, steps=2, horizon=0.1)


@pytest.mark.parametrize("wrap", ["eager", "jax.jit", "vmap"])
def test_simulators_check_token_values_under_any_transformation(wrap):
    """Tokens off the sphere or non-finite raise an error naming `x0` from inside the compiled program,
    eagerly, under a caller's jax.jit and under vmap: never a silent NaN trajectory. A fixed-step
    scheme cannot fail, so there is no ``throw`` switch to leave the checks out."""
    from cfm_jax.stochastic import integrate_increments, solve_diffrax

    model, sde = _tiny_models()
    key, keys = jax.random.key(1), jax.random.split(jax.random.key(2), 2)
    x = random_tokens(jax.random.key(0), 2, 3)
    dB = 0.1 * jax.random.normal(jax.random.key(3), (2, 2, 3))
    errors = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError)  # the second under a plain jax.jit
    runs = {"simulate": lambda x0: simulate(model, x0, key)[1]}
    if wrap == "eager":
        from cfm_jax.stochastic import brownian_path

        path = brownian_path(jax.random.key(4), sde, (2, 3))
        runs |= {
            "simulate_many": lambda x0: simulate_many(model, x0, keys)[1],
            "simulate_many per realisation": lambda x0: simulate_many(sde, jnp.stack([x, x0]), keys)[1],
            "integrate_increments": lambda x0: integrate_increments(sde, x0, dB),
            "solve_diffrax": lambda x0: solve_diffrax(sde, x0, path),
        }
    for name, run in runs.items():
        f = {"eager": run, "jax.jit": jax.jit(run), "vmap": lambda x0, run=run: jax.vmap(run)(x0[None])}[wrap]
        for bad, match in (
            (2 * x, "`x0` rows must be unit vectors"),
            (x.at[1, 2].set(jnp.nan), "`x0` contains non-finite"),
        ):
            with pytest.raises(errors, match=match):
                jax.block_until_ready(f(bad))
        assert np.isfinite(np.asarray(f(x))).all(), name
    with pytest.raises(TypeError, match="throw"):
        simulate(model, x, key, throw=False)  # pyright: ignore[reportCallIssue]


def test_simulators_check_the_model_and_increments_inside_the_program():
    """A NaN in the model's parameters or in the Brownian increments is refused by name (in jit)."""
    from cfm_jax.stochastic import integrate_increments

    model, sde = _tiny_models()
    x = random_tokens(jax.random.key(0), 2, 3)
    bad_attention = SphereAttention("SA", 1.0, Q=jnp.full((3, 3), jnp.nan))
    bad = StochasticTransformer(model.kernel, width=4, layers=2, horizon=0.1, attention=bad_attention)
    with pytest.raises(eqx.EquinoxRuntimeError, match="`model` parameters"):
        simulate(bad, x, jax.random.key(1))
    with pytest.raises(eqx.EquinoxRuntimeError, match="`dB`"):
        integrate_increments(sde, x, jnp.full((2, 2, 3), jnp.inf))
    with pytest.raises(ValueError, match="`model` must be"):
        simulate(model.kernel, x, jax.random.key(1))  # pyright: ignore[reportArgumentType]  # bad on purpose
    with pytest.raises(ValueError, match="3 starts but `keys` has 2"):
        simulate_many(model, jnp.stack([x, x, x]), jax.random.split(jax.random.key(0), 2))


def test_simulators_are_compiled_once():
    """simulate, simulate_many and the SDE integrators reuse their program on a second call with new
    tokens, keys and increments (counted compilations, not time); a new static option compiles anew."""
    from _compiles import count_compilations

    from cfm_jax.stochastic import integrate_increments

    model, sde = _tiny_models()
    xs = [random_tokens(k, 2, 3) for k in jax.random.split(jax.random.key(0), 2)]
    ks = jax.random.split(jax.random.key(1), 2)
    kss = [jax.random.split(k, 2) for k in ks]
    dBs = [0.1 * jax.random.normal(k, (4, 2, 3)) for k in ks]

    def calls(i):
        simulate(model, xs[i], ks[i], save_every=1)
        simulate_many(sde, xs[i], kss[i])
        integrate_increments(sde, xs[i], dBs[i])

    calls(0)
    with count_compilations() as count:
        calls(1)
    assert count() == 0
    with count_compilations() as count:
        simulate(model, xs[1], ks[1], save_every=2)
    assert count() >= 1  # the counter sees a compilation where there is one


class _Still(AbstractSphereModel):
    """A user's model: tokens stay where they are (checks that simulate accepts any AbstractSphereModel)."""

    horizon: float = 1.0

    @property
    def num_steps(self) -> int:
        return 3

    @property
    def dt(self) -> float:
        return self.horizon / 3

    def step_systems(self, xs, key):
        return xs


def test_any_sphere_model_runs_and_the_interface_is_abstract():
    x = random_tokens(jax.random.key(0), 2, 3)
    ts, xs = simulate(_Still(1.0), x, jax.random.key(1), save_every=1)
    np.testing.assert_allclose(ts, [0, 1 / 3, 2 / 3, 1])
    np.testing.assert_array_equal(xs[-1], x)
    with pytest.raises(TypeError):
        AbstractSphereModel()  # pyright: ignore[reportAbstractUsage, reportCallIssue]  # abstract on purpose
