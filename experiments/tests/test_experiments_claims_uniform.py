"""claims.uniform: the uniform-in-θ lines judged in the ball on synthetic per-context suprema with a known
growth in d, p and n; the lines withheld when E sup is not a measured constant (no gain over the best
fixed start, no convergence, an n-slope missing −1/2); the Gaussian contrast never judged; and a tiny
run through the driver (two independent draws)."""

import re
import typing

import numpy as np
import pytest

import cfm_experiments
from cfm_experiments.claims import ball as B, uniform as U
from cfm_experiments.draws import Redrawn
from cfm_experiments.protocol import resolve

HAVE = {"steps": 60, "contexts": 16, "largest d": 16, "largest H": 8}
NOT_TESTED = "not tested: the claimed regime is not reached"
NS = [128, 512, 2048]


def _row(d, heads, level, rng, law="ball", energy="1", gain=0.5, decay=-0.5, converged=True, lower=3.5):
    """Per context: the aligned start at ``level``, the trivial one and a random one below it, the
    best ascent ``gain``·level above the aligned start; in the ball E sup at every n of :data:`NS`
    with √n·dev ∝ n^(decay + 1/2) (the deviation's slope ``decay``)."""
    config = dict(sweep="d" if heads == 1 else "heads", dim=d, heads=heads, layers=4, law=law, sup_steps=60)
    config |= dict(energy=energy) if law == "gaussian" else dict(ns=NS, sup_n=NS[0])
    aligned = level * np.exp(0.05 * rng.standard_normal(32))
    initial = np.stack([aligned, 0.3 * aligned, 0.1 * aligned], axis=1)
    best = initial.copy()
    best[:, 0] = aligned * (1 + gain)
    names = ["aligned", "trivial", "random"]
    row = {"config": config, "starts": names, "best": best.tolist(), "initial": initial.tolist()}
    if law == "ball":
        sup = best.max(axis=1)
        scale = (np.asarray(NS) / NS[0]) ** (decay + 0.5)
        eps = rng.standard_normal((3, 32))
        eps -= eps.mean(axis=1, keepdims=True)  # E sup exactly ∝ n^(decay + 1/2), the contexts scattered
        row |= {
            "sup_ns": (scale[:, None] * (sup + 0.1 * sup.mean() * eps)).tolist(),
            "stretch_sup": [[0.9 * sup.mean(), sup.mean()]] * 3,
            "converged_ns": [converged, True, True],  # the first size's search is the one that may not converge
            "converged": converged,
            "ball_lower": lower,
        }
    return row


def test_uniform_sup_reads_the_best_fixed_start_the_gain_and_the_n_slope():
    u = U.uniform_sup(_row(4, 1, 2.0, np.random.default_rng(0)))
    assert u["start"] == "aligned" and u["interval"].contains(3.0) and u["fixed"].contains(2.0)
    assert u["gain"].contains(1.0) and u["trivial"].contains(0.6) and not u["problems"]
    assert u["slope"].contains(-0.5) and u["steps"] == 120 and u["last_gain"] == pytest.approx(1 / 0.9 - 1)


def test_uniform_line_against_root_d_and_against_p():
    rng = np.random.default_rng(0)
    dims = [2, 4, 8, 16]
    d_of = lambda r: r["config"]["dim"]  # noqa: E731
    root = [_row(d, 1, d**0.5, rng) for d in dims]
    line = U.uniform_line(root, "d", d_of, HAVE)
    # γ = 1/2 exactly: the interval straddles the bound of "at most √d"
    assert line.verdict == "undecided: interval straddles the boundary"
    assert "B_1" in line.claim and "cross law" in line.claim
    slower = [_row(d, 1, d**0.25, rng) for d in dims]
    assert U.uniform_line(slower, "d", d_of, HAVE).verdict == "holds"  # γ = 1/4: at most √d
    linear = [_row(d, 1, d, rng) for d in dims]
    assert U.uniform_line(linear, "d", d_of, HAVE).verdict == "refuted at these sizes"
    p = lambda r: 3 * 4 * r["config"]["heads"] * 16  # noqa: E731
    flat = [_row(4, h, 1.0, rng) for h in (1, 2, 4, 8)]
    assert U.uniform_line(flat, "p", p, HAVE).verdict == "holds"
    grows = [_row(4, h, h**0.5, rng) for h in (1, 2, 4, 8)]
    assert U.uniform_line(grows, "p", p, HAVE).verdict == "refuted at these sizes"
    assert U.uniform_line(grows, "p", p, HAVE | {"steps": 10}).verdict == "inconclusive at these sizes"


