"""claims.deviation: the sup deviation against the exact limit (rate, scale identity, padding, batching)
and its programs (one per padded shape, reused across seeds, norms and configurations).

Every computation here shares one shape (Gaussian, d = 3, L = 2, n ∈ {4, 16, 64})."""

import jax
import numpy as np
import pytest

from cfm_experiments.claims import deviation as D
from cfm_experiments.claims.sampling import draw, gaussian_law, seed_keys, transformer
from cfm_experiments.claims.statistics import slope_fit
from cfm_jax import CompileRecorder, EmpiricalMeasure

NS = [4, 16, 64]


def _cfg(**kw):
    base = dict(law="gaussian", dim=3, heads=1, width=0, layers=2, scale=1.0, qk=1.0, v=1.0)
    return {**base, "ns": NS, "seeds": 8, "seed": 0, **kw}


@pytest.fixture(scope="module")
def base_row():
    return D.deviations(_cfg())


def test_deviation_decays_at_rate_one_half(base_row):
    """Against the exact Gaussian limit (no floor), the slope's bootstrap 95 % CI contains −1/2."""
    fit = slope_fit(NS, base_row["values"])
    assert fit.ci_low <= -0.5 <= fit.ci_high and fit.ci_high < 0, fit
    assert base_row["floor"] == [0.0] * 8


def test_scale_identity_and_seed_batching(base_row):
    """x_s(σx, σμ; b) = σ x_s(x, μ; bσ²): scale 2 with ‖Q‖‖K‖ = 1/4 is exactly twice scale 1 with 1;
    and the first 8 seeds of a 20-seed run (two batches, padded) are those of the 8-seed run."""
    scaled = D.deviations(_cfg(scale=2.0, qk=0.25, seeds=20))
    np.testing.assert_allclose(np.asarray(scaled["values"])[:8], 2 * np.asarray(base_row["values"]), rtol=1e-9)
    other = D.deviations(_cfg(scale=2.0, qk=1.0))  # another β: not a rescaling
    assert not np.allclose(np.asarray(other["values"]), 2 * np.asarray(base_row["values"]), rtol=1e-3)


def test_padded_prefix_equals_the_unpadded_system(base_row):
    """Seed 0's deviation at n = 16 from the padded system equals that of the 16-point context itself."""
    fixed, seeds = seed_keys(0)
    inputs = draw(seeds, 0, fixed, 1.0, 1.0, 1.0, False, False, False,
                  batch=D.BATCH, law="gaussian", dim=3, heads=1, width=0, layers=2, size=64, n_ref=0)  # fmt: skip
    p = jax.tree.map(lambda a: a[0], inputs["params"])
    model, x0 = transformer(p), inputs["x0"][0]
    ref = D.reference_tokens(model, x0, gaussian_law(3, 1.0))
    direct = D.sup_deviation(D.token_trajectory(model, x0, EmpiricalMeasure(inputs["z"][0][:16])), ref)
    np.testing.assert_allclose(float(direct), base_row["values"][0][1], rtol=1e-10)


def test_a_fixed_model_varies_only_the_context(base_row):
    row = D.deviations(_cfg(fixed_model=True))
    values = np.asarray(row["values"])
    assert not np.allclose(values, np.asarray(base_row["values"]))
    assert np.unique(values[:, 0]).size == values.shape[0]  # every context its own


def test_programs_are_reused_across_seeds_norms_and_configurations(base_row):
    """After one configuration of a shape has run, more seeds, other norms and scales, another base seed,
    the other value norm and a fixed model compile nothing new (a compile counter, not a timer)."""
    with CompileRecorder() as stats:
        D.deviations(_cfg(seeds=24, qk=3.0, v=0.5, scale=1.7, seed=9, vnorm="sum"))
        D.deviations(_cfg(fixed_model=True, qk=0.3))
    assert stats.compiled + stats.cache_loads == 0, stats.compiled_names  # compiled or loaded from the disk cache


def test_programs_hold_no_host_callback():
    """The claims' programs keep the library's checks of what they drew themselves as data
    (``cfm_jax.compiled``): a program with a host callback is never stored by the persistent
    compilation cache, so every warm ``cfm-jax claims`` would compile it again."""
    from cfm_experiments.claims import ascent

    B, L, d, N = 2, 2, 3, 16
    f = jax.numpy.zeros  # arrays, not shape structs: cfm_jax.compiled traces arrays, keeps the rest static
    dt = jax.numpy.result_type(float)
    params = {k: f((B, L, 1, d, d), dt) for k in ("Q", "K", "V")}
    x0, z, refs = f((B, 1, d), dt), f((B, N, d), dt), f((B, L + 1, 1, d), dt)
    ns = f((3,), jax.numpy.int32)
    texts = [
        D.deviations_program.lower(params, x0, z, refs, ns).as_text(),  # pyright: ignore[reportAttributeAccessIssue]
        D.references.lower(params, x0, 1.0, None).as_text(),
        ascent.evaluate.lower(  # pyright: ignore[reportAttributeAccessIssue]
            params, {"m": f((B, d), dt), "F": f((B, d, d), dt)}, f((1, d), dt), f((2, N, d), dt), 1.0, f((d,), dt), ns
        ).as_text(),
    ]
    for text in texts:
        assert "callback" not in text
