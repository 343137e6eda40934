"""The ablation part of `cfm-jax ogd` on a tiny configuration, through the one driver: the ridge rule
per seed, the science of the regimes, resume, and bad options (the protocol's rules)."""

import json
from typing import Any

import numpy as np
import pytest

import cfm_experiments
from cfm_experiments.cli import main
from cfm_experiments.ogd import ablation

TINY: dict[str, Any] = dict(dim=2, layers=2, mlp_width=4, n_ref=64, ns=[4, 32], steps=30, seeds=2)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("ogd") / "ablation"
    return cfm_experiments.run("ogd", out=out, quick=True, **TINY)


@pytest.mark.slow  # the module's ablation run (pilots and three ridges)
def test_each_seeds_ridges_are_its_pilots_lambda_c_over_8_and_1_5(report):
    """λ_c = 2C with C from the seed's own λ = 0 run on the region it visited (written out here: 2C,
    not C); weak = λ_c/8, strong = min(1.5·λ_c, 0.9/η); the zero row's region C is the pilot's."""
    rows = {r["config"]["regime"]: r for r in report.rows}
    assert list(rows) == ["zero", "weak", "strong"]
    C = np.asarray(rows["zero"]["C_pilot"])
    np.testing.assert_array_equal(rows["zero"]["region_C"], C)
    assert rows["zero"]["lam"] == [0.0, 0.0] and (C > 0).all()
    np.testing.assert_allclose(rows["weak"]["lam"], 2 * C / 8, rtol=1e-12)
    np.testing.assert_allclose(rows["strong"]["lam"], np.minimum(1.5 * 2 * C, 0.9 / 0.03), rtol=1e-12)
    for r in rows.values():
        np.testing.assert_array_equal(r["C_pilot"], C)


@pytest.mark.slow  # the module's ablation run (pilots and three ridges)
def test_the_table_reads_lambda_c_as_twice_the_pilots_C(report):
    """The summary table's λ_c is 2C of each seed's pilot (written out here), so the weak ridge sits at
    λ/λ_c = 1/8 exactly."""
    table = ablation.regimes_table(report.rows)
    C = np.asarray(next(r for r in report.rows if r["config"]["regime"] == "zero")["C_pilot"])
    assert table["weak"]["lambda_c"] == pytest.approx(2 * C.mean(), rel=1e-12)
    assert table["weak"]["lambda_over_lambda_c"] == pytest.approx(1 / 8, rel=1e-12)


@pytest.mark.slow  # the module's ablation run (pilots and three ridges)
def test_the_strong_ridge_is_closest_and_larger_contexts_are_closer(report):
    """The ridge contracts the coupled pair at rate 1 − ηλ per step: on the same streams the strong
    ridge's sup_k deviation is below the unregularised one for every seed and n; in every regime it
    falls with n (negative fitted slopes)."""
    rows = {r["config"]["regime"]: np.asarray(r["sup_dev"]) for r in report.rows}
    assert (rows["strong"] < rows["zero"]).all(), rows
    for name, sup in rows.items():
        assert (sup[:, -1] < sup[:, 0]).all(), name
    table = report.summaries["ablation"].data["regimes"]
    assert all(t["slope_sup"]["slope"] < 0 for t in table.values())
    text = report.summaries["ablation"].text
    assert "95 % t half-width" in text and "λ/2C,run" in text and "nan" not in text


