"""verdicts.vocabulary: one vocabulary (no module writes a verdict's text but this one), the band and
claim rules, the order of verdicts."""

import ast
import json
import math
from pathlib import Path

import pytest

import cfm_experiments
from cfm_experiments.protocol import VERDICTS, Claim
from cfm_experiments.verdicts import vocabulary as V

PACKAGE = Path(cfm_experiments.__file__).parent


def test_each_withheld_verdict_is_named_for_its_reason():
    assert V.BELOW_STABLE_SIZES == "inconclusive at these sizes"
    assert V.UNDECIDED == "undecided: interval straddles the boundary"
    assert V.NOT_MEASURED == "not measured: no usable rows"
    assert V.DRAWS_DISAGREE == "undecided: the draws disagree"
    assert V.NOT_TESTED.startswith("not tested: ")
    assert {v for v in V.Verdict if v.withheld} == {
        V.BELOW_STABLE_SIZES,
        V.UNDECIDED,
        V.DRAWS_DISAGREE,
        V.NOT_MEASURED,
        V.NOT_TESTED,
    }
    assert len(set(VERDICTS)) == len(VERDICTS) == len(V.Verdict) == len(V.ORDER)


def test_no_module_writes_a_verdict_of_its_own():
    """Every string constant of the experiments' sources that is a verdict's text, or names one
    (``INCONCLUSIVE = ...``), outside the verdicts module: none."""
    texts = set(VERDICTS)
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == Path(V.__file__):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in texts:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value!r}")
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name) and t.id == "INCONCLUSIVE":
                        found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: defines INCONCLUSIVE")
    assert not found, "\n".join(found)


def test_a_claim_takes_a_verdict_or_its_text_and_refuses_others():
    c = Claim("c", "m", "holds")
    assert c.verdict is V.HOLDS and json.dumps(c.verdict) == '"holds"'
    with pytest.raises(ValueError, match="unknown verdict 'inconclusive'"):
        Claim("c", "m", "inconclusive")


@pytest.mark.parametrize(
    "interval, verdict",
    [
        ((0.2, 0.8), V.HOLDS),  # inside [0, 1]
        ((0.0, 1.0), V.HOLDS),  # the band's edges belong to it
        ((1.2, 1.5), V.REFUTED),  # wholly above
        ((-0.5, -0.1), V.REFUTED),  # wholly below
        ((0.5, 1.5), V.UNDECIDED),  # across the upper edge
        ((-0.5, 0.5), V.UNDECIDED),
        ((float("nan"), float("nan")), V.NOT_MEASURED),
    ],
)
def test_against_band(interval, verdict):
    lo, hi = interval
    assert V.against_band(lo, hi, 0.0, 1.0) == verdict


def test_against_a_one_sided_band_at_its_boundary():
    """The claim "≤ ½": an interval ending at ½ holds, one across ½ is undecided, one beyond it refuted."""
    assert V.against_band(0.1, 0.5, high=0.5) == V.HOLDS
    assert V.against_band(0.45, 0.55, high=0.5) == V.UNDECIDED
    assert V.against_band(0.5000001, 0.6, high=0.5) == V.REFUTED


def test_worst_is_the_weakest():
    assert V.worst([V.HOLDS, V.UNDECIDED, V.DIFFERENT]) == V.UNDECIDED
    assert V.worst([V.HOLDS, V.NOT_OBSERVED, V.UNDECIDED]) == V.NOT_OBSERVED
    assert V.worst([V.HOLDS, V.REFUTED, V.NOT_MEASURED]) == V.REFUTED
    assert V.worst([V.HOLDS]) == V.HOLDS and V.worst([]) == V.NOT_MEASURED
    assert V.worst([V.HOLDS, V.BELOW_STABLE_SIZES]) == V.BELOW_STABLE_SIZES