def test_the_line_prints_the_a_priori_bound_at_the_n_of_e_sup():
    """The a-priori bound grows like √n: the line prints it at the n E sup is reported at (the first of
    the sizes, not the largest), with that n."""
    rng = np.random.default_rng(3)
    rows = [_row(d, 1, 1.0, rng) for d in (2, 4, 8)]
    measured = U.uniform_line(rows, "d", lambda r: r["config"]["dim"], HAVE).measured
    found = re.search(r"E sup found at n = (\d+) ", measured)
    printed = re.search(r"a-priori bound on √n·dev in the ball at n = (\d+): ([\d.]+) ", measured)
    assert found and printed, measured
    n, (at, bound) = int(found.group(1)), printed.groups()
    assert n == NS[0] and int(at) == n, measured
    assert bound == f"{B.ball_bound(n, 4):.3g}" and U.a_priori(rows[0]) == pytest.approx(B.ball_bound(n, 4))


def test_the_line_prints_the_balls_lower_bound_beside_the_cross_law():
    """The ball's lower bound (the skewed law) stands beside the cross law's E sup; above every E sup's
    interval the line says the cross law is not the ball's worst law, below one it does not."""
    rng = np.random.default_rng(4)
    line = U.uniform_line([_row(d, 1, 1.0, rng, lower=3.5) for d in (2, 4, 8)], "d", lambda r: r["config"]["dim"], HAVE)
    assert "the ball's supremum over laws is at least 3.5 at n = 128" in line.measured, line.measured
    assert "the cross law is not the ball's worst law" in line.measured
    low = [_row(d, 1, 1.0, rng, lower=1.2) for d in (2, 4, 8)]
    measured = U.uniform_line(low, "d", lambda r: r["config"]["dim"], HAVE).measured
    assert "not above every E sup on the cross law" in measured and "worst law" not in measured, measured


@pytest.mark.parametrize(
    "broken, reason",
    [
        (dict(gain=0.002), "d=8 never improved on the best fixed start"),
        (dict(converged=False), "d=8 search not converged (n = 128)"),
        (dict(decay=0.0), "d=8 its n-slope"),
    ],
)
def test_e_sup_that_is_not_a_measured_constant_withholds_the_verdict(broken, reason):
    """No gain over the best fixed start, an ascent that did not converge, or a deviation that does not
    decay like n^{-1/2} at one d: *not tested*, and the line names the d and the reason."""
    rng = np.random.default_rng(1)
    rows = [_row(d, 1, d**0.25, rng, **(broken if d == 8 else {})) for d in (2, 4, 8, 16)]
    line = U.uniform_line(rows, "d", lambda r: r["config"]["dim"], HAVE)
    assert line.verdict == NOT_TESTED and reason in line.measured, line.measured


def test_the_gaussian_laws_are_a_contrast_never_judged():
    """The judged lines read the ball's rows only: Gaussian rows growing like d beside ball rows flat
    in d leave the d-line *holds*; their own lines are labelled contrasts that read *not tested*."""
    rng = np.random.default_rng(2)
    dims = (2, 4, 8, 16)
    rows = [_row(d, 1, 1.0, rng) for d in dims] + [_row(4, h, 1.0, rng) for h in (2, 4, 8)]
    rows += [_row(d, 1, 5.0 * d, rng, law="gaussian", energy=e) for d in dims for e in ("1", "d")]
    settings = resolve(cfm_experiments.COMMANDS["claims"].parts(), uni_dims=dims, sup_at_dim=4)
    one_draw = typing.cast(type[Redrawn], U.Uniform).one_draw  # the part's own class: one draw's summary
    claims = one_draw().summarize(rows, settings).claims
    judged = [c for c in claims if not c.claim.startswith("contrast")]
    assert [c.verdict for c in judged] == ["holds", "holds"] and all("B_1" in c.claim for c in judged)
    contrast = [c for c in claims if c.claim.startswith("contrast")]
    assert len(contrast) == 2 and all(c.verdict == NOT_TESTED and "N(0, I" in c.claim for c in contrast)


