"""Parts `strong`, `chaos`, `weak_L`, `weak_m`: exact couplings, the weak fit on data with a known answer,
their verdicts, program reuse, and figures from stored rows."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cfm_experiments.protocol import resolve
from cfm_experiments.sync.common import random_starts
from cfm_experiments.sync.convergence import Chaos, Strong, WeakL, WeakM, weak_fit
from cfm_jax import CompileRecorder
from cfm_jax.stochastic import (
    NoiseKernel,
    SphereAttention,
    SphereSDE,
    StochasticTransformer,
    simulate,
    simulate_many,
)

STRONG, CHAOS, WEAK_L, WEAK_M = Strong(), Chaos(), WeakL(), WeakM()


def _programs(fn, *args):
    with CompileRecorder() as stats:
        out = fn(*args)
    return stats.compiled + stats.cache_loads, out


@pytest.mark.filterwarnings("ignore:overflow encountered in exp")  # the fit's prefactor, with an error of 0
def test_strong_coupling_is_exact_at_the_fine_step_and_a_second_seed_compiles_nothing():
    """The scheme with as many steps as the reference is the reference (the same increments, summed
    in blocks of one): error 0. Coarser schemes deviate, the coarsest the most."""
    config = dict(Ls=[4, 8, 16], fine=16, N=3, d=3, R=3, seed=0)
    row = STRONG.run(config)
    assert row["errors"][-1] < 1e-13 and row["errors"][0] > row["errors"][1] > 1e-3
    again, _ = _programs(STRONG.run, {**config, "seed": 1})
    assert again == 0, f"a second seed compiled {again} program(s)"


def test_chaos_coupling_is_exact_at_n_ref_and_a_second_seed_compiles_nothing():
    """With N = N_ref the system is the reference (error 0); with N < N_ref the error is the sup over the
    saved times of the RMS distance to the reference's first N tokens, recomputed here run by run with
    the library's simulate (the same starts and keys)."""
    config = dict(Ns=[2, 8], N_ref=8, d=3, width=8, steps=10, T=1.0, R=2, seed=0)
    row = CHAOS.run(config)
    assert row["errors"][-1] < 1e-13 < row["errors"][0]
    sde = SphereSDE(NoiseKernel("relu", 0.5, 1.0, 0.0), 10, 1.0, SphereAttention("SA", 1.0), noise="features", width=8)
    starts = random_starts(jax.random.key(1), 2, 8, 3)
    sups = []
    for x, k in zip(starts, jax.random.split(jax.random.key(0), 2)):
        ref = np.asarray(simulate(sde, x, k, save_every=1)[1])
        small = np.asarray(simulate(sde, x[:2], k, save_every=1)[1])
        sups.append(np.sqrt(((small - ref[:, :2]) ** 2).sum(-1).mean(-1)).max())
    assert row["errors"][0] == pytest.approx(np.mean(sups), rel=1e-12)
    again, _ = _programs(CHAOS.run, {**config, "seed": 1})
    assert again == 0, f"a second seed compiled {again} program(s)"


