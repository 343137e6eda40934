"""The configurations of ``cfm-jax rates``: one row per (field, population, d), all n and the floor.

The physics (coupled n-point vs reference systems, their deviations, the compiled programs) is
:mod:`cfm_jax.chaos`; here the grid of (field, population, d, ns) is turned into the rows of the
sweep (:func:`sweep_configs`) and one row into its numbers (:func:`run_config`).

Rows against the exact Gaussian limit also record the attention regime of their models at the
population law (:func:`cfm_jax.chaos.attention_regimes`, one small program outside the sweep's):
where the softmax's effective sample size is small or ρ ≥ 1, the sampled contexts approach the
limit slowly or seem not to, and :func:`regime_lines` says so in the summary and the table. The
sweep keeps the library's default Q/K scale at every d on purpose (the low-d rows are in that
regime by design: the slope it costs is part of what the sweep measures), so the library's
:class:`cfm_jax.HeavyTailWarning`, advice to a user who chose the model, is not raised for these
rows: each is silenced around the sweep's own calls only (:func:`_by_design`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import jax.numpy as jnp
import numpy as np

from cfm_jax import AttentionRegime, HeavyTailWarning, warn_if_heavy_tailed
from cfm_jax.chaos import ChaosSpec, attention_regimes, run_seeds

#: the QMC points W1 is taken against on the Sinkhorn (dʹ = 2) rows, at least 4 per point of the
#: n-point measure.
W1_SIZE = 512


def sweep_configs(grid: Mapping[str, Any], *, base_seed: int = 0, layers: int = 4, adjoint: bool = True) -> list[dict]:
    """Configurations (JSON-able dicts), one per (field, population, d): all n and the floor.

    ``grid``: ``attention_dims``, ``control_dims``, ``ns``, ``control_ns``, ``n_ref``,
    ``control_n_ref``, ``seeds``, ``subspace`` ((D, dʹ) or None) and ``reference``:

    - ``"exact"``: Gaussian attention rows compare with the exact Gaussian limit (their MLP
      declared linear, so that the limit is Gaussian), every other row with a QMC reference of
      n_ref points (see :mod:`cfm_jax.chaos`); W1 of the dʹ = 2 rows over ``w1_ns`` against
      ``w1_size`` QMC points; ∇φ up to ``grad_phi_max_n``.
    - ``"sample"``: i.i.d. references of n_ref points, every quantity at every n (n <= n_ref).

    W1 policy (W1 between measures is computed only where the intrinsic dimension dʹ <= 3:
    beyond, a CPU-size reference cannot resolve n^{-1/dʹ}; the control field shows the curse of
    dimension instead):

    - dʹ = 1: at every n of the row. Gaussian rows: the exact quantile formula against the law
      N(m_s, Σ_s) of the limit (floor 0); control rows: the exact sorted formula against
      ``control_n_ref`` QMC points (floor: two such sets).
    - dʹ = 2: Sinkhorn (ε = 2 % of the cost scale, bias ≲ 5 %) over its own sizes ``w1_ns``
      (16…128) against ``w1_size`` = 512 ≥ 4·max(w1_ns) QMC points (Gaussian rows: Sobol points
      pushed by the exact flow); its floor is two such sets. Sinkhorn between the n-point measure
      and the reference costs O(n·w1_size) an iteration, so larger n would not fit the run's
      budget, and the reference would have to grow with n.

    ∇φ (attention rows with the adjoint) has no closed form in the Gaussian limit: it is compared
    with a QMC reference of n_ref points (floor: two of them) for n <= ``grad_phi_max_n``, where
    the particle adjoints the probes need (O(n²) memory a layer) are affordable. The token adjoint
    p of every n is the cheap token-only adjoint (:func:`cfm_jax.chaos.token_adjoint_states`).
    """
    configs = []
    exact = grid.get("reference", "sample") == "exact"

    def group(field, population, d, k, ns, n_ref):
        dk = k or d
        w1 = dk <= 3
        if exact:
            ref = "gaussian" if field == "attention" and population == "gaussian" else "qmc"
            extra: dict = {"reference": ref}
            if ref == "gaussian":
                extra["mlp_activation"] = "linear"
            if w1 and dk > 1:
                extra["w1_ns"] = list(grid["w1_ns"])
            if field == "attention" and adjoint and grid.get("grad_phi_max_n"):
                extra["grad_phi_max_n"] = int(grid["grad_phi_max_n"])
            w1_size = n_ref if dk == 1 else min(int(grid["w1_size"]), n_ref)
        else:
            extra = {}
            w1_size = min(1024 if dk == 1 else 512, n_ref)
        configs.append(
            dict(
                field=field,
                population=population,
                dim=d,
                intrinsic_dim=k,
                ns=list(ns),
                n_ref=n_ref,
                **extra,
                seeds=grid["seeds"],
                seed=base_seed,
                layers=layers,
                w1=w1,
                w1_size=w1_size,
                **({} if dk == 1 else {"relative_epsilon": 0.02}),
                **({} if adjoint else {"adjoint": False}),
            )
        )

    for d in grid["attention_dims"]:
        group("attention", "gaussian", d, None, grid["ns"], grid["n_ref"])
    for d in grid["control_dims"]:
        group("control", "gaussian", d, None, grid["control_ns"], grid["control_n_ref"])
    if grid.get("subspace"):
        D, k = grid["subspace"]
        group("attention", "subspace_gaussian", D, k, grid["ns"], grid["n_ref"])
        group("control", "subspace_gaussian", D, k, grid["control_ns"], grid["control_n_ref"])
    return configs


def spec_from_config(config: Mapping[str, Any]) -> ChaosSpec:
    """The :class:`cfm_jax.chaos.ChaosSpec` of one :func:`sweep_configs` entry (extra keys such as
    seeds or the part ignored)."""
    names = {f.name for f in dataclasses.fields(ChaosSpec)}
    kw = {k: v for k, v in config.items() if k in names}
    kw["ns"] = tuple(int(n) for n in config["ns"])
    if kw.get("w1_ns") is not None:
        kw["w1_ns"] = tuple(int(n) for n in kw["w1_ns"])
    return ChaosSpec(**kw)


@contextlib.contextmanager
def _by_design() -> Iterator[None]:
    """Within the block, no :class:`cfm_jax.HeavyTailWarning`: the sweep's rows are in the heavy-tail
    regime by design (module docstring), and the summary and table list them instead; every other
    warning, and this one outside the block, is left as it is."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HeavyTailWarning)
        yield


