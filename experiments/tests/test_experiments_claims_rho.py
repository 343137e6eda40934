"""claims.rho: the candidate law, the ρ a row reports, the option's refusals, the
regression verdict on synthetic slopes pooled over draws, bins that agree across two independent
draws, and the pooled verdict the same for four base seeds at its stated sizes (slow)."""

import math

import numpy as np
import pytest

from cfm_experiments.claims import rho as R, rho_models as M
from cfm_experiments.protocol import Settings
from cfm_experiments.verdicts import claims as VC
from cfm_jax.stats import Interval

HAVE = {"largest n": 10240, "models per bin": 16, "contexts": 2, "draws": 6}
RANGE = (0.5, 16.0)


def test_predicted_slope():
    np.testing.assert_allclose(R.predicted_slope([0.5, 2.0, 4.0, 8.0]), [-0.5, -0.5, -0.125, -0.03125])


def _config(models, seed=2, layers=2, rho_bin=0):
    return {
        "rho_bin": rho_bin,
        "models": models,
        "seed": seed,
        "rho_ns": [8, 32],
        "rho_contexts": 2,
        "rho_beta_range": list(RANGE),
        "layers": layers,
    }


def test_the_part_reports_the_rho_of_its_models():
    """A row's ρ is that of the models it drew, at its context law (σ = SCALE, d = DIM); its β lie in
    the range, and a candidate is the same model whichever row draws it."""
    row = R.Rho().run(_config([3, 7]))
    beta, params, _, _ = M.inputs(_config([3, 7]))
    expected = M.rho_of(params, M.SCALE)  # against an independent computation: test_experiments_claims_rho_models
    np.testing.assert_allclose(row["rho"], expected, rtol=1e-10)
    assert params["Q"].shape[-1] == M.DIM and np.ptp(expected) > 0  # distinct models, each its own ρ
    assert all(RANGE[0] <= b <= RANGE[1] for b in row["beta"])
    _, alone, _, _ = M.inputs(_config([7, 11]))
    np.testing.assert_allclose(alone["Q"][0], params["Q"][1], rtol=1e-6)