def test_the_heads_sweep_runs_only_with_its_flag():
    parts = cfm_experiments.COMMANDS["claims"].select(["uniform"])
    for flag in (False, True):
        settings = resolve(parts, quick=True, heads_sweeps=flag)
        heads = [c["heads"] for c in parts[0].configs(settings) if c["sweep"] == "heads"]
        assert heads == ([h for h in settings["uni_heads"] if h > 1] if flag else []) * 2  # two draws


def test_a_tiny_run_through_the_driver(tmp_path):
    report = cfm_experiments.run(
        "claims", out=tmp_path / "o", parts=["uniform"], uni_dims=[1, 2], uni_heads=[1, 2], heads_sweeps=True,
        sup_at_dim=2, sup_n=6, sup_steps=3, sup_stretches=2, uni_contexts=2, layers=1,
    )  # fmt: skip
    # per draw: 2 ball d-rows, 1 ball heads row, 4 Gaussian rows; two independent draws
    assert len(report.rows) == 14 and {r["config"]["seed"] for r in report.rows} == {0, 1}
    assert len(report.claims) == 4 and (tmp_path / "o" / "uniform.png").exists()
    ball = [r for r in report.rows if r["config"]["law"] == "ball"]
    assert all(np.shape(r["best"]) == (U.BALL_CONTEXT_FACTOR * 2, len(U.BALL_STARTS)) for r in ball)
    assert all(np.shape(r["sup_ns"]) == (U.UNIFORM_SIZES, U.BALL_CONTEXT_FACTOR * 2) for r in ball)
    assert len({round(r["ball_lower"], 9) for r in ball}) == 1 and ball[0]["ball_lower"] > 0  # the same at every d, H
    assert all("2 independent draws (seeds 0, 1)" in c.sizes for c in report.claims)
    judged = [c for c in report.claims if not c.claim.startswith("contrast")]
    assert all(c.verdict in ("inconclusive at these sizes", NOT_TESTED) for c in judged)


TINY = dict(
    law="ball", sweep="d", dim=2, heads=1, layers=1, seed=0, embed_dim=4, embed_heads=1, uni_contexts=2, sup_n=6,
    sup_steps=3, sup_stretches=2, ns=[6, 24, 96],
)  # fmt: skip


def test_the_vmapped_search_gives_the_serial_rows():
    """The problems of a step (contexts × starts) vmapped give the rows of the one-at-a-time path to
    round-off, the ball's lower bound included."""
    batched, serial = U.run_ball(TINY), U.run_ball(TINY, batch_size=1)
    assert batched.keys() == serial.keys() and batched["starts"] == serial["starts"]
    for key in ("best", "initial", "sup_ns", "ball_lower"):
        np.testing.assert_allclose(batched[key], serial[key], rtol=1e-9, err_msg=key)
    for a, b in zip(batched["stretch_sup"], serial["stretch_sup"]):
        np.testing.assert_allclose(a, b, rtol=1e-9)
    assert batched["converged_ns"] == serial["converged_ns"]


def test_a_size_whose_search_did_not_converge_leaves_the_row_not_converged(monkeypatch):
    """Every size's search must converge, not only the largest n's: the first size capped at one
    stretch (it cannot converge), the others reporting convergence, leave the row not converged and
    its line withheld, naming that n."""
    sizes, real = [], U.until_converged

    def first_capped(stretch, state, config, cap=None):
        sizes.append(len(sizes))
        state, bests, _ = real(stretch, state, config, 1 if len(sizes) == 1 else cap)
        return state, bests, len(sizes) > 1

    monkeypatch.setattr(U, "until_converged", first_capped)
    row = U.run_ball(TINY) | {"config": TINY}
    assert len(sizes) == U.UNIFORM_SIZES and row["converged_ns"] == [False, True, True] and not row["converged"]
    assert "search not converged (n = 6)" in U.uniform_sup(row)["problems"]
    rows = [row, row | {"config": TINY | {"dim": 4}}]
    line = U.uniform_line(rows, "d", lambda r: r["config"]["dim"], HAVE)
    assert line.verdict == NOT_TESTED and "d=2 search not converged (n = 6)" in line.measured, line.measured
