"""claims.ball: the shares of a discrete law are its draws, the ball objective is the n-point system of
the drawn points, and the a-priori bound is the largest displacement, never exceeded by the ascent
in the ball or by what it measures."""

import jax
import numpy as np
import pytest

from cfm_experiments.claims import ascent as A, ball as B, starts as S


def test_shares_of_a_discrete_law_are_its_draws():
    """counts: every context's shares sum to one, a zero-weight atom is never drawn, the n-prefixes
    nest (the shares at n are those of the first n draws) and the shares average to the weights."""
    rng = np.random.default_rng(0)
    w = np.array([[0.2, 0.0, 0.8, 0.0], [0.25, 0.25, 0.25, 0.25]])
    c = B.counts(rng, w, 400, [4, 64])
    assert c.shape == (2, 400, 2, 4)
    np.testing.assert_allclose(c.sum(axis=-1), 1.0)
    assert np.all(c[0, :, :, [1, 3]] == 0)
    assert np.all((c[:, :, 0] * 4) % 1 == 0) and np.all((c[:, :, 1] * 64) % 1 == 0)
    np.testing.assert_allclose(c[:, :, 1].mean(axis=1), w, atol=0.02)


def test_the_ball_objective_is_the_n_point_system_of_the_drawn_points():
    """The atoms weighted by their shares are the n-point context of the drawn points (points at one
    atom move together): the same deviation as the n explicit points, one context at a time."""
    from cfm_experiments.claims.deviation import sup_deviation, token_trajectory
    from cfm_jax import EmpiricalMeasure

    rng = np.random.default_rng(1)
    d, n = 3, 12
    law = B.ball_law(rng, d, "random")
    theta = S.random_params(rng, d, 1, 2, 1.0, 1.0, False)
    u = rng.random(n)
    idx = np.searchsorted(np.cumsum(law["w"]) / law["w"].sum(), u, side="right")
    shares = np.bincount(idx, minlength=B.ATOMS) / n
    model = A.model_of(theta)
    x0 = A.token(d)
    ref = token_trajectory(model, x0, EmpiricalMeasure(law["a"], law["w"]))
    explicit = np.sqrt(n) * sup_deviation(token_trajectory(model, x0, EmpiricalMeasure(law["a"][idx])), ref)
    shared = B.ball_objective(theta, law["a"], law["w"], shares[None], x0, float(n))
    np.testing.assert_allclose(shared, explicit, rtol=1e-5)


def test_the_a_priori_bound_is_the_largest_displacement_and_is_never_exceeded():
    """With Q = K = V = I and every atom at R e₁ the token e₁ moves by exactly R((1 + 1/L)^L − 1) (half
    the bound at n = 1); no (θ, ball law) found by the ascent or drawn exceeds the bound."""
    from cfm_experiments.claims.deviation import token_trajectory
    from cfm_jax import EmpiricalMeasure

    L, d = 4, 2
    model = A.model_of(S.identity(d, 1, L, 1.0, 1.0, False))
    a = np.zeros((2, d))
    a[:, 0] = 1.0
    xs = token_trajectory(model, A.token(d), EmpiricalMeasure(a))
    np.testing.assert_allclose(xs[-1, 0, 0] - 1.0, B.ball_bound(1, L) / 2, rtol=1e-6)
    rng = np.random.default_rng(2)
    theta0, law0, _ = B.ball_starts(rng, d, 1, L, B.BALL_STRUCTURED[:3], 2, False)
    shares = B.counts(rng, law0["w"], 8, [16])[:, :, 0]
    ones = (np.ones(d), np.ones(1))
    theta, atoms, best, history = B.ascend_ball(
        theta0, law0["a"], law0["w"], shares, A.token(d), 16.0, False, 0.3, *ones, steps=20
    )
    assert np.all(np.linalg.norm(np.asarray(atoms), axis=-1) <= 1.0 + 1e-6)
    assert np.all(np.asarray(best) >= np.asarray(history)[:, 0] - 1e-6) and np.any(best > history[:, 0] * 1.01)
    assert np.max(history) <= B.ball_bound(16, L)
    held = B.counts(rng, law0["w"], 16, [4, 16, 64])
    values = B.evaluate_ball(theta, atoms, law0["w"], held, A.token(d), np.asarray([4, 16, 64]))
    assert np.all(np.asarray(values) <= B.ball_bound(np.asarray([4, 16, 64]), L))


