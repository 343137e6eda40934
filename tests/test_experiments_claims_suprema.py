"""claims.suprema: the supremum's read-out, the search checks (a supremum that never improved on its
start, or that a trivial model beats, withholds its line's verdict and says so) and the lines on
synthetic rows (known growth in d and H, the worst case's rate), its option rules, and one tiny
ascent sweep through the driver (slow)."""

import numpy as np
import pytest

import cfm_experiments
from cfm_experiments.claims import suprema as S

HAVE = {"steps": 60, "held-out contexts": 32, "largest d": 32, "largest H": 8}
STARTS = ["aligned · one-dimensional", "aligned · isotropic", "trivial · isotropic", "random 1 · isotropic"]
NOT_TESTED = "not tested: the claimed regime is not reached"


def _row(sweep, dim, heads, energy, vnorm, sup, rng, contexts=32, slope=-0.5, start=0.5, trivial=0.3):
    """Held-out √n·dev at the ascent's n: the first start's ascent (the winner) at ``sup``, its start at
    ``start``·sup, the trivial start at ``trivial``·sup, the others and the random models well below
    it; the winner at three n as sup·(n/128)^{slope + 1/2}."""
    S_ = len(STARTS)
    noise = lambda: np.exp(0.05 * rng.standard_normal(contexts))  # noqa: E731
    held = np.empty((2 * S_ + 8, contexts))
    for i in range(held.shape[0]):
        held[i] = (0.2 if i >= 2 * S_ else 0.1 * sup) * noise()
    held[0] = sup * noise()
    held[S_] = start * held[0] * noise()  # the winner's start, paired with it
    held[S_ + STARTS.index("trivial · isotropic")] = trivial * sup * noise()
    ns = np.array([32, 128, 512])
    worst = held[0][:, None] * (ns / 128.0) ** (slope + 0.5)
    config = dict(sweep=sweep, dim=dim, heads=heads, energy=energy, vnorm=vnorm, sup_n=128, eval_ns=ns.tolist())
    return {
        "config": config | {"layers": 4},
        "starts": STARTS,
        "train_best": [5.0, 1.0, 1.0, 1.0],
        "held_out": held.tolist(),
        "worst_case": worst.tolist(),
        "law_found": [[0.99, 0.0, 1.0]] * S_,
    }


def test_supremum_reads_the_winner_its_gain_and_the_trivial_model():
    rng = np.random.default_rng(0)
    r = _row("d", 4, 1, "1", "concat", 2.0, rng)
    best = S.supremum(r)
    assert best["start"] == STARTS[0] and best["interval"].contains(2.0)
    assert best["gain"].contains(1.0) and best["trivial"].contains(0.6) and not best["problems"]
    assert S.random_mean(r).contains(0.2)
    r["train_best"] = [1.0, 5.0, 1.0, 1.0]  # the winner is the largest training value, not the held-out
    assert S.supremum(r)["start"] == STARTS[1]


def test_search_names_what_went_wrong():
    """Paired per-context values: a gain below MIN_GAIN of the start (or none) is *never improved on
    its start*; a supremum below the trivial model is *beaten by a trivial model*."""
    rng = np.random.default_rng(1)
    start = 1 + 0.1 * rng.standard_normal(32)
    assert not S.search(start + 0.5, start, 0.5 * start)["problems"]
    assert S.search(start * (1 + S.MIN_GAIN / 2), start, 0.5 * start)["problems"] == ["never improved on its start"]
    assert S.search(start, start, 0.5 * start)["problems"] == ["never improved on its start"]
    beaten = S.search(start + 0.5, start, start + 1.0)
    assert beaten["problems"] == ["beaten by a trivial model"] and beaten["margin"].contains(-0.5)


