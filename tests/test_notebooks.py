"""Every notebook executes at its committed size, shows its figures, and its text's claims hold."""

import re

import pytest
from conftest import execute_notebook, notebook_images


@pytest.mark.slow  # executes the notebook (CI runs it in its slow step)
def test_quickstart_notebook(tmp_path):
    outputs, text = execute_notebook("quickstart.ipynb", tmp_path)
    line = next(ln for ln in text.splitlines() if ln.startswith("Euler vs residual network"))
    assert float(line.split(":")[1]) < 1e-5
    errors = [float(ln.split()[-1]) for ln in text.splitlines() if ln.startswith("Heun")]
    assert len(errors) == 3 and all(2.5 < a / b < 6 for a, b in zip(errors, errors[1:]))  # "about fourfold"
    assert len(notebook_images(outputs)) == 1  # the trajectory figure is displayed inline


@pytest.mark.slow  # executes the notebook (CI runs it in its slow step)
def test_sync_notebook(tmp_path):
    """The text says the Benettin estimate's 95% CI contains the closed-form λ₁."""
    _, text = execute_notebook("sync.ipynb", tmp_path)
    m = re.search(
        r"estimate ([+-]?[\d.]+), 95% Student-t CI half-width over \d+ runs ([\d.]+); closed form ([+-]?[\d.]+)", text
    )
    assert m is not None, text
    est, half, closed = (float(v) for v in m.groups())
    assert abs(est - closed) <= half, (est, half, closed)


@pytest.mark.slow  # executes the notebook (CI runs it in its slow step)
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


def notebook_not_committed_executed(nb: dict) -> str | None:
    """Why a notebook (its JSON) is not committed executed: a code cell not run, cells run out of
    order or in several sessions, an error output, or no output at all (None: it is executed)."""
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    counts = [c.get("execution_count") for c in code]
    if counts != list(range(1, len(code) + 1)):
        return f"execution counts {counts}: not run top to bottom in one session"
    outputs = [o for c in code for o in c.get("outputs", [])]
    if any(o.get("output_type") == "error" for o in outputs):
        return "a cell raised"
    return None if outputs else "no outputs"


def test_every_notebook_is_committed_executed():
    """The site shows the committed outputs (mkdocs-jupyter does not execute): every notebook under
    notebooks/ was run top to bottom and kept its outputs."""
    import json
    from pathlib import Path

    notebooks = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
    assert notebooks
    bad = {p.name: why for p in notebooks if (why := notebook_not_committed_executed(json.loads(p.read_text())))}
    assert not bad, bad


def test_the_executed_check_fails_on_a_cleared_notebook():
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "ogd.ipynb").read_text())
    assert notebook_not_committed_executed(nb) is None
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for c in code:
        c["outputs"] = []
    assert notebook_not_committed_executed(nb) == "no outputs"
    code[0]["execution_count"] = None
    assert "not run top to bottom" in str(notebook_not_committed_executed(nb))
    code[0]["execution_count"], code[0]["outputs"] = 1, [{"output_type": "error"}]
    assert notebook_not_committed_executed(nb) == "a cell raised"
