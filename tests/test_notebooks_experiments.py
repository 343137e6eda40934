"""The chaos and OGD notebooks execute at their committed size, show their figures, and their claims hold
(a file of their own so the two slowest notebooks run on the other test worker)."""

import re

import pytest
from conftest import execute_notebook, notebook_images, printed_intervals


@pytest.mark.slow  # executes the notebook (CI runs it in its slow step)
def test_chaos_notebook(tmp_path):
    """The text says every attention slope's CI contains −1/2; control d=1 contains −1/2, d=4 lies above it."""
    outputs, text = execute_notebook("chaos.ipynb", tmp_path)
    attention = [printed_intervals(text, q) for q in ("token", "context", "adjoint", "grad_phi")]
    assert all(len(a) == 1 and a[0][1] <= -0.5 <= a[0][2] for a in attention), attention
    (c1,), (c4,) = printed_intervals(text, "control d=1"), printed_intervals(text, "control d=4")
    assert c1[1] <= -0.5 <= c1[2] and c4[1] > -0.5 and c4[0] < -0.25, (c1, c4)
    assert len(notebook_images(outputs)) == 1


@pytest.mark.slow  # executes the notebook (CI runs it in its slow step)
def test_ogd_notebook_reports_the_three_ridge_regimes(tmp_path):
    """The text says: strong ridge lowest at every n, deviation falls with n, slope at λ = 0 near −1."""
    outputs, text = execute_notebook("ogd.ipynb", tmp_path)
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
    assert len(notebook_images(outputs)) == 1


@pytest.mark.slow  # about a minute on 2 loaded cores (three compiled programs)
def test_constants_notebook_text_matches_its_output(tmp_path):
    """The text says: every C/C(d=2) interval contains 1 and every slope interval −1/2 (section 1); the σ
    and ‖Q‖‖K‖ sweeps agree, slopes contain −1/2 up to β = 4 but not at β = 16, κ's interval lies
    below 2 (section 2); quantiles ordered, curvature intervals contain 0, q slopes −0.48 … −0.50 (3)."""
    outputs, text = execute_notebook("constants.ipynb", tmp_path)
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
    assert len(notebook_images(outputs)) == 1