def test_d_lines_per_energy_on_known_laws():
    """Flat in d at E‖z‖² ≤ 1 reads *holds*; at E‖z‖² ≤ d a growth like d^{1/4} *holds*, exactly √d (the
    bound itself) is *undecided* and a growth like d is
    *refuted*; a supremum that did not beat its start, or that a trivial model beats, withholds the
    verdict (*not tested*) and the line names the d and the reason."""
    rng = np.random.default_rng(1)
    dims = (2, 4, 8, 32)
    flat = [_row("d", d, 1, "1", "concat", 2.0, rng) for d in dims]
    line = S.d_line(flat, "1", HAVE)
    assert line.verdict == "holds" and "improved on its start and beats the trivial models" in line.measured
    assert "E\\|z\\|^2 \\leq 1" in line.claim
    root = [_row("d", d, 1, "d", "concat", 2.0 * d**0.5, rng) for d in dims]
    assert S.d_line(root, "d", HAVE).verdict == "undecided: interval straddles the boundary"  # γ = ½ exactly
    slower = [_row("d", d, 1, "d", "concat", 2.0 * d**0.25, rng) for d in dims]
    assert S.d_line(slower, "d", HAVE).verdict == "holds"  # γ = ¼: at most √d
    linear = [_row("d", d, 1, "d", "concat", 2.0 * d, rng) for d in dims]
    assert S.d_line(linear, "d", HAVE).verdict == "refuted at these sizes"
    stuck = flat[:2] + [_row("d", 8, 1, "1", "concat", 2.0, rng, start=1.0)] + flat[3:]
    line = S.d_line(stuck, "1", HAVE)
    assert line.verdict == NOT_TESTED and "d=8 never improved on its start" in line.measured, line.measured
    beaten = flat[:3] + [_row("d", 32, 1, "1", "concat", 2.0, rng, trivial=1.5)]
    line = S.d_line(beaten, "1", HAVE)
    assert line.verdict == NOT_TESTED and "d=32 beaten by a trivial model" in line.measured, line.measured
    assert S.d_line(beaten, "1", HAVE | {"steps": 30}).verdict == "inconclusive at these sizes"


def test_heads_lines_on_known_laws():
    """A supremum growing like H^{1/2} at fixed concatenated norm reads *refuted*; a flat one *holds*
    (*inconclusive* below the stable sizes); one never improved on its start *not tested*."""
    rng = np.random.default_rng(2)
    heads = [_row("heads", 4, h, "1", "concat", 2.0 * h**0.5, rng) for h in (1, 2, 4, 8)]
    assert S.heads_line(heads, "concat", HAVE).verdict == "refuted at these sizes"
    flat = [_row("heads", 4, h, "1", "sum", 2.0, rng) for h in (1, 2, 4, 8)]
    assert S.heads_line(flat, "sum", HAVE).verdict == "holds"
    assert S.heads_line(flat, "sum", HAVE | {"largest H": 4}).verdict == "inconclusive at these sizes"
    flat[2] = _row("heads", 4, 4, "1", "sum", 2.0, rng, start=1.0)
    line = S.heads_line(flat, "sum", HAVE)
    assert line.verdict == NOT_TESTED and "H=4 never improved on its start" in line.measured


def test_worst_rate_line():
    rng = np.random.default_rng(2)
    good = [_row("d", d, 1, "1", "concat", 1.0, rng) for d in (2, 4, 8, 16, 32)]
    assert S.worst_rate_line(good, HAVE).verdict == "holds"
    slow = [_row("d", d, 1, "d", "concat", 1.0, rng, slope=-0.2) for d in (2, 4, 8)]
    assert S.worst_rate_line(good[:2] + slow, HAVE).verdict == "not observed at these sizes"


def test_configs_cover_both_energies_and_the_heads_at_one():
    parts = cfm_experiments.COMMANDS["claims"].select(["suprema"])
    settings = cfm_experiments.resolve(parts, quick=True)
    configs = parts[0].configs(settings)
    dims = [(c["dim"], c["energy"]) for c in configs if c["sweep"] == "d"]
    assert dims == [(d, e) for d in settings["sup_dims"] for e in S.ENERGIES]
    assert {c["energy"] for c in configs if c["sweep"] == "heads"} == {"1"}
    assert S.budget("1", 8) == 1.0 and S.budget("d", 8) == 8.0


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
        "claims", out=tmp_path / "o", parts=["suprema"], sup_dims=[1, 2], sup_heads=[1, 2], sup_at_dim=2, sup_n=8,
        sup_steps=4, sup_contexts=2, sup_restarts=1, sup_randoms=2, sup_eval_ns=[4, 8], sup_eval_contexts=3, layers=1,
    )  # fmt: skip
    assert len(report.claims) == 5 and all(c.verdict == "inconclusive at these sizes" for c in report.claims)
    assert len(report.rows) == 6 and (tmp_path / "o" / "suprema.png").exists()
    row = next(r for r in report.rows if r["config"]["heads"] == 2)
    assert len(row["starts"]) == 5 and len(row["held_out"]) == 2 * 5 + 2 and len(row["worst_case"][0]) == 2
    # per embedding (d ≤ 2 with one head; two heads): one ascent and two evaluations
    assert report.compile.programs <= 14, report.compile.names
