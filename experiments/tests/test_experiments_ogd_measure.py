"""The one OGD measurement: the ridge rule, the pilot, and one compiled program per task shape."""

import jax
import numpy as np
import pytest

from cfm_experiments.ogd import measure as M
from cfm_jax import CompileRecorder

TINY = dict(dim=2, layers=1, batch=2, ns=(4,), eta=0.5, steps=4, context_scale=0.5)


def _task(seeds=2, **kw):
    sizes = {**TINY, **kw}
    scale = sizes.pop("context_scale")
    return M.GaussianTask(**sizes, seeds=seeds, mu=M.gaussian_law(sizes["dim"], scale))


def test_ridge_rule_is_a_ratio_of_twice_C():
    """λ_c = 2C: λ_c/8 of C = 4 is 1, 1.5·λ_c is 12 (capped at 0.9/η for ratios >= 1), 0 is 0."""
    assert M.ridge(4.0, 1 / 8, 0.1) == pytest.approx(1.0)
    assert M.ridge(4.0, 1.5, 0.01) == pytest.approx(12.0)
    assert M.ridge(4.0, 1.5, 0.1) == pytest.approx(9.0)  # 0.9/η
    assert M.ridge(4.0, 0.25, 0.1) == pytest.approx(2.0) and M.ridge(4.0, 0.0, 0.1) == 0.0
    np.testing.assert_allclose(M.ridges([1.0, 2.0], 1.0, 0.01), [2.0, 4.0])
    assert M.LAMBDA_C_FACTOR == 2.0 and M.REGIMES == {"zero": 0.0, "weak": 0.125, "strong": 1.5}


def test_a_sub_threshold_ridge_that_breaks_eta_lambda_below_one_names_eta():
    """λ_c/8 = 1 for C = 4: allowed just below η = 1, an error naming --eta at η = 1."""
    assert M.ridge(4.0, 1 / 8, 1 - 1e-9) == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"--eta 1.0: the ridge 0.125·λ_c = 1 .*lower --eta"):
        M.ridge(4.0, 1 / 8, 1.0)


def test_k_c():
    assert M.k_c(0.5) == 2 and M.k_c(0.03) == 33 and M.k_c(5.0) == 1


def test_one_program_per_shape_for_every_seed_and_ridge():
    """The first measurement of a shape builds its two programs (or loads them from the persistent
    cache); another base seed, other ridges and another regime of the same shape build nothing."""
    task = _task()
    with CompileRecorder() as first:
        M.measure(task, jax.random.key(0), [0.0, 0.0])
    assert first.compiled + first.cache_loads >= 2
    # the keys are made outside the recording: fold_in is a program of its own
    k1, k2 = jax.random.key(1), jax.random.fold_in(jax.random.key(2), 7)
    with CompileRecorder() as again:
        a = M.measure(task, k1, [0.3, 0.1])
        b = M.measure(_task(), k2, np.array([1.0, 0.0]))
    assert again.compiled == 0 and again.cache_loads == 0, again.compiled_names
    assert set(a) == {"deviations", "losses", "ref_norms", "C"} and a["deviations"].shape == (2, 4, 1)
    assert not np.allclose(a["deviations"], b["deviations"])


def test_seeds_are_independent_problems_and_the_ridge_contracts():
    """Seed s of a batch equals seed s measured at a different λ for the other seeds; a larger λ
    lowers ‖θ̂_K‖ (the ridge pulls θ̂ toward 0)."""
    task = _task()
    one = M.measure(task, jax.random.key(3), [0.0, 0.0])
    two = M.measure(task, jax.random.key(3), [0.0, 1.0])
    np.testing.assert_array_equal(one["deviations"][0], two["deviations"][0])
    assert two["ref_norms"][1, -1] < one["ref_norms"][1, -1]


def test_pilot_is_kept_per_configuration_and_refuses_a_diverged_run(monkeypatch):
    calls = []

    def fake(task, base, lams):
        calls.append(1)
        bad = len(calls) > 1
        return {"losses": np.array([[np.nan if bad else 1.0]]), "C": np.array([1.0])}

    monkeypatch.setattr(M, "measure", fake)
    monkeypatch.setattr(M, "_PILOTS", {})
    task = _task()
    first = M.pilot(task, None, {"a": 1})
    assert M.pilot(task, None, {"a": 1}) is first and len(calls) == 1  # kept
    with pytest.raises(ValueError, match="--eta 0.5: the λ = 0 pilot diverged"):
        M.pilot(task, None, {"a": 2})
