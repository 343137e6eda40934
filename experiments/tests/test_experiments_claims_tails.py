"""claims.tails: its line on synthetic tails with known n-dependence, and on a real fixed-model run."""

import numpy as np

from cfm_experiments.claims import deviation as D, tails as T
from cfm_experiments.claims.common import base_config
from cfm_experiments.claims.statistics import tail_fits

NS = [10, 100, 1000]


def _line(values, ns=NS):
    row = {"config": base_config(0, ns=ns, seeds=len(values), fixed_model=True), "values": np.asarray(values).tolist()}
    need, have = {"contexts": 256, "largest n": 500}, {"contexts": len(values), "largest n": max(ns)}
    return T.tails_line(row, [tail_fits(ns, values, n_boot=300)], need, have)


def test_tails_line_on_known_laws():
    """Rayleigh/√n deviations: every quantile decays like n^{-1/2} (*holds*); Rayleigh/n^{0.3}: *refuted at
    these sizes* (beyond the band of finite-n corrections)."""
    e = np.random.default_rng(0).exponential(size=(512, 1))
    n = np.asarray(NS, float)
    assert _line(np.sqrt(2 * e) / np.sqrt(n)).verdict == "holds"
    assert _line(np.sqrt(2 * e) / n**0.3).verdict == "refuted at these sizes"
    assert _line(np.sqrt(2 * e[:100]) / np.sqrt(n)).verdict == "inconclusive at these sizes"


def test_real_tail_quantiles_are_ordered():
    """One fixed model, 64 contexts (the shared d = 3, L = 2 shape): quantiles increase as δ decreases."""
    cfg = dict(law="gaussian", dim=3, heads=1, width=0, layers=2, scale=1.0, qk=1.0, v=1.0)
    row = D.deviations({**cfg, "ns": [4, 16, 64], "seeds": 64, "seed": 0, "fixed_model": True})
    f = tail_fits([4, 16, 64], row["values"], n_boot=200)
    assert f["ordered"] and all(lo > 0 for lo in f["coefficient"]["ci_low"]), f


def _fits(slope_cis, ordered=True):
    """tail_fits' statistics with the given slope intervals of q_δ in n (one per δ), the rest plain."""
    D, ns = len(slope_cis), [10.0, 100.0, 1000.0]
    flat = lambda v: {"value": [v] * len(ns), "ci_low": [v - 0.1] * len(ns), "ci_high": [v + 0.1] * len(ns)}  # noqa: E731
    return {
        "ns": ns,
        "deltas": [0.5, 0.2, 0.1, 0.05, 0.01][:D],
        "slopes": {
            "value": [(lo + hi) / 2 for lo, hi in slope_cis],
            "ci_low": [lo for lo, _ in slope_cis],
            "ci_high": [hi for _, hi in slope_cis],
        },
        "intercept": flat(1.0),
        "coefficient": flat(0.5),
        "curvature": flat(0.0),
        "ordered": ordered,
    }


def test_every_quantile_must_decay_like_n_to_the_minus_one_half():
    """The rule pools every δ's slope (correlated: the same contexts) against the band of finite-n
    corrections and reads each δ's own: one quantile whose slope lies beyond the band even at the
    family-wise level (the first, the last or one inside, above or below it) refutes the line, however
    many others meet it; a slope only nearer the band's edge does not; unordered quantiles read *not
    observed*."""
    row = {"config": base_config(0, ns=NS, seeds=512, fixed_model=True)}
    need, have = {"contexts": 256, "largest n": 500}, {"contexts": 512, "largest n": 1000}
    good, slow, fast, near = (-0.6, -0.4), (-0.3, -0.2), (-0.9, -0.75), (-0.45, -0.35)
    assert T.tails_line(row, [_fits([good] * 5)], need, have).verdict == "holds"
    for k in range(5):
        for bad in (slow, fast):
            cis = [good] * 5
            cis[k] = bad
            assert T.tails_line(row, [_fits(cis)], need, have).verdict == "refuted at these sizes", (k, bad)
        cis = [good] * 5
        cis[k] = near
        assert T.tails_line(row, [_fits(cis)], need, have).verdict == "holds", k
    assert T.tails_line(row, [_fits([good] * 5, ordered=False)], need, have).verdict == "not observed at these sizes"
    assert T.tails_line(row, [_fits([good] * 5), _fits([good] * 5, ordered=False)], need, have).verdict == (
        "not observed at these sizes"
    )
