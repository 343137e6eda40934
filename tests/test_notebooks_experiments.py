"""The chaos and OGD notebooks execute at their committed size, show their figures, and their claims hold
(a file of their own so the two slowest notebooks run on the other test worker)."""

import re

from conftest import execute_notebook, notebook_images, printed_intervals


def test_chaos_notebook(tmp_path):
    """The text says every attention slope's CI contains −1/2; control d=1 contains −1/2, d=4 lies above it."""
    outputs, text = execute_notebook("chaos.ipynb", tmp_path)
    attention = [printed_intervals(text, q) for q in ("token", "context", "adjoint", "grad_phi")]
    assert all(len(a) == 1 and a[0][1] <= -0.5 <= a[0][2] for a in attention), attention
    (c1,), (c4,) = printed_intervals(text, "control d=1"), printed_intervals(text, "control d=4")
    assert c1[1] <= -0.5 <= c1[2] and c4[1] > -0.5 and c4[0] < -0.25, (c1, c4)
    assert len(notebook_images(outputs)) == 1


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
