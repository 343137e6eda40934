"""verdicts: one vocabulary (no module writes a verdict's text but this one), the band rule, and the
claim line in Markdown and as plain text."""

import ast
import json
from pathlib import Path

import pytest

from cfm_experiments import verdicts as V
from cfm_experiments.driver import claims_table
from cfm_experiments.protocol import VERDICTS, Claim
from cfm_experiments.rates.claims import CLAIMS as RATES_CLAIMS

PACKAGE = Path(V.__file__).parent


def test_each_withheld_verdict_is_named_for_its_reason():
    assert V.BELOW_STABLE_SIZES == "inconclusive at these sizes"
    assert V.UNDECIDED == "undecided: interval straddles the boundary"
    assert V.NOT_MEASURED == "not measured: no usable rows"
    assert V.NOT_TESTED.startswith("not tested: ")
    assert {v for v in V.Verdict if v.withheld} == {V.BELOW_STABLE_SIZES, V.UNDECIDED, V.NOT_MEASURED, V.NOT_TESTED}
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


@pytest.mark.parametrize(
    "tex, text",
    [
        (r"$q_\delta \propto \sqrt{\log(1/\delta)}$", "q_δ ∝ √(log(1/δ))"),
        (r"$\sup_k ‖θ_k − \hat θ_k‖_{L^∞} = O(\sqrt{d/n})$", "sup_k ‖θ_k − θ̂_k‖_(L^∞) = O(√(d/n))"),
        (r"decays as $n^{-1/2}$ whatever d", "decays as n^(-1/2) whatever d"),
        ("$e_K/e_{k_c}$ = ×3", "e_K/e_(k_c) = ×3"),
        (r"$\log q_δ ≈ c + γ\log\log(1/δ)$", "log q_δ ≈ c + γlog log(1/δ)"),
        ("no maths here", "no maths here"),
    ],
)
def test_plain_renders_the_maths(tex, text):
    assert V.plain(tex) == text


def test_every_rates_claim_reads_as_plain_text():
    for claim, _, _ in RATES_CLAIMS:
        text = V.plain(claim)
        assert "$" not in text and "\\" not in text and "{" not in text, text


def _claim(**kw):
    base = dict(
        claim=r"a sub-Gaussian tail $q_\delta \propto \sqrt{\log(1/\delta)}$ | b",
        measured=r"$\log q_δ$: 0.5",
        verdict=V.UNDECIDED,
        figure="f.png",
        sizes="n = 16",
        command="cfm-jax claims --quick",
    )
    return Claim(**(base | kw))


def test_the_markdown_line_keeps_the_maths_and_the_text_line_has_none():
    c = _claim()
    md = V.claim_line(c, "markdown")
    assert md.startswith("| a sub-Gaussian tail $q_\\delta \\propto \\sqrt{\\log(1/\\delta)}$ \\| b |")
    assert "**undecided: interval straddles the boundary**" in md and "`cfm-jax claims --quick`" in md
    text = V.claim_line(c, "text")
    assert "$" not in text and "\\" not in text
    first, *rest = text.splitlines()
    assert first == "[undecided: interval straddles the boundary] a sub-Gaussian tail q_δ ∝ √(log(1/δ)) | b"
    assert rest == ["    measured: log q_δ: 0.5", "    sizes: n = 16", "    command: cfm-jax claims --quick",
                    "    figure: f.png"]  # fmt: skip
    assert V.claim_line(c, "brief") == "- a sub-Gaussian tail q_δ ∝ √(log(1/δ)) | b: " + V.UNDECIDED
    assert V.claim_line(_claim(figure="", command=""), "text").splitlines()[1:] == [
        "    measured: log q_δ: 0.5",
        "    sizes: n = 16",
    ]


def test_the_claims_table_is_the_header_and_one_markdown_line_per_claim():
    c = _claim()
    table = claims_table([c, c]).splitlines()
    assert table[0].startswith("| claim |") and table[1].startswith("|---")
    assert table[2:] == [V.claim_line(c)] * 2
    assert V.claim_lines([c, c], "text").count("\n\n") == 1
