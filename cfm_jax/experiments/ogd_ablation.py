"""``cfm-jax ogd``: the ridge ablation of the OGD finite- vs population-context coupling (SPEC §3).

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
from pathlib import Path

import numpy as np

DEFAULTS = dict(dim=3, layers=4, heads=1, mlp_width=8, batch=4, n_ref=512, ns=(4, 16, 64), eta=0.03,
                steps=600, seeds=4, population="uniform_sphere")
QUICK = dict(dim=2, layers=2, heads=1, mlp_width=4, batch=4, n_ref=256, ns=(4, 16, 64), eta=0.03,
             steps=200, seeds=2, population="uniform_sphere")
MAX_CURVE_POINTS = 300


def add_arguments(parser):
    from ..cli import add_experiment_arguments

    add_experiment_arguments(parser, "cfm_out/ogd")
    parser.add_argument("--dim", type=int, help=f"token dimension d (default {DEFAULTS['dim']})")
    parser.add_argument("--layers", type=int, help=f"layers L (default {DEFAULTS['layers']})")
    parser.add_argument("--mlp-width", type=int, help=f"MLP width m (default {DEFAULTS['mlp_width']})")
    parser.add_argument("--n-ref", type=int, help=f"reference (population) sample size (default {DEFAULTS['n_ref']})")
    parser.add_argument("--ns", type=int, nargs="+", help=f"context sizes n (default {DEFAULTS['ns']})")
    parser.add_argument("--eta", type=float, help=f"learning rate η (default {DEFAULTS['eta']})")
    parser.add_argument("--steps", type=int, help=f"OGD steps K (default {DEFAULTS['steps']})")
    parser.add_argument("--seeds", type=int, help=f"seeds per (λ, n) (default {DEFAULTS['seeds']})")
    parser.add_argument("--population", choices=["uniform_sphere", "gaussian", "gaussian_mixture"],
                        help="context law (default uniform_sphere)")


def _config(args) -> dict:
    cfg = dict(QUICK if args.quick else DEFAULTS)
    for k in ("dim", "layers", "mlp_width", "n_ref", "ns", "eta", "steps", "seeds", "population"):
        v = getattr(args, k, None)
        if v is not None:
            cfg[k] = tuple(v) if k == "ns" else v
    cfg["ns"] = tuple(int(n) for n in cfg["ns"])
    if max(cfg["ns"]) > cfg["n_ref"]:
        raise ValueError(f"--ns must not exceed --n-ref={cfg['n_ref']}, got {cfg['ns']}.")
    if len(cfg["ns"]) < 2 or cfg["seeds"] < 1 or cfg["steps"] < 4:
        raise ValueError("need >= 2 context sizes, >= 1 seed and >= 4 steps.")
    cfg["seed"] = int(args.seed)
    return cfg


class _Problem:
    """Teacher, student and streams of one configuration (built once, shared by all rows)."""

    def __init__(self, cfg):
        import jax
        import jax.numpy as jnp

        from .. import Transformer
        from ..populations import make_population
        from ..streams import TeacherStudentStream

        self.cfg = cfg
        base = jax.random.key(cfg["seed"])
        kt, ks, kstream = jax.random.split(base, 3)
        dtype = jnp.result_type(float)
        mk = lambda k: Transformer.init(k, cfg["dim"], heads=cfg["heads"], mlp_width=cfg["mlp_width"],  # noqa: E731
                                        layers=cfg["layers"], dtype=dtype)
        self.teacher, self.student = mk(kt), mk(ks)
        self.stream_key = kstream
        self.stream0 = TeacherStudentStream(self.teacher, make_population(cfg["population"], cfg["dim"]), kstream,
                                            batch=cfg["batch"], context_size=cfg["n_ref"])

    def stream(self, seed: int):
        import equinox as eqx
        import jax

        return eqx.tree_at(lambda s: s.key, self.stream0, jax.random.fold_in(self.stream_key, seed))


def _lipschitz(problem, result, num_pairs=16):
    import jax

    from .. import ogd

    K = problem.cfg["steps"]
    stride = max(1, K // 16)
    visited = jax.tree.map(lambda a: a[::stride], result.ref_params)
    # pairs are evaluated on fresh samples, after the ones the run used
    est = ogd.estimate_lipschitz(problem.student, visited, problem.stream(10_000), jax.random.key(0),
                                 num_pairs=num_pairs, first_step=0)
    return {"C": float(est.C), "C_pairs": float(est.C_pairs), "C_local": float(est.C_local)}


def _pilot(problem):
    from .. import ogd

    cfg = problem.cfg
    res = ogd.coupled_run(problem.student, problem.stream(0), cfg["ns"], ogd.ridge_sgd(cfg["eta"], 0.0),
                          cfg["steps"], record_params=True)
    lip = _lipschitz(problem, res)
    lam_c = 2 * lip["C"]
    strong = min(1.5 * lam_c, 0.9 / cfg["eta"])
    return {**lip, "lambda_c": lam_c, "lambdas": {"zero": 0.0, "weak": lam_c / 8, "strong": strong}}


def _row(problem, config):
    import jax

    from .. import ogd

    cfg = problem.cfg
    t0 = time.perf_counter()
    res = ogd.coupled_run(problem.student, problem.stream(config["rep"]), cfg["ns"],
                          ogd.ridge_sgd(cfg["eta"], config["lam"]), cfg["steps"], record_params=True)
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
    from ..stats import fit_loglog, mean_ci

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


def _figure(path, cfg, pilot, rows, table):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in ("zero", "weak", "strong") if n in table]
    fig, axes = plt.subplots(1, len(names) + 1, figsize=(4.2 * (len(names) + 1), 3.6))
    for ax in axes[1 : len(names)]:
        ax.sharey(axes[0])  # one scale for the three regimes
    colors = plt.cm.viridis(np.linspace(0, 0.85, len(cfg["ns"])))
    for ax, name in zip(axes, names):
        rs = [r for r in rows if r["config"]["regime"] == name]
        k = np.asarray(rs[0]["curve_k"])
        curves = np.asarray([r["curve"] for r in rs])  # (S, P, len(ns))
        for i, n in enumerate(cfg["ns"]):
            ax.plot(k, np.exp(np.log(curves[:, :, i]).mean(0)), color=colors[i], label=f"n={n}")
        ax.set_yscale("log")
        lam = table[name]["lambda"]
        ax.set_title(f"λ={lam:.3g} ({lam / pilot['lambda_c']:.2g}·λ_c)")
        ax.axvline(1 / cfg["eta"], color="gray", ls=":", lw=1)
        ax.set_xlabel("k (dotted: 1/η)")
    axes[0].set_ylabel("‖θ_k − θ̂_k‖_L∞ (geo-mean over seeds)")
    axes[0].legend(fontsize=8)
    ax = axes[-1]
    ns = np.asarray(cfg["ns"])
    for name, marker in zip(names, "os^"):
        t = table[name]
        sup = np.asarray([r["sup_dev"] for r in rows if r["config"]["regime"] == name])  # (S, len(ns))
        y = np.exp(np.log(sup).mean(0))
        err = np.stack([y - sup.min(0), sup.max(0) - y])  # range over seeds
        ax.errorbar(ns, y, yerr=err, marker=marker, ls="none", capsize=2,
                    label=f"{name}: slope {t['slope_sup']['slope']:.2f}")
        ax.plot(ns, t["slope_sup"]["prefactor"] * ns ** t["slope_sup"]["slope"], color="gray", lw=0.8)
    ax.plot(ns, y[0] * (ns / ns[0]) ** -0.5, "k--", lw=0.8, label="n^-1/2")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.minorticks_off()
    ax.set_xlabel("context size n")
    ax.set_title(f"sup_k deviation (λ_c = 2C = {pilot['lambda_c']:.3g})\ngeo-mean, bars: range over seeds", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(args) -> int:
    from .runner import Sweep, write_summary

    cfg = _config(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    problem = _Problem(cfg)
    t0 = time.perf_counter()
    shape_cfg = {k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.items()}
    pilot_rows = Sweep(out / "pilot.jsonl", resume=args.resume, progress=False).run(
        [{"pilot": True, **shape_cfg}], lambda c: _pilot(problem), desc="pilot")
    pilot = pilot_rows[0]
    print(f"pilot (λ=0): C = {pilot['C']:.4g} (pairs {pilot['C_pairs']:.4g}, local {pilot['C_local']:.4g}), "
          f"λ_c = 2C = {pilot['lambda_c']:.4g}; η = {cfg['eta']}")
    if pilot["lambdas"]["strong"] <= pilot["lambda_c"]:
        print(f"warning: η = {cfg['eta']} does not allow λ > λ_c with η·λ < 1; the 'strong' run is below λ_c.")
    configs = [{**shape_cfg, "regime": name, "lam": lam, "rep": s}
               for name, lam in pilot["lambdas"].items() for s in range(cfg["seeds"])]
    rows = Sweep(out / "rows.jsonl", resume=args.resume).run(configs, lambda c: _row(problem, c), desc="ogd")
    table = _summarise(cfg, pilot, rows)
    _figure(out / "ogd_ablation.png", cfg, pilot, rows, table)
    print(f"\n{'regime':8s} {'λ':>8s} {'λ/λ_c':>6s} {'λ/2C_reg':>8s} " +
          " ".join(f"{'n=' + str(n):>16s}" for n in cfg["ns"]) + f" {'slope [95% CI]':>24s} growth(n={cfg['ns'][0]})")
    for name, t in table.items():
        cells = " ".join(f"{t['sup_dev'][n][0]:9.3g}±{t['sup_dev'][n][1]:<6.2g}" for n in cfg["ns"])
        s = t["slope_sup"]
        print(f"{name:8s} {t['lambda']:8.3g} {t['lambda_over_lambda_c_pilot']:6.2f} {t['lambda_over_2C_region']:8.2f} "
              f"{cells} {s['slope']:7.2f} [{s['ci_low']:.2f}, {s['ci_high']:.2f}]  "
              f"{t['growth_K_over_K2'][cfg['ns'][0]]:.3g}")
    summary = {
        "config": shape_cfg,
        "pilot": {k: pilot[k] for k in ("C", "C_pairs", "C_local", "lambda_c", "lambdas")},
        "regimes": table,
        "figure": "ogd_ablation.png",
        "seconds": time.perf_counter() - t0,
        "rows": [{k: v for k, v in r.items() if k not in ("curve", "curve_k")} for r in rows],
    }
    path = write_summary(out, summary)
    print(f"\nwrote {path} and {out / 'ogd_ablation.png'}")
    return 0
