"""Exact Gaussian limit vs Monte-Carlo references for the token error of an n-token context.

Gaussian context tokens μ = N(0, I/d); the error of the n-token system's target tokens is
measured against three stand-ins for the infinite-context model:

- ``exact``: the Gaussian limit (``forward`` on a ``GaussianMeasure``, the moment recursion; no sample at all);
- ``MC``:    an independent i.i.d. reference sample of n_ref tokens (the usual practice; one layer:
             n_ref = 10⁵, the size of the public one-layer token-sample-complexity package);
- ``QMC``:   an independent scrambled-Sobol reference of the same n_ref.

Panel 1: one attention layer (the target token only reads μ_0, so the reference costs O(n_ref));
panel 2: L = 4 layers (the reference context moves too: O(n_ref²) per layer, n_ref = 8192).
Errors are the mean over B = 8 target tokens, means and Student-t 95 % intervals over seeds.
Also the warm wall time of one reference evaluation (one seed). Writes
benchmarks/results/reference.{json,md,png}.

    python benchmarks/bench_reference.py [--seeds 8] [--notes "..."]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np
from _machine import machine
from _timing import warm_median

import cfm_jax
from cfm_jax import GaussianMeasure, forward
from cfm_jax.stats import fit_loglog, mean_ci

RESULTS = Path(__file__).resolve().parent / "results"
D, H, B = 4, 2, 8


def _setup(layers, seed=0):
    model = cfm_jax.Transformer.init(jax.random.key(seed), D, heads=H, layers=layers, dtype=jnp.float64)
    mu = GaussianMeasure(jnp.zeros(D), jnp.eye(D) / D)
    x0 = mu.sample(jax.random.key(seed + 1), B)
    return model, mu, x0


def _one_layer_tokens(model, x0, z):
    """x_1 = x_0 + V(x_0, μ_0): the one-layer token only reads the initial context."""
    w = jnp.full((z.shape[0],), 1.0 / z.shape[0], z.dtype)
    return x0 + model.field(x0, cfm_jax.EmpiricalMeasure.unchecked(z, w), model.layer_params(0))


def _deep_tokens(model, x0, z):
    """The L-layer residual network: ``forward`` with its default Euler step, one per layer."""
    return cfm_jax.forward(
        model, x0, cfm_jax.EmpiricalMeasure.unchecked(z, jnp.full((z.shape[0],), 1.0 / z.shape[0]))
    ).x1


def panel(layers, ns, n_ref, seeds) -> dict[str, Any]:
    model, mu, x0 = _setup(layers)
    tokens = _one_layer_tokens if layers == 1 else _deep_tokens
    exact_fn = jax.jit(lambda m, S: forward(model, x0, GaussianMeasure.unchecked(m, S)).x1)
    exact = exact_fn(mu.mean, mu.cov)
    keys = jax.random.split(jax.random.key(100 + layers), seeds)

    def ref_tokens(key, qmc):
        return tokens(model, x0, mu.sample(key, n_ref, qmc=qmc))

    ref_fn = {q: jax.jit(jax.vmap(lambda k, q=q: ref_tokens(jax.random.fold_in(k, 1), q))) for q in (False, True)}
    refs = {"MC": ref_fn[False](keys), "QMC": ref_fn[True](keys)}
    one_ref = jax.jit(lambda k: ref_tokens(k, False))
    times = {
        "exact": warm_median(exact_fn, mu.mean, mu.cov, repeats=5),
        "MC": warm_median(one_ref, keys[0], repeats=3),
        "QMC": warm_median(jax.jit(lambda k: ref_tokens(k, True)), keys[0], repeats=3),
    }
    errors = {name: [] for name in ("exact", "MC", "QMC")}
    t_n = []
    for n in ns:
        fn = jax.jit(jax.vmap(lambda k, n=n: tokens(model, x0, mu.sample(k, n))))
        x1 = fn(keys)  # (seeds, B, d), i.i.d. contexts independent of the references
        t_n.append(warm_median(jax.jit(lambda k, n=n: tokens(model, x0, mu.sample(k, n))), keys[0], repeats=3))
        for name, r in (("exact", exact[None]), ("MC", refs["MC"]), ("QMC", refs["QMC"])):
            errors[name].append(np.asarray(jnp.mean(jnp.linalg.norm(x1 - r, axis=-1), axis=-1)).tolist())
    # each reference's own error (against the exact limit): its floor
    floors = {
        q: np.asarray(jnp.mean(jnp.linalg.norm(refs[q] - exact[None], axis=-1), axis=-1)).tolist()
        for q in ("MC", "QMC")
    }
    fits = {name: fit_loglog(ns, np.asarray(e)).as_dict() for name, e in errors.items()}
    return dict(
        layers=layers,
        ns=list(ns),
        n_ref=n_ref,
        seeds=seeds,
        errors=errors,
        floors=floors,
        fits=fits,
        seconds={"reference_" + k: v for k, v in times.items()} | {"n_system": t_n},
    )


def figure(panels, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 6.0))
    styles = {"exact": ("C0", "o", "-"), "MC": ("C3", "s", "--"), "QMC": ("C2", "^", "-.")}
    for ax, p in zip(axes, panels):
        ns = np.asarray(p["ns"], float)
        for name, e in p["errors"].items():
            stats = [mean_ci(v) for v in e]
            m, h = np.array([s[0] for s in stats]), np.array([s[1] for s in stats])
            color, marker, ls = styles[name]
            t = p["seconds"]["reference_" + name]
            fit = p["fits"][name]
            label = (
                f"vs exact Gaussian limit ({t * 1e3:.2g} ms)"
                if name == "exact"
                else f"vs {name} reference, n_ref={p['n_ref']} ({t * 1e3:.3g} ms)"
            )
            ax.errorbar(
                ns, m, yerr=h, color=color, marker=marker, ls=ls, capsize=3, label=f"{label}; slope {fit['slope']:.2f}"
            )
        for q, ls in (("MC", ":"), ("QMC", (0, (1, 3)))):
            ax.axhline(
                np.mean(p["floors"][q]), color=styles[q][0], ls=ls, lw=1, label=f"{q} reference's own error (floor)"
            )
        c = np.mean(p["errors"]["exact"][0]) * np.sqrt(ns[0])
        ax.plot(ns, c / np.sqrt(ns), color="0.5", lw=0.8, ls="--", label=r"$\propto n^{-1/2}$")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("context size n (i.i.d. Gaussian tokens)")
        ax.set_ylabel("token error  mean ‖x₁ − x̂₁‖")
        ax.set_title(
            f"{'one attention layer' if p['layers'] == 1 else str(p['layers']) + ' layers'}, d={D}, H={H}"
            f" ({p['seeds']} seeds, 95 % CI)"
        )
        ax.grid(True, which="major", alpha=0.3)
        lo = min(min(np.min(e) for e in p["errors"]["exact"]), np.mean(p["floors"]["QMC"]))
        ax.set_ylim(lo / 3, None)
        # below the axes: the floors are horizontal lines across the whole panel
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=8, ncol=1, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def main(argv=None):
    assert __doc__ is not None  # the module docstring is the description
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=8)
    p.add_argument("--notes", default="")
    p.add_argument("--plot-only", action="store_true", help="redraw reference.png from reference.json")
    args = p.parse_args(argv)
    if args.plot_only:
        figure(json.loads((RESULTS / "reference.json").read_text())["panels"], RESULTS / "reference.png")
        return
    t0 = time.perf_counter()
    panels = [
        panel(1, [16, 64, 256, 1024, 4096, 16384, 65536], 100_000, args.seeds),
        panel(4, [16, 64, 256, 1024, 4096], 8192, args.seeds),
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = dict(panels=panels, wall_seconds=time.perf_counter() - t0, machine=machine(notes=args.notes))
    (RESULTS / "reference.json").write_text(json.dumps(out, indent=1))
    figure(panels, RESULTS / "reference.png")
    lines = [
        "# Exact Gaussian limit vs Monte-Carlo references (benchmarks/bench_reference.py)",
        "",
        f"d = {D}, H = {H}, B = {B} target tokens, μ = N(0, I/d), float64, {args.seeds} seeds. "
        "Error: mean over tokens of ‖x₁ − x̂₁‖ for an i.i.d. n-token context; mean over seeds.",
        "",
    ]
    for pn in panels:
        lines += [
            f"## {pn['layers']} layer(s), reference size n_ref = {pn['n_ref']}",
            "",
            "| n | vs exact | vs MC | vs QMC |",
            "|---|---|---|---|",
        ]
        for i, n in enumerate(pn["ns"]):
            lines.append(
                f"| {n} | " + " | ".join(f"{np.mean(pn['errors'][k][i]):.3g}" for k in ("exact", "MC", "QMC")) + " |"
            )
        f = pn["fits"]
        lines += [
            "",
            "fitted slope (95 % CI): "
            + "; ".join(f"{k} {f[k]['slope']:.3f} [{f[k]['ci_low']:.3f}, {f[k]['ci_high']:.3f}]" for k in f),
            f"reference's own error (its floor): MC {np.mean(pn['floors']['MC']):.3g}, "
            f"QMC {np.mean(pn['floors']['QMC']):.3g}; exact 0",
            "warm time of one reference (one seed): "
            + ", ".join(
                f"{k[len('reference_') :]} {v * 1e3:.3g} ms"
                for k, v in pn["seconds"].items()
                if k.startswith("reference_")
            ),
            "",
        ]
    lines += [
        f"Total wall time {out['wall_seconds']:.0f} s (compilation included) on {out['machine']['processor']}, "
        f"{out['machine']['cpu_count']} CPUs, {out['machine']['backend']}. {args.notes}",
        "",
    ]
    (RESULTS / "reference.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
