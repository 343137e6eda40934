"""Every strategy, SaveAt and path gives the outputs and gradients stored before the solve was
refactored into one loop (tests/data/reference.json, float64; rewrite it with tests/_reference.py)."""

import json

import numpy as np
import pytest
from _reference import PATH, cases, compute

STORED = json.loads(PATH.read_text())
CASES = cases()
# one case per strategy family and SaveAt kind in the default run; the whole grid with -m slow
DEFAULT = {
    "discrete/steps/constant",
    "discrete_recompute/layers/constant",
    "discrete_every2/final/linear",
    "continuous/layers/constant",
    "continuous_backsolve/steps/constant",
    "autodiff/final/linear",
    "heun/continuous/constant",
}


def test_every_case_is_stored():
    assert sorted(STORED) == sorted(CASES)


@pytest.mark.parametrize(
    "name", [n if n in DEFAULT else pytest.param(n, marks=pytest.mark.slow) for n in sorted(CASES)]
)
def test_outputs_and_gradients_equal_the_stored_values(name):
    got = compute(*CASES[name])
    for key, ref in STORED[name].items():
        np.testing.assert_allclose(got[key], ref, rtol=1e-10, atol=1e-12, err_msg=f"{name}: {key}")
