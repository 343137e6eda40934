"""experiments.plotting: exact panel counts, ticks at the run's values, named reference slopes."""

import numpy as np

from cfm_experiments import plotting


def test_figure_has_exactly_the_panels_asked_for():
    fig, axes = plotting.figure(5, ncols=3)
    assert len(axes) == 5 and len(fig.axes) == 5  # the sixth grid slot is removed
    plotting.pyplot().close(fig)


def test_log_ticks_at_the_values_run():
    fig, (ax,) = plotting.figure(1)
    ax.plot([16, 32, 64, 128], [1, 2, 3, 4])
    plotting.log_ticks(ax, [16, 32, 64, 128])
    fig.canvas.draw()
    np.testing.assert_array_equal(ax.get_xticks(), [16, 32, 64, 128])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["16", "32", "64", "128"]
    plotting.pyplot().close(fig)


def test_log_values_labels_a_range_narrower_than_a_decade():
    fig, (ax,) = plotting.figure(1)
    ax.plot([1, 2], [0.21, 0.48])
    plotting.log_values(ax, "y")
    fig.canvas.draw()
    lo, hi = ax.get_ylim()
    labels = [t.get_text() for t, v in zip(ax.get_yticklabels(), ax.get_yticks()) if lo <= v <= hi and t.get_text()]
    assert len(labels) >= 2, labels
    plotting.pyplot().close(fig)


def test_reference_slope_passes_through_its_anchor_with_its_slope():
    fig, (ax,) = plotting.figure(1)
    (line,) = plotting.reference_slope(ax, [4, 16, 64], (16, 0.1), -0.5)
    x, y = line.get_data()
    np.testing.assert_allclose(y, 0.1 * (np.asarray(x) / 16) ** -0.5)
    assert line.get_label() == "slope -0.50" and line.get_linestyle() == "--"
    plotting.pyplot().close(fig)
