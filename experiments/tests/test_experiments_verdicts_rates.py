"""verdicts.rates: the verdict rules of `cfm-jax rates` on fits with a known answer."""

from cfm_experiments import VERDICTS
from cfm_experiments.verdicts.rates import agrees, counts, verdict


def _fit(slope, lo, hi, *, band=(-0.5, -0.5), meaningful=True):
    return dict(slope=slope, ci_low=lo, ci_high=hi, expected_band=list(band), meaningful=meaningful)


def test_a_fit_counts_when_not_floor_limited_and_its_ci_excludes_zero():
    assert counts(_fit(-0.5, -0.6, -0.4))
    assert counts(_fit(0.3, 0.1, 0.5))  # a growth is a detected change too
    assert not counts(_fit(-0.5, -0.6, -0.4, meaningful=False))
    assert not counts(_fit(-0.3, -0.8, 0.1))  # cannot tell a decay from none
    assert not counts(_fit(-0.3, -0.8, 0.0))


def test_a_fit_agrees_when_its_ci_meets_the_allowed_band():
    assert agrees(_fit(-0.45, -0.55, -0.35)) and agrees(_fit(-0.4, -0.5, -0.3))
    assert not agrees(_fit(-0.3, -0.45, -0.1)) and not agrees(_fit(-0.7, -0.8, -0.51))
    log_band = (-0.5, -0.36)  # W1 at dʹ = 2: −1/2 up to a log
    assert agrees(_fit(-0.38, -0.42, -0.34, band=log_band)) and agrees(_fit(-0.3, -0.37, -0.2, band=log_band))
    assert not agrees(_fit(-0.3, -0.34, -0.2, band=log_band))


def test_verdicts():
    good, off, floored, flat = _fit(-0.5, -0.6, -0.4), _fit(-0.3, -0.4, -0.2), _fit(-0.3, -0.4, -0.2), _fit(0, -1, 1)
    floored["meaningful"] = False
    assert verdict([good, good]) == "holds"
    assert verdict([good, floored, flat]) == "holds"  # the uncounted fits do not decide
    assert verdict([good, off]) == "not observed at these sizes"  # finite n cannot refute an asymptotic rate
    assert verdict([floored, flat]) == verdict([]) == "not measured: no usable rows"
    assert {verdict([good]), verdict([off]), verdict([flat])} <= set(VERDICTS)
