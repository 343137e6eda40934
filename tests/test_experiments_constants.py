"""experiments.constants: fixed-norm models, samplers, the deviation against the exact limit (rate,
scale identity, tails), the statistics on known laws, the resumable command, Ctrl-C, bad input.

Every real computation here shares one compiled program (Gaussian, d = 3, L = 2, n ∈ {4, 16, 64}):
the scalars, the seeds and the fixed-model switch are arguments of it.
"""

import json
import math
import os
import signal
import subprocess
import sys
import time
from argparse import Namespace
from pathlib import Path

import jax
import numpy as np
import pytest

from cfm_experiments import constants as C
from cfm_experiments.results import ResultsFolder

ROOT = Path(__file__).resolve().parents[1]
NS = [4, 16, 64]


def _cfg(**kw):
    base = dict(part="prefactors", law="gaussian", dim=3, heads=1, width=0, layers=2, scale=1.0, qk=1.0, v=1.0)
    return {**base, "ns": NS, "seeds": 8, "seed": 0, **kw}


@pytest.fixture(scope="module")
def base_row():
    return C.deviations(_cfg())


def test_fixed_norm_transformer_has_the_norms_asked_for():
    m = C.fixed_norm_transformer(jax.random.key(0), 5, heads=3, width=7, layers=2, qk=2.5, v=0.7)
    op = lambda a: np.linalg.norm(np.asarray(a), ord=2, axis=(-2, -1))  # noqa: E731
    np.testing.assert_allclose(op(m.Q) * op(m.K), 2.5, rtol=1e-6)
    concat = np.moveaxis(np.asarray(m.V), 1, 2).reshape(2, 5, 15)  # [V_1 V_2 V_3] per layer
    np.testing.assert_allclose(op(concat), 0.7, rtol=1e-6)
    np.testing.assert_allclose(op(m.W1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(op(m.W2), 1.0, rtol=1e-6)
    assert C.param_count(dict(dim=5, heads=3, width=7, layers=2)) == sum(
        np.asarray(a).size for a in (m.Q, m.K, m.V, m.W1, m.W2, m.b1, m.b2)
    )


@pytest.mark.parametrize("qmc", [False, True])
def test_samplers_have_their_laws_moments(qmc):
    """Gaussian: E‖z‖² = σ², the covariance of the exact reference; ball of radius R in d = 3: inside
    it, E‖z‖ = 3R/4, E‖z‖² = 3R²/5, mean 0."""
    n, key = 4096, jax.random.key(1)
    g = np.asarray(C.sample_law("gaussian", key, n, 4, 1.5, qmc=qmc))
    assert abs((g**2).sum(1).mean() / 1.5**2 - 1) < 0.05
    law = C.gaussian_law(4, 1.5)  # the exact reference is the law the contexts are drawn from
    np.testing.assert_allclose(np.cov(g.T), np.asarray(law.cov), atol=0.04)
    np.testing.assert_allclose(g.mean(0), np.asarray(law.mean), atol=0.05)
    b = np.asarray(C.sample_law("ball", key, n, 3, 2.0, qmc=qmc))
    r = np.linalg.norm(b, axis=1)
    assert r.max() <= 2.0 and abs(r.mean() / 1.5 - 1) < 0.02 and abs((r**2).mean() / 2.4 - 1) < 0.03
    assert np.abs(b.mean(0)).max() < 0.05


def test_deviation_decays_at_rate_one_half(base_row):
    """Against the exact Gaussian limit (no floor), the slope's bootstrap 95 % CI contains −1/2."""
    fit = C.slope_fit(NS, base_row["values"])
    assert fit["ci_low"] <= -0.5 <= fit["ci_high"] and fit["ci_high"] < 0, fit
    assert base_row["floor"] == [0.0] * 8


def test_scale_identity_and_seed_batching(base_row):
    """x_s(σx, σμ; b) = σ x_s(x, μ; bσ²): scale 2 with ‖Q‖‖K‖ = 1/4 is exactly twice scale 1 with 1;
    and the first 8 seeds of a 20-seed run (two batches, padded) are those of the 8-seed run."""
    scaled = C.deviations(_cfg(scale=2.0, qk=0.25, seeds=20))
    np.testing.assert_allclose(np.asarray(scaled["values"])[:8], 2 * np.asarray(base_row["values"]), rtol=1e-9)
    other = C.deviations(_cfg(scale=2.0, qk=1.0))  # another β: not a rescaling
    assert not np.allclose(np.asarray(other["values"]), 2 * np.asarray(base_row["values"]), rtol=1e-3)


def test_tail_quantiles_of_the_real_deviation_are_ordered(base_row):
    """One fixed model, 64 contexts: quantiles increase as δ decreases and the affine coefficient b > 0;
    every seed has the same model (the seeds differ from the per-seed-model run only in the model)."""
    row = C.deviations(_cfg(seeds=64, fixed_model=True))
    f = C.tail_fits(NS, row["values"])
    assert f["ordered"] and all(lo > 0 for lo in f["coefficient"]["ci_low"]), f
    assert not np.allclose(np.asarray(row["values"])[:8], np.asarray(base_row["values"]))


def test_tail_fits_on_known_laws():
    """Rayleigh deviations R/√n (q_δ = √(2 log(1/δ))/√n exactly affine, a = 0, b = √2, slope −1/2)
    pass; exponential deviations (q_δ = log(1/δ), quadratic in t) show a curvature CI excluding 0."""
    rng = np.random.default_rng(0)
    ns = np.array([10, 100, 1000])
    e = rng.exponential(size=(4000, 1))
    ray = np.sqrt(2 * e) / np.sqrt(ns)
    f = C.tail_fits(ns, ray, n_boot=300)
    assert all(lo <= 0 <= hi for lo, hi in zip(f["curvature"]["ci_low"], f["curvature"]["ci_high"])), f
    assert all(lo <= math.sqrt(2) <= hi for lo, hi in zip(f["coefficient"]["ci_low"], f["coefficient"]["ci_high"]))
    assert all(lo <= -0.5 <= hi for lo, hi in zip(f["slopes"]["ci_low"], f["slopes"]["ci_high"]))
    assert f["ordered"]
    g = C.tail_fits(ns, e / np.sqrt(ns), n_boot=300)
    assert all(lo > 0 for lo in g["curvature"]["ci_low"]), g


def test_prefactor_and_ratio_on_a_known_law():
    """dev = C n^{-1/2} × lognormal noise: C's CI covers the truth, and the ratio of two constants too."""
    rng = np.random.default_rng(1)
    ns = np.array([10, 100, 1000])
    a = 0.3 * ns**-0.5 * np.exp(0.3 * rng.standard_normal((64, 3)))
    b = 0.6 * ns**-0.5 * np.exp(0.3 * rng.standard_normal((64, 3)))
    pa = C.prefactor(ns, a)
    assert pa["ci_low"] <= 0.3 <= pa["ci_high"] and pa["ci_high"] < 0.4, pa
    q = C.ratio(ns, b, a)
    assert q["ci_low"] <= 2.0 <= q["ci_high"] and q["ci_low"] > 1.5, q
    g = C.growth_fit(np.log([1.0, 2.0, 4.0]), [np.log(0.3) + 0.1 * rng.standard_normal(64) for _ in range(3)])
    assert g["ci_low"][0] <= 0 <= g["ci_high"][0]


class _Tiny:
    """A part of the command at the test size: its Gaussian configurations moved to the shared program."""

    def __init__(self, part, seeds):
        self.part, self.seeds = part, seeds

    def configs(self, quick, seed):
        return [
            dict(c, dim=3, ns=NS, layers=2, seeds=self.seeds)
            for c in self.part.configs(True, seed)
            if c["law"] == "gaussian"
        ]

    def run_config(self, config):
        return self.part.run_config(config)

    def summarize(self, rows):
        return self.part.summarize(rows)

    def figures(self, rows, out_dir):
        return self.part.figures(rows, out_dir)


def _tiny_parts():
    return [_Tiny(C.scales, 8), _Tiny(C.tails, 64)]


def test_claim_lines_resume_and_outputs(tmp_path):
    """The command on tiny parts: a stopped sweep resumes to the rows of an uninterrupted one;
    claim lines carry a known verdict and their figure; claims.md, summary.json and the PNGs exist."""
    args = Namespace(
        parts=None, quick=True, seed=0, out=tmp_path / "full", resume=False, overwrite=False, no_progress=True
    )
    assert C.run(args, parts=_tiny_parts()) == 0
    summary = json.loads((tmp_path / "full" / "summary.json").read_text())
    assert summary["claims"] and all(c["verdict"] in C.VERDICTS for c in summary["claims"])
    for c in summary["claims"]:
        assert (tmp_path / "full" / c["figure"]).exists() and c["measured"]
    assert "| claim |" in (tmp_path / "full" / "claims.md").read_text()
    run = json.loads((tmp_path / "full" / "run.json").read_text())
    assert {"rows.jsonl", "claims.md", "summary.json", "scales.png", "tails.png"} <= set(run["files"])
    # the scale identity holds exactly, so its line says so
    assert next(c for c in summary["claims"] if "only through β" in c["claim"])["verdict"] == "holds"

    folder = ResultsFolder(tmp_path / "part", "constants", {"parts": ["scales", "tails"]}, mode="new")
    rows, lines, _ = C.run_parts(_tiny_parts(), folder, quick=True, seed=0, progress=False, stop_after=1)
    assert len(rows) == 1 and lines == []
    folder = ResultsFolder(tmp_path / "part", "constants", {"parts": ["scales", "tails"]}, mode="resume")
    rows, _, _ = C.run_parts(_tiny_parts(), folder, quick=True, seed=0, progress=False)
    full = [json.loads(ln) for ln in (tmp_path / "full" / "rows.jsonl").read_text().splitlines()]
    assert [(r["key"], r["values"]) for r in rows] == [(r["key"], r["values"]) for r in full]


def test_parts_selection_and_bad_names():
    assert [C.part_name(p) for p in C.select_parts(["tails", "prefactors"])] == ["prefactors", "tails"]
    assert [C.part_name(p) for p in C.select_parts(None)] == ["prefactors", "scales", "tails"]
    with pytest.raises(ValueError, match="--parts: unknown part 'nope'"):
        C.select_parts(["nope"])
    for p in C.PARTS:  # every configuration names its part, and quick is smaller than the default
        assert {c["part"] for c in p.configs(False, 0)} == {C.part_name(p)}
        assert len(p.configs(True, 0)) <= len(p.configs(False, 0))
    tails = C.tails.configs(True, 0)[0]
    assert tails["seeds"] >= 256 and max(tails["ns"]) / min(tails["ns"]) >= 100
    for c in C.prefactors.configs(True, 0) + C.scales.configs(True, 0):
        assert max(c["ns"]) / min(c["ns"]) >= 99  # two decades of n


def _cli(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "cfm_experiments", "constants", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_bad_input_is_one_line(tmp_path):
    for args, needle in (
        (["--parts", "nope"], "--parts"),
        (["--seed", "-1"], "--seed"),
        (["--resume", "--overwrite"], "--overwrite"),
    ):
        proc = _cli(*args, "--out", str(tmp_path / "o"))
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode != 0 and len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_ctrl_c_exits_130_promptly(tmp_path):
    """SIGINT while the command imports, compiles or computes: exit 130 within 2 s, one message naming --resume."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CFM_JAX_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cfm_experiments",
            "constants",
            "--quick",
            "--no-progress",
            "--out",
            str(tmp_path / "o"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    t0 = time.monotonic()
    while True:  # until its signal handlers are installed
        status = Path(f"/proc/{proc.pid}/status").read_text()
        mask = int(next(ln for ln in status.splitlines() if ln.startswith("SigCgt:")).split()[1], 16)
        if mask & (1 << (signal.SIGINT - 1)) and mask & (1 << (signal.SIGTERM - 1)):
            break
        assert proc.poll() is None and time.monotonic() - t0 < 60
        time.sleep(0.02)
    time.sleep(1.0)
    t1 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and time.monotonic() - t1 < 2.0 and "Traceback" not in err and "--resume" in err


@pytest.mark.slow
def test_prefactor_ratio_across_dimensions_contains_one():
    """At fixed ‖Q‖‖K‖ and ‖V‖ (and E‖z‖² = 1), C(d = 12)/C(d = 2) has a bootstrap 95 % CI containing 1
    over 32 models each (two more compiled programs: slow)."""
    a = C.deviations(_cfg(dim=2, seeds=32))
    b = C.deviations(_cfg(dim=12, seeds=32))
    q = C.ratio(NS, b["values"], a["values"])
    assert q["ci_low"] <= 1.0 <= q["ci_high"] and q["ci_high"] - q["ci_low"] < 1.0, q
