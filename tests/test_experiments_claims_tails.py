"""claims.tails: its line on synthetic tails with known n-dependence, and on a real fixed-model run."""

import numpy as np

from cfm_experiments.claims import deviation as D, tails as T
from cfm_experiments.claims.common import base_config
from cfm_experiments.claims.statistics import tail_fits

NS = [10, 100, 1000]


def _line(values, ns=NS):
    row = {"config": base_config(0, ns=ns, seeds=len(values), fixed_model=True), "values": np.asarray(values).tolist()}
    need, have = {"contexts": 256, "largest n": 500}, {"contexts": len(values), "largest n": max(ns)}
    return T.tails_line(row, tail_fits(ns, values, n_boot=300), need, have)


def test_tails_line_on_known_laws():
    """Rayleigh/√n deviations: every quantile decays like n^{-1/2} (*holds*); Rayleigh/n^{0.3}: *not observed*."""
    e = np.random.default_rng(0).exponential(size=(512, 1))
    n = np.asarray(NS, float)
    assert _line(np.sqrt(2 * e) / np.sqrt(n)).verdict == "holds"
    assert _line(np.sqrt(2 * e) / n**0.3).verdict == "not observed at these sizes"
    assert _line(np.sqrt(2 * e[:100]) / np.sqrt(n)).verdict == "inconclusive at these sizes"


def test_real_tail_quantiles_are_ordered():
    """One fixed model, 64 contexts (the shared d = 3, L = 2 shape): quantiles increase as δ decreases."""
    cfg = dict(law="gaussian", dim=3, heads=1, width=0, layers=2, scale=1.0, qk=1.0, v=1.0)
    row = D.deviations({**cfg, "ns": [4, 16, 64], "seeds": 64, "seed": 0, "fixed_model": True})
    f = tail_fits([4, 16, 64], row["values"], n_boot=200)
    assert f["ordered"] and all(lo > 0 for lo in f["coefficient"]["ci_low"]), f
