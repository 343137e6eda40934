"""The library's notebook executes at its committed size, shows its figure, and its text's claims
hold; every notebook (the experiments' too) is committed executed."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the library's notebooks, and the experiments' (read as files: the library's tests import nothing
#: of the experiments)
NOTEBOOKS, EXPERIMENT_NOTEBOOKS = ROOT / "notebooks", ROOT / "experiments" / "notebooks"


@pytest.mark.slow  # executes the notebook (CI runs it in its slow step)
def test_quickstart_notebook(notebook):
    _, text, images = notebook(NOTEBOOKS / "quickstart.ipynb")
    line = next(ln for ln in text.splitlines() if ln.startswith("Euler vs residual network"))
    assert float(line.split(":")[1]) < 1e-5
    errors = [float(ln.split()[-1]) for ln in text.splitlines() if ln.startswith("Heun")]
    assert len(errors) == 3 and all(2.5 < a / b < 6 for a, b in zip(errors, errors[1:]))  # "about fourfold"
    assert len(images) == 1  # the trajectory figure is displayed inline


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
    notebooks/ and experiments/notebooks/ was run top to bottom and kept its outputs."""
    import json

    notebooks = sorted(p for folder in (NOTEBOOKS, EXPERIMENT_NOTEBOOKS) for p in folder.glob("*.ipynb"))
    assert notebooks
    bad = {p.name: why for p in notebooks if (why := notebook_not_committed_executed(json.loads(p.read_text())))}
    assert not bad, bad


def test_the_executed_check_fails_on_a_cleared_notebook():
    import json

    nb = json.loads((NOTEBOOKS / "quickstart.ipynb").read_text())
    assert notebook_not_committed_executed(nb) is None
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for c in code:
        c["outputs"] = []
    assert notebook_not_committed_executed(nb) == "no outputs"
    code[0]["execution_count"] = None
    assert "not run top to bottom" in str(notebook_not_committed_executed(nb))
    code[0]["execution_count"], code[0]["outputs"] = 1, [{"output_type": "error"}]
    assert notebook_not_committed_executed(nb) == "a cell raised"
