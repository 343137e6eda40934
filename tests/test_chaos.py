"""Propagation-of-chaos experiments: analytic special case, rates at small size, resume, control."""

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax import EmpiricalMeasure, Transformer
from cfm_jax.experiments import chaos
from cfm_jax.fields.control import W1ControlField
from cfm_jax.populations import (
    embedded_sphere,
    gaussian,
    gaussian_mixture,
    subspace_gaussian,
    uniform_sphere,
)
from cfm_jax.stats import fit_loglog
from cfm_jax.wasserstein import wasserstein1


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


def test_adjoint_api_matches_autodiff_fallback(small_model):
    """p_s from cfm_jax.adjoint_trajectories (if built) equals autodiff through the Euler scheme."""
    if getattr(cfm_jax, "adjoint_trajectories", None) is None:
        pytest.skip("cfm_jax.adjoint_trajectories not available in this build")
    kx, kz, ky = jax.random.split(jax.random.key(3), 3)
    x0 = jax.random.normal(kx, (2, 3), jnp.float64)
    ctx = EmpiricalMeasure(jax.random.normal(kz, (9, 3), jnp.float64))
    y = jax.random.normal(ky, (2, 3), jnp.float64)
    ps, _ = jax.jit(chaos.adjoint_states)(small_model, x0, ctx, y)
    ps_ad, _ = jax.jit(chaos._adjoint_fallback)(small_model, x0, ctx, y)
    np.testing.assert_allclose(ps, ps_ad, rtol=1e-9, atol=1e-12)


_RATE = dict(ns=(8, 32, 128), n_ref=512, layers=2, heads=1, mlp_width=4, batch=4, adjoint=False, w1=False)


@pytest.mark.parametrize("d", [2, 8])
def test_token_rate_is_parametric(d):
    """Attention: sup_s‖x_s − x̂_s‖ ~ n^{-1/2} for d ∈ {2, 8}; band [−0.7, −0.3]."""
    spec = chaos.ChaosSpec(field="attention", dim=d, **_RATE)
    res = chaos.run_seeds(spec, seeds=16)
    fit = fit_loglog(spec.ns, res["token"].T)
    assert -0.7 <= fit.slope <= -0.3, fit
    ctx = fit_loglog(spec.ns, res["context"].T)
    assert -0.7 <= ctx.slope <= -0.3, ctx


def test_control_rate_is_shallower_in_d4():
    """The W1-Lipschitz control field: slope ≈ −1/4 in d = 4, clearly shallower than −1/2,
    while in d = 1 it is parametric (W1 in 1-D decays like n^{-1/2})."""
    kw = dict(_RATE, ns=(4, 16, 64), n_ref=256, layers=1, relative_epsilon=0.02)
    spec4 = chaos.ChaosSpec(field="control", dim=4, **kw)
    fit4 = fit_loglog(spec4.ns, chaos.run_seeds(spec4, seeds=6)["token"].T)
    assert fit4.slope > -0.4 and fit4.ci_high > -0.45, fit4
    spec1 = chaos.ChaosSpec(field="control", dim=1, **kw)
    fit1 = fit_loglog(spec1.ns, chaos.run_seeds(spec1, seeds=6)["token"].T)
    assert fit1.slope < fit4.slope - 0.1, (fit1, fit4)


def test_control_field_population_fixed_point_and_lipschitz():
    """With ν = the reference, the reference system does not move; |V(μ) − V(μ')| ≤ W1(μ, μ')."""
    nu = EmpiricalMeasure(jax.random.normal(jax.random.key(4), (64, 1), jnp.float64))
    field = W1ControlField.create(nu)
    model = cfm_jax.CFM(field, {"c": jnp.ones(3)}, 1)
    sol = jax.jit(cfm_jax.forward)(model, jnp.zeros((1, 1)), nu)
    assert float(jnp.abs(sol.x1).max()) < 1e-12
    mu1 = EmpiricalMeasure(jax.random.normal(jax.random.key(5), (20, 1), jnp.float64))
    mu2 = EmpiricalMeasure(mu1.points * 1.3 + 0.2)
    q = jnp.zeros((1, 1))
    dv = float(jnp.abs(field(q, mu1, {}) - field(q, mu2, {})).max())
    assert 0 < dv <= float(wasserstein1(mu1, mu2)) + 1e-12
    with pytest.raises(ValueError, match="direction"):
        W1ControlField.create(nu, direction=jnp.zeros(2))


