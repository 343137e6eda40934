"""Every notebook executes at its small size (so none rots) and prints what it promises."""

from conftest import execute_notebook


def test_quickstart_notebook(tmp_path):
    _, text = execute_notebook("quickstart.ipynb", tmp_path)
    line = next(ln for ln in text.splitlines() if ln.startswith("Euler vs residual network"))
    assert float(line.split(":")[1]) < 1e-5


def test_chaos_notebook(tmp_path):
    _, text = execute_notebook("chaos.ipynb", tmp_path)
    assert "slope" in text and "control d=4" in text


def test_ogd_notebook_reports_the_three_ridge_regimes(tmp_path):
    outputs, text = execute_notebook("ogd.ipynb", tmp_path)
    for regime in ("zero", "weak", "strong"):
        assert any(ln.startswith(regime) and "slope" in ln for ln in text.splitlines()), regime
    assert any(o.get("data", {}).get("image/png") for o in outputs)  # the figure is displayed


def test_sync_notebook(tmp_path):
    _, text = execute_notebook("sync.ipynb", tmp_path)
    assert "closed form" in text