def test_the_cross_law_is_in_the_ball_with_the_moments_of_n0_i_over_d():
    """±R e_i with weight 1/(2d): every atom on the sphere of radius R, mean 0, covariance R²I/d (the
    moments of N(0, R²I/d)); atoms beyond 2d carry weight 0; fewer atoms than 2d is refused."""
    d = 3
    law = B.ball_law(np.random.default_rng(0), d, "cross", atoms=2 * d + 2)
    a, w = law["a"], law["w"]
    np.testing.assert_allclose(np.linalg.norm(a[: 2 * d], axis=1), B.RADIUS)
    np.testing.assert_allclose(w, [1 / (2 * d)] * (2 * d) + [0.0, 0.0])
    np.testing.assert_allclose(w @ a, 0.0, atol=1e-15)
    np.testing.assert_allclose((a * w[:, None]).T @ a, np.eye(d) / d)
    with pytest.raises(ValueError, match="atoms"):
        B.ball_law(np.random.default_rng(0), d, "cross", atoms=2 * d - 1)


def test_the_ascent_with_the_law_fixed_moves_only_the_parameters():
    """``learn_law=False``: the atoms come back as they went in, θ stays in Θ, and the best value is at
    least the start's (one context per start: a per-context supremum)."""
    rng = np.random.default_rng(3)
    d, L = 2, 2
    law = B.ball_law(rng, d, "cross", atoms=2 * d)
    theta0 = S.stack([S.construction(rng, name, d, 1, L, 1.0, 1.0, True) for name in ("aligned", "random")])
    atoms, w = np.stack([law["a"]] * 2), np.stack([law["w"]] * 2)
    shares = B.counts(rng, law["w"][None], 2, [16])[0]  # (2 contexts, 1, K): one per start
    ones = (np.ones(d), np.ones(1))
    theta, a, best, history = B.ascend_ball(
        theta0, atoms, w, shares, A.token(d), 16.0, True, 0.3, *ones, steps=5, learn_law=False
    )
    np.testing.assert_array_equal(np.asarray(a), atoms)
    assert np.all(np.asarray(best) >= np.asarray(history)[:, 0] - 1e-6)
    sums = np.linalg.norm(np.asarray(theta["V"]), ord=2, axis=(-2, -1)).sum(axis=-1)
    assert np.all(sums <= 1 + 1e-5)


def test_the_two_atom_mean_is_the_expectation_over_every_sequence_of_draws():
    """two_atom_mean's binomial sum equals the average over all 2ⁿ sequences of n draws, each weighted
    by its probability (the objective of its shares); one positive weight: the law's single context."""
    import itertools

    rng = np.random.default_rng(4)
    d, L, n = 2, 2, 5
    law = B.ball_law(rng, d, "skewed")
    theta = S.random_params(rng, d, 1, L, 1.0, 1.0, False)
    x0, p = A.token(d), law["w"][0]
    total = 0.0
    for seq in itertools.product((0, 1), repeat=n):
        k = n - sum(seq)  # draws of the first atom
        shares = np.zeros((1, B.ATOMS))
        shares[0, :2] = k / n, 1 - k / n
        total += p**k * (1 - p) ** (n - k) * float(B.ball_objective(theta, law["a"], law["w"], shares, x0, float(n)))
    np.testing.assert_allclose(B.two_atom_mean(theta, law["a"], law["w"], x0, n), total, rtol=1e-10)
    one = B.ball_law(rng, d, "one-sided") | {"w": np.array([1.0, 0.0, 0.0, 0.0])}
    assert B.two_atom_mean(theta, one["a"], one["w"], x0, n) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="`w`"):
        B.two_atom_mean(theta, law["a"], np.full(B.ATOMS, 0.25), x0, n)


def test_the_vmapped_ascent_and_evaluation_equal_the_serial_ones():
    """The starts and their contexts vmapped (:data:`~.ball.BATCH`) or one after another: the same
    ascent and the same held-out values to round-off."""
    rng = np.random.default_rng(5)
    d, L = 2, 2
    theta0, law0, _ = B.ball_starts(rng, d, 1, L, B.BALL_STRUCTURED[:2], 1, False)
    shares = B.counts(rng, law0["w"], 3, [8])[:, :, 0]
    ones = (np.ones(d), np.ones(1))
    args = (theta0, law0["a"], law0["w"], shares, A.token(d), 8.0, False, 0.3, *ones)
    vmapped, serial = (B.ascend_ball(*args, steps=4, batch_size=b) for b in (B.BATCH, 1))
    for a, b in zip(jax.tree.leaves(vmapped), jax.tree.leaves(serial)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    held = B.counts(rng, law0["w"], 2, [4, 16])
    values = [
        B.evaluate_ball(vmapped[0], vmapped[1], law0["w"], held, A.token(d), np.asarray([4, 16]), batch_size=b)
        for b in (B.BATCH, 1)
    ]
    np.testing.assert_allclose(values[0], values[1], rtol=1e-9, atol=1e-12)
