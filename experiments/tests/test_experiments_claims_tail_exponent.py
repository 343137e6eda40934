"""claims.tail_exponent: the linearised limit's draws on a known covariance, the first variation against
the n-point deviation it linearises, the models at their ρ, and the lines' verdicts on synthetic tails
(per model, the line the worst of its models)."""

import jax
import numpy as np
import pytest
from _tail_rows import decaying as _decaying, model as _model

from cfm_experiments.claims import tail_exponent as T
from cfm_experiments.claims.deviation import reference_tokens, sup_deviation, token_trajectory
from cfm_experiments.claims.rho_models import rho_of
from cfm_experiments.claims.sampling import fixed_norm_params, sample_law, transformer
from cfm_experiments.claims.statistics import upper_quantiles
from cfm_experiments.verdicts import BELOW_STABLE_SIZES, HOLDS, REFUTED, UNDECIDED, tails as TR
from cfm_jax import EmpiricalMeasure


def test_linearised_sups_of_a_known_covariance():
    """f with covariance diag(0, 0 | 1, 1) ((L + 1) = 2 layers, d = 2): sup_s‖G_s‖ = ‖G_1‖ is Rayleigh:
    q_δ = √(2 log(1/δ))."""
    f = np.random.default_rng(0).choice([-1.0, 1.0], size=(20000, 4))
    f[:, :2] = 0
    sups = T.linearised_sups(f - f.mean(axis=0), 200_000, 2, seed=1)
    deltas = (1e-1, 1e-2, 1e-3)
    np.testing.assert_allclose(upper_quantiles(sups, deltas), np.sqrt(2 * np.log(1 / np.asarray(deltas))), rtol=0.03)


@pytest.mark.slow  # 512 contexts of 256 points and a Jacobian over 512 atoms: ~40 s on two loaded cores
def test_the_linearised_limit_predicts_the_deviation_at_large_n():
    """√n·dev at n = 256 (uniform ball, d = 2, L = 2) has the median of the linearised limit's sup_s‖G_s‖ to
    15 %; the limit is built from a QMC reference sample of 512 points (the reference of the deviation)."""
    key = jax.random.key(0)
    params = fixed_norm_params(key, 2, heads=1, width=0, layers=2, qk=1.0, v=1.0)
    x0 = sample_law("ball", jax.random.key(1), 1, 2, 1.0)
    ref_points = sample_law("ball", jax.random.key(2), 512, 2, 1.0, qmc=True)
    model = transformer(params)
    ref = reference_tokens(model, x0, EmpiricalMeasure(ref_points))
    zs = jax.vmap(lambda k: sample_law("ball", k, 256, 2, 1.0))(jax.random.split(jax.random.key(3), 512))
    dev = jax.vmap(lambda z: sup_deviation(token_trajectory(model, x0, EmpiricalMeasure(z)), ref))(zs)
    lin = T.linearised_sups(T.influence(params, x0, ref_points), 20_000, 2, seed=0)
    ratio = np.median(16 * np.asarray(dev)) / np.median(lin)
    assert 0.85 < ratio < 1.15, ratio


def test_deltas_reach_down_to_ten_contexts_beyond():
    assert T.deltas_for(100_000) == T.TAIL_DELTAS
    assert T.deltas_for(25_000) == (1e-1, 3e-2, 1e-2, 3e-3, 1e-3)
    assert T.deltas_for(1000) == (1e-1, 3e-2, 1e-2)
    with pytest.raises(ValueError, match="--tail-samples 300"):
        T.deltas_for(300)


def _config(law, model, rho):
    return {
        "law": law,
        "model": model,
        "rho": rho,
        "seed": 0,
        "tail_ns": [8, 4],
        "tail_samples": 400,
        "n_lin": 32,
        "tail_n_ref": 64,
        "layers": 2,
    }


@pytest.mark.slow  # a row's contexts and the linearised limit
def test_a_row_runs_its_model_at_its_rho():
    """Model i is drawn at unit norms and rescaled to its ρ (that of the rho part, recomputed here),
    the same model on both laws, another model for another i; the row keeps every n's statistics at
    the δ its contexts allow."""
    ball, gauss = T.model_inputs(_config("ball", 1, 2.5)), T.model_inputs(_config("gaussian", 1, 2.5))
    other = T.model_inputs(_config("ball", 2, 2.5))
    stacked = lambda p: jax.tree.map(lambda a: np.asarray(a)[None], p)  # noqa: E731
    np.testing.assert_allclose(rho_of(stacked(ball["params"])), [2.5], rtol=1e-5)
    np.testing.assert_array_equal(ball["params"]["Q"], gauss["params"]["Q"])
    assert not np.allclose(ball["params"]["Q"], other["params"]["Q"])
    np.testing.assert_allclose(rho_of(stacked(other["params"])), [2.5], rtol=1e-5)
    row = T.TailExponent().run(_config("gaussian", 0, 1.0))
    assert row["rho"] == pytest.approx(1.0, rel=1e-5) and row["floor"] == 0
    assert [s["n"] for s in row["sizes"]] == [4, 8] and row["deltas"] == [1e-1, 3e-2]
    assert all(len(s["ratio"]["value"]) == 2 and s["median"] > 0 for s in row["sizes"])


HAVE = {"contexts per model": 100_000}


