"""Every notebook executes at its committed size, shows its figures, and its text's claims hold."""

import re

from conftest import execute_notebook, notebook_images


def test_quickstart_notebook(tmp_path):
    outputs, text = execute_notebook("quickstart.ipynb", tmp_path)
    line = next(ln for ln in text.splitlines() if ln.startswith("Euler vs residual network"))
    assert float(line.split(":")[1]) < 1e-5
    errors = [float(ln.split()[-1]) for ln in text.splitlines() if ln.startswith("Heun")]
    assert len(errors) == 3 and all(2.5 < a / b < 6 for a, b in zip(errors, errors[1:]))  # "about fourfold"
    assert len(notebook_images(outputs)) == 1  # the trajectory figure is displayed inline


def test_sync_notebook(tmp_path):
    """The text says the Benettin estimate's 95% CI contains the closed-form λ₁."""
    _, text = execute_notebook("sync.ipynb", tmp_path)
    m = re.search(
        r"estimate ([+-]?[\d.]+), 95% Student-t CI half-width over \d+ runs ([\d.]+); closed form ([+-]?[\d.]+)", text
    )
    assert m is not None, text
    est, half, closed = (float(v) for v in m.groups())
    assert abs(est - closed) <= half, (est, half, closed)


def test_paper_notebook(tmp_path):
    """The text says the theorem's bound holds where Assumption 1 does, and that ReLU ends in one
    cluster (polar and nematic order 1) while tanh ends on two antipodal points (nematic 1, polar < 1)."""
    outputs, text = execute_notebook("paper.ipynb", tmp_path)
    assert "bound holds at every layer: True" in text
    orders = dict(re.findall(r"^\s*(relu|tanh): polar order ([\d.]+), nematic order [\d.]+", text, re.M))
    nematic = dict(re.findall(r"^\s*(relu|tanh): polar order [\d.]+, nematic order ([\d.]+)", text, re.M))
    assert float(orders["relu"]) > 0.99 and float(nematic["relu"]) > 0.99
    assert float(orders["tanh"]) < 0.9 and float(nematic["tanh"]) > 0.99
    assert len(notebook_images(outputs)) >= 1
