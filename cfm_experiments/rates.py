"""``cfm-jax rates``: the propagation-of-chaos sweep (grid, resumable rows, rate fits, table, figure).

The physics (coupled n-point vs reference systems, their deviations) is :mod:`cfm_jax.chaos`;
this module chooses the grid of (field, population, d, ns), runs it through the resumable
:class:`~cfm_jax.experiments.Sweep` (one row per configuration, all seeds vmapped), fits log-log
slopes with bootstrap 95 % CIs over seeds and writes ``rows.jsonl``, ``table.txt``,
``summary.json`` and ``rates.png``. Compilations: one per configuration (one per d and field),
not one per n (see :mod:`cfm_jax.chaos`); with the persistent cache a rerun compiles nothing.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .results import ResultsFolder, read_rows

#: short column names of the table, with their meaning (printed under it).
COLUMNS = {
    "slope": "fitted exponent of deviation ≈ C·n^slope (least squares on the seed-mean of log deviation)",
    "95% CI": "bootstrap 95 % interval of the slope, resampling seeds",
    "expected": "the paper's exponent (−1/2 for attention, −1/dʹ for W1 and the control field)",
    "C": "fitted prefactor C",
    "floor/dev": "reference floor (two independent references) / mean deviation at the largest n",
    "n": "the context sizes the slope is fitted over (each quantity over its own, see the W1 policy)",
    "reference": "what n is compared with: gaussian (the exact Gaussian limit, floor 0; those rows' MLP is "
    "declared linear so that the limit is Gaussian), qmc (scrambled-Sobol points: n_ref of them, w1_size for W1), "
    "sample (i.i.d. n_ref points)",
}

#: the W1 / ∇φ policy, printed under the table (and documented in :func:`sweep_configs`).
POLICY = (
    "  W1 is computed only where dʹ <= 3. dʹ = 1: at every n, exactly (Gaussian rows: the quantile formula "
    "against the limit's law N(m_s, Σ_s), floor 0; control rows: the sorted formula against n_ref QMC points). "
    "dʹ = 2: Sinkhorn (ε = 2 % of the cost scale) over its own n (reference of 512 QMC points >= 4n). "
    "∇φ has no closed form in the Gaussian limit: compared with a QMC reference of n_ref points for "
    "n <= grad_phi_max_n."
)


def default_grid(quick: bool = False, reference: str = "exact") -> dict:
    """Built-in sizes of ``cfm-jax rates`` (``quick``: about a minute on 2 CPU cores).

    ``reference="exact"`` (default): n over 2.4 decades (16…4096; control 8…128, its reference of
    512 QMC points >= 4n: the control field is itself a Sinkhorn W1 to it), W1 with
    Sinkhorn over its own sizes 16…128 against 512 QMC points, ∇φ up to n = 256 against a QMC
    reference of ``n_ref`` points (see :func:`sweep_configs`). ``"sample"``: the i.i.d.
    references of n_ref points, n = 16…128 (control 8…64), for comparison.
    """
    if reference == "sample":
        grid = dict(
            attention_dims=[2, 8] if quick else [1, 2, 4, 8, 16],
            control_dims=[4] if quick else [1, 2, 4, 8],
            ns=[16, 32, 64, 128],
            control_ns=[8, 16, 32, 64],
            n_ref=1024 if quick else 2048,
            control_n_ref=256 if quick else 512,
            seeds=6 if quick else 8,
            subspace=None if quick else (8, 2),
            reference="sample",
        )
        return grid
    if reference != "exact":
        raise ValueError(f"`reference` must be 'exact' or 'sample', got {reference!r}.")
    if quick:
        return dict(
            attention_dims=[2, 8],
            control_dims=[4],
            ns=[16, 64, 256, 1024],
            control_ns=[8, 16, 32, 64, 128],
            n_ref=1024,
            control_n_ref=512,
            seeds=6,
            subspace=None,
            reference="exact",
            w1_ns=[16, 32, 64, 128],
            w1_size=512,
            grad_phi_max_n=256,
        )
    return dict(
        attention_dims=[1, 2, 4, 8, 16],
        control_dims=[1, 2, 4, 8],
        ns=[16, 64, 256, 1024, 4096],
        control_ns=[8, 16, 32, 64, 128],
        n_ref=2048,
        control_n_ref=512,
        seeds=8,
        subspace=(8, 2),
        reference="exact",
        w1_ns=[16, 32, 64, 128],
        w1_size=512,
        grad_phi_max_n=256,
    )


def sweep_configs(grid: dict, *, base_seed: int = 0, layers: int = 4, adjoint: bool = True) -> list[dict]:
    """Configurations (JSON-able dicts), one per (field, population, d): all n and the floor.

    ``grid["reference"] == "exact"`` (the default grid): Gaussian attention rows compare with the
    exact Gaussian limit (their MLP declared linear, so that the limit is Gaussian), every other
    row with a QMC reference of n_ref points (see :mod:`cfm_jax.chaos`). ``"sample"``: i.i.d.
    references of n_ref points, every quantity at every n (the previous default).

    W1 policy (W1 between measures is computed only where the intrinsic dimension d' <= 3:
    beyond, a CPU-size reference cannot resolve n^{-1/d'}; the control field shows the curse of
    dimension instead):

    - d' = 1: at every n of the row. Gaussian rows: the exact quantile formula against the law
      N(m_s, Σ_s) of the limit (floor 0); control rows: the exact sorted formula against
      ``control_n_ref`` QMC points (floor: two such sets).
    - d' = 2: Sinkhorn (ε = 2 % of the cost scale, bias ≲ 5 %, see ``cfm_jax._wasserstein``) over
      its own sizes ``w1_ns`` (16…128) against ``w1_size`` = 512 ≥ 4·max(w1_ns) QMC points (Gaussian
      rows: Sobol points pushed by the exact flow); its floor is two such sets. Sinkhorn between
      the n-point measure and the reference costs O(n·w1_size) an iteration, so larger n would not
      fit the run's budget, and the reference would have to grow with n.

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


def spec_from_config(config: Mapping[str, Any]):
    """The :class:`cfm_jax.chaos.ChaosSpec` of one :func:`sweep_configs` entry (extra keys such as seeds ignored)."""
    from cfm_jax.chaos import ChaosSpec

    names = {f.name for f in dataclasses.fields(ChaosSpec)}
    kw = {k: v for k, v in config.items() if k in names}
    kw["ns"] = tuple(int(n) for n in config["ns"])
    if kw.get("w1_ns") is not None:
        kw["w1_ns"] = tuple(int(n) for n in kw["w1_ns"])
    return ChaosSpec(**kw)


def run_config(config: Mapping[str, Any]) -> dict:
    """One sweep row: per-seed sup deviations (``values[q]``: seeds × ns), floors, wall time."""
    from cfm_jax.chaos import run_seeds

    spec = spec_from_config(config)
    t0 = time.perf_counter()
    res = run_seeds(spec, config["seeds"], config.get("seed", 0))
    values = {k: v.tolist() for k, v in res.items() if not k.startswith("floor_")}
    floors = {k[len("floor_") :]: v.tolist() for k, v in res.items() if k.startswith("floor_")}
    return {"values": values, "floor": floors, "seconds": time.perf_counter() - t0}


def results_folder(
    out_dir, configs, *, resume: bool = False, overwrite: bool = False, config: dict | None = None
) -> ResultsFolder:
    """The :class:`~cfm_jax.experiments.ResultsFolder` of a rates sweep; ``config`` (default: the
    configurations themselves) is what ``run.json`` records and ``--resume`` compares."""
    if resume and overwrite:
        raise ValueError("`resume` and `overwrite` exclude each other.")
    mode = "resume" if resume else "overwrite" if overwrite else "new"
    return ResultsFolder(out_dir, "rates", {"configs": configs} if config is None else config, mode=mode)


def run_sweep(
    configs,
    out_dir,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    stop_after=None,
    folder: ResultsFolder | None = None,
) -> list[dict]:
    """Run ``configs`` with the resumable :class:`Sweep` (rows in ``out_dir/rows.jsonl``).

    ``out_dir`` must not hold results unless ``resume`` (only those of the same configurations)
    or ``overwrite`` (see :class:`~cfm_jax.experiments.ResultsFolder`); ``folder`` an already
    opened one.
    """
    folder = folder or results_folder(out_dir, configs, resume=resume, overwrite=overwrite)
    return folder.sweep(progress=progress).run(configs, run_config, desc="rates", stop_after=stop_after)


def fit_rates(rows: list[dict], *, floor_ratio: float = 0.5, n_boot: int = 1000) -> list[dict]:
    """Fitted log-log slopes with bootstrap 95 % CIs, per (field, population, d, quantity).

    The floor is the median over seeds of the deviation between two independent references,
    i.e. √2 × the reference's own error. A fit is flagged ``meaningful`` only where that error,
    floor/√2, is below ``floor_ratio`` times the mean deviation at the largest n; otherwise the
    slope reflects the proxy, not the rate.
    """
    from cfm_jax.chaos import QUANTITIES, expected_slope, quantity_reference
    from cfm_jax.stats import fit_loglog, mean_ci

    fits = []
    for r in rows:
        cfg = r["config"]
        field, d = cfg["field"], cfg["dim"]
        dk = cfg.get("intrinsic_dim") or d
        spec = spec_from_config(cfg)
        for q in QUANTITIES:
            if q not in r["values"]:
                continue
            ns = np.asarray(spec.quantity_ns(q), dtype=np.float64)  # each quantity over its own sizes
            y = np.asarray(r["values"][q], dtype=np.float64).T  # (K, S)
            fit = fit_loglog(ns, y, n_boot=n_boot)
            floors = r.get("floor", {}).get(q)
            fl = float(np.median(np.asarray(floors, dtype=np.float64))) if floors is not None else float("nan")
            top = float(y[-1].mean())
            cis = [mean_ci(v)[1] for v in y]
            fits.append(
                dict(
                    field=field,
                    population=cfg["population"],
                    dim=d,
                    intrinsic_dim=dk,
                    quantity=q,
                    slope=fit.slope,
                    ci_low=fit.ci_low,
                    ci_high=fit.ci_high,
                    prefactor=fit.prefactor,
                    expected=expected_slope(field, q, dk),
                    floor=fl,
                    deviation_at_max_n=top,
                    meaningful=bool(not np.isfinite(fl) or fl / math.sqrt(2) < floor_ratio * top),
                    ns=ns.tolist(),
                    mean=y.mean(axis=1).tolist(),
                    ci_halfwidth=cis,
                    reference=quantity_reference(spec, q),
                )
            )
    return fits


def prefactors_vs_dim(fits: list[dict]) -> dict:
    """Dimension-free constants: the fitted prefactor of attention's token quantities vs d."""
    out: dict = {}
    for f in fits:
        if f["field"] == "attention" and f["population"] == "gaussian" and f["quantity"] != "w1":
            out.setdefault(f["quantity"], {})[f["dim"]] = f["prefactor"]
    return out


def _n_range(ns) -> str:
    return f"{int(ns[0])}–{int(ns[-1])}"


def format_table(fits: list[dict]) -> str:
    """Plain-text table (one line per fit) followed by the meaning of every column."""
    head = (
        f"{'quantity':9} {'field':9} {'population':17} {'d':>3} {'dʹ':>3} {'slope':>7} {'95% CI':>17} "
        f"{'expected':>8} {'C':>7} {'floor/dev':>9} {'n':>9} {'reference':>9}  note"
    )
    lines = [head, "-" * len(head)]
    for f in fits:
        floor = f["floor"] if f["floor"] is not None else float("nan")
        ratio = floor / f["deviation_at_max_n"] if np.isfinite(floor) else float("nan")
        note = "" if f["meaningful"] else "floor-limited: slope not meaningful"
        lines.append(
            f"{f['quantity']:9} {f['field']:9} {f['population']:17} {f['dim']:>3} {f['intrinsic_dim']:>3} "
            f"{f['slope']:>7.3f} [{f['ci_low']:>7.3f},{f['ci_high']:>7.3f}] {f['expected']:>8.3f} "
            f"{f['prefactor']:>7.3g} {(f'{ratio:9.2f}' if np.isfinite(ratio) else f'{chr(8212):>9}')} "
            f"{_n_range(f['ns']):>9} {f.get('reference', 'sample'):>9}  {note}"
        )
    lines.append("")
    lines += [f"  {k:9} {v}" for k, v in COLUMNS.items()]
    lines.append(
        "  floor-limited: the reference's own error (floor/√2) is not < 0.5 × the deviation at the "
        "largest n, so the slope reflects the reference, not the rate; '—': no floor for that quantity"
    )
    if any(f.get("reference") != "sample" for f in fits):
        lines.append(POLICY)
    return "\n".join(lines)


def _panels(fits):
    from cfm_jax.chaos import QUANTITIES

    panels = [
        ("attention", q) for q in QUANTITIES if any(f["quantity"] == q and f["field"] == "attention" for f in fits)
    ]
    panels += [
        ("control", q) for q in ("token", "w1") if any(f["quantity"] == q and f["field"] == "control" for f in fits)
    ]
    return panels


def plot_rates(fits: list[dict], path) -> Path:
    """:func:`rates_figure` saved to ``path``."""
    from .plotting import save

    return save(rates_figure(fits), path)


def rates_figure(fits: list[dict]):
    """Log-log deviation vs n, one panel per (field, quantity) in :func:`fit_rates`.

    Solid lines with markers: mean over seeds, with the Student-t 95 % interval over seeds;
    dashed, same colour: the expected slope drawn through the curve's last point; dotted, same
    colour: the reference floor (none where the reference is exact). The panel title names the
    references of its rows other than ``sample``.
    """
    from matplotlib.lines import Line2D

    from cfm_jax.chaos import QUANTITIES

    from .plotting import COLORS, figure, log_ticks, log_values

    panels = _panels(fits)
    # one colour per (population, d) in every panel, so a curve keeps its colour across panels
    rows = list(dict.fromkeys((f["population"], f["dim"]) for f in fits))
    colour = {r: COLORS[i % len(COLORS)] for i, r in enumerate(rows)}
    fig, axes = figure(len(panels), ncols=min(4, len(panels)), width=4.0, height=4.8)
    for ax, (field, q) in zip(axes, panels):
        sel = [f for f in fits if f["field"] == field and f["quantity"] == q]
        all_ns = sorted({n for f in sel for n in f["ns"]})
        floors = False
        for f in sel:
            color = colour[(f["population"], f["dim"])]
            ns, m = np.array(f["ns"]), np.array(f["mean"])
            lab = f"d={f['dim']}" + (f" (dʹ={f['intrinsic_dim']})" if f["intrinsic_dim"] != f["dim"] else "")
            lab += f": {f['slope']:+.2f}" + ("" if f["meaningful"] else " (floor-limited)")
            ci = np.array(f.get("ci_halfwidth", np.full(len(ns), np.nan)), dtype=np.float64)
            # Student-t 95 % interval over seeds, clipped at the axis floor on a log scale
            ax.errorbar(
                ns,
                m,
                yerr=[np.minimum(np.nan_to_num(ci), 0.9 * m), np.nan_to_num(ci)],
                fmt="o-",
                color=color,
                label=lab,
                lw=1.4,
                capsize=2.5,
                ms=4,
            )
            ax.plot(ns, m[-1] * (ns / ns[-1]) ** f["expected"], "--", color=color, lw=1.0)
            if f["floor"] is not None and np.isfinite(f["floor"]) and f["floor"] > 0:  # exact references: 0
                ax.axhline(f["floor"], color=color, ls=":", lw=1.0)
                floors = True
        log_values(ax, "y")
        log_ticks(ax, all_ns, "x")
        refs = sorted({f.get("reference", "sample") for f in sel} - {"sample"})
        ax.set_title(f"{field}: {q}" + (f" (vs {', '.join(refs)})" if refs else ""), fontsize=10)
        ax.set_xlabel("context size n")
        ax.set_ylabel(QUANTITIES[q].replace(" (coupled context)", "") + " (token units)", fontsize=9)
        handles, labels = ax.get_legend_handles_labels()
        handles.append(Line2D([], [], color="0.3", ls="--"))
        labels.append("expected slope (same colour)")
        if floors:  # the coupled context has no floor
            handles.append(Line2D([], [], color="0.3", ls=":"))
            labels.append("reference floor (same colour)")
        handles.append(Line2D([], [], color="0.3", marker="|", ls="none"))
        labels.append("95 % CI over seeds")
        # outside the axes (below), so no data point is ever covered
        ax.legend(
            handles,
            labels,
            fontsize=7,
            title="fitted slope",
            title_fontsize=7,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.2),
            ncol=2,
            frameon=False,
        )
    fig.suptitle("finite vs infinite context: deviation (sup over depth, mean over seeds) vs n", fontsize=11)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------------------------
