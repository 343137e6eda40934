"""cfm_experiments.rates.grid: the rows of the sweep follow the W1 and ∇φ policy; one row's numbers."""

import warnings

import numpy as np
import pytest

import cfm_jax
from cfm_experiments.rates import W1_SIZE, run_config, spec_from_config, sweep_configs
from cfm_experiments.rates.grid import pooled_regime, regime_lines, row_regime
from cfm_jax import chaos

FULL = dict(
    attention_dims=[1, 2, 4, 8, 16],
    control_dims=[1, 2, 4, 8],
    ns=[16, 64, 256, 1024, 4096],
    control_ns=[8, 16, 32, 64, 128],
    n_ref=2048,
    control_n_ref=512,
    seeds=8,
    subspace=(8, 2),
    reference="exact",
    w1_ns=[16, 32, 64, 128],
    w1_size=W1_SIZE,
    grad_phi_max_n=256,
)


def test_exact_rows_follow_the_policy():
    """One row per (field, population, d); exact references (the Gaussian limit, MLP declared linear,
    for Gaussian attention; QMC for the rest); the W1 policy (dʹ = 1 at every n, dʹ = 2 over its own
    sizes against >= 4n QMC points, none above dʹ = 3); ∇φ only up to 256, against QMC."""
    configs = sweep_configs(FULL)
    keys = [(c["field"], c["population"], c["dim"]) for c in configs]
    assert len(keys) == len(set(keys)) == 5 + 4 + 2
    for c in configs:
        spec = spec_from_config(c)
        chaos.validate_spec(spec)
        dk = c["intrinsic_dim"] or c["dim"]
        gaussian = c["field"] == "attention" and c["population"] == "gaussian"
        assert c["reference"] == ("gaussian" if gaussian else "qmc")
        assert (c.get("mlp_activation") == "linear") == gaussian
        assert c["w1"] == (dk <= 3) and c.get("relative_epsilon", 0.01) == (0.01 if dk == 1 else 0.02)
        if c["w1"] and dk == 1:
            assert spec.quantity_ns("w1") == spec.ns
        elif c["w1"]:
            assert 4 * max(spec.quantity_ns("w1")) <= spec.w1_size <= spec.n_ref
        if c["field"] == "attention":
            assert spec.quantity_ns("grad_phi") == (16, 64, 256)
            assert chaos.quantity_reference(spec, "grad_phi") == "qmc"
    sub = [c for c in configs if c["population"] == "subspace_gaussian"]
    assert {(c["dim"], c["intrinsic_dim"]) for c in sub} == {(8, 2)}
    no_adjoint = sweep_configs(FULL, adjoint=False, base_seed=3, layers=2)
    assert all(c["adjoint"] is False and "grad_phi_max_n" not in c for c in no_adjoint)
    assert all(c["seed"] == 3 and c["layers"] == 2 for c in no_adjoint)


def test_sample_rows_keep_n_within_the_reference():
    grid = dict(FULL, ns=[16, 32, 64, 128], control_ns=[8, 16, 32, 64], reference="sample")
    for c in sweep_configs(grid):
        assert max(c["ns"]) <= c["n_ref"] and "reference" not in c and "w1_ns" not in c
        assert spec_from_config(c).reference == "sample"


def test_spec_round_trip_and_one_row():
    """A row's spec ignores the keys that are not the spec's; its numbers are per seed and per size."""
    grid = dict(FULL, attention_dims=[1], control_dims=[], subspace=None, ns=[4, 8], n_ref=32, seeds=2)
    (config,) = sweep_configs(grid, layers=1, adjoint=False)
    spec = spec_from_config({**config, "part": "exact"})
    assert spec.ns == (4, 8) and spec.reference == "gaussian" and spec.layers == 1
    row = run_config(config)
    assert set(row) == {"values", "floor", "regime"}  # a Gaussian row: its models' regime
    expected = chaos.attention_regimes(spec, 2, 0)
    for field in ("rho", "ess_fraction", "logit_variance", "heavy_tailed"):
        np.testing.assert_allclose(row["regime"][field], getattr(expected, field), rtol=1e-12, err_msg=field)
    assert np.asarray(row["regime"]["ess_fraction"]).shape == (2, 1, spec.heads, spec.batch)
    assert set(row["values"]) == {"token", "context", "w1"} and len(row["values"]["token"]) == 2
    assert all(len(v) == 2 for v in row["values"]["token"])
    assert row["floor"]["token"] == [0.0, 0.0]  # the exact limit


