"""Synthetic rows of the suprema part: a winner at a known supremum, its start, the trivial model and
random models below it, and the winner's worst case at three n with a known slope."""

import numpy as np

STARTS = ["aligned · one-dimensional", "aligned · isotropic", "trivial · isotropic", "random 1 · isotropic"]


def row(
    sweep, dim, heads, energy, vnorm, sup, rng, contexts=32, slope=-0.5, start=0.5, trivial=0.3, law="ball",
    converged=True,
):  # fmt: skip
    """Held-out √n·dev at the ascent's n: the first start's ascent (the winner) at ``sup``, its start at
    ``start``·sup, the trivial start at ``trivial``·sup, the others and the random models well below
    it; the winner at three n as sup·(n/128)^{slope + 1/2} (with noise); two stretches of the ascent."""
    S_ = len(STARTS)
    noise = lambda: np.exp(0.05 * rng.standard_normal(contexts))  # noqa: E731
    held = np.empty((2 * S_ + 8, contexts))
    for i in range(held.shape[0]):
        held[i] = (0.2 if i >= 2 * S_ else 0.1 * sup) * noise()
    held[0] = sup * noise()
    held[S_] = start * held[0] * noise()  # the winner's start, paired with it
    held[S_ + STARTS.index("trivial · isotropic")] = trivial * sup * noise()
    ns = np.array([32, 128, 512])
    worst = held[0][:, None] * (ns / 128.0) ** (slope + 0.5) * np.exp(0.05 * rng.standard_normal((contexts, 3)))
    config = dict(
        sweep=sweep, dim=dim, heads=heads, energy=energy, vnorm=vnorm, sup_n=128, eval_ns=ns.tolist(),
        slope_ns=ns.tolist(),
    )  # fmt: skip
    return {
        "config": config | {"layers": 4, "law": law, "sup_steps": 60},
        "starts": STARTS,
        "train_best": [5.0, 1.0, 1.0, 1.0],
        "stretch_best": [[4.99, 1.0, 1.0, 1.0], [5.0, 1.0, 1.0, 1.0]],
        "converged": converged,
        "bound": 32.6,
        "held_out": held.tolist(),
        "worst_ns": ns.tolist(),
        "worst_case": worst.tolist(),
        "law_found": [[0.99, 0.0, 1.0]] * S_,
    }
