"""``cfm-jax ogd``: the ridge ablation of the OGD finite- vs population-context coupling (``docs/ogd.md``).

Teacher–student stream (contexts uniform on the unit sphere by default, the compact support
the paper assumes). Steps:

1. *pilot*: λ = 0, seed 0; C is estimated on the visited region (:func:`cfm_jax.ogd.estimate_lipschitz`),
   λ_c = 2C; the three regimes are λ = 0, λ_weak = λ_c/8 and λ_strong = min(1.5·λ_c, 0.9/η);
2. for every λ and seed: one coupled run (n-point contexts = the first n points of the n_ref
   reference sample) recording ‖θ_k^{(n)} − θ̂_k‖_{L∞} at every k, plus C re-estimated on the
   region that run visited;
3. summary: sup_k deviation per (λ, n) with CIs over seeds and fitted n-slopes (bootstrap),
   late-window level, growth dev(K)/dev(K/2); figures deviation-vs-k per λ and sup_k vs n.

Rows go through the resumable :class:`~cfm_jax.experiments.Sweep` (``pilot.jsonl``,
``rows.jsonl``); ``--resume`` reruns only what is missing.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

DEFAULTS = dict(
    dim=3,
    layers=4,
    heads=1,
    mlp_width=8,
    batch=4,
    n_ref=512,
    ns=(4, 16, 64),
    eta=0.03,
    steps=600,
    seeds=4,
    population="uniform_sphere",
)
QUICK = dict(DEFAULTS, dim=2, layers=2, mlp_width=4, n_ref=256, steps=200, seeds=2)
MAX_CURVE_POINTS = 300


def add_arguments(parser):
    from .options import add_experiment_arguments

    add_experiment_arguments(parser, "cfm_out/ogd")

    def dflt(key):
        show = lambda v: " ".join(map(str, v)) if isinstance(v, tuple) else v  # noqa: E731
        return f"(default: {show(DEFAULTS[key])}; with --quick: {show(QUICK[key])})"

    parser.add_argument("--dim", type=int, help=f"token dimension d {dflt('dim')}")
    parser.add_argument("--layers", type=int, help=f"layers L {dflt('layers')}")
    parser.add_argument("--mlp-width", type=int, help=f"MLP width m {dflt('mlp_width')}")
    parser.add_argument("--n-ref", type=int, help=f"reference (population) sample size {dflt('n_ref')}")
    parser.add_argument("--ns", type=int, nargs="+", metavar="N", help=f"context sizes n {dflt('ns')}")
    parser.add_argument("--eta", type=float, help=f"learning rate η {dflt('eta')}")
    parser.add_argument("--steps", type=int, help=f"OGD steps K {dflt('steps')}")
    parser.add_argument("--seeds", type=int, help=f"seeds per (λ, n) {dflt('seeds')}")
    parser.add_argument(
        "--population",
        choices=["uniform_sphere", "gaussian", "gaussian_mixture"],
        help="context law (default: uniform_sphere)",
    )


def make_config(quick: bool = False, seed: int = 0, **overrides) -> dict:
    """The ablation's configuration: :data:`DEFAULTS` (or :data:`QUICK`) with ``overrides``
    (``None`` values ignored); a ValueError names the first bad entry."""
    cfg: dict[str, Any] = dict(QUICK if quick else DEFAULTS)
    unknown = set(overrides) - set(cfg)
    if unknown:
        raise ValueError(f"unknown configuration keys {sorted(unknown)}; known: {sorted(cfg)}.")
    cfg.update({k: v for k, v in overrides.items() if v is not None})
    from .options import check_option

    cfg["ns"] = tuple(cfg["ns"])
    for k in ("dim", "layers", "mlp_width", "n_ref", "ns", "eta", "steps", "seeds"):
        check_option(k, cfg[k])
    if len(cfg["ns"]) < 2:
        raise ValueError(f"--ns: need at least two positive context sizes to fit a rate, got {cfg['ns']}.")
    if max(cfg["ns"]) > cfg["n_ref"]:
        raise ValueError(f"--ns must not exceed --n-ref={cfg['n_ref']}, got {cfg['ns']}.")
    cfg["ns"] = tuple(int(n) for n in cfg["ns"])
    cfg["seed"] = int(seed)
    return cfg


class _Problem:
    """Teacher, student and streams of one configuration (built once, shared by all rows)."""

    def __init__(self, cfg):
        import jax
        import jax.numpy as jnp

        from cfm_jax import TeacherStudentStream, Transformer, make_population

        self.cfg = cfg
        base = jax.random.key(cfg["seed"])
        kt, ks, kstream = jax.random.split(base, 3)
        dtype = jnp.result_type(float)
        mk = lambda k: Transformer.init(
            k,
            cfg["dim"],
            heads=cfg["heads"],
            mlp_width=cfg["mlp_width"],  # noqa: E731
            layers=cfg["layers"],
            dtype=dtype,
        )
        self.teacher, self.student = mk(kt), mk(ks)
        self.stream_key = kstream
        self.stream0 = TeacherStudentStream(
            self.teacher,
            make_population(cfg["population"], cfg["dim"]),
            kstream,
            batch=cfg["batch"],
            context_size=cfg["n_ref"],
        )

    def stream(self, seed: int):
        import equinox as eqx
        import jax

        return eqx.tree_at(lambda s: s.key, self.stream0, jax.random.fold_in(self.stream_key, seed))


def _lipschitz(problem, result, num_pairs=16):
    import jax

    from cfm_jax import ogd

    K = problem.cfg["steps"]
    stride = max(1, K // 16)
    visited = jax.tree.map(lambda a: a[::stride], result.ref_params)
    # pairs are evaluated on fresh samples, after the ones the run used
    est = ogd.estimate_lipschitz(
        problem.student, visited, problem.stream(10_000), jax.random.key(0), num_pairs=num_pairs, first_step=0
    )
    return {"C": float(est.C), "C_pairs": float(est.C_pairs), "C_local": float(est.C_local)}


def _pilot(problem):
    """The λ = 0 run, C on the region it visited and the three ridges; a ValueError naming
    ``--eta`` when the run diverges or the weak ridge λ_c/8 breaks ηλ < 1 (no row is written)."""
    import math

    import equinox as eqx

    from cfm_jax import ogd

    cfg = problem.cfg
    eta = cfg["eta"]
    try:
        res = ogd.coupled_run(
            problem.student, problem.stream(0), cfg["ns"], ogd.ridge_sgd(eta, 0.0), cfg["steps"], record_params=True
        )
    except eqx.EquinoxRuntimeError as e:  # the forward's input checks: the parameters left the finite numbers
        raise ValueError(f"--eta {eta}: the pilot run (λ = 0) diverged (non-finite parameters); lower --eta.") from e
    if not np.isfinite(np.asarray(res.losses)).all():
        raise ValueError(f"--eta {eta}: the pilot run (λ = 0) diverged (non-finite loss); lower --eta.")
    lip = _lipschitz(problem, res)
    if not math.isfinite(lip["C"]):
        raise ValueError(f"--eta {eta}: the pilot run's Lipschitz estimate C is not finite ({lip['C']}); lower --eta.")
    return {**lip, **ridges(lip["C"], eta)}


def ridges(C: float, eta: float) -> dict:
    """λ_c = 2C and the three regimes λ = 0, λ_c/8, min(1.5·λ_c, 0.9/η); a ValueError naming
    ``--eta`` when λ_c/8 ≥ 1/η (the weak ridge would not contract: ηλ must stay below 1)."""
    lam_c = 2 * C
    weak = lam_c / 8
    if not eta * weak < 1:
        raise ValueError(
            f"--eta {eta}: the weak ridge λ_c/8 = {weak:.4g} (λ_c = 2C from the pilot) needs "
            f"η·λ < 1, i.e. --eta below {1 / weak:.4g}; lower --eta."
        )
    return {"lambda_c": lam_c, "lambdas": {"zero": 0.0, "weak": weak, "strong": min(1.5 * lam_c, 0.9 / eta)}}


def _row(problem, config):
    import jax

    from cfm_jax import ogd

    cfg = problem.cfg
    t0 = time.perf_counter()
    res = ogd.coupled_run(
        problem.student,
        problem.stream(config["rep"]),
        cfg["ns"],
        ogd.ridge_sgd(cfg["eta"], config["lam"]),
        cfg["steps"],
        record_params=True,
    )
    res = jax.block_until_ready(res)
    seconds = time.perf_counter() - t0
    dev = np.asarray(res.deviations)  # (K, len(ns))
    K = dev.shape[0]
    stride = max(1, K // MAX_CURVE_POINTS)
    third = K // 3
    losses = np.asarray(res.losses)
    return {
        "sup_dev": dev.max(0),
        "argmax_k": dev.argmax(0) + 1,
        "late_dev": dev[-third:].max(0),
        "growth": dev[-1] / np.maximum(dev[K // 2 - 1], 1e-300),
        "curve_k": np.arange(1, K + 1)[::stride],
        "curve": dev[::stride],
        "ref_norm_final": float(res.ref_norms[-1]),
        "ref_norm_max": float(np.max(res.ref_norms)),
        "loss_late": losses[-third:].mean(0),  # per trajectory (ns..., reference)
        **{f"region_{k}": v for k, v in _lipschitz(problem, res, num_pairs=8).items()},
        "seconds": seconds,
    }


def _summarise(cfg, pilot, rows):
    from cfm_jax.stats import fit_loglog, mean_ci

    ns = np.asarray(cfg["ns"])
    out = {}
    for name, lam in pilot["lambdas"].items():
        rs = [r for r in rows if r["config"]["regime"] == name]
        if not rs:
            continue
        sup = np.asarray([r["sup_dev"] for r in rs])  # (S, len(ns))
        late = np.asarray([r["late_dev"] for r in rs])
        growth = np.asarray([r["growth"] for r in rs])
        fit = fit_loglog(ns, sup.T)
        fit_late = fit_loglog(ns, late.T)
        C_reg = max(r["region_C"] for r in rs)
        out[name] = {
            "lambda": lam,
            "lambda_over_lambda_c_pilot": lam / pilot["lambda_c"],
            "lambda_over_2C_region": lam / (2 * C_reg),
            "C_region": C_reg,
            "sup_dev": {int(n): mean_ci(sup[:, i]) for i, n in enumerate(ns)},
            "late_dev": {int(n): mean_ci(late[:, i]) for i, n in enumerate(ns)},
            "growth_K_over_K2": {int(n): float(np.mean(growth[:, i])) for i, n in enumerate(ns)},
            "argmax_k_median": {int(n): float(np.median([r["argmax_k"][i] for r in rs])) for i, n in enumerate(ns)},
            "slope_sup": fit.as_dict(),
            "slope_late": fit_late.as_dict(),
            "loss_late_reference": float(np.mean([r["loss_late"][-1] for r in rs])),
            "ref_norm_final": float(np.mean([r["ref_norm_final"] for r in rs])),
            "seeds": len(rs),
        }
    return out


def ablation_figure(cfg, pilot, rows, table):
    """Deviation vs step k per regime (one shared y scale) and sup_k deviation vs n with fitted slopes."""
    from .plotting import COLORS, figure, log_ticks, log_values, reference_slope

    names = [n for n in ("zero", "weak", "strong") if n in table]
    fig, axes = figure(len(names) + 1, ncols=len(names) + 1, width=4.0, height=3.6)
    for ax in axes[1 : len(names)]:
        ax.sharey(axes[0])  # one scale for the three regimes
    for ax, name in zip(axes, names):
        rs = [r for r in rows if r["config"]["regime"] == name]
        k = np.asarray(rs[0]["curve_k"])
        curves = np.asarray([r["curve"] for r in rs])  # (S, P, len(ns))
        for i, n in enumerate(cfg["ns"]):
            ax.plot(k, np.exp(np.log(curves[:, :, i]).mean(0)), color=COLORS[i], lw=1.4, label=f"n = {n}")
        log_values(ax, "y")
        lam = table[name]["lambda"]
        ax.set_title(f"{name}: λ = {lam:.3g} = {lam / pilot['lambda_c']:.2g}·λ_c")
        ax.axvline(1 / cfg["eta"], color="0.3", ls=":", lw=1.2, label="k = 1/η")
        ax.set_xlabel("OGD step k")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("‖θ_k − θ̂_k‖_∞ (geometric mean over seeds)")  # the three panels share it
    ax = axes[-1]
    ns = np.asarray(cfg["ns"], dtype=float)
    for i, (name, marker) in enumerate(zip(names, "os^")):
        t = table[name]
        sup = np.asarray([r["sup_dev"] for r in rows if r["config"]["regime"] == name])  # (S, len(ns))
        y = np.exp(np.log(sup).mean(0))
        err = np.stack([y - sup.min(0), sup.max(0) - y])  # range over seeds
        fit = t["slope_sup"]
        ax.errorbar(
            ns,
            y,
            yerr=err,
            marker=marker,
            ls="none",
            capsize=2,
            color=COLORS[i],
            label=f"{name}: data (bars: range over seeds)",
        )
        ax.plot(
            ns,
            fit["prefactor"] * ns ** fit["slope"],
            color=COLORS[i],
            lw=1.2,
            label=f"{name}: fit, slope {fit['slope']:+.2f} [{fit['ci_low']:+.2f}, {fit['ci_high']:+.2f}]",
        )
    reference_slope(ax, ns, (ns[0], y[0]), -0.5, label="reference slope −1/2")
    log_values(ax, "y")
    log_ticks(ax, ns, "x")
    ax.set_xlabel("context size n")
    ax.set_ylabel("sup_k ‖θ_k − θ̂_k‖_∞ (geometric mean)")
    ax.set_title(f"sup over k vs n (λ_c = 2C = {pilot['lambda_c']:.3g})")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))  # outside: the points fill the panel
    fig.tight_layout()
    return fig


def _pilot_ok(row) -> bool:
    """A pilot row is a result only with a finite C (an older version wrote NaN pilots)."""
    return row.get("C") is not None and row.get("lambda_c") is not None


def run_ablation(
    cfg: dict, out, *, resume: bool = False, overwrite: bool = False, progress: bool = True, verbose: bool = True
) -> dict:
    """Pilot, coupled runs for every (regime, seed), table and figure; returns the summary.

    ``cfg`` from :func:`make_config`; ``out`` the folder for ``run.json``, ``pilot.jsonl``,
    ``rows.jsonl``, ``summary.json`` and ``ogd_ablation.png``. A folder holding results needs
    ``resume`` (rows of the same ``cfg`` are kept) or ``overwrite``
    (:class:`~cfm_jax.experiments.ResultsFolder`).
    """
    from .plotting import save
    from .results import ResultsFolder

    if resume and overwrite:
        raise ValueError("`resume` and `overwrite` exclude each other.")
    say = print if verbose else (lambda *a, **k: None)
    shape_cfg = {k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.items()}
    folder = ResultsFolder(out, "ogd", shape_cfg, mode="resume" if resume else "overwrite" if overwrite else "new")
    out = folder.path
    problem = _Problem(cfg)
    t0 = time.perf_counter()
    pilot_rows = folder.sweep("pilot.jsonl", progress=False).run(
        [{"pilot": True, **shape_cfg}], lambda c: _pilot(problem), desc="pilot", valid=_pilot_ok
    )
    pilot = pilot_rows[0]
    say(
        f"pilot (λ=0): C = {pilot['C']:.4g} (pairs {pilot['C_pairs']:.4g}, local {pilot['C_local']:.4g}), "
        f"λ_c = 2C = {pilot['lambda_c']:.4g}; η = {cfg['eta']}"
    )
    if pilot["lambdas"]["strong"] <= pilot["lambda_c"]:
        say(f"warning: η = {cfg['eta']} does not allow λ > λ_c with η·λ < 1; the 'strong' run is below λ_c.")
    configs = [
        {**shape_cfg, "regime": name, "lam": lam, "rep": s}
        for name, lam in pilot["lambdas"].items()
        for s in range(cfg["seeds"])
    ]
    rows = folder.sweep(progress=progress).run(configs, lambda c: _row(problem, c), desc="ogd")
    table = _summarise(cfg, pilot, rows)
    folder.record("ogd_ablation.png")
    fig_path = save(ablation_figure(cfg, pilot, rows, table), out / "ogd_ablation.png")
    say(format_table(cfg, table))
    summary = {
        "config": shape_cfg,
        "pilot": {k: pilot[k] for k in ("C", "C_pairs", "C_local", "lambda_c", "lambdas")},
        "regimes": table,
        "figure": "ogd_ablation.png",
        "seconds": time.perf_counter() - t0,
        "rows": [{k: v for k, v in r.items() if k not in ("curve", "curve_k")} for r in rows],
    }
    path = folder.write_summary(summary)
    say(f"\nwrote {out / 'pilot.jsonl'}, {out / 'rows.jsonl'}, {path}, {fig_path}")
    return summary


def run(args) -> int:
    """``cfm-jax ogd``."""
    keys = ("dim", "layers", "mlp_width", "n_ref", "ns", "eta", "steps", "seeds", "population")
    cfg = make_config(args.quick, args.seed, **{k: getattr(args, k, None) for k in keys})
    run_ablation(cfg, args.out, resume=args.resume, overwrite=args.overwrite, progress=not args.no_progress)
    return 0


def format_table(cfg, table) -> str:
    """One line per regime: λ, its ratios to λ_c, sup_k deviation per n (mean ± 95 % t half-width
    over seeds), the fitted n-slope with its bootstrap 95 % CI, and the late growth; then a key."""
    ns = cfg["ns"]
    seeds = max(t["seeds"] for t in table.values())
    lines = [
        f"{'regime':8s} {'λ':>8s} {'λ/λ_c':>6s} {'λ/λ_c,run':>9s} "
        + " ".join(f"{'n=' + str(n):>17s}" for n in ns)
        + f" {'slope [95% CI]':>22s} {'growth':>7s}"
    ]
    for name, t in table.items():
        cells = " ".join(f"{t['sup_dev'][n][0]:9.3g} ± {t['sup_dev'][n][1]:<5.2g}" for n in ns)
        s = t["slope_sup"]
        lines.append(
            f"{name:8s} {t['lambda']:8.3g} {t['lambda_over_lambda_c_pilot']:6.2f} "
            f"{t['lambda_over_2C_region']:9.2f} {cells} {s['slope']:7.2f} [{s['ci_low']:5.2f}, {s['ci_high']:5.2f}] "
            f"{t['growth_K_over_K2'][ns[0]]:7.3g}"
        )
    lines += [
        "",
        f"  n=…        sup over steps k of ‖θ_k^(n) − θ̂_k‖_∞: mean ± 95 % t half-width over {seeds} seeds",
        "  λ/λ_c      ridge λ over λ_c = 2C, C the Lipschitz estimate of the pilot run (λ = 0)",
        "  λ/λ_c,run  λ over 2C with C re-estimated on the parameters this regime's runs visited (max over seeds)",
        "  slope      fitted exponent of sup_k deviation ≈ C·n^slope; bootstrap 95 % CI resampling seeds",
        f"  growth     deviation at the last step / at step K/2, n = {ns[0]} (> 1: still growing)",
    ]
    return "\n".join(lines)


__all__ = [
    "DEFAULTS",
    "QUICK",
    "ablation_figure",
    "add_arguments",
    "format_table",
    "make_config",
    "ridges",
    "run",
    "run_ablation",
]
