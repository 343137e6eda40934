"""Synthetic rows of ``cfm-jax rates`` with a known answer: deviations C·n^slope times a small
log-normal noise per seed, centred so that the fit's point estimate is exact, and chosen floors
(no JAX: the statistics, verdicts, table and figure are tested on them)."""

from __future__ import annotations

import numpy as np

from cfm_experiments.rates import spec_from_config, sweep_configs

GRID = dict(
    attention_dims=[2, 8],
    control_dims=[4],
    ns=[16, 64, 256, 1024],
    control_ns=[8, 16, 32, 64, 128],
    n_ref=1024,
    control_n_ref=512,
    seeds=8,
    subspace=None,
    reference="exact",
    w1_ns=[16, 32, 64, 128],
    w1_size=512,
    grad_phi_max_n=256,
)


def synthetic_rows(slopes=None, *, prefactor: float = 0.6, floor_ratio: float = 0.2, noise: float = 0.05, seed=0):
    """One row per configuration of :data:`GRID`; every quantity decays as ``prefactor``·n^slope with
    slope ``slopes[(field, quantity)]`` (default the paper's), and floors ``floor_ratio`` × the
    deviation at the largest n (none for the coupled context)."""
    from cfm_jax.chaos import expected_slope

    rng = np.random.default_rng(seed)
    rows = []
    for config in sweep_configs(GRID):
        spec = spec_from_config(config)
        dk = config["intrinsic_dim"] or config["dim"]
        values, floors = {}, {}
        for q in spec.measured():
            ns = np.asarray(spec.quantity_ns(q), dtype=np.float64)
            slope = (slopes or {}).get((config["field"], q), expected_slope(config["field"], q, dk))
            mean = prefactor * ns**slope
            z = rng.standard_normal((config["seeds"], ns.size))
            y = mean[None, :] * np.exp(noise * (z - z.mean(axis=0)))  # the seed-mean of log y is log mean
            values[q] = y.tolist()
            if q != "context":
                floors[q] = [floor_ratio * float(mean[-1])] * config["seeds"]
        rows.append({"config": {"part": "exact", **config}, "values": values, "floor": floors})
    return rows


__all__ = ["GRID", "synthetic_rows"]
