"""cfm_jax.chaos: exact couplings, the analytic special case, padding, and the rates at small size."""

import functools
import os
import subprocess
import sys
import textwrap
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax import EmpiricalMeasure, Transformer, chaos
from cfm_jax.stats import fit_loglog

_EXACT: dict[str, Any] = dict(n_ref=32, layers=2, heads=1, mlp_width=4, batch=2, num_probes=3, w1_size=32)


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


@pytest.mark.parametrize("field", ["attention", "control"])
def test_full_reference_deviation_is_exactly_zero(field):
    """n = n_ref: the coupled n-point context *is* the reference, so every deviation is 0 (exactly
    up to float64 round-off: the n-system and the reference are compiled as different programs),
    while n < n_ref is not (an independent n-point sample would fail the first assertion by O(1))."""
    spec = chaos.ChaosSpec(field=field, dim=1, ns=(8, 32), **_EXACT)
    res = chaos.run_seeds(spec, seeds=2)
    quantities = [q for q in chaos.QUANTITIES if q in res]
    assert set(quantities) == (
        {"token", "context", "w1", "adjoint", "grad_phi"} if field == "attention" else {"token", "context", "w1"}
    )
    for q in quantities:
        np.testing.assert_allclose(res[q][:, -1], 0.0, rtol=0, atol=1e-14, err_msg=q)
        assert (res[q][:, 0] > 1e-4).all(), q


def test_context_and_tokens_start_coupled():
    """At s = 0 the n-point particles are the first n reference particles and the tokens are shared."""
    model = Transformer.init(jax.random.key(0), 2, heads=1, mlp_width=4, layers=3, dtype=jnp.float64)
    ref = jax.random.normal(jax.random.key(1), (40, 2), jnp.float64)
    x0 = jax.random.normal(jax.random.key(2), (3, 2), jnp.float64)
    dev = jax.jit(functools.partial(chaos.coupled_deviations, adjoint=False))(model, x0, ref[:10], ref)
    assert float(dev["context"][0]) == 0.0 and float(jnp.max(dev["token"][0])) == 0.0
    assert float(dev["context"][-1]) > 1e-3 and float(jnp.max(dev["token"][-1])) > 1e-3


@pytest.mark.parametrize("field,dim", [("attention", 2), ("control", 1)])
def test_padded_contexts_equal_unpadded(field, dim):
    """One padded n-system (zero-weight atoms, mapped over n) = one unpadded system per n, to round-off."""
    spec = chaos.ChaosSpec(
        field=field,
        dim=dim,
        ns=(4, 8),
        n_ref=16,
        layers=1,
        heads=1,
        mlp_width=4,
        batch=2,
        num_probes=2,
        w1_size=16,
        relative_epsilon=0.05,
    )
    padded = chaos.run_seeds(spec, seeds=2, padded=True)
    plain = chaos.run_seeds(spec, seeds=2, padded=False)
    assert padded.keys() == plain.keys()
    for q in padded:
        np.testing.assert_allclose(padded[q], plain[q], rtol=1e-10, atol=1e-14, err_msg=q)


_SEEDS_ON_DEVICES = textwrap.dedent(
    """
    import jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    from cfm_jax import chaos
    devs = jax.local_devices()
    assert len(devs) == 4, devs
    assert chaos.seed_devices(8) == tuple(devs) and chaos.seed_devices(6) == tuple(devs[:3])
    assert chaos.seed_devices(5) == tuple(devs[:1])
    spec = chaos.ChaosSpec(field="attention", dim=1, ns=(4, 8), n_ref=16, layers=1, heads=1, mlp_width=4,
                           batch=2, num_probes=2, w1_size=16)
    split = chaos.run_seeds(spec, 6)  # on 3 devices
    one = chaos.run_seeds(spec, 6, devices=devs[:1])
    assert split.keys() == one.keys() == {"token", "context", "w1", "adjoint", "grad_phi", "floor_token",
                                          "floor_w1", "floor_adjoint", "floor_grad_phi"}, split.keys()
    assert all(v.shape[0] == 6 for v in split.values()) and (one["token"] > 0).all()
    for q in one:
        np.testing.assert_allclose(split[q], one[q], rtol=1e-12, atol=1e-15, err_msg=q)
    print("SEEDS_SPLIT_OK")
    """
)


