"""The searches of part ``suprema`` (:mod:`.suprema`): one configuration's ascent to convergence and the
held-out measurement of what it found.

The ascent (:mod:`.ascent`, in the ball :mod:`.ball`: projected normalised gradient ascent on common
random draws) runs in stretches of ``--sup-steps`` steps, each restarting the rate's cosine from its
top, until no start gains more than :data:`CONVERGED` (relative) over a stretch, at most
``--sup-stretches`` stretches (:func:`~.ascent.converge`; the Gaussian contrast at most
:data:`GAUSSIAN_STRETCHES`). Then every (θ, law) found, every start and random models are measured
on independent draws (the training value is biased upward), and the winner, the start whose ascent
reached the largest training value, at every n of its slope.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from .ascent import JITTER, Problem, ascend, converge, evaluate, normals
from .ball import (
    BALL_STRUCTURED,
    BATCH,
    RADIUS,
    ascend_ball,
    ball_bound,
    ball_law,
    ball_starts,
    counts,
    evaluate_ball,
)
from .starts import STRUCTURED, law_start, random_params, stack, starts

Energy = Literal["1", "d"]
#: the energy budgets of the Gaussian contrast: E‖z‖² ≤ 1, and E‖z‖² ≤ d (each direction's second moment ≤ 1).
ENERGIES: tuple[Energy, ...] = ("1", "d")
#: the rate of the normalised ascent: the length of a θ (or law) step before the cosine decay.
LEARNING_RATE = 0.3
#: the ball's contexts are its atoms (a few points, whatever n): it trains and measures on this many
#: times ``--sup-contexts`` and ``--sup-eval-contexts`` (the training value's upward bias shrinks).
BALL_CONTEXTS = 8
#: the Gaussian contrast's cap on stretches (its n-point systems cost n² per context: a contrast, not a search
#: to convergence; its rows say whether it converged).
GAUSSIAN_STRETCHES = 2
#: the ascent has converged when no start gains more than this (relative) over a stretch.
CONVERGED = 0.005


def budget(energy: Energy, dim: int) -> float:
    """The energy budget B of ``energy`` in dimension ``dim``."""
    return 1.0 if energy == "1" else float(dim)


def value_norm(config: dict) -> float:
    """The largest ‖Σ_h V_h‖ the value norm allows: √H under the concatenated norm, 1 under Σ_h‖V_h‖."""
    return 1.0 if config["vnorm"] == "sum" else float(np.sqrt(config["heads"]))


def until_converged(stretch, state, config, cap=None):
    """:func:`~.ascent.converge` at the part's tolerance and ``--sup-stretches`` (or ``cap``, the smaller)."""
    return converge(stretch, state, min(int(config["sup_stretches"]), cap or 10**9), CONVERGED)


def run_ball(config: dict, batch_size: int | None = BATCH) -> dict:
    """One configuration in the paper's class: the starts (:data:`~.ball.BALL_STRUCTURED`, the
    identical-heads construction only for H > 1, then random models on random laws), the ascent
    of θ and the atoms on the training shares until it converges, and every (θ, law) found, every
    start and ``sup_randoms`` random models on random laws measured on held-out shares at every n
    of ``eval_ns`` and ``slope_ns``; the problem embedded in ``embed_dim`` and ``embed_heads``. The
    problems of a step (starts × contexts) are mapped in blocks of ``batch_size`` (:data:`~.ball.BATCH`:
    all vmapped; 1: one after another, the same row to round-off)."""
    d, H, L = int(config["dim"]), int(config["heads"]), int(config["layers"])
    v_sum = config["vnorm"] == "sum"
    rng = np.random.default_rng([int(config["seed"]), 3, d, H, int(v_sum)])
    prob = Problem(d, H, int(config["embed_dim"]), int(config["embed_heads"]))
    pairs = [p for p in BALL_STRUCTURED if H > 1 or p[0] != "identical heads"]
    theta0, law0, names = ball_starts(rng, d, H, L, pairs, int(config["sup_restarts"]), v_sum)
    R = int(config["sup_randoms"])
    randoms = stack([random_params(rng, d, H, L, 1.0, 1.0, v_sum) for _ in range(R)])
    random_laws = stack([ball_law(rng, d, "random") for _ in range(R)])
    n = int(config["sup_n"])
    ns = sorted({int(m) for m in config["eval_ns"]} | {int(m) for m in config["slope_ns"]})
    train = counts(rng, law0["w"], BALL_CONTEXTS * int(config["sup_contexts"]), [n])[:, :, 0]
    a0 = prob.points(law0["a"])

    def stretch(state):
        theta, a, best, _ = ascend_ball(
            state[0], state[1], law0["w"], train, prob.x0, float(n), v_sum, LEARNING_RATE, *prob.masks,
            steps=int(config["sup_steps"]), batch_size=batch_size,
        )  # fmt: skip
        return (theta, a), best

    (theta, a), bests, converged = until_converged(stretch, (prob.theta(theta0), a0), config)
    w = np.concatenate([law0["w"], law0["w"], random_laws["w"]])
    held = counts(rng, w, BALL_CONTEXTS * int(config["sup_eval_contexts"]), ns)
    both = lambda *trees: {k: np.concatenate([np.asarray(t[k]) for t in trees]) for k in trees[0]}  # noqa: E731
    thetas = both(theta, prob.theta(theta0), prob.theta(randoms))
    atoms = np.concatenate([np.asarray(a), a0, prob.points(random_laws["a"])])
    values = np.asarray(
        evaluate_ball(thetas, atoms, w, held, prob.x0, np.asarray(ns), batch_size=batch_size), np.float64
    )
    win = int(np.argmax(bests[-1]))
    at = ns.index(n)
    return {
        "starts": names,
        "train_best": bests[-1].tolist(),
        "stretch_best": bests.tolist(),  # (stretches, starts): the best value after each stretch
        "converged": bool(converged),
        "held_out": values[:, :, at].tolist(),  # (found, starts, randoms; contexts) at n
        "worst_ns": ns,
        "worst_case": values[win].tolist(),  # the winner: (contexts, worst_ns)
        "law_found": {"atoms": np.asarray(a)[win, :, :d].tolist(), "weights": law0["w"][win].tolist()},
        "bound": float(ball_bound(n, L, RADIUS, value_norm(config))),
    }


