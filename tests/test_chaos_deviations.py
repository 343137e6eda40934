"""cfm_jax._chaos.deviations: exact couplings, the analytic special case, the adjoints, the 1-D W1 to
a normal law, and value checks that hold under jax.jit."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cfm_jax
from cfm_jax import EmpiricalMeasure, Transformer, chaos


def test_uniform_attention_closed_form():
    """K = 0, no MLP: x_l − x̂_l = (Π_{k<l}(I + M_k/L) − I)(m_0 − m̂_0), for tokens and particles."""
    d, L = 3, 5
    base = Transformer.init(jax.random.key(0), d, heads=2, layers=L, v_scale=1.5, dtype=jnp.float64)
    model = Transformer(Q=base.Q, K=jnp.zeros_like(base.K), V=base.V)
    ref = jax.random.normal(jax.random.key(1), (200, d), jnp.float64) + 0.3
    x0 = jax.random.normal(jax.random.key(2), (3, d), jnp.float64)
    n = 17
    dev = jax.jit(functools.partial(chaos.coupled_deviations, adjoint=False))(model, x0, ref[:n], ref)
    closed = chaos.uniform_attention_deviation(model, ref[:n].mean(0) - ref.mean(0))
    want = jnp.linalg.norm(closed, axis=-1)
    assert dev["token"].shape == (L + 1, 3)
    np.testing.assert_allclose(dev["token"], jnp.broadcast_to(want[:, None], (L + 1, 3)), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(dev["context"], want, rtol=1e-10, atol=1e-13)
    assert float(want[-1]) > 1e-3  # the case is not trivially zero


def test_context_and_tokens_start_coupled():
    """At s = 0 the n-point particles are the first n reference particles and the tokens are shared."""
    model = Transformer.init(jax.random.key(0), 2, heads=1, mlp_width=4, layers=3, dtype=jnp.float64)
    ref = jax.random.normal(jax.random.key(1), (40, 2), jnp.float64)
    x0 = jax.random.normal(jax.random.key(2), (3, 2), jnp.float64)
    dev = chaos.coupled_deviations(model, x0, ref[:10], ref, adjoint=False)
    assert float(dev["context"][0]) == 0.0 and float(jnp.max(dev["token"][0])) == 0.0
    assert float(dev["context"][-1]) > 1e-3 and float(jnp.max(dev["token"][-1])) > 1e-3


def test_adjoint_states_match_autodiff(small_model):
    """p_0 = ∂ℓ/∂x_0 (autodiff through the forward) and p_1 = (x_1 − y)/B for ℓ = mean_b ½‖x_1 − y‖²."""
    kx, kz, ky = jax.random.split(jax.random.key(3), 3)
    x0 = jax.random.normal(kx, (2, 3), jnp.float64)
    ctx = EmpiricalMeasure(jax.random.normal(kz, (9, 3), jnp.float64))
    y = jax.random.normal(ky, (2, 3), jnp.float64)
    ps, _ = jax.jit(chaos.adjoint_states)(small_model, x0, ctx, y)

    def loss(x):
        x1 = cfm_jax.forward(small_model, x, ctx).x1
        return 0.5 * jnp.mean(jnp.sum((x1 - y) ** 2, -1))

    np.testing.assert_allclose(ps[0], jax.grad(loss)(x0), rtol=1e-9, atol=1e-12)
    x1 = cfm_jax.forward(small_model, x0, ctx).x1
    np.testing.assert_allclose(ps[-1], (x1 - y) / 2, rtol=1e-12, atol=1e-14)


def test_token_adjoint_states_equal_the_particle_adjoint(small_model):
    """The token-only adjoint (context held on its trajectory) = the p of adjoint_trajectories, on a
    padded context (zero-weight atoms); its shapes are checked."""
    kx, kz, ky = jax.random.split(jax.random.key(4), 3)
    x0 = jax.random.normal(kx, (2, 3), jnp.float64)
    ctx = EmpiricalMeasure(jax.random.normal(kz, (9, 3), jnp.float64), chaos.prefix_weights(6, 9, jnp.float64))
    y = jax.random.normal(ky, (2, 3), jnp.float64)
    sol = cfm_jax.forward(small_model, x0, ctx, saveat=cfm_jax.SaveAt(layers=True))
    assert sol.xs is not None and sol.contexts is not None
    zs = sol.contexts.points
    ps = chaos.token_adjoint_states(small_model, sol.xs, zs, ctx.weights, y)
    want, _ = chaos.adjoint_states(small_model, x0, ctx, y)
    assert ps.shape == want.shape == (5, 2, 3)
    np.testing.assert_allclose(ps, want, rtol=1e-10, atol=1e-13)
    with pytest.raises(ValueError, match="`xs` and `zs` must be"):
        chaos.token_adjoint_states(small_model, sol.xs[1:], zs, ctx.weights, y)
    with pytest.raises(ValueError, match="`weights` must be"):
        chaos.token_adjoint_states(small_model, sol.xs, zs, ctx.weights[1:], y)
    with pytest.raises(Exception, match="`y` contains non-finite"):
        jax.jit(chaos.token_adjoint_states)(small_model, sol.xs, zs, ctx.weights, y.at[0, 0].set(jnp.nan))


def test_prefix_weights():
    np.testing.assert_array_equal(chaos.prefix_weights(3, 5, jnp.float64), [1 / 3, 1 / 3, 1 / 3, 0.0, 0.0])
    np.testing.assert_array_equal(chaos.prefix_weights(3, 3), np.full(3, 1 / 3))
    np.testing.assert_array_equal(chaos.prefix_weights(1, 3), [1.0, 0.0, 0.0])
    for n in (0, 4, np.int64(4), jnp.asarray(0)):  # a value: the error of every value check
        with pytest.raises(eqx.EquinoxRuntimeError, match=r"`n` must be in \[1, size = 3\]"):
            chaos.prefix_weights(n, 3)


@settings(max_examples=60, deadline=None)  # deadline: the first call of a shape compiles
@given(
    size=st.integers(1, 64),
    data=st.data(),
    dtype=st.sampled_from([np.float32, np.float64]),
    kind=st.sampled_from([int, np.int32, np.int64, jnp.asarray]),
)
def test_prefix_weights_sum_to_one(size, data, dtype, kind):
    """For every integer n in [1, size], of any integer type: 1/n (rounded once) on the first n
    atoms, exactly 0 after, so the weights sum to 1 within round-off."""
    n = data.draw(st.integers(1, size), label="n")
    w = np.asarray(chaos.prefix_weights(kind(n), size, dtype))
    assert w.dtype == dtype and w.shape == (size,)
    np.testing.assert_array_equal(w[:n], np.full(n, dtype(1) / dtype(n)))
    np.testing.assert_array_equal(w[n:], 0.0)
    # n copies of 1/n (each rounded by half an ulp) summed: round-off up to about n ulp, never more
    assert abs(w.sum(dtype=np.float64) - 1) <= n * np.finfo(dtype).eps


@settings(max_examples=30, deadline=None)
@given(n=st.floats(0.5, 8.5).filter(lambda v: not v.is_integer()))
def test_prefix_weights_refuses_a_non_integer_n(n):
    """A fractional n would put 1/n on floor(n) + 1 atoms (2.5 on 5 atoms: weights summing to 1.2)."""
    with pytest.raises(ValueError, match="`n` must be an integer"):
        chaos.prefix_weights(n, 9)


def test_prefix_weights_refuses_floats_and_integer_dtypes_by_name():
    """A float n is refused even at an integer value (eagerly, and traced under jax.jit), as is a
    bool; an integer or bool dtype (all weights 1/n → 0) and a non-dtype are refused naming `dtype`."""
    for n in (3.0, np.float64(2.0), jnp.asarray(2.0), True):
        with pytest.raises(ValueError, match="`n` must be an integer"):
            chaos.prefix_weights(n, 5)
    with pytest.raises(ValueError, match="`n` must be an integer"):
        jax.jit(lambda n: chaos.prefix_weights(n, 5))(2.5)
    for dtype in (jnp.int32, np.int64, "int8", bool, "not a dtype"):
        with pytest.raises(ValueError, match="`dtype` must be a floating dtype"):
            chaos.prefix_weights(2, 5, dtype)
    with pytest.raises(ValueError, match="`size` must be a positive int"):
        chaos.prefix_weights(2, 0)


@pytest.mark.parametrize("n", [0, 4])
def test_prefix_weights_checks_a_traced_n(n):
    """Under jax.jit the range of n is checked inside the program (as eagerly), naming `n`."""
    fn = jax.jit(chaos.prefix_weights, static_argnums=1)
    np.testing.assert_array_equal(fn(2, 3), [0.5, 0.5, 0.0])
    with pytest.raises(Exception, match=r"`n` must be in \[1, size = 3\]"):
        jax.block_until_ready(fn(n, 3))


def test_prefix_weights_in_a_compiled_sweep_holds_no_callback():
    """A sweep's own program in ``cfm_jax.compiled``: the same weights, the check of a traced n as
    data (no host callback: the persistent cache can store it) and still raised after the call; a
    plain ``jax.jit`` holds a callback. There is no ``throw`` switch: nothing here can fail but a check."""
    sweep = lambda ns: jax.lax.map(lambda n: chaos.prefix_weights(n, 3), ns)  # noqa: E731
    ns = jnp.asarray([1, 2, 3])
    np.testing.assert_array_equal(cfm_jax.compiled(sweep)(ns)[1], [0.5, 0.5, 0.0])
    assert "callback" not in cfm_jax.compiled(sweep).lower(ns).as_text()  # pyright: ignore[reportFunctionMemberAccess]
    assert "callback" in jax.jit(sweep).lower(ns).as_text()
    with pytest.raises(eqx.EquinoxRuntimeError, match="`n` must be in"):
        cfm_jax.compiled(sweep)(jnp.asarray([1, 4]))
    with pytest.raises(TypeError, match="throw"):
        chaos.prefix_weights(2, 3, throw=False)  # pyright: ignore[reportCallIssue]


def test_coupled_deviations_names_swapped_or_mismatched_arguments():
    """Swapped context/reference (n > n_ref) is detected by shape and both are named; equal sizes
    (the full-reference case) are allowed; a token dimension mismatch, an impossible w1_size and a
    bad ε too, eagerly and (ε) under jit."""
    model = Transformer.init(jax.random.key(0), 2, heads=1, mlp_width=4, layers=1, dtype=jnp.float64)
    ref = jax.random.normal(jax.random.key(1), (12, 2), jnp.float64)
    x0 = jnp.zeros((1, 2))
    with pytest.raises(ValueError, match=r"`context` has n = 12 .* `reference` \(n_ref = 5\).*swapped"):
        chaos.coupled_deviations(model, x0, ref, ref[:5], adjoint=False)
    chaos.coupled_deviations(model, x0, ref, ref, adjoint=False)  # n = n_ref is fine
    chaos.coupled_deviations(model, x0, ref, ref[:5], coupled=False, adjoint=False)  # independent samples
    with pytest.raises(ValueError, match="token dimension"):
        chaos.coupled_deviations(model, x0, ref[:5, :1], ref, adjoint=False)
    with pytest.raises(ValueError, match=r"`w1_size` must be an integer in \[1, 12\]"):
        chaos.coupled_deviations(model, x0, ref[:5], ref, w1_size=13, adjoint=False)
    with pytest.raises(ValueError, match=r"`w1_size` must be an integer in \[1, 5\]"):
        chaos.coupled_deviations(model, x0, ref, ref[:5], coupled=False, w1_size=6, adjoint=False)
    for bad in (2.5, 4.0, True):  # refused, not checked as int(w1_size) and then used as 2.5
        with pytest.raises(ValueError, match=r"`w1_size` must be an integer in \[1, 12\], got"):
            chaos.coupled_deviations(model, x0, ref[:5], ref, w1_size=bad, adjoint=False)  # pyright: ignore[reportArgumentType]
    np.testing.assert_array_equal(
        chaos.coupled_deviations(model, x0, ref[:5], ref, w1_size=np.int64(4), adjoint=False)["w1"],  # pyright: ignore[reportArgumentType]
        chaos.coupled_deviations(model, x0, ref[:5], ref, w1_size=4, adjoint=False)["w1"],
    )
    with pytest.raises(eqx.EquinoxRuntimeError, match="`relative_epsilon` must be finite and > 0"):
        chaos.coupled_deviations(model, x0, ref[:5], ref, w1_size=4, relative_epsilon=0.0, adjoint=False)
    traced = jax.jit(lambda eps: chaos.coupled_deviations(model, x0, ref[:5], ref, w1_size=4, relative_epsilon=eps))
    with pytest.raises(Exception, match="`relative_epsilon` must be finite and > 0"):
        jax.block_until_ready(traced(-1.0))


def test_coupled_deviations_check_values_under_jit():
    """A NaN in the context reaches no deviation: the error names it, under jit too."""
    model = Transformer.init(jax.random.key(0), 2, heads=1, mlp_width=4, layers=1, dtype=jnp.float64)
    ref = jax.random.normal(jax.random.key(1), (12, 2), jnp.float64)
    x0 = jnp.zeros((1, 2))
    bad = ref.at[3, 0].set(jnp.nan)
    fn = jax.jit(lambda r: chaos.coupled_deviations(model, x0, r[:5], ref, adjoint=False))
    with pytest.raises(Exception, match="non-finite"):
        jax.block_until_ready(fn(bad))


def test_w1_to_normal_1d_is_the_integral_of_the_cdf_gap():
    """W1(μ, N(m, σ²)) = ∫|F_μ(t) − Φ((t − m)/σ)| dt: the closed form vs a fine quadrature of the CDF
    gap (an independent path), with unequal and zero weights; and the exact special case of one atom at
    the mean, W1 = E|σZ| = σ√(2/π)."""
    from scipy.integrate import quad
    from scipy.stats import norm

    rng = np.random.default_rng(0)
    x = rng.normal(0.3, 0.7, 40)
    w = rng.uniform(size=40)
    w[25:] = 0.0  # padding atoms: no mass, no contribution
    w /= w.sum()
    got = chaos.wasserstein1_to_normal_1d(jnp.asarray(x)[:, None], jnp.asarray(w), 0.1, 0.9)
    edges = np.concatenate([[-9.0], np.sort(x), [9.0]])
    want = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):  # F is constant between atoms: a smooth integrand on each piece
        F = w[x <= 0.5 * (lo + hi)].sum()
        want += quad(lambda t, F=F: abs(F - norm.cdf(t, 0.1, 0.9)), lo, hi, epsabs=1e-13, limit=200)[0]
    np.testing.assert_allclose(got, want, rtol=1e-9)
    one = chaos.wasserstein1_to_normal_1d(jnp.array([[0.4]]), jnp.ones(1), 0.4, 2.0)
    np.testing.assert_allclose(one, 2.0 * np.sqrt(2 / np.pi), rtol=1e-12)


@pytest.mark.parametrize(
    "weights,std,match",
    [
        ([0.5, 0.6], 1.0, "`weights` must sum to 1"),
        ([1.5, -0.5], 1.0, "`weights` must be finite and non-negative"),
        ([0.5, 0.5], 0.0, "`std` must be finite and > 0"),
        ([0.5, 0.5], float("nan"), "`std` must be finite and > 0"),
    ],
)
def test_w1_to_normal_1d_checks_values_under_jit(weights, std, match):
    fn = jax.jit(chaos.wasserstein1_to_normal_1d)
    with pytest.raises(Exception, match=match):
        jax.block_until_ready(fn(jnp.array([0.0, 1.0]), jnp.asarray(weights), 0.0, std))
    with pytest.raises(ValueError, match="`weights` must have shape"):
        chaos.wasserstein1_to_normal_1d(jnp.array([0.0, 1.0]), jnp.ones(3) / 3, 0.0, 1.0)
