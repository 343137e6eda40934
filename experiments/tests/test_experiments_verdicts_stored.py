"""verdicts on what rows store: every rule fed the intervals, fits and rows of every committed results
folder (rows.jsonl and summary.json), each with one field at a time set to null (how a row stores NaN)
or removed. No rule raises, and none reads *holds* (or another affirmative verdict) when a field it
needs is null or missing."""

import copy
import json
from pathlib import Path

import pytest

import cfm_experiments
from cfm_experiments.verdicts import (
    CODE_PASSED,
    DIFFERENT,
    HOLDS,
    NOT_MEASURED,
    against_band,
    against_claim,
    claims as C,
    edges,
    ogd as O,
    rates as RA,
    slopes as SL,
    sync as SY,
    tails as TA,
)

RESULTS = Path(cfm_experiments.__file__).parents[1] / "results"
FOLDERS = sorted(p.parent for p in RESULTS.rglob("rows.jsonl"))
AFFIRMATIVE = {HOLDS, DIFFERENT, CODE_PASSED}
NEEDED = ("ci_low", "ci_high")  # what every interval rule needs of an interval


def _records(folder: Path) -> list:
    rows = [json.loads(line) for line in (folder / "rows.jsonl").read_text().splitlines() if line.strip()]
    summary = folder / "summary.json"
    return rows + ([json.loads(summary.read_text())] if summary.exists() else [])


def _walk(x):
    yield x
    if isinstance(x, dict):
        for v in x.values():
            yield from _walk(v)
    elif isinstance(x, list):
        for v in x:
            yield from _walk(v)


def _intervals(folder: Path) -> list[dict]:
    """Every stored interval of a folder: a mapping with scalar ``ci_low`` and ``ci_high`` (deduplicated)."""
    seen, out = set(), []
    for rec in _records(folder):
        for x in _walk(rec):
            if isinstance(x, dict) and not isinstance(x.get("ci_low", []), list) and "ci_high" in x:
                key = json.dumps(x, sort_keys=True, default=str)
                if key not in seen:
                    seen.add(key)
                    out.append(x)
    return out


def _mutations(record: dict):
    """(field, how, the record with that field null or removed), one field at a time."""
    for key in record:
        nulled = dict(record)
        nulled[key] = None
        yield key, "null", nulled
        yield key, "removed", {k: v for k, v in record.items() if k != key}


#: every rule, fed one stored interval where it reads one (its other inputs fixed).
INTERVAL_RULES = {
    "against_band": lambda iv: against_band(*edges(iv), 0.0, 1.0),
    "against_claim": lambda iv: against_claim(*edges(iv), 0.0, 0.5),
    "claims.independence": C.independence,
    "claims.at_most": lambda iv: C.at_most(iv, 0.5, alternative=1.0),
    "claims.bounded_growth": lambda iv: C.bounded_growth(iv, 2.0),
    "claims.rate": lambda iv: C.rate([iv] * 3, -0.5),
    "claims.all_contain": lambda iv: C.all_contain([iv], -0.5),
    "claims.law_rule (a, b)": lambda iv: C.law_rule(iv, iv, [(iv, -0.5)]),
    "claims.bias_verdict": lambda iv: C.bias_verdict([iv], 0.01),
    "slopes.slope_verdict": lambda iv: SL.slope_verdict([iv], (10, 100, 1000)),
    "sync.order_verdict": lambda iv: SY.order_verdict(*edges(iv), 0.5),
    "ogd.slope_verdict": lambda iv: O.slope_verdict(iv, -0.5),
    "ogd.sign_verdict": lambda iv: O.sign_verdict([iv], positive=HOLDS, negative=HOLDS),
    "ogd.at_most_half": lambda iv: O.at_most_half([iv])[0],
    "ogd.rate_verdict": O.rate_verdict,
    "ogd.growth_verdict": lambda iv: O.growth_verdict(iv, iv),
    "ogd.bounded_verdict": lambda iv: O.bounded_verdict([iv]),
    "tails.decay_verdict": lambda iv: TA.decay_verdict(
        [{"n": 16, "median_ci": {"value": 1.0, "ci_low": 0.99, "ci_high": 1.01}}, {"n": 64, "median_ci": iv}]
    ),
}