def test_weak_fit_on_samples_with_a_known_offset():
    """Samples whose means sit exactly c/x above the reference's mean: the resolved slope is −1 within its
    bootstrap interval and equals the least-squares slope of the resolved errors (the statistic on the
    data); a size whose offset is 1.5 standard errors is not resolved (the rule is two), nor one at 0."""
    rng = np.random.default_rng(0)
    R, xs = 4000, np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    ref = rng.normal(size=R)
    centred = [z - z.mean() + ref.mean() for z in rng.normal(size=(5, R))]
    se = [np.hypot(z.std(), ref.std()) / np.sqrt(R) for z in centred]
    offsets = [0.5 / xs[0], 0.5 / xs[1], 0.5 / xs[2], 1.5 * se[3], 0.0]
    samples = [z + c for z, c in zip(centred, offsets)]
    fit = weak_fit(xs, ref, samples)
    assert list(fit["resolved_sizes"]) == [1.0, 2.0, 4.0]
    np.testing.assert_allclose(fit["errors"], offsets, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(fit["standard_errors"], se, rtol=1e-14)
    errs = np.asarray(fit["errors"])[:3]
    assert fit["slope_resolved"] == pytest.approx(np.polyfit(np.log(xs[:3]), np.log(errs), 1)[0], rel=1e-12)
    assert fit["slope_resolved"] == pytest.approx(-1.0, abs=1e-8)  # the errors are exactly 0.5/x
    lo, hi = fit["slope_resolved_ci"]
    assert lo < -1.0 < hi and hi - lo < 0.5, (lo, hi)
    unresolved = weak_fit(xs[:2], ref, [ref + 1e-6, ref - 1e-6])  # the same runs: nothing resolved
    assert list(unresolved["resolved_sizes"]) == [] and np.isnan(unresolved["slope_resolved"])


def test_weak_rows_run_only_outside_quick_and_reuse_their_programs():
    assert WEAK_L.configs(resolve([WEAK_L], quick=True)) == [] and WEAK_M.configs(resolve([WEAK_M], quick=True)) == []
    assert WEAK_L.configs(resolve([WEAK_L]))[0]["R"] == 8000 and WEAK_M.configs(resolve([WEAK_M]))[0]["R"] == 20000
    assert WEAK_M.configs(resolve([WEAK_M], realisations=10))[0]["R"] == 10
    config = dict(ms=[1, 2], L=2, R=50, seed=0)
    row = WEAK_M.run(config)
    assert len(row["errors"]) == 2 and all(se > 0 for se in row["standard_errors"])
    # the reference runs on the seed, width m on seed + 7m (the committed results' keys)
    k, x0 = NoiseKernel("relu", 1.5, 1.0, 0.0), jnp.eye(3)[:2]
    rho = lambda model, seed: np.asarray(  # noqa: E731
        jnp.sum(jnp.prod(simulate_many(model, x0, jax.random.split(jax.random.key(seed), 50))[1], axis=1), -1)
    )
    ref, m2 = rho(SphereSDE(k, steps=2, horizon=1.0), 0), rho(StochasticTransformer(k, width=2, layers=2), 14)
    assert row["errors"][1] == pytest.approx(abs(m2.mean() - ref.mean()), rel=1e-10)
    again, _ = _programs(WEAK_M.run, {**config, "seed": 1})
    assert again == 0, f"a second seed compiled {again} program(s)"
    summary = WEAK_M.summarize([], resolve([WEAK_M], quick=True))
    assert summary.text == "not run under --quick" and not summary.claims


def _rate_row(part, lo, hi, config):
    fit = {"slope": (lo + hi) / 2, "intercept": 0.0, "ci_low": lo, "ci_high": hi, "prefactor": 1.0}
    return {"config": {"part": part.name, **config}, "errors": [0.4, 0.3, 0.2], "fit": fit}


@pytest.mark.parametrize("lo,hi,verdict", [(-0.66, -0.54, "holds"), (-0.45, -0.30, "refuted at these sizes")])
def test_strong_claim_verdict(lo, hi, verdict):
    config = dict(Ls=[4, 8, 16], fine=32, N=3, d=3, R=3, seed=0)
    summary = STRONG.summarize([_rate_row(STRONG, lo, hi, config)], resolve([STRONG]))
    (line,) = summary.claims
    assert line.verdict == verdict and line.figure == "strong.png" and "vs −0.5" in line.measured
    assert summary.data["ci"] == [lo, hi]


def test_weak_claim_reads_the_resolved_fit(tmp_path):
    """The weak claim is judged on the resolved sizes' slope and interval (stored as null when there is
    none: not measured); the figure draws both kinds of stored row."""
    config = dict(Ls=[1, 2, 4, 8], width=64, ref_steps=64, R=8000, seed=0)
    nan_fit = {"slope": -2.27, "intercept": 0.0, "ci_low": None, "ci_high": None, "prefactor": 1.0}
    row = {
        "config": {"part": "weak_L", **config},
        "errors": [0.18, 0.083, 0.023, 0.0015],
        "standard_errors": [0.0095, 0.0098, 0.0099, 0.0101],
        "fit": nan_fit,
        "resolved_sizes": [1.0, 2.0, 4.0],
        "slope_resolved": -1.49,
        "slope_resolved_ci": [-1.7, -1.3],
    }
    (line,) = WEAK_L.summarize([row], resolve([WEAK_L])).claims
    assert (
        line.verdict == "holds" and "-1.49 [-1.70, -1.30]" in line.measured and "resolved [1.0, 2.0, 4.0]" in line.sizes
    )
    flat = {**row, "slope_resolved_ci": [-0.9, -0.5]}
    assert WEAK_L.summarize([flat], resolve([WEAK_L])).claims[0].verdict == "refuted at these sizes"
    none = {**row, "resolved_sizes": [1.0], "slope_resolved": None, "slope_resolved_ci": [None, None]}
    summary = WEAK_L.summarize([none], resolve([WEAK_L]))
    assert summary.claims[0].verdict == "not measured: no usable rows"
    (path,) = WEAK_L.figures([none], summary, tmp_path)
    assert path.name == "weak_L.png" and path.stat().st_size > 10_000
    strong = json.loads(json.dumps(_rate_row(STRONG, -0.7, -0.5, dict(Ls=[4, 8, 16], fine=32, N=3, d=3, R=3, seed=0))))
    assert STRONG.figures([strong], STRONG.summarize([strong], resolve([STRONG])), tmp_path)[0].exists()


def test_the_parts_programs_hold_no_host_callback():
    """The sweeps run the simulators on their own generated tokens without value checks, so every
    program is stored in the persistent compilation cache (one holding a host callback never is)."""
    from cfm_experiments.sync.convergence import coupled_paths, feature_paths, overlaps

    k = NoiseKernel("relu", 0.5, 1.0, 0.0)
    sde = SphereSDE(k, 4, 1.0, SphereAttention("SA", 1.0), noise="features", width=8)
    x0 = random_starts(jax.random.key(0), 2, 3, 3)
    keys = jax.random.split(jax.random.key(1), 2)
    dB = jnp.zeros((2, 8, 3, 3))
    lowered = [
        coupled_paths.lower(SphereSDE(k, 4, 1.0), x0[0], dB, 2),
        feature_paths.lower(sde, x0, keys, 2),
        overlaps.lower(StochasticTransformer(k, width=2, layers=2), jnp.eye(3)[:2], keys),
    ]
    for program in lowered:
        assert "callback" not in program.as_text()
