"""Part `lyapunov`: its rows contain the closed form, its claim lines count the misses honestly."""

import pytest

from cfm_experiments.protocol import resolve
from cfm_experiments.sync.lyapunov import Lyapunov, coverage_claim, lyapunov_table, step_for
from cfm_jax import CompileRecorder
from cfm_jax.stochastic import NoiseKernel

PART = Lyapunov()


def _config(**kw):
    return {**dict(method="benettin", act="relu", d=3, attention="none", T=2.0, R=48, seed=0, dt_base=0.02), **kw}


@pytest.mark.parametrize("method", ["benettin", "twin"])
def test_quick_lyapunov_rows_contain_the_closed_form(method):
    """A tiny row (ReLU, d = 3, 48 realisations): its 95% Student-t CI over realisations contains
    λ₁ = ½[(d−3)κ'(1) − (d−1)κ(1)] = −1/2 (a two-sided check at the row's own interval)."""
    row = PART.run(_config(method=method))
    assert row["closed_form"] == pytest.approx(-0.5) and row["within_ci"], row
    assert 0 < row["ci_half_width"] < abs(row["closed_form"])  # informative: the CI excludes 0


def test_configs_quick_and_full():
    quick = PART.configs(resolve([PART], quick=True))
    full = PART.configs(resolve([PART]))
    assert len(quick) == 12 and {(c["method"], c["attention"], c["R"], c["T"]) for c in quick} == {
        ("benettin", "none", 32, 3.0)
    }
    groups = [(c["method"], c["attention"], c["R"]) for c in full]
    assert groups == [("benettin", "none", 128)] * 12 + [("twin", "none", 128)] * 12 + [("benettin", "SA", 64)] * 4
    assert {c["R"] for c in PART.configs(resolve([PART], realisations=3)) if c["attention"] == "SA"} == {2}


def test_step_keeps_the_noise_energy_per_step_small():
    """Δt = min(base, 3·base/(d·κ(1))): for ReLU κ(1) = 1/2, so d = 10 gets 3·0.01/5 = 0.006."""
    relu = NoiseKernel("relu")
    assert step_for(relu, 10, 0.01) == pytest.approx(0.006) and step_for(relu, 2, 0.01) == 0.01


def _rows(below, above=0, n=12):
    """n rows of λ₁ = −1/2 with half-width 0.1: ``below`` intervals wholly below it, then ``above`` wholly
    above it, the rest containing it."""
    shift = [-0.2] * below + [0.2] * above + [0.01] * (n - below - above)
    return [
        {
            "config": _config(act="relu", d=2 + i),
            "estimate": -0.5 + s,
            "ci_half_width": 0.1,
            "closed_form": -0.5,
            "within_ci": abs(s) <= 0.1,
        }
        for i, s in enumerate(shift)
    ]


def test_claim_lines_count_the_misses():
    """Twelve intervals: three misses on both sides is what a true claim produces (holds), four is not
    (refuted); the measured text gives the count, the largest distance in half-widths, the tail
    probability and the misses on each side."""
    line = coverage_claim(_rows(2, 1), "the flow")
    assert line.verdict == "holds" and line.measured.startswith("9 of 12 95% intervals contain λ₁")
    assert "2.00 half-widths" in line.measured and "P(≥ 3 misses | claim) = 0.02" in line.measured
    assert "2 below λ₁, 1 above" in line.measured
    assert coverage_claim(_rows(2, 2), "the flow").verdict == "refuted at these sizes"
    assert coverage_claim(_rows(0), "the flow").verdict == "holds"


def test_an_estimate_biased_one_way_is_refuted():
    """Three misses of twelve all below λ₁ (an estimator biased low), or all above, are more than a true
    claim misses on one side, though the same three split between the sides hold."""
    assert coverage_claim(_rows(3, 0), "the flow").verdict == "refuted at these sizes"
    assert coverage_claim(_rows(0, 3), "the flow").verdict == "refuted at these sizes"
    assert coverage_claim(_rows(2, 1), "the flow").verdict == "holds"
    assert coverage_claim(_rows(1, 2), "the flow").verdict == "holds"


def test_summary_has_one_claim_line_per_estimator(tmp_path):
    rows = _rows(0, n=2) + [{**r, "config": _config(method="twin", d=r["config"]["d"])} for r in _rows(0, 1, n=2)]
    summary = PART.summarize(rows, resolve([PART]))
    assert [c.verdict for c in summary.claims] == ["holds", "holds"]
    assert "Benettin" in summary.claims[0].claim and "twin" in summary.claims[1].claim
    assert summary.data["all_within_ci"] is False and len(lyapunov_table(rows)) == 4
    assert summary.text.splitlines()[-1].split()[-1] == "yes" and " NO" in summary.text
    (path,) = PART.figures(rows, summary, tmp_path)
    assert path.stat().st_size > 10_000


def test_a_second_seed_reuses_the_programs():
    """The estimator and the model's stage are compiled once: a second seed compiles neither (small
    eager PRNG programs that other tests of the same process may have left in another state are not
    counted)."""
    with CompileRecorder() as first:
        PART.run(_config(T=0.2, R=2))
    assert "jit(_samples)" in first.compiled_names or first.cache_loads > 0 or first.compiled == 0
    with CompileRecorder() as stats:
        PART.run(_config(T=0.2, R=2, seed=1))
    heavy = [n for n in stats.compiled_names if n in ("jit(_samples)", "jit(stage)")]
    assert not heavy, stats.compiled_names


@pytest.mark.parametrize(
    "estimate, inside",
    [
        (-0.5, True),
        (-0.45, True),
        (-0.55, True),
        (-0.6, True),
        (-0.4, True),
        (-0.3, False),
        (-0.7, False),
        (-5.0, False),
    ],
)
def test_within_ci_is_two_sided(estimate, inside):
    """λ₁ = −½ against estimate ± 0.1: an estimate far below the closed form misses exactly as one far above
    does (a one-sided check would count every estimate below λ₁ as a hit)."""
    from cfm_experiments.sync.lyapunov import within_ci

    assert within_ci(estimate, 0.1, -0.5) is inside
    assert not within_ci(float("nan"), 0.1, -0.5) and not within_ci(-0.5, float("nan"), -0.5)