def test_seeds_split_across_devices_equal_one_device():
    """With 4 (forced host) devices, 8 seeds split across all 4 and 6 seeds across 3; every seed's
    deviations (adjoints and the exact 1-D W1 included) equal the single-device run's to round-off."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    out = subprocess.run(
        [sys.executable, "-c", _SEEDS_ON_DEVICES], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "SEEDS_SPLIT_OK" in out.stdout


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


_RATE: dict[str, Any] = dict(
    ns=(8, 32, 128), n_ref=512, layers=2, heads=1, mlp_width=4, batch=4, adjoint=False, w1=False
)


@pytest.mark.parametrize("d", [2, 8])
def test_token_rate_is_parametric(d):
    """Attention: sup_s‖x_s − x̂_s‖ and the coupled context ~ n^{-1/2} for d ∈ {2, 8}.

    Two-sided, from the fit's own bootstrap 95 % CI over 16 seeds: it must contain −1/2 and be
    narrower than 0.6 (so a rate off by more than ~0.3 is rejected). A broken coupling (an
    independent n-point sample) leaves the context deviation O(1): slope ≈ 0, CI excludes −1/2.
    """
    spec = chaos.ChaosSpec(field="attention", dim=d, **_RATE)
    res = chaos.run_seeds(spec, seeds=16)
    for q in ("token", "context"):
        fit = fit_loglog(spec.ns, res[q].T)
        assert fit.contains(-0.5) and fit.ci_high - fit.ci_low < 0.6, (q, fit)


def test_control_rate_is_slower_in_d4():
    """The W1-Lipschitz control field drives its tokens at W1(μ_n, P) ~ n^{-1/d}: −1/4 in d = 4.

    Two-sided, from the fits' bootstrap 95 % CIs over 8 seeds. In d = 4 the whole CI lies between
    the parametric −1/2 and −1/5: at n ≤ 64 the empirical W1 is pre-asymptotic (its n^{-1/2}
    fluctuation term still counts), so the fitted slope sits between −1/2 and the asymptotic −1/4
    (−0.32 measured), never shallower than the −1/4 the theory allows plus slack. In d = 1 (W1 in
    1-D is parametric) the CI contains −1/2 and excludes −1/4.
    """
    kw = dict(_RATE, ns=(4, 16, 64), n_ref=256, layers=1, relative_epsilon=0.02)
    spec4 = chaos.ChaosSpec(field="control", dim=4, **kw)
    fit4 = fit_loglog(spec4.ns, chaos.run_seeds(spec4, seeds=8)["token"].T)
    assert -0.5 < fit4.ci_low and fit4.ci_high < -0.2, fit4
    spec1 = chaos.ChaosSpec(field="control", dim=1, **kw)
    fit1 = fit_loglog(spec1.ns, chaos.run_seeds(spec1, seeds=8)["token"].T)
    assert fit1.contains(-0.5) and fit1.ci_high < -0.25, fit1


def test_prefix_weights():
    w = chaos.prefix_weights(3, 5, jnp.float64)
    np.testing.assert_array_equal(w, [1 / 3, 1 / 3, 1 / 3, 0.0, 0.0])


def test_spec_validation():
    with pytest.raises(ValueError, match="ns"):
        chaos.run_seeds(chaos.ChaosSpec(ns=(8, 64), n_ref=32), seeds=1)
    with pytest.raises(ValueError, match="field"):
        chaos.run_seeds(chaos.ChaosSpec(field="mlp"), seeds=1)  # pyright: ignore[reportArgumentType]  # bad on purpose
    with pytest.raises(ValueError, match="population"):
        chaos.run_seeds(chaos.ChaosSpec(population="cauchy"), seeds=1)  # pyright: ignore[reportArgumentType]  # bad on purpose
    with pytest.raises(ValueError, match="seeds"):
        chaos.run_seeds(chaos.ChaosSpec(ns=(4, 8), n_ref=8), seeds=0)
    with pytest.raises(ValueError, match="`seeds`"):
        chaos.seed_devices(0)
    with pytest.raises(ValueError, match="`devices`"):
        chaos.seed_devices(4, [])
    assert chaos.seed_devices(3) == tuple(jax.local_devices()[:1])  # the test session has one device


def test_coupled_deviations_names_swapped_or_mismatched_arguments():
    """Swapped context/reference (n > n_ref) is detected by shape and both are named; equal sizes
    (the full-reference case) are allowed; a token dimension mismatch and an impossible w1_size too."""
    model = Transformer.init(jax.random.key(0), 2, heads=1, mlp_width=4, layers=1, dtype=jnp.float64)
    ref = jax.random.normal(jax.random.key(1), (12, 2), jnp.float64)
    x0 = jnp.zeros((1, 2))
    with pytest.raises(ValueError, match=r"`context` has n = 12 .* `reference` \(n_ref = 5\).*swapped"):
        chaos.coupled_deviations(model, x0, ref, ref[:5], adjoint=False)
    chaos.coupled_deviations(model, x0, ref, ref, adjoint=False)  # n = n_ref is fine
    chaos.coupled_deviations(model, x0, ref, ref[:5], coupled=False, adjoint=False)  # independent samples
    with pytest.raises(ValueError, match="token dimension"):
        chaos.coupled_deviations(model, x0, ref[:5, :1], ref, adjoint=False)
    with pytest.raises(ValueError, match=r"`w1_size` must be in \[1, 12\]"):
        chaos.coupled_deviations(model, x0, ref[:5], ref, w1_size=13, adjoint=False)
    with pytest.raises(ValueError, match=r"`w1_size` must be in \[1, 5\]"):
        chaos.coupled_deviations(model, x0, ref, ref[:5], coupled=False, w1_size=6, adjoint=False)


def test_prefix_weights_and_spec_check_their_ranges():
    np.testing.assert_array_equal(chaos.prefix_weights(3, 3), np.full(3, 1 / 3))
    np.testing.assert_array_equal(chaos.prefix_weights(1, 3), [1.0, 0.0, 0.0])
    for n in (0, 4):
        with pytest.raises(ValueError, match="`n` must be in"):
            chaos.prefix_weights(n, 3)
    for eps in (0.0, -0.01, float("inf")):
        with pytest.raises(ValueError, match="`relative_epsilon`"):
            chaos.validate_spec(chaos.ChaosSpec(field="attention", dim=2, ns=(4, 8), n_ref=16, relative_epsilon=eps))
    chaos.validate_spec(chaos.ChaosSpec(field="attention", dim=2, ns=(4, 8), n_ref=16, relative_epsilon=1e-6))


# --- exact references: the Gaussian limit and QMC ---------------------------------------------

_EXACT_REF: dict[str, Any] = dict(
    field="attention",
    dim=2,
    ns=(4, 16, 64),
    n_ref=256,
    layers=2,
    heads=1,
    mlp_width=3,
    batch=2,
    num_probes=4,
    w1_size=64,
    relative_epsilon=0.05,
    mlp_activation="linear",
)


def test_size_buckets():
    assert chaos.size_buckets((16, 64, 256, 1024, 2048)) == [[16, 64], [256, 1024], [2048]]
    assert chaos.size_buckets((8,)) == [[8]]


def test_gaussian_reference_token_deviation_is_the_direct_one():
    """Against the Gaussian limit: the token deviation of each n equals ‖forward(first n i.i.d.
    points) − gaussian_flow‖ computed directly (an unpadded forward per n), the exact floors are 0
    (W1 in d = 2, against QMC points, has a floor > 0), and max(ns) may exceed n_ref."""
    import jax.numpy as jnp

    from cfm_jax import GaussianMeasure, gaussian_flow
    from cfm_jax._populations import _Gaussian

    spec = chaos.ChaosSpec(**dict(_EXACT_REF, ns=(4, 16, 512), adjoint=False), reference="gaussian")
    key = jax.random.key(5)
    res = chaos.exact_reference_deviations(spec, key)
    assert res["floor_token"] == 0 and res["floor_context"] == 0 and "adjoint" not in res
    assert res["floor_w1"] > 0  # Sinkhorn in d = 2 against QMC points of the pushed Gaussian
    k_model, k_ctx, _, _, k_x, _, _ = jax.random.split(key, 7)
    law = spec.population_law()
    z, x0 = law(k_ctx, 512), law(k_x, spec.batch)
    model = chaos.build_model(spec, k_model)
    assert isinstance(law, _Gaussian)
    mu = GaussianMeasure(jnp.zeros(2), law.scale**2 * jnp.eye(2))
    exact = gaussian_flow(model, x0, mu, saveat=cfm_jax.SaveAt(layers=True)).xs
    assert exact is not None
    for i, n in enumerate(spec.ns):
        xs = cfm_jax.forward(model, x0, z[:n], saveat=cfm_jax.SaveAt(layers=True)).xs
        assert xs is not None
        direct = jnp.mean(jnp.max(jnp.linalg.norm(xs - exact, axis=-1), axis=0))
        np.testing.assert_allclose(res["token"][i], direct, rtol=1e-9)


def test_gaussian_and_qmc_references_agree():
    """A QMC reference of n_ref = 1024 points stands in for the exact limit: the n-point deviations
    (same i.i.d. contexts) agree to a few per cent of their size, and the QMC floors are small."""
    base = dict(_EXACT_REF, n_ref=1024, w1=False, grad_phi_max_n=4)  # ∇φ (QMC on both) is not compared here
    g = chaos.run_seeds(chaos.ChaosSpec(**base, reference="gaussian"), seeds=2)
    q = chaos.run_seeds(chaos.ChaosSpec(**base, reference="qmc"), seeds=2)
    for k in ("token", "context", "adjoint"):
        np.testing.assert_allclose(q[k], g[k], rtol=0.1, err_msg=k)
    assert np.all(q["floor_token"] < 0.2 * g["token"][:, -1])


def test_exact_reference_validation():
    with pytest.raises(ValueError, match="`reference`='gaussian' needs"):
        chaos.run_seeds(chaos.ChaosSpec(**dict(_EXACT_REF, mlp_activation="gelu"), reference="gaussian"), seeds=1)
    with pytest.raises(ValueError, match="`reference`='gaussian' needs"):
        chaos.run_seeds(chaos.ChaosSpec(**dict(_EXACT_REF, field="control"), reference="gaussian"), seeds=1)
    with pytest.raises(ValueError, match="`reference` must be"):
        chaos.run_seeds(chaos.ChaosSpec(reference="mc"), seeds=1)  # pyright: ignore[reportArgumentType]  # bad on purpose


def test_w1_to_normal_1d_is_the_integral_of_the_cdf_gap():
    """W1(μ, N(m, σ²)) = ∫|F_μ(t) − Φ((t − m)/σ)| dt: the closed form vs a fine trapezoid rule on the CDF
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