# cfm-jax rates


def add_arguments(parser):
    from .options import add_experiment_arguments

    add_experiment_arguments(parser, "cfm_out/rates")
    full, quick = default_grid(False), default_grid(True)
    sample = default_grid(False, "sample")

    def dflt(key):
        show = lambda v: " ".join(map(str, v)) if isinstance(v, list) else v  # noqa: E731
        text = f"(default: {show(full[key])}; with --quick: {show(quick[key])}"
        return text + (f"; with --reference sample: {show(sample[key])})" if key in sample else ")")

    parser.add_argument(
        "--dims", type=int, nargs="+", metavar="D", help=f"attention dimensions d {dflt('attention_dims')}"
    )
    parser.add_argument(
        "--control-dims", type=int, nargs="+", metavar="D", help=f"control-field dimensions d {dflt('control_dims')}"
    )
    parser.add_argument("--ns", type=int, nargs="+", metavar="N", help=f"context sizes n, attention {dflt('ns')}")
    parser.add_argument(
        "--control-ns", type=int, nargs="+", metavar="N", help=f"context sizes n, control {dflt('control_ns')}"
    )
    parser.add_argument(
        "--n-ref",
        type=int,
        help=f"reference size, attention: QMC points for the subspace row and ∇φ (i.i.d. with --reference "
        f"sample) {dflt('n_ref')}",
    )
    parser.add_argument(
        "--control-n-ref", type=int, help=f"reference size (QMC points), control {dflt('control_n_ref')}"
    )
    parser.add_argument(
        "--w1-ns",
        type=int,
        nargs="+",
        metavar="N",
        help=f"context sizes of the Sinkhorn W1 rows (dʹ = 2; exact references only) {dflt('w1_ns')}",
    )
    parser.add_argument("--seeds", type=int, help=f"seeds per configuration, vmapped {dflt('seeds')}")
    parser.add_argument("--layers", type=int, default=4, help="layers L")
    parser.add_argument(
        "--no-subspace",
        action="store_true",
        help="skip the population on a dʹ = 2 subspace of R^8 (run by default, not with --quick)",
    )
    parser.add_argument("--no-adjoint", action="store_true", help="skip the adjoint quantities (p, ∇φ)")
    parser.add_argument(
        "--reference",
        choices=("sample", "exact"),
        default=None,
        help="exact (default): the exact Gaussian limit for Gaussian attention rows (their MLP declared "
        "linear), a QMC reference for the others and for ∇φ; sample: i.i.d. references of n_ref points "
        "(the previous default, with its own default sizes)",
    )


