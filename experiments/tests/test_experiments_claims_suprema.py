"""claims.suprema: the lines on synthetic rows (known growth in d and H, the worst case's rate, the
Gaussian contrast; a supremum that is not a measured constant withholds its line's verdict and says
which d or H and why), the configs, its option rules, and one tiny ascent sweep through the driver
(slow)."""

import numpy as np
import pytest
from _suprema_rows import row as _row

import cfm_experiments
from cfm_experiments.claims import ball as B, searches, suprema as S

HAVE = {"steps": 60, "held-out contexts": 32, "largest d": 32, "largest H": 8}
NOT_TESTED = "not tested: the claimed regime is not reached"


def test_d_line_in_the_ball_on_known_laws():
    """Flat in d reads *holds*, a growth like d *refuted*; a supremum that did not beat its start,
    that a trivial model beats, whose search did not converge or whose own n-slope lies outside the band of n^−1/2
    withholds the verdict (*not tested*) and the line names the d and the reason."""
    rng = np.random.default_rng(1)
    dims = (2, 4, 8, 32)
    flat = [_row("d", d, 1, "1", "concat", 2.0, rng) for d in dims]
    line = S.d_line(flat, HAVE)
    assert line.verdict == "holds" and "every search converged" in line.measured, line.measured
    assert "B_1" in line.claim and "a-priori bound on √n·dev in the ball at n = 128: 32.6" in line.measured
    linear = [_row("d", d, 1, "1", "concat", 2.0 * d, rng) for d in dims]
    assert S.d_line(linear, HAVE).verdict == "refuted at these sizes"
    root = [_row("d", d, 1, "1", "concat", 2.0 * d**0.5, rng) for d in dims]
    assert S.d_line(root, HAVE).verdict == "refuted at these sizes"  # γ = ½: its interval above 0
    stuck = flat[:2] + [_row("d", 8, 1, "1", "concat", 2.0, rng, start=1.0, converged=False)] + flat[3:]
    line = S.d_line(stuck, HAVE)
    assert line.verdict == NOT_TESTED and "d=8 never improved on its start" in line.measured, line.measured
    assert "d=8 search not converged" in line.measured
    beaten = flat[:3] + [_row("d", 32, 1, "1", "concat", 2.0, rng, trivial=1.5)]
    line = S.d_line(beaten, HAVE)
    assert line.verdict == NOT_TESTED and "d=32 beaten by a trivial model" in line.measured, line.measured
    assert S.d_line(beaten, HAVE | {"steps": 30}).verdict == "inconclusive at these sizes"
    flat_slow = flat[:3] + [_row("d", 32, 1, "1", "concat", 2.0, rng, slope=-0.2)]
    line = S.d_line(flat_slow, HAVE)
    assert line.verdict == NOT_TESTED and "d=32 its n-slope" in line.measured and "outside the band" in line.measured


def test_the_gaussian_contrast_carries_no_verdict_on_the_claim():
    rng = np.random.default_rng(6)
    rows = [_row("d", d, 1, "d", "concat", 70.0, rng, law="gaussian", slope=-0.1) for d in (2, 8, 32)]
    line = S.contrast_line(rows, "d")
    assert line.verdict == NOT_TESTED and line.claim.startswith("contrast, outside the paper's class")
    assert "n-slope -0.10" in line.measured and "d=32" in line.measured


def test_heads_lines_on_known_laws():
    """A supremum growing like H^{1/2} at fixed concatenated norm reads *refuted*; a flat one *holds*
    (*inconclusive* below the stable sizes); one never improved on its start *not tested*."""
    rng = np.random.default_rng(2)
    heads = [_row("heads", 4, h, "1", "concat", 2.0 * h**0.5, rng) for h in (1, 2, 4, 8)]
    assert S.heads_line(heads, "concat", HAVE).verdict == "refuted at these sizes"
    flat = [_row("heads", 4, h, "1", "sum", 2.0, rng) for h in (1, 2, 4, 8)]
    assert S.heads_line(flat, "sum", HAVE).verdict == "holds"
    assert S.heads_line(flat, "sum", HAVE | {"largest H": 4}).verdict == "inconclusive at these sizes"
    flat[2] = _row("heads", 4, 4, "1", "sum", 2.0, rng, start=1.0, converged=False)
    line = S.heads_line(flat, "sum", HAVE)
    assert line.verdict == NOT_TESTED and "H=4 never improved on its start" in line.measured


def test_worst_rate_line():
    rng = np.random.default_rng(2)
    good = [_row("d", d, 1, "1", "concat", 1.0, rng) for d in (2, 4, 8, 16, 32)]
    assert S.worst_rate_line(good, HAVE).verdict == "holds"
    slow = [_row("d", d, 1, "d", "concat", 1.0, rng, slope=-0.2) for d in (2, 4, 8)]
    assert S.worst_rate_line(good[:2] + slow, HAVE).verdict == "refuted at these sizes"  # outside the band


