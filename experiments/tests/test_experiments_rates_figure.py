"""cfm_experiments.rates.figure: one labelled panel per (field, quantity), legends for every line style."""

import numpy as np
from _rates_rows import synthetic_rows

from cfm_experiments.rates import fit_rates, plot_rates, rates_figure
from cfm_experiments.rates.figure import LABELS


def test_figure_has_one_labelled_panel_per_quantity(tmp_path):
    """No empty panel, every axis labelled (mathtext), x ticks at the n that were run, a legend in every
    panel naming the expected slope, and the floor's line style exactly where a floor is drawn."""
    rows = synthetic_rows()
    for r in rows:  # the Gaussian attention rows' token-level floors are exactly 0, as against the exact limit
        if r["config"]["reference"] == "gaussian":
            r["floor"].update(token=[0.0] * 8, adjoint=[0.0] * 8)
    fits = fit_rates(rows, n_boot=50)
    fig = rates_figure(fits)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == [
        "attention: token (vs gaussian)",
        "attention: context (vs gaussian)",
        "attention: w1 (vs qmc)",
        "attention: adjoint (vs gaussian)",
        "attention: grad_phi (vs qmc)",
        "control: token (vs qmc)",
    ]
    for ax in fig.axes:
        quantity = ax.get_title().split(": ")[1].split(" ")[0]
        assert ax.get_xlabel() == "context size n" and ax.get_ylabel().startswith(LABELS[quantity])
        ticks = sorted({n for f in fits if f"{f['field']}: {f['quantity']}" in ax.get_title() for n in f["ns"]})
        np.testing.assert_array_equal(ax.get_xticks(), ticks)
        legend = ax.get_legend()
        assert legend is not None
        labels = [t.get_text() for t in legend.get_texts()]
        assert "expected slope (same colour)" in labels and "95 % CI over seeds" in labels
        drawn = any(line.get_linestyle() == ":" for line in ax.get_lines())
        assert drawn == any("floor" in t for t in labels)
        assert drawn == (quantity in ("w1", "grad_phi") or ax.get_title().startswith("control"))
    assert all(label.count("$") % 2 == 0 for label in LABELS.values())
    assert plot_rates(fits, tmp_path / "rates.png").stat().st_size > 10_000
