"""The experiments' notebooks execute at their committed size, show their figures, and their claims hold."""

import re
from pathlib import Path

import pytest

#: the experiments' notebooks
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def printed_intervals(text, prefix):
    """(slope, low, high) of every line starting with ``prefix`` that prints 'slope S ... [L, H]'."""
    out = []
    for ln in text.splitlines():
        if ln.startswith(prefix):
            m = re.search(r"slope ([+-][\d.]+).*?\[([+-][\d.]+), ([+-][\d.]+)\]", ln)
            if m:
                out.append(tuple(float(v) for v in m.groups()))
    return out


@pytest.mark.slow  # executes the notebook (CI runs it in its slow step)
def test_chaos_notebook(notebook):
    """The text says every attention slope's CI contains −1/2; control d=1 contains −1/2, d=4 lies above it."""
    _, text, images = notebook(NOTEBOOKS / "chaos.ipynb")
    attention = [printed_intervals(text, q) for q in ("token", "context", "adjoint", "grad_phi")]
    assert all(len(a) == 1 and a[0][1] <= -0.5 <= a[0][2] for a in attention), attention
    (c1,), (c4,) = printed_intervals(text, "control d=1"), printed_intervals(text, "control d=4")
    assert c1[1] <= -0.5 <= c1[2] and c4[1] > -0.5 and c4[0] < -0.25, (c1, c4)
    assert len(images) == 1


@pytest.mark.slow  # executes the notebook (CI runs it in its slow step)
def test_ogd_notebook_reports_the_three_ridge_regimes(notebook):
    """The text says: strong ridge lowest at every n, deviation falls with n, slope at λ = 0 near −1."""
    _, text, images = notebook(NOTEBOOKS / "ogd.ipynb")
    rows = {
        ln.split()[0]: ln
        for ln in text.splitlines()
        if ln.split() and ln.split()[0] in ("zero", "weak", "strong") and "±" in ln
    }
    assert set(rows) == {"zero", "weak", "strong"}
    means = {k: [float(v) for v in re.findall(r"([\d.e+-]+) ±", ln)] for k, ln in rows.items()}
    assert all(s < z for s, z in zip(means["strong"], means["zero"])), means
    assert all(m[-1] < m[0] for m in means.values()), means
    (zero,) = printed_intervals(text, "zero ")
    assert -1.3 < zero[0] < -0.7, zero
    assert len(images) == 1


@pytest.mark.slow  # about a minute on 2 loaded cores (three compiled programs)
def test_constants_notebook_text_matches_its_output(notebook):
    """The text says: every C/C(d=2) interval contains 1 and every slope interval −1/2 (section 1); the σ
    and ‖Q‖‖K‖ sweeps agree, slopes contain −1/2 up to β = 4 but not at β = 16, κ's interval lies
    below 2 (section 2); quantiles ordered, curvature intervals contain 0, q slopes −0.48 … −0.50 (3)."""
    _, text, images = notebook(NOTEBOOKS / "constants.ipynb")
    dims = re.findall(
        r"C/C\(d=2\) = [\d.]+ \[([\d.]+), ([\d.]+)\]\s+slope ([+-][\d.]+) \[([+-][\d.]+), ([+-][\d.]+)\]", text
    )
    assert len(dims) == 3 and all(
        float(a) <= 1 <= float(b) and float(lo) <= -0.5 <= float(hi) for a, b, _, lo, hi in dims
    )
    beta_line = (
        r"beta=\s*([\d.]+): C/sigma = ([\d.]+) \(qk sweep\), ([\d.]+) \(sigma sweep\); "
        r"slope [+-][\d.]+ \[([+-][\d.]+), ([+-][\d.]+)\]"
    )
    betas = re.findall(beta_line, text)
    assert len(betas) == 4 and all(a == b for _, a, b, _, _ in betas)
    assert all((float(lo) <= -0.5 <= float(hi)) == (float(beta) <= 4) for beta, _, _, lo, hi in betas), betas
    kappa = re.search(r"kappa = ([\d.]+) \[([\d.]+), ([\d.]+)\]", text)
    assert kappa is not None and float(kappa.group(3)) < 2
    assert "quantiles ordered in delta at every n: True" in text
    curv = re.findall(r"curvature [+-][\d.]+ \[([+-][\d.]+), ([+-][\d.]+)\]", text)
    assert len(curv) == 5 and all(float(lo) <= 0 <= float(hi) for lo, hi in curv)
    slopes = [float(v) for v in re.findall(r"slope of q in n ([+-][\d.]+)", text)]
    assert len(slopes) == 5 and all(-0.505 <= v <= -0.475 for v in slopes), slopes
    assert len(images) == 1


@pytest.mark.slow  # executes the notebook (CI runs it in its slow step)
def test_sync_notebook(notebook):
    """The text says the Benettin estimate's 95% CI contains the closed-form λ₁."""
    _, text, _ = notebook(NOTEBOOKS / "sync.ipynb")
    m = re.search(
        r"estimate ([+-]?[\d.]+), 95% Student-t CI half-width over \d+ runs ([\d.]+); closed form ([+-]?[\d.]+)", text
    )
    assert m is not None, text
    est, half, closed = (float(v) for v in m.groups())
    assert abs(est - closed) <= half, (est, half, closed)


@pytest.mark.slow  # executes the notebook (CI runs it in its slow step)
def test_paper_notebook(notebook):
    """The text says the theorem's bound holds where Assumption 1 does, and that ReLU ends in one
    cluster (polar and nematic order 1) while tanh ends on two antipodal points (nematic 1, polar < 1)."""
    _, text, images = notebook(NOTEBOOKS / "paper.ipynb")
    assert "bound holds at every layer: True" in text
    orders = dict(re.findall(r"^\s*(relu|tanh): polar order ([\d.]+), nematic order [\d.]+", text, re.M))
    nematic = dict(re.findall(r"^\s*(relu|tanh): polar order [\d.]+, nematic order ([\d.]+)", text, re.M))
    assert float(orders["relu"]) > 0.99 and float(nematic["relu"]) > 0.99
    assert float(orders["tanh"]) < 0.9 and float(nematic["tanh"]) > 0.99
    assert len(images) >= 1