@pytest.mark.slow  # the module's ablation run (pilots and three ridges)
def test_outputs_are_strict_json_and_resume_reruns_nothing(report):
    strict = lambda s: json.loads(s, parse_constant=lambda c: pytest.fail(c))  # noqa: E731
    strict((report.folder / "summary.json").read_text())
    rows = [strict(line) for line in (report.folder / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and (report.folder / "ogd_ablation.png").stat().st_size > 10_000
    again = cfm_experiments.run("ogd", out=report.folder, quick=True, mode="resume", **TINY)
    assert [r["sup_dev"] for r in again.rows] == [r["sup_dev"] for r in report.rows]
    assert again.compile.compiled == 0  # nothing ran


def test_bad_seeds_are_refused_by_the_rule_of_the_command_line(tmp_path):
    """The Python entry point refuses what the command line refuses (the seed's own rule, stated here)."""
    for seed in (-1, 1.5, 2**62):
        with pytest.raises(ValueError, match=r"--seed must be an integer in \[0, 2\*\*62\)"):
            cfm_experiments.run("ogd", out=tmp_path / "x", quick=True, seed=seed)
    assert not (tmp_path / "x").exists()
    assert main(["ogd", "--seed", "-1", "--out", str(tmp_path / "y")]) == 2
    assert not (tmp_path / "y").exists()


@pytest.mark.parametrize(
    "options,message",
    [
        (dict(ns=[4]), r"--ns needs at least 2 value\(s\)"),
        (dict(ns=[4, 128], n_ref=64), r"--ns must not exceed --n-ref=64"),
        (dict(seeds=1), r"--seeds must be an integer >= 2"),
        (dict(eta=0.0), r"--eta must be a finite number > 0"),
        (dict(steps=3), r"--steps must be an integer >= 4"),
        (dict(population="cube"), r"--population must be one of uniform_sphere, gaussian, gaussian_mixture"),
        (dict(width=3), r"--width: not an option"),
    ],
)
def test_bad_options(tmp_path, options, message):
    with pytest.raises(ValueError, match=message):
        cfm_experiments.run("ogd", out=tmp_path / "x", quick=True, **options)


def test_configs_cover_the_three_regimes():
    settings = cfm_experiments.resolve((ablation.PART,), quick=False)
    configs = ablation.PART.configs(settings)
    assert [(c["regime"], c["ratio"]) for c in configs] == [("zero", 0.0), ("weak", 0.125), ("strong", 1.5)]
    json.dumps(configs)
    assert {c["n_ref"] for c in configs} == {512} and configs[0]["ns"] == [4, 16, 64]


def test_argmax_k_is_the_one_based_step_of_the_largest_deviation():
    """A deviation peaking at step k (1-based, as ``curve_k``) is recorded as k: at the first step, inside,
    and at the last, per seed and n; ``curve_k`` labels the same step."""
    K = 12
    peaks = np.array([[1, 5], [9, K]])  # (S, len(ns))
    devs = np.ones((2, K, 2))
    for s, i in np.ndindex(peaks.shape):
        devs[s, peaks[s, i] - 1, i] = 5.0  # step k is entry k − 1
    m = {"deviations": devs, "losses": np.zeros((2, K, 3)), "ref_norms": np.ones((2, K)), "C": np.array([1.0, 1.0])}
    out = ablation.record({}, m, [0.0, 0.0], [1.0, 1.0])
    assert out["argmax_k"] == peaks.tolist()
    assert out["curve_k"][int(np.argmax(out["curve"][0], axis=0)[1])] == peaks[0, 1]


@pytest.mark.parametrize("seeds,how", [(2, "Student-t interval of the per-seed slopes"), (8, "bootstrap interval")])
def test_the_tables_key_names_the_slope_interval_fit_loglog_takes(seeds, how):
    """Below 8 seeds fit_loglog's interval is the t interval of the per-seed slopes, not a bootstrap."""
    row = dict(seeds=seeds, sup_dev={4: (1.0, 0.1)}, lambda_over_lambda_c=1.0, lambda_over_2C_region=0.5)
    row |= dict(slope_sup=dict(slope=-0.5, ci_low=-0.7, ci_high=-0.3), growth_K_over_K2={4: 1.0}, **{"lambda": 0.1})
    text = ablation.format_table([4], {"weak": row})
    assert how in text and ("bootstrap" in text) == (seeds >= 8)
