"""claims.uniform: the uniform-in-θ lines judged in the ball on synthetic per-context suprema with a known
growth in d, p and n; the lines withheld when E sup is not a measured constant (no gain over the best
fixed start, no convergence, an n-slope missing −1/2); the Gaussian contrast never judged; and a tiny
run through the driver (two independent draws)."""

import typing

import numpy as np
import pytest

import cfm_experiments
from cfm_experiments.claims import uniform as U
from cfm_experiments.draws import Redrawn
from cfm_experiments.protocol import resolve

HAVE = {"steps": 60, "contexts": 16, "largest d": 16, "largest H": 8}
NOT_TESTED = "not tested: the claimed regime is not reached"
NS = [128, 512, 2048]


def _row(d, heads, level, rng, law="ball", energy="1", gain=0.5, decay=-0.5, converged=True):
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
            "converged": converged,
            "bound": 32.6,
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
    assert "B_1" in line.claim and "a-priori bound in the ball 32.6" in line.measured
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


@pytest.mark.parametrize(
    "broken, reason",
    [
        (dict(gain=0.002), "d=8 never improved on the best fixed start"),
        (dict(converged=False), "d=8 search not converged"),
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


def test_a_tiny_run_through_the_driver(tmp_path):
    report = cfm_experiments.run(
        "claims", out=tmp_path / "o", parts=["uniform"], uni_dims=[1, 2], uni_heads=[1, 2], sup_at_dim=2, sup_n=6,
        sup_steps=3, sup_stretches=2, uni_contexts=2, layers=1,
    )  # fmt: skip
    # per draw: 2 ball d-rows, 1 ball heads row, 4 Gaussian rows; two independent draws
    assert len(report.rows) == 14 and {r["config"]["seed"] for r in report.rows} == {0, 1}
    assert len(report.claims) == 4 and (tmp_path / "o" / "uniform.png").exists()
    ball = [r for r in report.rows if r["config"]["law"] == "ball"]
    assert all(np.shape(r["best"]) == (U.BALL_CONTEXT_FACTOR * 2, len(U.BALL_STARTS)) for r in ball)
    assert all(np.shape(r["sup_ns"]) == (U.UNIFORM_SIZES, U.BALL_CONTEXT_FACTOR * 2) for r in ball)
    assert all("2 independent draws (seeds 0, 1)" in c.sizes for c in report.claims)
    judged = [c for c in report.claims if not c.claim.startswith("contrast")]
    assert all(c.verdict in ("inconclusive at these sizes", NOT_TESTED) for c in judged)