def test_every_committed_folder_is_read():
    assert {f.name for f in FOLDERS} >= {"claims", "ogd", "rates", "sync"}
    assert all(_intervals(f) or f.name == "rates" for f in FOLDERS)


@pytest.mark.parametrize("folder", FOLDERS, ids=[str(f.relative_to(RESULTS)) for f in FOLDERS])
def test_every_rule_reads_every_stored_interval_with_a_field_null_or_removed(folder):
    intervals = _intervals(folder)
    for iv in intervals:
        for name, rule in INTERVAL_RULES.items():
            rule(iv)  # as stored: no exception
            for key, how, mutated in _mutations(iv):
                got = rule(mutated)
                if key in NEEDED:
                    assert got not in AFFIRMATIVE, (folder.name, name, key, how, iv, got)


def _rates_fits() -> list[dict]:
    summary = json.loads((RESULTS / "rates" / "summary.json").read_text())
    return [f for part in summary["results"].values() for f in part.get("fits", [])]


def test_the_rates_rule_reads_every_stored_fit_with_a_field_null_or_removed():
    """A fit's CI, its floor flag and its allowed band are what the rule needs: without one the fit
    cannot hold (alone, the claim reads *not measured*); among the others it merely does not count."""
    fits = _rates_fits()
    assert fits
    for fit in fits:
        for key, how, mutated in _mutations(fit):
            alone = RA.verdict([mutated])
            if key in ("ci_low", "ci_high", "meaningful", "expected_band"):
                assert alone == NOT_MEASURED, (key, how, fit, alone)
            RA.verdict([*fits, mutated])  # no exception among the others


def _tail_rows() -> list[dict]:
    rows = [json.loads(line) for line in (RESULTS / "claims" / "rows.jsonl").read_text().splitlines()]
    return [r for r in rows if r["config"]["part"] == "tail_exponent"]


def test_the_tail_rule_reads_every_stored_model_with_a_field_null_or_removed():
    """Every field of a committed tail model's row and of each of its sizes, null or removed: no
    exception, and the model's verdict is not *holds*."""
    rows = _tail_rows()
    assert rows
    needed_top = {"sizes"}
    needed_size = {"n", "gamma", "gamma_lin", "median_ci", "ratio"}
    for row in rows:
        TA.model_verdict(row)
        for key, how, mutated in _mutations(row):
            got = TA.model_verdict(mutated)
            if key in needed_top:
                assert got == NOT_MEASURED, (key, how, got)
        for k in range(len(row["sizes"])):
            for key, how, size in _mutations(row["sizes"][k]):
                mutated = copy.deepcopy(row)
                mutated["sizes"][k] = size
                got = TA.model_verdict(mutated)
                if key in needed_size and k == len(row["sizes"]) - 1:
                    assert got not in AFFIRMATIVE, (key, how, got)


def test_counts_and_sizes_as_stored():
    """coverage_verdict with no cell, judge with a null or NaN size: never *holds*."""
    assert SY.coverage_verdict(0, 0, 0) == NOT_MEASURED
    for have in ({"seeds": None}, {"seeds": float("nan")}, {}, {"seeds": "32"}):
        assert C.judge(HOLDS, {"seeds": 32}, have)[0] != HOLDS, have
    with pytest.raises(ValueError, match="size needed for 'seeds' must be a number"):
        C.judge(HOLDS, {"seeds": float("nan")}, {"seeds": 32})
    assert C.bias_verdict([{"ci_low": None, "ci_high": None}], 0.05) == NOT_MEASURED
    assert RA.verdict([{"meaningful": True, "ci_low": None, "ci_high": None, "expected_band": [-0.6, -0.4]}]) == (
        NOT_MEASURED
    )
