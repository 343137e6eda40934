"""Every notebook executes at its committed size, shows its figures, and its text's claims hold."""

import re

from conftest import execute_notebook


def _images(outputs):
    return [o for o in outputs if o.get("data", {}).get("image/png")]


def _intervals(text, prefix):
    """(slope, low, high) of every line starting with ``prefix`` that prints 'slope S ... [L, H]'."""
    out = []
    for ln in text.splitlines():
        if ln.startswith(prefix):
            m = re.search(r"slope ([+-][\d.]+).*?\[([+-][\d.]+), ([+-][\d.]+)\]", ln)
            if m:
                out.append(tuple(float(v) for v in m.groups()))
    return out


def test_quickstart_notebook(tmp_path):
    outputs, text = execute_notebook("quickstart.ipynb", tmp_path)
    line = next(ln for ln in text.splitlines() if ln.startswith("Euler vs residual network"))
    assert float(line.split(":")[1]) < 1e-5
    errors = [float(ln.split()[-1]) for ln in text.splitlines() if ln.startswith("Heun")]
    assert len(errors) == 3 and all(2.5 < a / b < 6 for a, b in zip(errors, errors[1:]))  # "about fourfold"
    assert len(_images(outputs)) == 1  # the trajectory figure is displayed inline


def test_chaos_notebook(tmp_path):
    """The text says every attention slope's CI contains −1/2; control d=1 contains −1/2, d=4 lies above it."""
    outputs, text = execute_notebook("chaos.ipynb", tmp_path)
    attention = [_intervals(text, q) for q in ("token", "context", "adjoint", "grad_phi")]
    assert all(len(a) == 1 and a[0][1] <= -0.5 <= a[0][2] for a in attention), attention
    (c1,), (c4,) = _intervals(text, "control d=1"), _intervals(text, "control d=4")
    assert c1[1] <= -0.5 <= c1[2] and c4[1] > -0.5 and c4[0] < -0.25, (c1, c4)
    assert len(_images(outputs)) == 1


def test_ogd_notebook_reports_the_three_ridge_regimes(tmp_path):
    """The text says: strong ridge lowest at every n, deviation falls with n, slope at λ = 0 near −1."""
    outputs, text = execute_notebook("ogd.ipynb", tmp_path)
    rows = {ln.split()[0]: ln for ln in text.splitlines() if ln.split() and ln.split()[0] in ("zero", "weak", "strong")
            and "±" in ln}
    assert set(rows) == {"zero", "weak", "strong"}
    means = {k: [float(v) for v in re.findall(r"([\d.e+-]+) ±", ln)] for k, ln in rows.items()}
    assert all(s < z for s, z in zip(means["strong"], means["zero"])), means
    assert all(m[-1] < m[0] for m in means.values()), means
    (zero,) = _intervals(text, "zero ")
    assert -1.3 < zero[0] < -0.7, zero
    assert len(_images(outputs)) == 1


def test_sync_notebook(tmp_path):
    """The text says the Benettin estimate's 95% CI contains the closed-form λ₁."""
    _, text = execute_notebook("sync.ipynb", tmp_path)
    m = re.search(r"estimate ([+-]?[\d.]+), 95% Student-t CI half-width over \d+ runs ([\d.]+); closed form ([+-]?[\d.]+)", text)
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
    assert len(_images(outputs)) >= 1
