"""claims.suprema: the supremum's read-out and lines on synthetic rows (known growth in d and H, the
worst case's rate), its option rules, and one tiny ascent sweep through the driver (slow)."""

import numpy as np
import pytest

import cfm_experiments
from cfm_experiments.claims import suprema as S

HAVE = {"steps": 60, "held-out contexts": 32, "largest d": 32, "largest H": 8}


def _row(sweep, dim, heads, law, vnorm, sup, rng, contexts=32, slope=-0.5):
    """Held-out √n·dev: the aligned start at ``sup`` (times n^{slope + 1/2}), the others and the random
    models well below it."""
    ns = np.array([32, 128, 512])
    scale = (ns / 128.0) ** (slope + 0.5)
    held = np.empty((4 + 8, contexts, 3))
    for i in range(held.shape[0]):
        level = sup if i == 0 else 0.3 * sup if i < 4 else 0.2
        held[i] = level * scale * np.exp(0.05 * rng.standard_normal((contexts, 1)))
    config = dict(sweep=sweep, dim=dim, heads=heads, law=law, vnorm=vnorm, sup_n=128, eval_ns=ns.tolist(), layers=4)
    return {"config": config, "starts": S.start_names(2), "held_out": held.tolist()}


def test_supremum_and_random_mean_read_the_held_out_values():
    rng = np.random.default_rng(0)
    r = _row("d", 4, 1, "isotropic", "concat", 2.0, rng)
    best = S.supremum(r)
    assert best["start"] == "aligned" and best["interval"].contains(2.0)
    assert S.random_mean(r).contains(0.2)


def test_d_line_and_heads_lines_on_known_laws():
    """A supremum flat in d reads *holds*; one growing like H^{1/2} at fixed concatenated norm reads
    *refuted*; the d-line takes the larger of the two laws at each d."""
    rng = np.random.default_rng(1)
    dims = [
        _row("d", d, 1, law, "concat", 1.0 + (law == "low-dimensional"), rng) for d in (2, 4, 8, 32) for law in S.LAWS
    ]
    line = S.d_line(dims, HAVE)
    assert line.verdict == "holds" and "low-dimensional" in line.measured, line.measured
    heads = [_row("heads", 4, h, "low-dimensional", "concat", 2.0 * h**0.5, rng) for h in (1, 2, 4, 8)]
    assert S.heads_line(heads, "concat", HAVE).verdict == "refuted at these sizes"
    flat = [_row("heads", 4, h, "low-dimensional", "sum", 2.0, rng) for h in (1, 2, 4, 8)]
    assert S.heads_line(flat, "sum", HAVE).verdict == "holds"
    assert S.heads_line(flat, "sum", HAVE | {"largest H": 4}).verdict == "inconclusive at these sizes"


def test_worst_rate_line():
    rng = np.random.default_rng(2)
    good = [_row("d", d, 1, "isotropic", "concat", 1.0, rng) for d in (2, 4, 8, 16, 32)]
    assert S.worst_rate_line(good, HAVE).verdict == "holds"
    slow = [_row("d", d, 1, "isotropic", "concat", 1.0, rng, slope=-0.2) for d in (2, 4, 8)]
    assert S.worst_rate_line(good[:2] + slow, HAVE).verdict == "not observed at these sizes"


def test_option_rules_state_their_bounds():
    parts = cfm_experiments.COMMANDS["claims"].select(["suprema"])
    with pytest.raises(ValueError, match=r"--sup-heads must include 1"):
        cfm_experiments.resolve(parts, sup_heads=[2, 4])
    with pytest.raises(ValueError, match=r"--sup-eval-ns must include --sup-n \(128\)"):
        cfm_experiments.resolve(parts, sup_eval_ns=[32, 512])
    with pytest.raises(ValueError, match=r"--sup-randoms must be an integer >= 2"):
        cfm_experiments.resolve(parts, sup_randoms=1)


@pytest.mark.slow  # two ascent programs and two evaluations: ~1 min on two loaded cores
def test_a_tiny_sweep_runs_through_the_driver(tmp_path):
    report = cfm_experiments.run(
        "claims", out=tmp_path / "o", parts=["suprema"], sup_dims=[1, 2], sup_heads=[1, 2], sup_at_dim=2, sup_n=8,
        sup_steps=4, sup_contexts=2, sup_restarts=1, sup_randoms=2, sup_eval_ns=[4, 8], sup_eval_contexts=3, layers=1,
    )  # fmt: skip
    assert len(report.claims) == 4 and all(c.verdict == "inconclusive at these sizes" for c in report.claims)
    assert len(report.rows) == 6 and (tmp_path / "o" / "suprema.png").exists()
    assert report.compile.programs <= 12, report.compile.names  # one ascent and one evaluation per sweep
