"""experiments.ogd_ablation on a tiny configuration: the science of the ridge ablation, resume, bad input."""

import json

import numpy as np
import pytest

from cfm_experiments import ogd_ablation

TINY = dict(dim=2, layers=2, mlp_width=4, n_ref=64, ns=(4, 32), steps=30, seeds=2)


@pytest.fixture(scope="module")
def ablation(tmp_path_factory):
    out = tmp_path_factory.mktemp("ogd")
    cfg = ogd_ablation.make_config(True, 0, **TINY)
    return cfg, out, ogd_ablation.run_ablation(cfg, out, progress=False, verbose=False)


def test_regimes_and_their_ordering(ablation):
    """λ_weak = λ_c/8 < λ_c < λ_strong = min(1.5 λ_c, 0.9/η). The ridge contracts the coupled pair
    (θ, θ̂) at rate 1 − ηλ per step, so on the same stream and seed the strong ridge's sup_k
    deviation is below the unregularised one, for every seed and n; and for every regime the
    deviation falls with n (a larger context is closer to the population): negative fitted slopes."""
    cfg, _, summary = ablation
    lam = summary["pilot"]["lambdas"]
    lam_c = summary["pilot"]["lambda_c"]
    assert lam["zero"] == 0 and np.isclose(lam["weak"], lam_c / 8)
    assert np.isclose(lam["strong"], min(1.5 * lam_c, 0.9 / cfg["eta"]))
    by = {
        name: np.array([r["sup_dev"] for r in summary["rows"] if r["config"]["regime"] == name])
        for name in ("zero", "weak", "strong")
    }
    assert (by["strong"] < by["zero"]).all(), by
    for name, t in summary["regimes"].items():
        assert t["slope_sup"]["slope"] < 0, (name, t["slope_sup"])
        assert (by[name][:, -1] < by[name][:, 0]).all(), name


def test_outputs_are_strict_json_and_resume_reruns_nothing(ablation, capsys):
    cfg, out, summary = ablation
    strict = lambda s: json.loads(s, parse_constant=lambda c: pytest.fail(c))  # noqa: E731
    strict((out / "summary.json").read_text())
    rows = [strict(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 3 * cfg["seeds"]
    again = ogd_ablation.run_ablation(cfg, out, resume=True, progress=False, verbose=False)
    assert [r["sup_dev"] for r in again["rows"]] == [r["sup_dev"] for r in summary["rows"]]
    table = ogd_ablation.format_table(cfg, summary["regimes"])
    assert "95 % t half-width" in table and "λ/λ_c,run" in table and "nan" not in table


def test_bad_configuration():
    with pytest.raises(ValueError, match="--ns"):
        ogd_ablation.make_config(ns=(4,))
    with pytest.raises(ValueError, match="--n-ref"):
        ogd_ablation.make_config(ns=(4, 128), n_ref=64)
    with pytest.raises(ValueError, match="--seeds"):
        ogd_ablation.make_config(seeds=1)
    with pytest.raises(ValueError, match="unknown"):
        ogd_ablation.make_config(width=3)


def test_weak_ridge_adapts_to_eta_or_names_it():
    """λ_c/8 must keep η·λ < 1: just below the limit the ridges are returned, at it the error names --eta."""
    C = 4.0  # λ_c = 8, weak = 1: η < 1 allowed
    r = ogd_ablation.ridges(C, 1 - 1e-9)
    assert r["lambdas"]["weak"] == 1.0 and r["lambdas"]["strong"] == min(12.0, 0.9 / (1 - 1e-9))
    with pytest.raises(ValueError, match="--eta 1.0.*lower --eta"):
        ogd_ablation.ridges(C, 1.0)


def test_diverging_pilot_names_eta_and_writes_no_row(tmp_path, ablation):
    """A learning rate at which the λ = 0 pilot diverges: one error naming --eta, no pilot row left to
    be reused; a NaN pilot row left by an older version is run again, not reused."""
    cfg = ogd_ablation.make_config(True, 0, **{**TINY, "eta": 1e3})
    with pytest.raises(ValueError, match="--eta 1000.0"):
        ogd_ablation.run_ablation(cfg, tmp_path / "a", progress=False, verbose=False)
    assert not (tmp_path / "a" / "pilot.jsonl").exists()
    good_cfg, good_out, summary = ablation
    out = tmp_path / "b"
    out.mkdir()
    pilot = json.loads((good_out / "pilot.jsonl").read_text())
    nan_pilot = {**pilot, "C": None, "lambda_c": None}
    (out / "pilot.jsonl").write_text(json.dumps(nan_pilot) + "\n")
    (out / "rows.jsonl").write_text((good_out / "rows.jsonl").read_text())
    again = ogd_ablation.run_ablation(good_cfg, out, resume=True, progress=False, verbose=False)
    assert again["pilot"]["C"] == summary["pilot"]["C"]
    assert json.loads((out / "pilot.jsonl").read_text())["C"] == pilot["C"]
