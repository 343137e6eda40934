"""Part `chaos_w2` (propagation of chaos in E sup_t W₂²): exact W₂, an exact coupling, the claimed order,
the verdict per d and program reuse."""

import itertools

import numpy as np
import pytest

from cfm_experiments.protocol import resolve
from cfm_experiments.sync.chaos_w2 import ChaosW2, claimed_order, w2_squared_uniform
from cfm_jax import CompileRecorder

PART = ChaosW2()


def test_w2_squared_against_brute_force_and_exact_cases():
    """Exact W₂² between uniform measures (N | M) against enumerating every plan that moves mass 1/N in
    blocks (all assignments of z to y repeated M/N times) on a tiny case; 0 for equal measures; and for y
    one point, the mean squared distance to z."""
    rng = np.random.default_rng(0)
    y, z = rng.normal(size=(2, 3)), rng.normal(size=(4, 3))
    yy = np.repeat(y, 2, axis=0)
    brute = min(((yy[list(p)] - z) ** 2).sum(-1).mean() for p in itertools.permutations(range(4)))
    assert w2_squared_uniform(y, z) == pytest.approx(brute, rel=1e-12)
    assert w2_squared_uniform(z, z[::-1]) == pytest.approx(0.0, abs=1e-15)
    assert w2_squared_uniform(y[:1], z) == pytest.approx(((z - y[0]) ** 2).sum(-1).mean(), rel=1e-12)
    with pytest.raises(ValueError, match="divide"):
        w2_squared_uniform(z[:3], z)


def _config(**kw):
    c = dict(d=3, act="tanh", sigma=0.1, Ns=[2, 8, 16], N_ref=16, L=10, T=1.0, width=16, R=3, save_every=5, seed=0)
    return {**c, **kw}


def test_chaos_w2_is_zero_at_n_ref_decreases_with_n_and_a_second_seed_compiles_nothing():
    """The coupling is exact: with N = N_ref the system is the reference (same start, same keys), so the
    deviation is 0 to round-off; smaller N deviate, the smaller the more (2 tokens vs 8: at least double)."""
    row = PART.run(_config())
    assert row["mean"][-1] < 1e-20
    assert row["mean"][0] > 2 * row["mean"][1] > 0
    with CompileRecorder() as stats:
        PART.run(_config(seed=1))
    assert stats.compiled + stats.cache_loads == 0, stats


def test_claimed_order_and_verdicts_per_dimension():
    """min(1/2, 2/d): 1/2 up to d = 4, 2/d above; a slope interval reaching below −order holds, one wholly
    above it is refuted at these sizes."""
    assert [claimed_order(d) for d in (2, 3, 4, 5, 8)] == [0.5, 0.5, 0.5, 0.4, 0.25]
    fit = lambda lo, hi: {"slope": (lo + hi) / 2, "intercept": 0.0, "ci_low": lo, "ci_high": hi, "prefactor": 1.0}  # noqa: E731
    rows = [
        {"config": {"part": "chaos_w2", **_config(d=5)}, "mean": [0.9, 0.5, 0.3], "fit": fit(-0.71, -0.56)},
        {"config": {"part": "chaos_w2", **_config(d=8)}, "mean": [0.9, 0.8, 0.7], "fit": fit(-0.22, -0.10)},
    ]
    summary = PART.summarize(rows, resolve([PART]))
    assert [c.verdict for c in summary.claims] == ["holds", "refuted at these sizes"]
    assert "O(N^(−0.4))" in summary.claims[0].claim and "O(N^(−0.25))" in summary.claims[1].claim
    assert [r["d"] for r in summary.data["chaos_w2"]] == [5, 8]
    assert [c["d"] for c in PART.configs(resolve([PART], quick=True))] == [2, 5]
