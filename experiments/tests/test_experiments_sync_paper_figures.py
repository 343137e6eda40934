"""The figures of part `paper`, drawn from rows as stored: one panel pair per (d, σ, attention scale), the
width check per (activation, d), labels in mathtext."""

import json

import numpy as np
from matplotlib.figure import Figure

from cfm_experiments.sync import paper_figures as pf

T = np.linspace(0.0, 5.0, 7)


def _row(act, d, sigma, scale, width=256, rate=-1.0):
    q = np.tile(np.linspace(-0.5, 0.9, 5), (T.size, 1))
    e = np.exp(rate * T)
    config = dict(kind="cell", act=act, d=d, sigma=sigma, scale=scale, N=6, L=30, T=5.0, beta=1.0, width=width, R=4)
    row = {
        "config": config,
        "t": T,
        "cos_quantiles": q,
        "energy_mean": e,
        "energy_quantiles": np.stack([0.5 * e, e, 2 * e], 1),
        "rate": rate,
        "rate_ci": [rate - 0.1, None],  # a stored row: NaN comes back as null
    }
    return json.loads(json.dumps({k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in row.items()}))


def test_activation_figure_has_a_pair_of_panels_per_cell(tmp_path, monkeypatch):
    drawn = []
    monkeypatch.setattr(pf, "save", lambda fig, path: drawn.append(fig) or path)
    rows = [_row("relu", d, s, sc) for d in (5, 64) for s in (0.0, 0.1) for sc in pf.SCALES]
    pf.activation_figure(rows + [_row("tanh", 5, 0.0, 1.0)], "relu", tmp_path / "a.png")
    (fig,) = drawn
    assert isinstance(fig, Figure) and len(fig.axes) == 2 * 3 * 4
    labels = [ax.get_ylabel() for ax in fig.axes[:2]]
    assert labels == [r"cosine $\langle x_i, x_j\rangle$", r"$E_\beta(X_\ell)$"]
    assert fig.axes[0].get_title() == r"$d$ = 5, $\sigma$ = 0, attention +1"
    assert fig.axes[-1].get_xlabel() == r"layer $\ell$" and "$E_\\beta" in fig.get_suptitle()
    pf.activation_figure([_row("none", 5, 0.0, 0.0)], "none", tmp_path / "b.png")
    assert len(drawn[1].axes) == 2  # only the scales run


def test_width_figure_one_panel_per_checked_cell(tmp_path):
    rows = [_row(a, 64, 0.1, 1.0, m, -1.0 - m / 1e4) for a in ("relu", "tanh") for m in (64, 256, 1024)]
    path = pf.width_figure(rows + [_row("relu", 5, 0.1, 1.0)], tmp_path / "w.png", 256)
    assert path.stat().st_size > 10_000
