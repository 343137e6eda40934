"""The parts of ``cfm-jax rates``: the sweep against exact references (default) and against i.i.d. ones.

``exact`` (run by default): Gaussian attention rows against the exact infinite-context limit,
the others against QMC references, n over 2.4 decades; ``sample`` (``--parts sample``): the
previous method, i.i.d. references of n_ref points whose prefixes are the n-point contexts, with
its own sizes (``--sample-*``). Each row is one (field, population, d) with every seed
(:func:`~cfm_experiments.rates.grid.run_config`); the summary is the table of fitted rates, the
prefactors vs d, the claims of :mod:`~cfm_experiments.rates.claims`, a line per Gaussian row in
the heavy-tail regime of the exact limit (:func:`~cfm_experiments.rates.grid.regime_lines`; in
that regime by design, so no :class:`cfm_jax.HeavyTailWarning` is raised for them) and the figure.

Programs: each row compiles :func:`cfm_jax.chaos.program_count` programs (its reference and one
per bucket of n; ``docs/chaos.md``), and nothing is compiled twice within a run.
"""

from __future__ import annotations

import abc
from pathlib import Path

from ..declarations.rates import EXACT, SAMPLE, SHARED
from ..protocol import Part, Settings, Summary
from .claims import claims
from .figure import plot_rates
from .fits import W1_NOTE, fit_rates, format_prefactors, format_table, prefactors_vs_dim
from .grid import W1_SIZE, regime_lines, run_config, sweep_configs

#: the heading of the summary's lines on rows in the heavy-tail regime (:func:`~.grid.regime_lines`).
REGIME_HEAD = (
    "Rows whose sampled contexts approach the exact limit slowly or seem not to "
    "(cfm_jax.attention_regime at the population law, target tokens as queries; "
    "effective sample size below 100 at the largest n, or ρ ≥ 1). They are in this heavy-tail regime "
    "by design: the sweep keeps the library's default Q/K scale at every d, and their slopes show what "
    "it costs, so no HeavyTailWarning is raised for them:"
)


def _rows_check(settings: Settings) -> None:
    if not settings["dims"] and not settings["control_dims"]:
        raise ValueError("--dims, --control-dims: at least one dimension is needed (both are empty).")


class _Rates(Part):
    """What both parts do with their grid: its rows, the table, the claims, the figure."""

    #: the text file and the figure it writes.
    table: str
    figure: str

    @abc.abstractmethod
    def grid(self, settings: Settings) -> dict:
        """The grid of :func:`~cfm_experiments.rates.grid.sweep_configs`."""

    def configs(self, settings: Settings) -> list[dict]:
        grid = self.grid(settings)
        return sweep_configs(
            grid, base_seed=settings.seed, layers=settings["layers"], adjoint=not settings["no_adjoint"]
        )

    def run(self, config: dict) -> dict:
        return run_config(config)

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        if not rows:
            return Summary()
        fits = fit_rates(rows)
        table = format_table(fits)
        pre = prefactors_vs_dim(fits)
        heavy = regime_lines(rows)
        regime = (REGIME_HEAD + "\n" + "\n".join(f"  {line}" for line in heavy)) if heavy else ""
        text = "\n\n".join(t for t in (table, W1_NOTE, format_prefactors(pre), regime) if t)
        written = "\n\n".join(t for t in (table, regime) if t)  # the table file names them too
        lines = claims(fits, seeds=settings["seeds"], layers=settings["layers"], figure=self.figure)
        data = {
            "fits": fits,
            "prefactor_vs_dim": pre,
            "table": self.table,
            "figure": self.figure,
            "heavy_tailed": heavy,
        }
        return Summary(text=text, data=data, claims=lines, files={self.table: written})

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        return [plot_rates(summary.data["fits"], out / self.figure)] if rows else []


class Exact(_Rates):
    declaration = EXACT
    title = "Finite vs infinite context against exact and QMC references: fitted rates in n and d"
    table = "table.txt"
    figure = "rates.png"

    def grid(self, settings: Settings) -> dict:
        return dict(
            attention_dims=list(settings["dims"]),
            control_dims=list(settings["control_dims"]),
            ns=list(settings["ns"]),
            control_ns=list(settings["control_ns"]),
            n_ref=settings["n_ref"],
            control_n_ref=settings["control_n_ref"],
            seeds=settings["seeds"],
            subspace=None if settings["no_subspace"] else (8, 2),
            reference="exact",
            w1_ns=list(settings["w1_ns"]),
            w1_size=W1_SIZE,
            grad_phi_max_n=256,
        )

    def check(self, settings: Settings) -> None:
        _rows_check(settings)
        grid = self.grid(settings)
        dks = [*grid["attention_dims"], *grid["control_dims"], *([2] if grid["subspace"] else [])]
        if any(2 <= k <= 3 for k in dks):  # some row takes W1 by Sinkhorn
            size = min(W1_SIZE, grid["n_ref"], grid["control_n_ref"])  # the QMC points W1 is taken against
            if 4 * max(grid["w1_ns"]) > size:
                raise ValueError(
                    f"--w1-ns: the largest size ({max(grid['w1_ns'])}) must be <= {size // 4}: the Sinkhorn W1 "
                    f"reference has min({W1_SIZE}, --n-ref, --control-n-ref) = {size} QMC points, at least 4 per "
                    "point of the n-point measure."
                )


class Sample(_Rates):
    declaration = SAMPLE
    title = "Finite vs infinite context against i.i.d. references of n_ref points (the previous method)"
    table = "table_sample.txt"
    figure = "rates_sample.png"

    def grid(self, settings: Settings) -> dict:
        return dict(
            attention_dims=list(settings["dims"]),
            control_dims=list(settings["control_dims"]),
            ns=list(settings["sample_ns"]),
            control_ns=list(settings["sample_control_ns"]),
            n_ref=settings["sample_n_ref"],
            control_n_ref=settings["sample_control_n_ref"],
            seeds=settings["seeds"],
            subspace=None if settings["no_subspace"] else (8, 2),
            reference="sample",
        )

    def check(self, settings: Settings) -> None:
        _rows_check(settings)
        for ns, ref in (("sample_ns", "sample_n_ref"), ("sample_control_ns", "sample_control_n_ref")):
            if max(settings[ns]) > settings[ref]:
                raise ValueError(
                    f"--{ref.replace('_', '-')} ({settings[ref]}) must be >= the largest of "
                    f"--{ns.replace('_', '-')} ({max(settings[ns])}): each n-point context is a prefix of it."
                )


__all__ = ["REGIME_HEAD", "SHARED", "Exact", "Sample"]