def test_an_interval_ending_exactly_at_the_claim_holds():
    """The one-sided bound (alternative = claim): an interval whose upper edge is the claim itself reaches
    it from the claim's side (*holds*); one starting exactly there reaches both sides (*undecided*); the
    mirror image likewise."""
    assert V.against_claim(-1.0, 0.0, 0.0, 0.0) == V.HOLDS
    assert V.against_claim(0.0, 1.0, 0.0, 0.0) == V.UNDECIDED
    assert V.against_claim(0.0, 1.0, 0.0, -0.5) == V.HOLDS  # mirrored: the alternative below the claim
    assert V.against_claim(-1.0, 0.0, 0.0, -0.5) == V.UNDECIDED
    assert V.against_claim(1e-12, 1.0, 0.0, 0.0) == V.REFUTED


def test_an_interval_touching_a_band_from_outside_is_undecided():
    """An interval whose edge is the band's edge, the rest outside: it reaches the band (*undecided*),
    it is not wholly outside it (*refuted*)."""
    assert V.against_band(0.5, 1.0, 1.0, 2.0) == V.UNDECIDED
    assert V.against_band(2.0, 2.5, 1.0, 2.0) == V.UNDECIDED
    assert V.against_band(0.5, 1.0 - 1e-12, 1.0, 2.0) == V.REFUTED


@pytest.mark.parametrize("rule", ["band", "claim"])
def test_stored_and_empty_intervals_read_not_measured_and_nan_claims_are_refused(rule):
    """What a JSON row stores (null edges, None) reads *not measured*; a NaN claim or band edge is
    refused with the argument named."""
    nan = float("nan")
    if rule == "band":
        assert V.against_band(None, 1.0, 0.0, 2.0) == V.against_band(0.0, None, 0.0, 2.0) == V.NOT_MEASURED
        with pytest.raises(ValueError, match="`low` must be a number"):
            V.against_band(0.1, 0.2, nan, 1.0)
        with pytest.raises(ValueError, match="`high` must be a number"):
            V.against_band(0.1, 0.2, 0.0, nan)
        with pytest.raises(ValueError, match="reversed"):
            V.against_band(0.1, 0.2, 1.0, 0.0)
    else:
        assert V.against_claim(None, None, 0.0, 0.5) == V.NOT_MEASURED
        with pytest.raises(ValueError, match="`claim` must be a number"):
            V.against_claim(-0.1, 0.1, nan, 0.5)
        with pytest.raises(ValueError, match="`alternative` must be a number"):
            V.against_claim(-0.1, 0.1, 0.0, nan)
    for stored in ({"ci_low": None}, None, "ab", {"ci_low": "x", "ci_high": True}, (None, 1.0)):
        assert math.isnan(V.edges(stored)[0]), stored


def test_every_reading_of_the_vocabulary_has_an_input_that_produces_it():
    """Each verdict is reachable: over the rules table on a grid of intervals, judge below its sizes,
    agree on disagreeing draws and code_check, every verdict of the vocabulary is read by something
    (a verdict no input produces is a word the rules do not use)."""
    import itertools

    from cfm_experiments.verdicts import claims as C, table as R, tails as TA

    grid = [-2.0, -1.0, -0.6, -0.5, -0.45, -0.1, 0.0, 0.1, 0.5, 0.55, 0.9, 1.0, 1.2, 2.0, 3.0, 5.0]
    seen = {rule.apply(lo, hi) for rule in R.RULES for lo, hi in itertools.combinations(grid, 2)}
    seen |= {C.judge(V.HOLDS, {"seeds": 32}, {"seeds": 8})[0], V.agree([V.HOLDS, V.REFUTED])}
    seen |= {V.code_check(True), V.code_check(False)}
    tail_row = {"deltas": [0.1, 0.01], "sizes": [{"n": 64, "gamma_lin": 0.99, "gamma": None}]}
    seen.add(TA.model_checks(tail_row)["tail"])  # a bound at 1: not tested
    assert seen == set(V.Verdict), set(V.Verdict) - seen