def run_suprema(config: dict) -> dict:
    """One configuration of the Gaussian contrast: the starts (the identical-heads construction only
    for H > 1: with one head it is a random model), the ascent on the training draws until it
    converges, every (θ, law) found, every start and ``sup_randoms`` random models (on the
    isotropic law) measured on the held-out draws at the ascent's n, and the winner (the largest
    training value) at each n of ``eval_ns``; the problem embedded in ``embed_dim`` and ``embed_heads``."""
    d, H, L = int(config["dim"]), int(config["heads"]), int(config["layers"])
    v_sum = config["vnorm"] == "sum"
    energy = budget(config["energy"], d)
    rng = np.random.default_rng([int(config["seed"]), 1, d, H, ENERGIES.index(config["energy"])])
    prob = Problem(d, H, int(config["embed_dim"]), int(config["embed_heads"]), energy)
    pairs = [p for p in STRUCTURED if H > 1 or p[0] != "identical heads"]
    theta0, law0, names = starts(rng, d, H, L, energy, pairs, int(config["sup_restarts"]), v_sum)
    R = int(config["sup_randoms"])
    randoms = stack([random_params(rng, d, H, L, 1.0, 1.0, v_sum) for _ in range(R)])
    iso = stack([law_start(d, "isotropic", energy)] * R)
    train = prob.points(normals(rng, int(config["sup_contexts"]), int(config["sup_n"]), d))
    held = prob.points(normals(rng, int(config["sup_eval_contexts"]), max(config["eval_ns"]), d))

    def stretch(state):
        theta, law, best, _ = ascend(
            state[0], state[1], prob.x0, train, energy, 1.0, 1.0, v_sum, LEARNING_RATE, *prob.masks,
            learn_law=True, steps=int(config["sup_steps"]),
        )  # fmt: skip
        return (theta, law), best

    state = (prob.theta(theta0), prob.law(law0))
    (theta, law), bests, converged = until_converged(stretch, state, config, GAUSSIAN_STRETCHES)
    win = int(np.argmax(bests[-1]))
    both = lambda found, *more: {k: np.concatenate([np.asarray(found[k]), *(m[k] for m in more)]) for k in found}  # noqa: E731
    n = int(config["sup_n"])
    # every (θ, law) found, every start and the random models at the ascent's n (the draws' first n
    # points); the winner at every n of eval_ns (the slope): the n² cost of the largest n once
    values = evaluate(
        both(theta, prob.theta(theta0), prob.theta(randoms)), both(law, prob.law(law0), prob.law(iso)),
        prob.x0, held[:, :n], energy, prob.mask_d, np.asarray([n]),
    )  # fmt: skip
    one = lambda tree: {k: np.asarray(a)[win : win + 1] for k, a in tree.items()}  # noqa: E731
    worst = evaluate(one(theta), one(law), prob.x0, held, energy, prob.mask_d, np.asarray(config["eval_ns"]))
    return {
        "starts": names,
        "train_best": bests[-1].tolist(),
        "stretch_best": bests.tolist(),
        "converged": bool(converged),
        "held_out": np.asarray(values, np.float64)[:, :, 0].tolist(),  # (found, starts, randoms; contexts) at n
        "worst_ns": [int(m) for m in config["eval_ns"]],
        "worst_case": np.asarray(worst, np.float64)[0].tolist(),  # the winner: (contexts, eval ns)
        "law_found": moments(law, d, energy).tolist(),
    }


def moments(law: dict, d: int, energy: float) -> np.ndarray:
    """Per law ``(S, 3)``: the largest eigenvalue of the second-moment matrix S = Σ + mmᵀ, ‖m‖², tr S."""
    m, F = np.asarray(law["m"], np.float64)[:, :d], np.asarray(law["F"], np.float64)[:, :d, :d]
    second = F @ np.swapaxes(F, 1, 2) + JITTER * energy / d * np.eye(d) + m[:, :, None] * m[:, None, :]
    return np.stack([np.linalg.eigvalsh(second)[:, -1], (m**2).sum(axis=1), np.trace(second, axis1=1, axis2=2)], 1)


__all__ = [
    "BALL_CONTEXTS",
    "CONVERGED",
    "ENERGIES",
    "GAUSSIAN_STRETCHES",
    "LEARNING_RATE",
    "Energy",
    "budget",
    "moments",
    "run_ball",
    "run_suprema",
    "until_converged",
    "value_norm",
]