@pytest.mark.parametrize(
    "values", [["16", "0.5"], ["0.5", "4", "16"], ["0.5", "1e40"], ["0", "16"], ["1e-50", "1"]], ids=str
)
def test_a_bad_beta_range_is_refused_at_option_checking(values, tmp_path, capsys):
    """Reversed, three numbers, a high end that overflows float32 logits, a low end of 0 or below
    float32: one line on stderr naming the option, exit 2, no results folder."""
    from cfm_experiments import cli

    out = tmp_path / "never"
    assert cli.main(["claims", "--parts", "rho", "--rho-beta-range", *values, "--no-progress", "--out", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "--rho-beta-range" in lines[0], lines
    assert not out.exists()


def _models(rhos, slope_of, rng, ns=(640, 2560, 10240), draws=1):
    """Per model (its bin from its ρ), in each of ``draws`` draws: a mean deviation ∝ n^{slope} ending
    with the given slope, 4 contexts of small noise."""
    out = []
    for k in range(draws):
        for rho in rhos:
            s = slope_of(rho)
            values = np.asarray(ns, float) ** s * np.exp(0.02 * rng.standard_normal((4, len(ns))))
            b = int(np.searchsorted(M.RHO_BINS, rho, side="right") - 1)
            config = {"rho_bin": b, "draw": k}
            out.append({"config": config, "ns": list(ns), "beta": [1.0], "rho": [rho], "values": [values.tolist()]})
    return R.per_model(out)


def test_the_regression_verdict_on_synthetic_slopes():
    rng = np.random.default_rng(0)
    rhos = np.linspace(0.3, 6.0, 30)
    law = _models(rhos, lambda r: float(R.predicted_slope(r)), rng)
    assert R.rho_line(law, HAVE).verdict == "holds"
    flat = _models(rhos, lambda r: -0.5, rng)  # no transition at all: steeper than the law where it is slow
    assert R.rho_line(flat, HAVE).verdict == "not observed at these sizes"
    slow = _models(rhos, lambda r: -0.2, rng)  # slower than the law allows where it is −½
    assert R.rho_line(slow, HAVE).verdict == "refuted at these sizes"
    assert R.rho_line(law, HAVE | {"largest n": 2560}).verdict == "inconclusive at these sizes"
    assert R.rho_line(law, HAVE | {"models per bin": 8}).verdict == "inconclusive at these sizes"
    assert R.rho_line(law, HAVE | {"draws": 1}).verdict == "inconclusive at these sizes"


_AT_LAW = [((-0.52, -0.48), -0.5), ((-0.2, -0.1), -0.15)]  # each bin's interval reaches its law
_STEEPER = [((-0.52, -0.48), -0.5), ((-0.45, -0.35), -0.15)]  # the slow bin decays faster than the law
_SLOWER = [((-0.3, -0.2), -0.5), ((-0.2, -0.1), -0.15)]  # the fast bin decays slower than the law allows


@pytest.mark.parametrize(
    "a, b, bins, verdict",
    [
        ((-0.1, 0.1), (0.8, 1.2), _AT_LAW, "holds"),
        ((-0.1, 0.1), (0.3, 0.9), _STEEPER, "not observed at these sizes"),
        ((-0.1, 0.1), (0.3, 0.9), _SLOWER, "refuted at these sizes"),
        ((-0.1, 0.1), (1.1, 1.4), _SLOWER + _STEEPER, "refuted at these sizes"),
        ((-0.1, 0.1), (0.3, 0.9), _AT_LAW, "undecided: interval straddles the boundary"),
        ((-0.1, 0.1), (-0.2, 1.3), _AT_LAW, "undecided: interval straddles the boundary"),
        ((0.1, 0.3), (0.8, 1.2), _STEEPER, "not observed at these sizes"),
        ((-0.1, 0.1), (float("nan"), float("nan")), _AT_LAW, "not measured: no usable rows"),
        ((-0.1, 0.1), (-float("inf"), float("inf")), _AT_LAW, "not measured: no usable rows"),
        ((0.1, -0.1), (0.8, 1.2), _AT_LAW, "not measured: no usable rows"),
        ((-0.1, 0.1), (0.8, 1.2), [], "not measured: no usable rows"),
        ((-0.1, 0.1), (0.8, 1.2), [((None, -0.1), -0.15)], "not measured: no usable rows"),
    ],
)
def test_the_law_rule_is_total(a, b, bins, verdict):
    """Every interval pair reads a verdict of the vocabulary: NaN, infinite or reversed ones *not
    measured* (never *refuted* on no data), a b that reaches both 1 and 0 *undecided*; a law missed
    reads by its bins: slower than the law *refuted*, only steeper *not observed at these sizes*."""
    iv = lambda lo, hi: Interval(0.5 * (lo + hi), lo, hi)  # noqa: E731
    stored = [({"ci_low": lo, "ci_high": hi}, law) for (lo, hi), law in bins]
    assert VC.law_rule(iv(*a), iv(*b), stored) == verdict


def test_the_line_pools_the_draws_and_prints_each_draws_own_verdict():
    """Three draws: the verdict is the pooled regression's over all models; the line says how many draws
    and models it pooled and each draw's own verdict — here one draw holding the law, two without
    the transition, pooled *not observed at these sizes* (steeper than the law where it is slow)."""
    rng = np.random.default_rng(2)
    rhos = np.linspace(0.3, 6.0, 20)
    law = _models(rhos, lambda r: float(R.predicted_slope(r)), rng)
    flat = _models(rhos, lambda r: -0.5, rng, draws=2)
    for m in flat:
        m["draw"] += 1
    line = R.rho_line(law + flat, HAVE)
    assert line.verdict == "not observed at these sizes"
    assert "3 independent draws pooled, 60 models" in line.measured, line.measured
    own = line.measured.split("each draw alone (20 models): ")[1].split("; ")
    assert [x.split(",")[0][:10] for x in own] == ["draw 0: b ", "draw 1: b ", "draw 2: b "]
    assert own[0].endswith("holds") and all(x.endswith("not observed at these sizes") for x in own[1:]), own


def test_binned_slopes_cover_the_bins():
    rng = np.random.default_rng(1)
    law = _models(np.linspace(0.3, 6.0, 30), lambda r: float(R.predicted_slope(r)), rng)
    out = R.binned(law)
    assert [c["bin"] for c in out] == list(range(len(M.RHO_BINS) - 1))
    assert sum(c["models"] for c in out) == 30
    assert all(c["slope"].contains(c["law"]) or abs(c["slope"].value - c["law"]) < 0.05 for c in out)
    assert out[-1]["label"] == f"ρ ≥ {M.RHO_BINS[-2]:g}" and math.isinf(M.RHO_BINS[-1])


def test_a_second_bin_compiles_nothing():
    """Rows of another bin (other candidates, another base seed) reuse the draw, reference and
    deviation programs."""
    from cfm_jax import CompileRecorder

    part = R.Rho()
    first = part.run(_config([0, 1], seed=0, layers=1))
    with CompileRecorder() as stats:
        second = part.run(_config([5, 9], seed=3, layers=1, rho_bin=3))
    assert stats.compiled + stats.cache_loads == 0, stats.compiled_names  # compiled or loaded from the disk cache
    assert np.asarray(second["values"]).shape == np.asarray(first["values"]).shape == (2, 2, 2)


def _bins(seed):
    """The part's bins (configs → run → per_model → binned) at tiny sizes, one layer."""
    values = {
        "seed": seed,
        "rho_draws": 1,
        "rho_per_bin": 16,
        "rho_beta_range": RANGE,
        "rho_ns": (8, 32, 128),
        "rho_contexts": 2,
        "layers": 1,
    }
    part, settings = R.Rho(), Settings(False, values)
    rows = [{"config": c, **part.run(c)} for c in part.configs(settings)]
    return R.binned(R.per_model(rows))


@pytest.mark.slow  # 160 contexts per draw, two draws: ~25 s on two loaded cores
def test_bins_agree_across_two_independent_draws():
    """Two base seeds draw other models (and contexts): every bin's interval of the mean slope
    overlaps the other draw's, each bin holding 16 models."""
    a, b = _bins(0), _bins(1)
    assert [c["bin"] for c in a] == [c["bin"] for c in b] == list(range(len(M.RHO_BINS) - 1))
    for x, y in zip(a, b):
        assert x["models"] == y["models"] == 16
        sx, sy = x["slope"], y["slope"]
        assert sx.ci_low <= sy.ci_high and sy.ci_low <= sx.ci_high, (x["label"], sx, sy)


def _verdict(seed):
    """The ρ line's verdict (and its measured text) of the default run's rho part at base seed ``seed``."""
    import cfm_experiments

    parts = cfm_experiments.COMMANDS["claims"].select(["rho"])
    defaults = cfm_experiments.resolve(parts)
    settings = Settings(False, {k: defaults[k] for k in defaults} | {"seed": seed})
    part = parts[0]
    rows = [{"config": c, **part.run(c)} for c in part.configs(settings)]
    line = part.summarize(rows, settings).claims[0]
    return line.verdict, line.measured


@pytest.mark.long  # the default sizes (6 draws × 80 models, n ≤ 10240) four times: ~20 min on two idle cores
def test_the_pooled_verdict_is_the_same_for_four_base_seeds():
    """The stated sizes are those at which independent draws agree: four base seeds, one verdict."""
    verdicts = [_verdict(seed) for seed in range(4)]
    assert len({v for v, _ in verdicts}) == 1, verdicts