def run_config(config: Mapping[str, Any]) -> dict:
    """One row: per-seed sup deviations (``values[q]``: seeds × the quantity's sizes) and floors."""
    with _by_design():  # run_seeds warns about the Gaussian rows' regime: regime_lines reports it
        res = run_seeds(spec_from_config(config), config["seeds"], config.get("seed", 0))
    values = {k: v.tolist() for k, v in res.items() if not k.startswith("floor_")}
    floors = {k[len("floor_") :]: v.tolist() for k, v in res.items() if k.startswith("floor_")}
    row: dict = {"values": values, "floor": floors}
    regime = row_regime(config)
    if regime is not None:
        row["regime"] = regime
    return row


def row_regime(config: Mapping[str, Any]) -> dict | None:
    """The attention regime of a Gaussian-reference row's models and target tokens at the population
    law (:func:`cfm_jax.chaos.attention_regimes`): every field of :class:`cfm_jax.AttentionRegime`
    as nested lists with a leading seeds axis; None for the other rows (no Gaussian context law)."""
    spec = spec_from_config(config)
    if spec.reference != "gaussian":
        return None
    reg = attention_regimes(spec, config["seeds"], config.get("seed", 0))
    return {f.name: np.asarray(getattr(reg, f.name)).tolist() for f in dataclasses.fields(reg)}


def pooled_regime(regime: Mapping[str, Any]) -> AttentionRegime:
    """A row's regime (:func:`row_regime`) over all its seeds: the seeds' queries side by side
    ``(L, H, seeds·B)``, per layer and head the largest ρ (smallest tail index) over seeds."""
    a = {k: np.asarray(v) for k, v in regime.items()}
    per_query = lambda v: np.moveaxis(v, 0, 2).reshape(*v.shape[1:3], -1)  # noqa: E731
    return AttentionRegime(
        logit_variance=jnp.asarray(per_query(a["logit_variance"])),
        ess_fraction=jnp.asarray(per_query(a["ess_fraction"])),
        rho=jnp.asarray(a["rho"].max(axis=0)),
        tail_index=jnp.asarray(a["tail_index"].min(axis=0)),
        heavy_tailed=jnp.asarray(a["heavy_tailed"].any()),
    )


def regime_lines(rows: list[dict]) -> list[str]:
    """One line per row whose sampled contexts are in the heavy-tail regime at its largest n (the
    rule of :func:`cfm_jax.warn_if_heavy_tailed`: some ρ ≥ 1, or an effective sample size below
    100), with its smallest effective sample size and largest ρ over seeds; the rule's
    :class:`cfm_jax.HeavyTailWarning` is not raised (the regime is the sweep's design, and these
    lines report it). Rows without a regime (QMC references, or rows of an older run) are skipped."""
    lines = []
    for r in rows:
        if "regime" not in r:
            continue
        c, reg = r["config"], pooled_regime(r["regime"])
        n = max(int(v) for v in c["ns"])
        with _by_design():
            flagged = warn_if_heavy_tailed(reg, n)
        if flagged:
            ess, rho = float(np.min(reg.ess_fraction)), float(np.max(reg.rho))
            lines.append(
                f"{c['field']} {c['population']} d = {c['dim']}: smallest effective sample size "
                f"{ess:.3g}·n ({n * ess:.3g} at n = {n}), largest ρ = {rho:.3g}"
                + (" (weights of infinite variance)" if rho >= 1 else "")
            )
    return lines


__all__ = ["W1_SIZE", "pooled_regime", "regime_lines", "row_regime", "run_config", "spec_from_config", "sweep_configs"]