def test_configs_cover_the_ball_its_heads_and_the_gaussian_contrast():
    """The heads sweeps only with --heads-sweeps (out of the default run)."""
    parts = cfm_experiments.COMMANDS["claims"].select(["suprema"])
    default = cfm_experiments.resolve(parts, quick=True)
    assert not default["heads_sweeps"] and all(c["sweep"] == "d" for c in parts[0].configs(default))
    settings = cfm_experiments.resolve(parts, quick=True, heads_sweeps=True)
    configs = [c for c in parts[0].configs(settings) if c["seed"] == settings.seed]  # the first draw
    assert {c["seed"] for c in parts[0].configs(settings)} == {settings.seed, settings.seed + 1}
    ball = [c["dim"] for c in configs if c["sweep"] == "d" and c["law"] == "ball"]
    assert ball == list(settings["sup_dims"])
    gauss = [(c["dim"], c["energy"]) for c in configs if c["law"] == "gaussian"]
    assert gauss == [(d, e) for d in settings["sup_dims"] for e in searches.ENERGIES]
    heads = {(c["heads"], c["vnorm"], c["law"]) for c in configs if c["sweep"] == "heads"}
    assert heads == {(h, v, "ball") for h in settings["sup_heads"] if h > 1 for v in ("concat", "sum")}


def test_embedding_shares_programs_among_small_dimensions_only():
    """Up to SHARED_UP_TO a d-sweep problem is embedded in the largest of its group (a factor 4 at
    most); above it, in its own dimension."""
    dims = [2, 4, 8, 16, 32]
    assert S.SHARED_UP_TO == 8
    assert [S.embed_dim(d, dims) for d in dims] == [8, 8, 8, 16, 32]
    assert [S.embed_dim(d, [1, 2, 4, 8]) for d in (1, 2, 4, 8)] == [4, 4, 4, 8]
    assert [S.embed_dim(d, [3, 12, 48]) for d in (3, 12, 48)] == [3, 12, 48]


def test_option_rules_state_their_bounds():
    parts = cfm_experiments.COMMANDS["claims"].select(["suprema"])
    with pytest.raises(ValueError, match=r"--sup-heads must include 1"):
        cfm_experiments.resolve(parts, sup_heads=[2, 4])
    with pytest.raises(ValueError, match=r"--sup-eval-ns must include --sup-n \(128\)"):
        cfm_experiments.resolve(parts, sup_eval_ns=[32, 512])
    with pytest.raises(ValueError, match=r"--sup-randoms must be an integer >= 2"):
        cfm_experiments.resolve(parts, sup_randoms=1)


@pytest.mark.slow  # two ascent programs and four evaluations: ~10 s on two idle cores, ~30 s loaded
def test_a_tiny_sweep_runs_through_the_driver(tmp_path):
    report = cfm_experiments.run(
        "claims", out=tmp_path / "o", parts=["suprema"], sup_dims=[1, 2], sup_heads=[1, 2], heads_sweeps=True,
        sup_at_dim=2, sup_n=8, sup_steps=4, sup_stretches=2, sup_contexts=2, sup_restarts=1, sup_randoms=2,
        sup_eval_ns=[4, 8], sup_eval_contexts=3, layers=1,
    )  # fmt: skip
    verdicts = [c.verdict for c in report.claims]
    assert len(verdicts) == 6 and verdicts.count(NOT_TESTED) >= 2, verdicts  # the two contrasts at least
    assert all(v in ("inconclusive at these sizes", NOT_TESTED) for v in verdicts), verdicts
    assert len(report.rows) == 2 * (2 + 2 + 4) and (tmp_path / "o" / "suprema.png").exists()  # two draws
    row = next(r for r in report.rows if r["config"]["heads"] == 2 and r["config"]["vnorm"] == "concat")
    S_ = len(row["starts"])
    assert S_ == len(B.BALL_STRUCTURED) + 1 and len(row["held_out"]) == 2 * S_ + 2
    assert len(row["stretch_best"]) == 2 and row["bound"] == pytest.approx(B.ball_bound(8, 1, 1.0, 2**0.5))
    assert row["worst_ns"] == [4, 8, 32, 128, 512, 2048] and len(row["worst_case"][0]) == 6  # slope: 32 … 2048
    # per embedding: one ascent and one or two evaluations per class
    assert report.compile.compiled <= 20, report.compile.compiled_names


def test_worst_rate_line_holds_at_the_finite_n_slope_of_a_true_rate():
    """Tight slopes at the known case's finite-n −0.494, each interval missing −1/2 itself: a decay
    like n^{−½} with its finite-n correction, which the band gate reads *holds* (a point gate at −1/2
    withheld it); the line prints the band and its pooled slope."""
    rng = np.random.default_rng(3)
    rows = [_row("d", d, 1, "1", "concat", 1.0, rng, contexts=512, slope=-0.494) for d in (2, 4, 8, 16)]
    fits = [S.worst_slope(r) for r in rows]
    assert not any(f.contains(-0.5) for f in fits)
    line = S.worst_rate_line(rows, HAVE)
    assert line.verdict == "holds" and "pooled slope" in line.measured and "band" in line.measured
