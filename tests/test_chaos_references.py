"""cfm_jax._chaos.references: the exact Gaussian limit and QMC references against direct computations,
and the QMC reference's own error (floor) against an i.i.d. reference's."""

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax import GaussianMeasure, ball_probes, chaos, forward

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


def _seed_draws(spec, key, n):
    """The model, x0 and the first n i.i.d. context points of one seed of an exact-reference sweep."""
    k_model, k_ctx, _, _, k_x, _, _ = jax.random.split(key, 7)
    law = spec.population_law()
    return chaos.build_model(spec, k_model), law(k_x, spec.batch), law(k_ctx, n)


@pytest.mark.slow  # each reference's sweep programs
def test_gaussian_reference_token_deviation_is_the_direct_one():
    """Against the Gaussian limit: the token deviation of each n equals ‖forward(first n i.i.d.
    points) − forward‖ computed directly (an unpadded forward per n), the exact floors are 0
    (W1 in d = 2, against QMC points, has a floor > 0), and max(ns) may exceed n_ref."""
    spec = chaos.ChaosSpec(**dict(_EXACT_REF, ns=(4, 16, 512), adjoint=False), reference="gaussian")
    key = jax.random.key(5)
    res = chaos.exact_reference_deviations(spec, key)
    assert res["floor_token"] == 0 and res["floor_context"] == 0 and "adjoint" not in res
    assert res["floor_w1"] > 0  # Sinkhorn in d = 2 against QMC points of the pushed Gaussian
    model, x0, z = _seed_draws(spec, key, 512)
    mu = GaussianMeasure(jnp.zeros(2), 0.5 * jnp.eye(2))  # the population N(0, I/d)
    exact = forward(model, x0, mu, saveat=cfm_jax.SaveAt(layers=True)).xs
    assert exact is not None
    for i, n in enumerate(spec.ns):
        xs = cfm_jax.forward(model, x0, z[:n], saveat=cfm_jax.SaveAt(layers=True)).xs
        assert xs is not None
        direct = jnp.mean(jnp.max(jnp.linalg.norm(xs - exact, axis=-1), axis=0))
        np.testing.assert_allclose(res["token"][i], direct, rtol=1e-9)


@pytest.mark.slow  # each reference's sweep programs
def test_gaussian_and_qmc_references_agree():
    """A QMC reference of n_ref = 1024 points stands in for the exact limit: the n-point deviations
    (same i.i.d. contexts) agree to a few per cent of their size, and the QMC floors are small."""
    base = dict(_EXACT_REF, n_ref=1024, w1=False, grad_phi_max_n=4)  # ∇φ (QMC on both) is not compared here
    g = chaos.run_seeds(chaos.ChaosSpec(**base, reference="gaussian"), seeds=2)
    q = chaos.run_seeds(chaos.ChaosSpec(**base, reference="qmc"), seeds=2)
    for k in ("token", "context", "adjoint"):
        np.testing.assert_allclose(q[k], g[k], rtol=0.1, err_msg=k)
    assert np.all(q["floor_token"] < 0.2 * g["token"][:, -1])


@pytest.mark.slow  # each reference's programs for two quantities
def test_gaussian_rows_w1_and_grad_phi_references():
    """Gaussian row in d = 1: W1 is the exact quantile formula against the limit's law N(m_s, Σ_s) at
    every n (= a direct computation, floor 0); ∇φ is measured only at n <= grad_phi_max_n, against a
    QMC reference (its floor > 0); the seed's deviations are jit-able as one program."""
    spec = chaos.ChaosSpec(**dict(_EXACT_REF, dim=1, ns=(4, 16, 64), n_ref=64, grad_phi_max_n=16), reference="gaussian")
    key = jax.random.key(2)
    res = jax.jit(functools.partial(chaos.exact_reference_deviations, spec))(key)
    assert res["w1"].shape == (3,) and res["grad_phi"].shape == (2,) and res["token"].shape == (3,)
    assert res["floor_w1"] == res["floor_adjoint"] == 0 and res["floor_grad_phi"] > 0
    model, x0, z = _seed_draws(spec, key, 64)
    lim = forward(model, x0, GaussianMeasure(jnp.zeros(1), jnp.eye(1)), saveat=cfm_jax.SaveAt(layers=True))
    assert lim.contexts is not None
    for i, n in enumerate(spec.ns):
        traj = cfm_jax.forward(model, x0, z[:n], saveat=cfm_jax.SaveAt(layers=True)).contexts
        assert traj is not None
        zs = traj.points
        direct = max(
            chaos.wasserstein1_to_normal_1d(
                zs[s], jnp.full((n,), 1.0 / n), lim.contexts.mean[s, 0], jnp.sqrt(lim.contexts.cov[s, 0, 0])
            )
            for s in range(zs.shape[0])
        )
        np.testing.assert_allclose(res["w1"][i], direct, rtol=1e-9)


