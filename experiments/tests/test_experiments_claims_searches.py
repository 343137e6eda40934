"""claims.searches: the energy budgets and the value norm's largest ‖Σ_h V_h‖, the law's moments
against its second-moment matrix built independently, and one tiny search in the ball run to its
cap (slow)."""

import numpy as np
import pytest

from cfm_experiments.claims import ascent as A, ball as B, searches as R


def test_budgets_and_the_value_norm():
    assert R.budget("1", 8) == 1.0 and R.budget("d", 8) == 8.0
    assert R.value_norm({"vnorm": "sum", "heads": 4}) == 1.0
    assert R.value_norm({"vnorm": "concat", "heads": 4}) == pytest.approx(2.0)
    assert R.ENERGIES == ("1", "d")


def test_moments_are_those_of_the_second_moment_matrix():
    """σ₁², ‖m‖² and tr S of S = Σ + mmᵀ, Σ from the ascent's own covariance (:func:`~.ascent.covariance`),
    for laws embedded beyond d (the padding ignored)."""
    rng = np.random.default_rng(0)
    d, D, energy = 3, 5, 2.0
    mask = (np.arange(D) < d).astype(float)
    laws = {"m": rng.standard_normal((2, D)) * mask, "F": rng.standard_normal((2, D, D)) * mask[:, None] * mask}
    out = R.moments(laws, d, energy)
    for i in range(2):
        law = {k: v[i] for k, v in laws.items()}
        second = np.asarray(A.covariance(law, energy, mask))[:d, :d] + np.outer(law["m"][:d], law["m"][:d])
        expected = [np.linalg.eigvalsh(second)[-1], np.sum(law["m"][:d] ** 2), np.trace(second)]
        np.testing.assert_allclose(out[i], expected, rtol=1e-12)


TINY = dict(
    dim=2, heads=1, layers=1, vnorm="concat", seed=0, embed_dim=2, embed_heads=1, sup_restarts=1,
    sup_randoms=2, sup_n=8, sup_contexts=2, sup_eval_contexts=2, sup_steps=3, sup_stretches=1,
    eval_ns=[4, 8], slope_ns=[32, 128],
)  # fmt: skip


@pytest.mark.slow  # one ball ascent program and one evaluation: ~10 s on two idle cores
def test_a_tiny_search_in_the_ball_reports_what_it_found():
    """Its rows: every start, the training bests per stretch (capped, so not converged at one step),
    the held-out values of the found, the starts and the random models, the winner at every n, the
    law found inside the ball and the a-priori bound above every value measured."""
    row = R.run_ball(TINY)
    S = len(row["starts"])
    assert S == len([p for p in B.BALL_STRUCTURED if p[0] != "identical heads"]) + 1
    assert np.asarray(row["stretch_best"]).shape == (1, S) and not row["converged"]
    assert np.asarray(row["held_out"]).shape == (2 * S + 2, R.BALL_CONTEXTS * 2)
    assert row["worst_ns"] == [4, 8, 32, 128] and np.asarray(row["worst_case"]).shape == (R.BALL_CONTEXTS * 2, 4)
    assert np.all(np.linalg.norm(row["law_found"]["atoms"], axis=1) <= 1 + 1e-6)
    assert row["bound"] == pytest.approx(B.ball_bound(8, 1))
    assert np.max(row["worst_case"]) <= B.ball_bound(128, 1)


def test_the_vmapped_search_gives_the_serial_row():
    """The problems of a step (starts × contexts) vmapped give the one-at-a-time path's row to round-off."""
    config = TINY | {"sup_stretches": 2}
    batched, serial = R.run_ball(config), R.run_ball(config, batch_size=1)
    assert batched.keys() == serial.keys() and batched["starts"] == serial["starts"]
    assert batched["converged"] == serial["converged"]
    for key in ("train_best", "stretch_best", "held_out", "worst_case", "bound"):
        np.testing.assert_allclose(batched[key], serial[key], rtol=1e-9, atol=1e-12, err_msg=key)
    np.testing.assert_allclose(batched["law_found"]["atoms"], serial["law_found"]["atoms"], rtol=1e-9, atol=1e-12)
