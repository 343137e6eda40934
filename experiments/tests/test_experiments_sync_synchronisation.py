"""Part `sync` (synchronisation by common noise) on tiny sizes: the physics of a row, its program reuse, its
summary and figure from stored rows."""

import json

import numpy as np
import pytest

from cfm_experiments.protocol import resolve
from cfm_experiments.results import _jsonable
from cfm_experiments.sync.synchronisation import Synchronisation
from cfm_jax import CompileRecorder

PART = Synchronisation()


def _config(**kw):
    return {**dict(s_a=0.0, s_c=1.5, d=3, N=4, T=0.4, dt=0.02, beta=1.0, R=3, seed=0), **kw}


def _stored(config, result):
    """A row as the sweep stores it and reads it back (NaN as null)."""
    return json.loads(json.dumps({"config": _jsonable({"part": "sync", **config}), **_jsonable(result)}))


def _programs(fn, *args):
    with CompileRecorder() as stats:
        out = fn(*args)
    return stats.compiled + stats.cache_loads, out


def test_configs_are_the_old_default_and_quick_grids():
    full = PART.configs(resolve([PART]))
    quick = PART.configs(resolve([PART], quick=True))
    assert [(c["s_c"], c["s_a"]) for c in full] == [(b, a) for b in (0.0, 1.5) for a in (0.0, 0.25, 0.5, 1.0)]
    assert [(c["s_c"], c["s_a"]) for c in quick] == [(b, a) for b in (0.0, 1.5) for a in (0.0, 0.5, 1.0)]
    assert {(c["N"], c["T"], c["dt"], c["R"]) for c in full} == {(32, 8.0, 0.01, 64)}
    assert {(c["N"], c["T"], c["dt"], c["R"]) for c in quick} == {(16, 4.0, 0.02, 16)}
    assert {c["R"] for c in PART.configs(resolve([PART], realisations=5))} == {5}


def test_attention_alone_lowers_the_energy_and_a_second_seed_reuses_the_program():
    """s_a = 0: no noise (λ₁ = 0), softmax attention only; E_β falls at every saved time in every run's
    statistics, nothing synchronises to 1e-6 in T = 0.4. A second seed of the same shape compiles nothing."""
    _, row = _programs(PART.run, _config())
    assert row["lambda1"] == 0.0
    for stat in ("mean", "median", "logmean"):
        assert np.all(np.diff(row["deficit"][stat]) < 0), stat
        assert row["deficit"]["rates"][stat] < 0
    assert len(row["t"]) == 21 and row["t"][-1] == pytest.approx(0.4)  # every steps // 40 = 1 step
    t, mean = np.asarray(row["t"]), np.asarray(row["deficit"]["mean"])
    late = t >= 0.1 - 1e-12  # the rates are fitted over t >= T/4
    assert row["deficit"]["rates"]["mean"] == pytest.approx(np.polyfit(t[late], np.log(mean[late]), 1)[0], rel=1e-10)
    assert np.all(np.asarray(row["frac_synchronised"]) == 0)
    again, other = _programs(PART.run, _config(seed=1))
    assert again == 0, f"a second seed compiled {again} program(s)"
    assert not np.allclose(other["deficit"]["mean"], row["deficit"]["mean"])  # it did draw other starts


def test_summary_and_figure_from_stored_rows(tmp_path):
    """The summary reads the rows as stored (a rate too few points support is null) and the figure draws them."""
    row = _stored(_config(), PART.run(_config()))
    row["deficit"]["rates"]["median"] = None
    summary = PART.summarize([row], resolve([PART]))
    line = summary.text.splitlines()[1].split()
    assert line[:2] == ["1.5", "0"] and line[4] == "—" and not summary.claims
    assert summary.data["synchronisation"][0]["deficit_rates"]["mean"] == row["deficit"]["rates"]["mean"]
    (path,) = PART.figures([row], summary, tmp_path)
    assert path.name == "energy_deficit.png" and path.stat().st_size > 10_000