@pytest.mark.slow  # QMC and i.i.d. references at several sizes
def test_grad_phi_qmc_reference_floor_is_below_an_iid_one():
    """∇φ has no closed form on Gaussian rows, so its reference is a QMC one of n_ref points, and its
    floor (two such references) must sit well below that of two i.i.d. references of the same size
    (same model, tokens, targets and probes, computed directly): the geometric mean of the ratio over
    4 seeds is below 1/3 (0.12 measured) and no seed's above 0.6 (0.29). An i.i.d. reference in its
    place gives ratios ≈ 1."""
    spec = chaos.ChaosSpec(**dict(_EXACT_REF, ns=(4, 16), w1=False, grad_phi_max_n=4), reference="gaussian")
    res = chaos.run_seeds(spec, seeds=4)
    law = spec.population_law()
    ratios = []
    for s, key in enumerate(jax.random.split(jax.random.key(0), 4)):
        k_model, _, k_ref, k_ref2, k_x, k_y, k_probe = jax.random.split(key, 7)
        model = chaos.build_model(spec, k_model)
        probes = ball_probes(k_probe, spec.num_probes, spec.dim, spec.radius)
        r1, r2 = (law(jax.random.fold_in(k, 1), spec.n_ref) for k in (k_ref, k_ref2))  # i.i.d.
        dev = chaos.coupled_deviations(
            model, law(k_x, spec.batch), r2, r1, y=law(k_y, spec.batch), probes=probes, coupled=False
        )
        ratios.append(res["floor_grad_phi"][s] / float(jnp.max(dev["grad_phi"])))
    ratios = np.asarray(ratios)
    assert np.all(res["floor_grad_phi"] > 0), res["floor_grad_phi"]
    assert np.exp(np.mean(np.log(ratios))) < 1 / 3 and np.all(ratios < 0.6), ratios


def test_attention_regimes_are_those_of_the_rows_models_at_the_population():
    """chaos.attention_regimes: per seed, cfm_jax.attention_regime of the model and target tokens the
    sweep draws (as the direct-deviation test above draws them) at the population N(0, I/d), every
    field; only for a Gaussian reference."""
    spec = chaos.ChaosSpec(**dict(_EXACT_REF, dim=3, heads=2), reference="gaussian")
    seeds, base = 3, 4
    reg = chaos.attention_regimes(spec, seeds, base)
    assert reg.rho.shape == (seeds, 2, 2) and reg.ess_fraction.shape == (seeds, 2, 2, spec.batch)
    mu = GaussianMeasure(jnp.zeros(3), jnp.eye(3) / 3)
    for i, key in enumerate(jax.random.split(jax.random.key(base), seeds)):
        model, x0, _ = _seed_draws(spec, key, 1)
        one = cfm_jax.attention_regime(model, mu, x0)
        for field in ("logit_variance", "ess_fraction", "rho", "tail_index", "heavy_tailed"):
            np.testing.assert_allclose(getattr(reg, field)[i], getattr(one, field), rtol=1e-12, err_msg=field)
    assert np.ptp(np.asarray(reg.rho[:, 0, 0])) > 0  # the seeds' models differ
    qmc = chaos.ChaosSpec(**dict(_EXACT_REF, dim=3), reference="qmc")
    with pytest.raises(ValueError, match="spec.reference"):
        chaos.attention_regimes(qmc, seeds)
    with pytest.raises(ValueError, match="seeds"):
        chaos.attention_regimes(spec, 0)
