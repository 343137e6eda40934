"""Part ``lyapunov``: the top Lyapunov exponent of the noise flow against its closed form.

The second paper (after Raimond) gives the top exponent of the flow of the common noise in
closed form, λ₁ = ½[(d−3)κ'(1) − (d−1)κ(1)] (``NoiseKernel.lyapunov``). Each row estimates it
for one activation (ReLU, tanh, linear) and dimension d ∈ {2, 3, 5, 10} with
``estimate_lyapunov`` (mean over realisations and its 95 % Student-t interval):

* Benettin tangent vectors on the discrete model (m = 32), one token;
* outside ``--quick``: twin trajectories on the exact-noise limit SDE (δ = 1e-6), one token;
  and Benettin on N = 4 tokens with softmax attention on (Q = K = V = I, rotation-equivariant:
  after synchronisation only the collective mode remains, so the top exponent is still λ₁;
  half the realisations, the first half of the steps discarded).

The step keeps d·κ(1)·Δt <= 3·Δt_base (the O(Δt) bias of the estimators).

**Claims.** One line per estimator: the closed form is a statement about the flow (the paper's
formula), the estimates a measurement of the simulated flow, so the line is a claim with the
coverage rule of :mod:`.common` (how many of the intervals miss λ₁, and on which side, against
the 5 % a true claim misses, 2.5 % each side), not a code check.
"""

from __future__ import annotations

from pathlib import Path

import jax
from matplotlib.lines import Line2D

from cfm_jax.stochastic import (
    NoiseKernel,
    SphereAttention,
    SphereSDE,
    StochasticTransformer,
    estimate_lyapunov,
    random_tokens,
)

from ..declarations.sync import LYAPUNOV
from ..plotting import COLORS, figure, save
from ..protocol import Claim, Part, Settings, Summary
from ..verdicts.sync import coverage_verdict, miss_probability

ACTS = ("relu", "tanh", "linear")
DIMS = (2, 3, 5, 10)

#: (method, attention) -> what the claim line says the estimate is of.
GROUPS = {
    ("benettin", "none"): "the discrete model's noise flow (m = 32, one token; Benettin tangent vectors)",
    ("twin", "none"): "the limit SDE's noise flow (exact noise, one token; twin trajectories, δ = 1e-6)",
    ("benettin", "SA"): "N = 4 tokens with softmax attention Q = K = V = I (Benettin, the first half of the steps "
    "discarded): after synchronisation the collective mode's exponent is still λ₁",
}


def step_for(kernel: NoiseKernel, d: int, base: float) -> float:
    """Δt = min(base, 3·base/(d·κ(1))): the per-step noise energy d·κ(1)·Δt at most 3·base."""
    return min(base, 3 * base / (d * kernel.kappa1))


def within_ci(estimate: float, half_width: float, value: float) -> bool:
    """Whether the interval ``estimate ± half_width`` contains ``value`` (on either side; a NaN
    estimate or half-width contains nothing)."""
    return bool(abs(estimate - value) <= half_width)


