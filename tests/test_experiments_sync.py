"""The `cfm-jax sync` experiment: its Lyapunov rows contain the closed form, its figures read stored rows."""

import pytest


def test_sync_convergence_figure_accepts_rows_as_stored(tmp_path):
    """Rows come back from rows.jsonl with NaN stored as the string "nan" (a weak-error fit has
    one mean per size, hence no CI): the default run's figure code must draw them."""
    from cfm_experiments import sync

    fit = {"slope": -1.5, "intercept": 0.0, "ci_low": "nan", "ci_high": "nan", "prefactor": 1.0}
    rows = [
        {
            "config": {"section": "weak_L", "Ls": [1, 2, 4]},
            "errors": [0.2, 0.08, 0.02],
            "standard_errors": [0.01, 0.01, 0.01],
            "fit": fit,
        },
        {
            "config": {"section": "strong", "Ls": [4, 8]},
            "errors": [0.4, 0.3],
            "fit": {**fit, "ci_low": -0.7, "ci_high": -0.5},
        },
    ]
    written = sync._figures(tmp_path, rows)
    assert [p.name for p in written] == ["convergence.png"] and written[0].stat().st_size > 10_000


@pytest.mark.parametrize("method", ["benettin", "twin"])
def test_quick_lyapunov_rows_contain_the_closed_form(method):
    """A tiny Lyapunov row (ReLU, d = 3, 48 realisations): its 95% Student-t CI over realisations
    contains λ₁ = ½[(d−3)κ'(1) − (d−1)κ(1)] (a two-sided check at the row's own interval)."""
    from cfm_experiments import sync

    row = sync._run_lyapunov(
        dict(section="lyapunov", method=method, act="relu", d=3, attention="none", T=2.0, R=48, seed=0, dt_base=0.02)
    )
    assert row["within_ci"], row
    assert 0 < row["ci_half_width"] < abs(row["closed_form"])  # informative: the CI excludes 0