def test_token_adjoint_states_equal_the_particle_adjoint(small_model):
    """The token-only adjoint (context held on its trajectory) = the p of adjoint_trajectories, on a
    padded context (zero-weight atoms)."""
    kx, kz, ky = jax.random.split(jax.random.key(4), 3)
    x0 = jax.random.normal(kx, (2, 3), jnp.float64)
    ctx = EmpiricalMeasure(jax.random.normal(kz, (9, 3), jnp.float64), chaos.prefix_weights(6, 9, jnp.float64))
    y = jax.random.normal(ky, (2, 3), jnp.float64)
    sol = cfm_jax.forward(small_model, x0, ctx, saveat=cfm_jax.SaveAt(layers=True))
    assert sol.xs is not None and sol.contexts is not None
    ps = chaos.token_adjoint_states(small_model, sol.xs, sol.contexts.points, ctx.weights, y)
    want, _ = chaos.adjoint_states(small_model, x0, ctx, y)
    assert ps.shape == want.shape == (5, 2, 3)
    np.testing.assert_allclose(ps, want, rtol=1e-10, atol=1e-13)


def test_gaussian_rows_w1_and_grad_phi_references():
    """Gaussian row in d = 1: W1 is the exact quantile formula against the limit's law N(m_s, Σ_s) at
    every n (= a direct computation, floor 0); ∇φ is measured only at n <= grad_phi_max_n, against a
    QMC reference (its floor > 0); each quantity names its reference."""
    from cfm_jax import GaussianMeasure, gaussian_flow

    spec = chaos.ChaosSpec(**dict(_EXACT_REF, dim=1, ns=(4, 16, 64), n_ref=64, grad_phi_max_n=16), reference="gaussian")
    assert spec.quantity_ns("w1") == (4, 16, 64) and spec.quantity_ns("grad_phi") == (4, 16)
    key = jax.random.key(2)
    res = jax.jit(functools.partial(chaos.exact_reference_deviations, spec))(key)
    assert res["w1"].shape == (3,) and res["grad_phi"].shape == (2,) and res["token"].shape == (3,)
    assert res["floor_w1"] == res["floor_adjoint"] == 0 and res["floor_grad_phi"] > 0
    assert [chaos.quantity_reference(spec, q) for q in ("token", "w1", "adjoint", "grad_phi")] == [
        "gaussian",
        "gaussian",
        "gaussian",
        "qmc",
    ]
    k_model, k_ctx, _, _, k_x, _, _ = jax.random.split(key, 7)
    law = spec.population_law()
    z, x0 = law(k_ctx, 64), law(k_x, spec.batch)
    model = chaos.build_model(spec, k_model)
    lim = gaussian_flow(model, x0, GaussianMeasure(jnp.zeros(1), jnp.eye(1)), saveat=cfm_jax.SaveAt(layers=True))
    assert lim.contexts is not None
    for i, n in enumerate(spec.ns):
        contexts = cfm_jax.forward(model, x0, z[:n], saveat=cfm_jax.SaveAt(layers=True)).contexts
        assert contexts is not None
        zs = contexts.points
        direct = max(
            chaos.wasserstein1_to_normal_1d(
                zs[s], jnp.full((n,), 1.0 / n), lim.contexts.mean[s, 0], jnp.sqrt(lim.contexts.cov[s, 0, 0])
            )
            for s in range(zs.shape[0])
        )
        np.testing.assert_allclose(res["w1"][i], direct, rtol=1e-9)


def test_quantity_sizes_need_an_exact_reference():
    with pytest.raises(ValueError, match="`w1_ns` and `grad_phi_max_n` need an exact reference"):
        chaos.validate_spec(chaos.ChaosSpec(ns=(4, 8), n_ref=16, w1_ns=(4,)))
    with pytest.raises(ValueError, match="`w1_ns` must be"):
        chaos.validate_spec(chaos.ChaosSpec(**dict(_EXACT_REF, w1_ns=(0, 4)), reference="gaussian"))
    with pytest.raises(ValueError, match="`grad_phi_max_n`"):
        chaos.validate_spec(chaos.ChaosSpec(**dict(_EXACT_REF, grad_phi_max_n=0), reference="gaussian"))