def synthetic_regime(rho, ess) -> dict:
    """A row's regime as run_config records it, from ρ ``(seeds, L, H)`` and ESS/n ``(seeds, L, H, B)``
    (a Gaussian context: logit variance −log ESS/n)."""
    rho, ess = np.asarray(rho, float), np.asarray(ess, float)
    return {
        "logit_variance": (-np.log(ess)).tolist(),
        "ess_fraction": ess.tolist(),
        "rho": rho.tolist(),
        "tail_index": (2 / rho).tolist(),
        "heavy_tailed": (rho.max(axis=(1, 2)) >= 1).tolist(),
    }


def test_qmc_rows_record_no_regime():
    """Only rows against the Gaussian limit have a context law to evaluate the regime at."""
    configs = sweep_configs(dict(FULL, attention_dims=[2], control_dims=[2], subspace=(8, 2)))
    assert [row_regime(c) is None for c in configs if c["reference"] == "qmc"] == [True] * 3


def test_pooled_regime_over_seeds():
    """Seeds pooled: every seed's queries side by side per (layer, head); the largest ρ per (layer, head)."""
    rho = [[[0.2, 1.5]], [[0.9, 0.4]]]  # (seeds 2, L 1, H 2)
    ess = np.array([[[[0.5, 0.4], [0.3, 0.2]]], [[[0.9, 0.8], [0.7, 0.01]]]])  # (2, 1, 2, B 2)
    reg = pooled_regime(synthetic_regime(rho, ess))
    np.testing.assert_allclose(reg.rho, [[0.9, 1.5]])
    np.testing.assert_allclose(reg.tail_index, 2 / np.array([[0.9, 1.5]]))
    np.testing.assert_allclose(reg.ess_fraction, [[[0.5, 0.4, 0.9, 0.8], [0.3, 0.2, 0.7, 0.01]]])
    assert bool(reg.heavy_tailed) and reg.logit_variance.shape == (1, 2, 4)


def test_regime_lines_raise_no_warning(monkeypatch):
    """A line per row in the regime at its largest n (ρ ≥ 1, or fewer than 100 effective points),
    with its smallest ESS and largest ρ; no HeavyTailWarning (the regime is the sweep's design), while
    the library's rule, called outside, still warns."""
    import cfm_jax._regime as regime_module

    monkeypatch.setattr(regime_module, "_WARNED", False)
    base = {"field": "attention", "population": "gaussian", "ns": [16, 1024]}
    light = synthetic_regime([[[0.3]], [[0.4]]], np.full((2, 1, 1, 2), 0.5))  # 512 effective points
    few = synthetic_regime([[[0.3]], [[0.4]]], [[[[0.5, 0.05]]], [[[0.5, 0.5]]]])  # 51 at n = 1024
    heavy = synthetic_regime([[[0.3]], [[1.6]]], np.full((2, 1, 1, 2), 0.5))
    rows = [
        {"config": {**base, "dim": 2}, "regime": light},
        {"config": {**base, "dim": 4}, "regime": few},
        {"config": {**base, "dim": 8}, "regime": heavy},
        {"config": {**base, "dim": 16, "field": "control"}},  # no regime recorded
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lines = regime_lines(rows)
    assert [w.category for w in caught] == []
    assert lines == [
        "attention gaussian d = 4: smallest effective sample size 0.05·n (51.2 at n = 1024), largest ρ = 0.4",
        "attention gaussian d = 8: smallest effective sample size 0.5·n (512 at n = 1024), largest ρ = 1.6 "
        "(weights of infinite variance)",
    ]
    assert regime_lines(rows[:1]) == []
    with pytest.raises(KeyError):
        regime_lines([{"config": base, "regime": {}}])  # a malformed regime is not skipped silently
    monkeypatch.setattr(regime_module, "_WARNED", False)
    with pytest.warns(cfm_jax.HeavyTailWarning, match=r"\(51.2 of n = 1024 points\)"):  # silenced only inside
        cfm_jax.warn_if_heavy_tailed(pooled_regime(few), 1024)
