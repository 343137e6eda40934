"""claims.uniform: the uniform-in-θ line on synthetic suprema with a known growth in d and p."""

import numpy as np

from cfm_experiments.claims import uniform as U

HAVE = {"steps": 60, "contexts": 16, "largest d": 16, "largest H": 8}


def _row(d, heads, level, rng):
    config = dict(sweep="d" if heads == 1 else "heads", dim=d, heads=heads, layers=4)
    sup = level * np.exp(0.05 * rng.standard_normal(16))
    return {"config": config, "sup": sup.tolist(), "random": (0.3 * sup).tolist()}


def test_uniform_line_against_root_d_and_against_p():
    rng = np.random.default_rng(0)
    dims = [2, 4, 8, 16]
    root = [_row(d, 1, d**0.5, rng) for d in dims]
    assert U.uniform_line(root, "d", lambda r: r["config"]["dim"], HAVE).verdict == "holds"  # γ = 1/2: at most √d
    linear = [_row(d, 1, d, rng) for d in dims]
    assert U.uniform_line(linear, "d", lambda r: r["config"]["dim"], HAVE).verdict == "refuted at these sizes"
    p = lambda r: 3 * 4 * r["config"]["heads"] * 16  # noqa: E731
    flat = [_row(4, h, 1.0, rng) for h in (1, 2, 4, 8)]
    assert U.uniform_line(flat, "p", p, HAVE).verdict == "holds"
    grows = [_row(4, h, h**0.5, rng) for h in (1, 2, 4, 8)]
    assert U.uniform_line(grows, "p", p, HAVE).verdict == "refuted at these sizes"
    assert U.uniform_line(grows, "p", p, HAVE | {"steps": 10}).verdict == "inconclusive at these sizes"