def _tiny_configs():
    grid = dict(attention_dims=[1], control_dims=[1], ns=[4, 8], control_ns=[4, 8], n_ref=32,
                control_n_ref=32, seeds=2, subspace=None)
    # Same specs as test_cli_rates_small, so the two tests share compiled functions.
    return chaos.sweep_configs(grid, layers=2, adjoint=False)


def test_sweep_resume_matches_uninterrupted(tmp_path):
    configs = _tiny_configs()
    full = chaos.run_sweep(configs, tmp_path / "full", progress=False)
    part = chaos.run_sweep(configs, tmp_path / "part", progress=False, stop_after=1)
    assert len(part) == 1
    resumed = chaos.run_sweep(configs, tmp_path / "part", resume=True, progress=False)
    strip = lambda rows: [(r["key"], json.dumps(r["values"]), json.dumps(r["floor"])) for r in rows]  # noqa: E731
    assert strip(resumed) == strip(full)
    lines = (tmp_path / "part" / "rows.jsonl").read_text().splitlines()
    assert len(lines) == len(configs)  # no duplicates


def test_cli_rates_small(tmp_path, capsys):
    from cfm_jax.cli import main

    out = tmp_path / "rates"
    argv = ["rates", "--dims", "1", "--control-dims", "1", "--ns", "4", "8", "--control-ns", "4", "8",
            "--n-ref", "32", "--control-n-ref", "32", "--seeds", "2", "--no-subspace", "--no-progress",
            "--no-adjoint", "--layers", "2",
            "--out", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "slope" in text and "expected" in text and "token" in text
    summary = json.loads((out / "summary.json").read_text())
    assert {f["quantity"] for f in summary["fits"]} >= {"token", "w1"}
    assert (out / "rates.png").stat().st_size > 0 and (out / "rows.jsonl").exists()


def test_populations():
    key = jax.random.key(0)
    z = subspace_gaussian(6, 2)(key, 50)
    assert np.linalg.matrix_rank(np.asarray(z), tol=1e-5) == 2
    s = embedded_sphere(5, 2, radius=2.0)(key, 40)
    np.testing.assert_allclose(np.linalg.norm(np.asarray(s), axis=1), 2.0, rtol=1e-5)
    assert np.linalg.matrix_rank(np.asarray(s), tol=1e-5) == 3
    np.testing.assert_allclose(np.linalg.norm(np.asarray(uniform_sphere(3)(key, 10)), axis=1), 1.0, rtol=1e-5)
    m = gaussian_mixture(jnp.array([[5.0, 0.0], [-5.0, 0.0]]), scale=0.1)(key, 200)
    assert 0.3 < float((m[:, 0] > 0).mean()) < 0.7
    z1, z2 = jax.jit(jax.vmap(lambda k: gaussian(2)(k, 3)))(jax.random.split(key, 2))
    assert z1.shape == (3, 2) and not np.allclose(z1, z2)
    with pytest.raises(ValueError, match="intrinsic_dim"):
        subspace_gaussian(3, 4)
    with pytest.raises(ValueError, match="n"):
        gaussian(2)(key, 0)


def test_spec_validation():
    with pytest.raises(ValueError, match="ns"):
        chaos.run_seeds(chaos.ChaosSpec(ns=(8, 64), n_ref=32), seeds=1)
    with pytest.raises(ValueError, match="field"):
        chaos.run_seeds(chaos.ChaosSpec(field="mlp"), seeds=1)
    with pytest.raises(ValueError, match="population"):
        chaos.run_seeds(chaos.ChaosSpec(population="cauchy"), seeds=1)
