"""Part `figure1`: the odd-field symmetry behind the paper's Figure 1, its two outcomes, the part's rows."""

import jax
import numpy as np
import pytest

from cfm_experiments.protocol import resolve
from cfm_experiments.sync.figure1 import Figure1, trajectory
from cfm_jax import CompileRecorder
from cfm_jax.stochastic import NoiseKernel, StochasticTransformer, random_tokens, simulate

PART = Figure1()


def test_tanh_without_bias_is_an_odd_flow_and_relu_is_not():
    """G odd (tanh, σ = 0) ⇒ one layer maps −x to −(image of x) for the same weights, so the whole flow
    commutes with x ↦ −x token by token: antipodal points stay antipodal, which is what makes the
    two-point attractor possible. ReLU breaks the symmetry at O(1)."""
    x0 = random_tokens(jax.random.key(0), 6, 4)
    for act in ("tanh", "relu"):
        model = StochasticTransformer(NoiseKernel.paper(act, 4), width=32, layers=200, horizon=2.0)
        a = simulate(model, x0, jax.random.key(1))[1]
        b = simulate(model, -x0, jax.random.key(1))[1]
        gap = float(np.abs(np.asarray(a + b)).max())
        assert (gap < 1e-12) if act == "tanh" else (gap > 0.1), (act, gap)


def _final(act, seed, n=8, layers=3000, horizon=60.0, width=64):
    model = StochasticTransformer(NoiseKernel.paper(act, 4), width=width, layers=layers, horizon=horizon)
    x0 = random_tokens(jax.random.key(seed), n, 4)
    _, _, polar, nematic, mincos = trajectory(model, x0, jax.random.key(seed + 100), layers)
    return float(polar), float(nematic), float(mincos)


@pytest.mark.slow  # the figure's two long runs
def test_figure1_outcomes_small():
    """Figure 1's outcomes at a small size run long enough to reach the attractor (n = 8 on S³, m = 64,
    Δt = 0.02, T = 60; λ₁T = −7.5 (ReLU), −12 (tanh)): ReLU ends in one cluster (polar order ≈ 1) and never
    holds an antipodal pair; tanh ends on two antipodal points (nematic order ≈ 1) and, except with
    probability 2^{1−n} per run, both are occupied (a pair at cosine ≈ −1, polar order ≤ 1 − 2/n). Merging
    times have a long tail: 3 of 4 ReLU runs must have merged, 3 of 4 tanh runs must show both points. The
    second and later runs of each activation compile nothing (one program per model)."""
    relu = [_final("relu", s) for s in range(4)]
    assert sum(p > 0.95 for p, _, _ in relu) >= 3 and all(c > -0.5 for _, _, c in relu), relu
    tanh = [_final("tanh", 0)]  # compiles (or loads) the model's program and the kernel's constants
    with CompileRecorder() as stats:
        tanh += [_final("tanh", s) for s in range(1, 4)]
    assert stats.compiled + stats.cache_loads == 0, stats
    assert all(n > 0.99 for _, n, _ in tanh), tanh
    both = [(p, c) for p, _, c in tanh if c < -0.99]
    assert len(both) >= 3 and all(p <= 1 - 2 / 8 + 1e-3 for p, _ in both), tanh


@pytest.mark.slow
def test_figure1_outcomes_full_size():
    """The paper's size (N = 64, L = 2000, T = 20, m = 2048), 3 runs each: at T = 20 the attractors are
    not yet reached (λ₁T = −2.5 for ReLU), but the outcomes already separate: tanh runs hold exactly
    antipodal pairs (min cosine < −0.999) and a small polar order (< 0.5), ReLU runs none (min cosine >
    −0.5) and a large polar order (> 0.8)."""
    for seed in range(3):
        for act in ("tanh", "relu"):
            row = PART.run(dict(act=act, n=64, d=4, T=20.0, layers=2000, width=2048, save_every=10, seed=seed))
            if act == "tanh":
                assert row["min_cosine"] < -0.999 and row["polar_order"] < 0.5, (seed, row["polar_order"])
            else:
                assert row["min_cosine"] > -0.5 and row["polar_order"] > 0.8, (seed, row["polar_order"])


def test_rows_summary_and_figure(tmp_path):
    assert [c["layers"] for c in PART.configs(resolve([PART], quick=True))] == [200, 200]
    assert [(c["act"], c["n"], c["width"]) for c in PART.configs(resolve([PART]))] == [
        ("relu", 64, 2048),
        ("tanh", 64, 2048),
    ]
    config = dict(act="tanh", n=5, d=4, T=2.0, layers=20, width=8, save_every=10, seed=0)
    row = {"config": {"part": "figure1", **config}, **PART.run(config)}
    assert np.asarray(row["coordinates"]).shape == (3, 5, 2) and np.asarray(row["t"]).tolist() == [0.0, 1.0, 2.0]
    assert 0 <= row["polar_order"] <= 1 + 1e-12 and 1 / 4 - 1e-12 <= row["nematic_order"] <= 1 + 1e-12
    summary = PART.summarize([row], resolve([PART]))
    assert summary.data["figure1"][0]["act"] == "tanh" and not summary.claims
    (path,) = PART.figures([row], summary, tmp_path)
    assert path.name == "figure1.png" and path.stat().st_size > 10_000