def _line(*models, have=HAVE):
    return T.exponent_line(list(models), "ball", have)


def test_exponent_line_verdicts():
    assert _line(_model()).verdict == HOLDS
    assert _line(_model(gamma=0.45)).verdict == HOLDS  # lighter than ½
    assert _line(_model(gamma=0.95)).verdict == REFUTED
    assert _line(_model(gamma=0.95), have={"contexts per model": 10_000}).verdict == BELOW_STABLE_SIZES


def test_a_deviation_that_does_not_decay_is_refuted():
    """Light-tailed and at the limit at the largest n, but √n·dev's median doubles from n = 16 to 64: the
    deviation itself does not decay (exponent 0 in n): refuted; a median's exponent whose interval reaches
    across the decay bound is undecided."""
    line = _line(_model(growth=2.0))
    assert line.verdict == REFUTED and "+0.00 [" in line.measured, line.measured
    edge = TR.decay_bound(16, 64)
    slow = _line(_decaying(edge, spread=0.02))  # the boundary itself
    assert slow.verdict == UNDECIDED and f"{edge:+.2f} [" in slow.measured


def test_a_deviation_far_from_its_limit_is_refuted():
    """Light-tailed and decaying like n^{-1/2}, but 6 × the linearised limit (the β = 16 regime): refuted;
    a ratio interval reaching across the band's edge is undecided."""
    assert _line(_model(ratio=(6.0, 5.0, 7.0))).verdict == REFUTED
    assert _line(_model(ratio=(0.3, 0.25, 0.35))).verdict == REFUTED
    assert _line(_model(ratio=(1.12, 1.05, 1.2))).verdict == UNDECIDED


def test_the_light_tail_that_neither_decays_nor_meets_its_limit():
    """γ = 0.05 (far lighter than ½: the one-sided exponent rule reads *holds*), 6 × the limit and no decay."""
    assert _line(_model(gamma=0.05, growth=2.0, ratio=(6.0, 5.5, 6.5))).verdict == REFUTED


def test_a_middle_model_that_does_not_decay_refutes_the_line():
    """Three models over ρ; the middle one (in the list and in ρ) has a light tail
    (γ = 0.3) but a deviation that does not decay: the line is refuted and says which model; each model
    alone, or the two others together, hold."""
    mild, bad, heavy = _model(0.5, model=0), _model(2.5, gamma=0.3, growth=2.0, model=1), _model(4.0, model=2)
    line = _line(heavy, bad, mild)  # the line orders its models by ρ
    assert line.verdict == REFUTED
    parts = line.measured.split("; ρ = ")
    assert len(parts) == 3 and parts[1].startswith("2.50") and parts[1].endswith(": refuted at these sizes")
    assert parts[0].endswith(": holds") and parts[2].endswith(": holds")
    assert _line(mild, heavy).verdict == HOLDS and _line(mild, _model(2.5, model=1), heavy).verdict == HOLDS
    far = _line(mild, _model(2.5, gamma=0.3, ratio=(6.0, 5.0, 7.0), model=1), heavy)
    assert far.verdict == REFUTED
    assert TR.model_verdict(bad) == REFUTED and TR.model_verdict(mild) == HOLDS


def test_the_line_withholds_what_one_model_withholds():
    """One model's straddling interval (the others holding) leaves the line undecided, not holding."""
    assert _line(_model(0.5), _model(2.5, ratio=(1.12, 1.05, 1.2), model=1), _model(4.0, model=2)).verdict == UNDECIDED


def test_quantile_ratios_of_a_scaled_sample():
    """A sample 2 × the limit's draws (other draws of the same law): every ratio's interval holds 2."""
    rng = np.random.default_rng(0)
    lin = np.abs(rng.standard_normal(100_000))
    r = T.quantile_ratios(2 * np.abs(rng.standard_normal(100_000)), lin, n_boot=100)
    assert all(lo <= 2.0 <= hi for lo, hi in zip(r["ci_low"], r["ci_high"])), r
    assert r["ci_high"][0] - r["ci_low"][0] < r["ci_high"][-1] - r["ci_low"][-1]  # the extreme δ is the widest
    assert np.allclose(r["value"], 2.0, rtol=0.15)


def test_numpy_contexts_have_their_laws_moments():
    rng = np.random.default_rng(5)
    g = T.contexts(rng, "gaussian", 64, 64, 3).reshape(-1, 3)
    assert abs((g**2).sum(1).mean() - 1) < 0.03 and np.abs(g.mean(0)).max() < 0.03
    b = np.linalg.norm(T.contexts(rng, "ball", 64, 64, 3).reshape(-1, 3), axis=1)
    assert b.max() <= 1.0 and abs(b.mean() - 0.75) < 0.01 and abs((b**2).mean() - 0.6) < 0.01


def test_a_model_text_names_each_check_so_no_verdict_reads_as_anothers():
    """A model whose decay passes but whose quantiles lie beyond the band: the text says the decay check
    held and the model is refuted by name, not a bare *refuted* right after the decay exponent."""
    row = _model(ratio=(1.3, 1.25, 1.35))
    text = T.model_text(row)
    assert "(decay check: holds); this model: refuted at these sizes" in text, text
    assert "limit check: refuted at these sizes" in text and "tail check: holds" in text, text