class Lyapunov(Part):
    declaration = LYAPUNOV
    title = (
        "Top Lyapunov exponent λ₁: estimate with its 95% Student-t confidence half-width over the runs, vs the closed "
        "form\n½[(d−3)κ'(1) − (d−1)κ(1)]; 'in CI' says whether the closed form lies in that interval"
    )
    float64 = True  # the twin separation δ = 1e-6

    def configs(self, settings: Settings) -> list[dict]:
        quick, seed = settings.quick, settings.seed
        runs = settings["realisations"] or (32 if quick else 128)
        base = 0.02 if quick else 0.01
        T = 3.0 if quick else 8.0
        cfgs = [
            dict(method="benettin", act=a, d=d, attention="none", T=T, R=runs, seed=seed, dt_base=base)
            for a in ACTS
            for d in DIMS
        ]
        if not quick:
            cfgs += [
                dict(method="twin", act=a, d=d, attention="none", T=T, R=runs, seed=seed, dt_base=base)
                for a in ACTS
                for d in DIMS
            ]
            cfgs += [
                dict(
                    method="benettin",
                    act="relu",
                    d=d,
                    attention="SA",
                    T=T,
                    R=max(2, runs // 2),
                    seed=seed,
                    dt_base=base,
                )
                for d in DIMS
            ]
        return cfgs

    def run(self, config: dict) -> dict:
        c = config
        k = NoiseKernel(c["act"], 1.0, 1.0, 0.0)
        d = c["d"]
        dt = step_for(k, d, c["dt_base"])
        steps = int(round(c["T"] / dt))
        att = SphereAttention(c["attention"], 1.0) if c["attention"] != "none" else SphereAttention()
        x0 = random_tokens(jax.random.key(c["seed"] + 1000 * d), 4 if att.active else 1, d)
        salt = 100 * d + 10 * ACTS.index(c["act"]) + (c["method"] == "twin") + 2 * att.active
        key = jax.random.fold_in(jax.random.key(c["seed"]), salt)
        if c["method"] == "benettin":
            model = StochasticTransformer(k, width=32, layers=steps, horizon=c["T"], attention=att)
            est = estimate_lyapunov(model, key, x0, realisations=c["R"], burn_in=0.5 if att.active else 0.0)
        else:
            model = SphereSDE(k, steps=steps, horizon=c["T"], attention=att)
            est = estimate_lyapunov(model, key, x0, method="twin", realisations=c["R"], delta=1e-6)
        closed = k.lyapunov(d)
        return {
            "estimate": est.estimate,
            "ci_half_width": est.ci_half_width,
            "closed_form": closed,
            "within_ci": within_ci(est.estimate, est.ci_half_width, closed),
            "dt": dt,
            "steps": steps,
        }

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        if not rows:
            return Summary()
        table = lyapunov_table(rows)
        head = (
            f"{'act':>7} {'d':>3} {'method':>9} {'attn':>5} {'estimate':>10} {'95% CI ±':>9} {'closed':>9} {'in CI':>5}"
        )
        lines = [head] + [
            f"{t['activation']:>7} {t['d']:>3} {t['method']:>9} {t['attention']:>5} {t['estimate']:>10.4f} "
            f"{t['ci_half_width']:>9.4f} {t['closed_form']:>9.4f} {'yes' if t['within_ci'] else 'NO':>5}"
            for t in table
        ]
        claims = []
        for (method, attention), what in GROUPS.items():
            group = [r for r in rows if (r["config"]["method"], r["config"]["attention"]) == (method, attention)]
            if group:
                claims.append(coverage_claim(group, what))
        data = {"lyapunov": table, "all_within_ci": all(t["within_ci"] for t in table)}
        return Summary(text="\n".join(lines), data=data, claims=tuple(claims))

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        return [save(lyapunov_figure(lyapunov_table(rows)), out / "lyapunov.png")] if rows else []


def lyapunov_table(rows: list[dict]) -> list[dict]:
    """The rows as records {d, activation, method, attention, estimate, ci_half_width, closed_form, within_ci}."""
    keys = ("estimate", "ci_half_width", "closed_form", "within_ci")
    return [
        {
            "d": r["config"]["d"],
            "activation": r["config"]["act"],
            "method": r["config"]["method"],
            "attention": r["config"]["attention"],
            **{k: r[k] for k in keys},
        }
        for r in rows
    ]


def coverage_claim(group: list[dict], what: str) -> Claim:
    """The claim line of one estimator: how many of its rows' intervals miss the closed form."""
    n = len(group)
    misses = sum(not r["within_ci"] for r in group)
    # an interval missing λ₁ lies wholly below it (the estimate biased low) or wholly above
    below = sum(not r["within_ci"] and r["estimate"] < r["closed_form"] for r in group)
    worst = max(abs(r["estimate"] - r["closed_form"]) / r["ci_half_width"] for r in group)
    c = group[0]["config"]
    acts = sorted({r["config"]["act"] for r in group}, key=ACTS.index)
    dims = sorted({r["config"]["d"] for r in group})
    return Claim(
        claim=f"λ₁ = ½[(d−3)κ'(1) − (d−1)κ(1)] is the top Lyapunov exponent of {what}",
        measured=f"{n - misses} of {n} 95% intervals contain λ₁ (largest |estimate − λ₁| = "
        f"{worst:.2f} half-widths); P(≥ {misses} misses | claim) = {miss_probability(misses, n):.2f}; "
        f"{below} below λ₁, {misses - below} above",
        verdict=coverage_verdict(below, misses - below, n),
        figure="lyapunov.png",
        sizes=f"{', '.join(acts)}; d ∈ {{{', '.join(map(str, dims))}}}; {c['R']} runs, T = {c['T']:g}, "
        f"Δt ≤ {c['dt_base']:g}",
    )


def lyapunov_figure(table: list[dict]):
    """Estimate against closed form, one colour per activation, one marker per estimator."""
    fig, (ax,) = figure(1, width=5.2, height=4.6)
    markers = {"benettin": "o", "twin": "s"}
    for j, act in enumerate(ACTS):
        for t in (t for t in table if t["activation"] == act):
            ax.errorbar(
                t["closed_form"],
                t["estimate"],
                yerr=t["ci_half_width"],
                fmt=markers[t["method"]],
                color=COLORS[j],
                mfc="none" if t["attention"] != "none" else COLORS[j],
                ms=5,
            )
    lo = min(t["closed_form"] for t in table) - 0.1
    ax.plot([lo, 0], [lo, 0], "k:", lw=1)
    handles = [Line2D([], [], color=COLORS[j], marker="o", ls="", label=act) for j, act in enumerate(ACTS)]
    handles.append(Line2D([], [], color="k", ls=":", label="estimate = closed form"))
    present = {(t["method"], t["attention"] != "none") for t in table}
    for (method, att), text in (
        (("benettin", False), "filled ○: Benettin, discrete model"),
        (("twin", False), "□: twin trajectories, exact SDE"),
        (("benettin", True), "hollow ○: softmax attention on"),
    ):
        if (method, att) in present:
            handles.append(
                Line2D([], [], color="0.3", marker=markers[method], mfc="none" if att else "0.3", ls="", label=text)
            )
    ax.legend(handles=handles, fontsize=7)
    ax.set_xlabel(r"closed form $\lambda_1 = \frac{1}{2}[(d-3)\kappa'(1) - (d-1)\kappa(1)]$")
    ax.set_ylabel(r"estimated $\lambda_1$ (95% CI over runs)")
    dims = ", ".join(str(d) for d in sorted({t["d"] for t in table}))
    ax.set_title(f"Top Lyapunov exponent of the noise flow, $d \\in \\{{{dims}\\}}$")
    return fig


__all__ = [
    "ACTS",
    "DIMS",
    "GROUPS",
    "Lyapunov",
    "coverage_claim",
    "lyapunov_figure",
    "lyapunov_table",
    "step_for",
    "within_ci",
]