def grid_from_args(args) -> dict:
    """The grid of :func:`default_grid` with the command-line overrides; ValueError on bad sizes."""
    from .options import check_option

    reference = args.reference or "exact"
    grid = default_grid(args.quick, reference)
    for name, attr in (
        ("attention_dims", "dims"),
        ("control_dims", "control_dims"),
        ("ns", "ns"),
        ("control_ns", "control_ns"),
        ("n_ref", "n_ref"),
        ("control_n_ref", "control_n_ref"),
        ("seeds", "seeds"),
        ("w1_ns", "w1_ns"),
    ):
        v = getattr(args, attr, None)
        if v is not None and name == "w1_ns" and reference == "sample":
            raise ValueError("--w1-ns: needs --reference exact (with sample references W1 is measured at --ns).")
        if v is not None:
            check_option(attr, v)  # the command line checked them already; Python callers too
            grid[name] = v
    check_option("layers", args.layers)
    if args.no_subspace:
        grid["subspace"] = None
    for key, flag in (("ns", "--ns"), ("control_ns", "--control-ns")) + (
        (("w1_ns", "--w1-ns"),) if reference == "exact" else ()
    ):
        if len(grid[key]) < 2:
            raise ValueError(f"{flag}: need at least two positive context sizes to fit a rate, got {grid[key]}.")
    for key, ref, flag in (("ns", "n_ref", "--n-ref"), ("control_ns", "control_n_ref", "--control-n-ref")):
        if reference == "sample" and max(grid[key]) > grid[ref]:
            raise ValueError(f"{flag} ({grid[ref]}) must be >= the largest context size ({max(grid[key])}).")
    dks = (
        list(grid["attention_dims"]) + list(grid["control_dims"]) + ([grid["subspace"][1]] if grid["subspace"] else [])
    )
    if reference == "exact" and any(2 <= k <= 3 for k in dks):  # some row takes W1 by Sinkhorn
        size = min(grid["w1_size"], grid["n_ref"], grid["control_n_ref"])  # the QMC points W1 is taken against
        if 4 * max(grid["w1_ns"]) > size:
            raise ValueError(
                f"--w1-ns: the largest size ({max(grid['w1_ns'])}) must be <= {size // 4}: the Sinkhorn W1 "
                f"reference has min(w1_size = {grid['w1_size']}, --n-ref, --control-n-ref) = {size} QMC points, "
                "at least 4 per point of the n-point measure."
            )
    return grid


