"""cfm_experiments.rates.grid: the rows of the sweep follow the W1 and ∇φ policy; one row's numbers."""

from cfm_experiments.rates import W1_SIZE, run_config, spec_from_config, sweep_configs
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
    assert set(row) == {"values", "floor"}
    assert set(row["values"]) == {"token", "context", "w1"} and len(row["values"]["token"]) == 2
    assert all(len(v) == 2 for v in row["values"]["token"])
    assert row["floor"]["token"] == [0.0, 0.0]  # the exact limit
