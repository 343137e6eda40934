"""verdicts.table: the one table of verdict rules is complete, and every rule in it is a total function with the
documented vocabulary on random, degenerate (NaN, ±∞, reversed) and straddling intervals."""

import ast
import importlib
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cfm_experiments
from cfm_experiments import verdicts as V
from cfm_experiments.verdicts import table as R

PACKAGE = Path(cfm_experiments.__file__).parent
#: what no interval that carries no information, or straddles its rule's boundary, may read.
AFFIRMATIVE = {V.HOLDS, V.DIFFERENT, V.CODE_PASSED}
IDS = [r.name for r in R.RULES]
finite = st.floats(min_value=-10.0, max_value=10.0, allow_nan=False)
margin = st.floats(min_value=0.0, max_value=5.0, allow_nan=False)


def _returns_verdict(node) -> bool:
    return node.returns is not None and "Verdict" in ast.unparse(node.returns)


def _verdict_functions(root: Path = PACKAGE, package: str = "cfm_experiments") -> set[str]:
    """``module:qualname`` of every function and method under ``root`` annotated to return a verdict."""
    found = set()
    for path in sorted(root.rglob("*.py")):
        if path == Path(R.__file__):  # the table's own adapters
            continue
        module = package + "." + ".".join(path.relative_to(root).with_suffix("").parts)
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and _returns_verdict(node):
                found.add(f"{module}:{node.name}")
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and _returns_verdict(item):
                        found.add(f"{module}:{node.name}.{item.name}")
    return found


def _name(f) -> str:
    return f"{f.__module__}:{f.__qualname__}"


def test_every_function_that_returns_a_verdict_is_in_the_table():
    """A new rule anywhere in the package must join RULES (and so the property test below) or say why
    it reads no interval."""
    listed = {_name(r.rule) for r in R.RULES} | {_name(f) for f in R.NOT_ON_INTERVALS}
    found = _verdict_functions()
    assert found - listed == set(), "rules missing from cfm_experiments.verdicts.table"
    assert listed - found == set(), "the table names functions that return no verdict"
    for name in found:  # the scan reads the modules the table imports
        module, qual = name.split(":")
        assert callable(eval(qual, vars(importlib.import_module(module))))


def test_every_rule_lives_in_the_verdicts_package():
    """No module outside :mod:`cfm_experiments.verdicts` defines a rule (a new rule belongs there)."""
    outside = {name.split(":")[0] for name in _verdict_functions() if not name.startswith("cfm_experiments.verdicts.")}
    assert outside == set()


def test_the_scan_sees_a_rule_that_is_left_out(tmp_path):
    """The completeness check itself: a module with a rule the table does not list is found (a copy of
    a module beside a new one, outside the package)."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "probe.py").write_text("def lenient(x) -> Verdict:\n    return HOLDS\n")
    (tmp_path / "other.py").write_text("def helper(x) -> float:\n    return x\n")
    assert _verdict_functions(tmp_path, "pkg") == {"pkg.sub.probe:lenient"}


@pytest.mark.parametrize("rule", R.RULES, ids=IDS)
def test_a_narrow_interval_at_the_claim_affirms_it(rule):
    """The table's claimed value is one the rule affirms (so the straddling intervals below are the
    rule's own boundary, not an interval it could never affirm)."""
    assert rule.apply(rule.claim - 1e-3, rule.claim + 1e-3) in (V.HOLDS, V.DIFFERENT), rule.name


@pytest.mark.parametrize("rule", R.RULES, ids=IDS)
@settings(max_examples=60, deadline=None)
@given(a=finite, b=finite)
def test_every_verdict_is_in_the_vocabulary(rule, a, b):
    lo, hi = min(a, b), max(a, b)
    v = rule.apply(lo, hi)
    assert isinstance(v, V.Verdict) and v not in (V.CODE_PASSED, V.CODE_FAILED)


@pytest.mark.parametrize("rule", R.RULES, ids=IDS)
@settings(max_examples=40, deadline=None)
@given(x=finite, which=st.sampled_from(["low", "high", "both"]))
def test_a_nan_interval_is_not_measured(rule, x, which):
    nan = float("nan")
    lo, hi = {"low": (nan, x), "high": (x, nan), "both": (nan, nan)}[which]
    assert rule.apply(lo, hi) == V.NOT_MEASURED, rule.name


@pytest.mark.parametrize("rule", R.RULES, ids=IDS)
@settings(max_examples=40, deadline=None)
@given(x=finite, which=st.sampled_from(["low", "high", "both"]))
def test_an_infinite_interval_affirms_nothing(rule, x, which):
    inf = float("inf")
    lo, hi = {"low": (-inf, x), "high": (x, inf), "both": (-inf, inf)}[which]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        v = rule.apply(lo, hi)
    if rule.infinite is None:
        assert v not in AFFIRMATIVE, (rule.name, lo, hi, v)
    else:
        assert v == rule.infinite, (rule.name, lo, hi, v)


@pytest.mark.parametrize("rule", [r for r in R.RULES if r.interval], ids=[r.name for r in R.RULES if r.interval])
@settings(max_examples=40, deadline=None)
@given(a=finite, gap=st.floats(min_value=1e-3, max_value=5.0))
def test_a_reversed_interval_is_not_measured(rule, a, gap):
    assert rule.apply(a + gap, a) == V.NOT_MEASURED, rule.name


@pytest.mark.parametrize("rule", [r for r in R.RULES if r.interval], ids=[r.name for r in R.RULES if r.interval])
@settings(max_examples=60, deadline=None)
@given(below=margin, above=margin)
def test_a_straddling_interval_never_affirms(rule, below, above):
    """An interval reaching both the claimed value and the alternative the claim denies."""
    lo = min(rule.claim, rule.alternative) - below
    hi = max(rule.claim, rule.alternative) + above
    v = rule.apply(lo, hi)
    assert v not in AFFIRMATIVE, (rule.name, lo, hi, v)


def test_the_table_holds_each_rule_once_per_boundary():
    names = [r.name for r in R.RULES]
    assert len(names) == len(set(names))
    assert all(r.claim != r.alternative for r in R.RULES)
    assert all(math.isfinite(r.claim) and math.isfinite(r.alternative) for r in R.RULES)


@given(verdicts=st.lists(st.sampled_from(list(V.Verdict)), min_size=1, max_size=6))
def test_draws_that_disagree_never_read_a_verdict_on_the_claim(verdicts):
    """verdicts.agree, the verdict of independent draws of one line: the draws' own verdict when
    they all agree; when they do not, neither *holds*, *holds with a different constant* nor
    *refuted*, and a failed code check in any draw fails the line."""
    got = V.agree(verdicts)
    assert got in V.VERDICTS
    if len(set(verdicts)) == 1:
        assert got == verdicts[0]
    else:
        assert got not in {V.HOLDS, V.DIFFERENT, V.REFUTED, V.CODE_PASSED}
        assert (got == V.CODE_FAILED) == (V.CODE_FAILED in verdicts)
    assert V.agree([]) == V.NOT_MEASURED
