"""The claims and curvature figures from synthetic rows: every panel drawn, PNGs written."""

from test_experiments_ogd_claims import _synthetic_rows as claims_rows
from test_experiments_ogd_curvature import _synthetic_rows as curvature_rows

from cfm_experiments.ogd import curvature as cv, figures
from cfm_experiments.plotting import save

PNG = b"\x89PNG\r\n\x1a\n"


def test_claims_figures(tmp_path):
    paths = figures.claims_figures(claims_rows(), tmp_path)
    assert [p.name for p in paths] == list(figures.CLAIMS_FIGURES)
    assert all(p.read_bytes()[:8] == PNG and p.stat().st_size > 10_000 for p in paths)
    rows = [r for r in claims_rows() if r["config"]["dim"] == 4]  # one d: no d-figure
    assert [p.name for p in figures.claims_figures(rows, tmp_path / "one")] == ["ogd_claims_n.png", "ogd_claims_k.png"]
    assert figures.claims_figures([], tmp_path) == []


def test_curvature_figure_has_its_four_labelled_panels(tmp_path):
    rows = curvature_rows({0.0: 0.02, 0.25: 0.005, 1.0: -0.02, 4.0: -0.1})
    fig = figures.curvature_figure(rows, cv.table(rows))
    axes = fig.get_axes()
    assert len(axes) == 4 and all(ax.get_xlabel() and ax.get_ylabel() and ax.get_legend() for ax in axes)
    path = save(fig, tmp_path / figures.CURVATURE_FIGURE)
    assert path.read_bytes()[:8] == PNG and path.stat().st_size > 20_000