def run(args) -> int:
    import jax

    from .options import results_mode

    grid = grid_from_args(args)
    configs = sweep_configs(grid, base_seed=args.seed, layers=args.layers, adjoint=not args.no_adjoint)
    # the resolved configuration: `--quick` and the same sizes given one by one are the same run
    config = {"grid": grid, "layers": args.layers, "seed": args.seed, "adjoint": not args.no_adjoint}
    folder = ResultsFolder(args.out, "rates", config, mode=results_mode(args))
    out = folder.path
    t0 = time.perf_counter()
    rows = run_sweep(configs, out, progress=not args.no_progress, folder=folder)
    wall = time.perf_counter() - t0
    fits = fit_rates(rows)
    table = format_table(fits)
    print(table)
    print(
        "\nW1 between measures is computed only where the intrinsic dimension dʹ <= 3: in higher d a "
        "CPU-size reference is too coarse (n_ref^(-1/d) is not << n^(-1/d)), and the control field's "
        "slope shows the curse of dimension instead (policy under the table)."
    )
    pre = prefactors_vs_dim(fits)
    if pre:
        print("\nfitted prefactor C vs d (attention, Gaussian population; dimension-free if flat):")
        for q, by_d in pre.items():
            print(f"  {q:9} " + "  ".join(f"d={d}: {c:.3g}" for d, c in sorted(by_d.items())))
    folder.record("rates.png", "table.txt")
    fig = plot_rates(fits, out / "rates.png")
    (out / "table.txt").write_text(table + "\n")
    summary = folder.write_summary(
        dict(
            grid=grid,
            wall_seconds_this_run=wall,
            sweep_seconds=sum(r.get("seconds", 0.0) for r in read_rows(out / "rows.jsonl")),
            backend=jax.default_backend(),
            fits=fits,
            prefactor_vs_dim=pre,
            figure=fig.name,
            rows="rows.jsonl",
        ),
    )
    print(f"\nwrote {out / 'rows.jsonl'}, {out / 'table.txt'}, {summary}, {fig} (sweep {wall:.1f} s)")
    return 0


__all__ = [
    "COLUMNS",
    "POLICY",
    "add_arguments",
    "default_grid",
    "fit_rates",
    "format_table",
    "grid_from_args",
    "plot_rates",
    "rates_figure",
    "prefactors_vs_dim",
    "results_folder",
    "run",
    "run_config",
    "run_sweep",
    "spec_from_config",
    "sweep_configs",
]
