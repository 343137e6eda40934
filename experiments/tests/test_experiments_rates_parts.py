"""cfm_experiments.rates.parts: the options and their rules (each bound stated here), the rules between
options, the rows of each part and what a part makes of its rows."""

import re

import pytest
from _rates_rows import synthetic_rows

import cfm_jax
from cfm_experiments.protocol import resolve
from cfm_experiments.rates import Exact, Sample

PARTS = (Exact(), Sample())


def _settings(part, quick=False, **options):
    return resolve((part,), quick=quick, **options)


def test_defaults_full_and_quick():
    exact, sample = PARTS
    assert isinstance(exact, Exact) and isinstance(sample, Sample) and sample.optional and not exact.optional
    full = _settings(exact)
    assert full["dims"] == (1, 2, 4, 8, 16) and full["ns"] == (16, 64, 256, 1024, 4096) and full["seeds"] == 8
    assert full["n_ref"] == 2048 and full["control_n_ref"] == 512 and not full["no_subspace"]
    quick = _settings(exact, quick=True)
    assert quick["dims"] == (2, 8) and quick["control_dims"] == (4,) and quick["ns"] == (16, 64, 256, 1024)
    assert quick["n_ref"] == 1024 and quick["seeds"] == 6 and quick["no_subspace"]
    assert len(exact.configs(full)) == 11 and len(exact.configs(quick)) == 3
    s = _settings(sample, quick=True)
    assert s["sample_ns"] == (16, 32, 64, 128) and s["sample_n_ref"] == 1024 and s["sample_control_n_ref"] == 256
    assert all(c.get("reference", "sample") == "sample" for c in sample.configs(s))


@pytest.mark.parametrize(
    "options,message",
    [
        ({"seeds": 1}, "--seeds must be an integer >= 2 (a confidence interval needs two)"),
        ({"ns": [16]}, "--ns needs at least 2 value(s)"),
        ({"w1_ns": [16]}, "--w1-ns needs at least 2 value(s)"),
        ({"control_ns": [8, 0]}, "--control-ns must be an integer >= 1, got 0"),
        ({"dims": [0]}, "--dims must be an integer >= 1, got 0"),
        ({"n_ref": 0}, "--n-ref must be an integer >= 1, got 0"),
        ({"layers": 0}, "--layers must be an integer >= 1, got 0"),
        ({"no_adjoint": "yes"}, "--no-adjoint must be True or False"),
        ({"dims": [], "control_dims": []}, "--dims, --control-dims: at least one dimension"),
        ({"w1_ns": [16, 256]}, "--w1-ns: the largest size (256) must be <= 128"),
        ({"w1_ns": [16, 64], "control_n_ref": 128}, "--w1-ns: the largest size (64) must be <= 32"),
    ],
)
def test_exact_part_rules(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        _settings(PARTS[0], **options)


def test_exact_rules_that_need_no_check():
    """n may exceed n_ref (the n-point contexts are independent of an exact reference); the W1 size
    rule applies only when some row has 2 <= dʹ <= 3; a Python list or NumPy integers are fine."""
    import numpy as np

    _settings(PARTS[0], ns=[8, 64], n_ref=32, dims=[1], control_dims=[1], no_subspace=True)
    _settings(PARTS[0], w1_ns=[16, 256], dims=[1, 8], control_dims=[4], no_subspace=True)
    s = _settings(PARTS[0], seeds=np.int64(3), ns=[np.int32(4), 8])
    assert s["seeds"] == 3 and s["ns"] == (4, 8)


@pytest.mark.parametrize(
    "options,message",
    [
        ({"sample_ns": [8, 64], "sample_n_ref": 32}, "--sample-n-ref (32) must be >= the largest of --sample-ns (64)"),
        ({"sample_control_ns": [8, 600]}, "--sample-control-n-ref (512) must be >= the largest"),
        ({"sample_ns": [8]}, "--sample-ns needs at least 2 value"),
    ],
)
def test_sample_part_rules(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        _settings(PARTS[1], **options)


def test_summary_table_claims_and_figure(tmp_path):
    """A part's summary: the table (also its file), the W1 note and the prefactors; the fits and
    prefactors as data; six claim lines; the figure file."""
    exact = PARTS[0]
    rows = synthetic_rows()
    summary = exact.summarize(rows, _settings(exact, quick=True))
    assert set(summary.files) == {"table.txt"} and summary.files["table.txt"] in summary.text
    assert "W1 between measures is computed only where" in summary.text and "fitted prefactor C vs d" in summary.text
    assert {"fits", "prefactor_vs_dim", "table", "figure"} <= set(summary.data)
    assert len(summary.data["fits"]) == sum(len(r["values"]) for r in rows)
    assert [c.verdict for c in summary.claims] == ["holds"] * 6
    assert all("6 seeds" in c.sizes and "L = 4" in c.sizes for c in summary.claims)
    (png,) = exact.figures(rows, summary, tmp_path)
    assert png.name == "rates.png" and png.stat().st_size > 10_000
    assert exact.summarize([], _settings(exact)).text == "" and exact.figures([], summary, tmp_path) == []
    sample = PARTS[1]
    assert sample.summarize(rows, _settings(sample)).files.keys() == {"table_sample.txt"}


def test_summary_reports_rows_in_the_heavy_tail_regime(monkeypatch):
    """Gaussian rows whose recorded regime is heavy-tailed get a line under the regime heading, which
    says they are there by design, in the printed summary and in the table file (and no
    HeavyTailWarning); rows in a good regime, or without one, add nothing."""
    import warnings

    import numpy as np

    import cfm_jax._regime as regime_module
    from cfm_experiments.rates.parts import REGIME_HEAD

    monkeypatch.setattr(regime_module, "_WARNED", False)
    exact = PARTS[0]
    rows = synthetic_rows()
    gaussian = [r for r in rows if r["config"].get("reference") == "gaussian"]
    assert len(gaussian) == 2
    for r, rho in zip(gaussian, (0.3, 2.5)):
        seeds = r["config"]["seeds"]
        r["regime"] = {
            "logit_variance": np.full((seeds, 4, 1, 2), 0.1).tolist(),
            "ess_fraction": np.full((seeds, 4, 1, 2), np.exp(-0.1)).tolist(),
            "rho": np.full((seeds, 4, 1), rho).tolist(),
            "tail_index": np.full((seeds, 4, 1), 2 / rho).tolist(),
            "heavy_tailed": [rho >= 1] * seeds,
        }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = exact.summarize(rows, _settings(exact, quick=True))
    text = summary.text
    assert "by design" in REGIME_HEAD and REGIME_HEAD in summary.files["table.txt"]
    assert not [w for w in caught if issubclass(w.category, cfm_jax.HeavyTailWarning)]  # the sweep's design
    block = text.split(REGIME_HEAD)[1].strip().splitlines()
    d = gaussian[1]["config"]["dim"]
    assert len(block) == 1 and block[0].startswith(f"attention gaussian d = {d}:") and "ρ = 2.5" in block[0]
    assert summary.files["table.txt"].split(REGIME_HEAD)[1].strip().splitlines() == block
    del gaussian[1]["regime"]
    assert REGIME_HEAD not in exact.summarize(rows, _settings(exact, quick=True)).text
