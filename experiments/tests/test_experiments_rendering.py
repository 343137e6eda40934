"""rendering: the claim line in Markdown (the maths as written) and as plain text (the TeX
translated), and the claims table."""

import pytest

from cfm_experiments import rendering as R
from cfm_experiments.driver import claims_table
from cfm_experiments.protocol import Claim
from cfm_experiments.rates.claims import CLAIMS as RATES_CLAIMS
from cfm_experiments.verdicts import UNDECIDED


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
    assert R.plain(tex) == text


def test_every_rates_claim_reads_as_plain_text():
    for claim, _, _ in RATES_CLAIMS:
        text = R.plain(claim)
        assert "$" not in text and "\\" not in text and "{" not in text, text


def _claim(**kw):
    base = dict(
        claim=r"a sub-Gaussian tail $q_\delta \propto \sqrt{\log(1/\delta)}$ | b",
        measured=r"$\log q_δ$: 0.5",
        verdict=UNDECIDED,
        figure="f.png",
        sizes="n = 16",
        command="cfm-jax claims --quick",
    )
    return Claim(**(base | kw))


def test_the_markdown_line_keeps_the_maths_and_the_text_line_has_none():
    c = _claim()
    md = R.claim_line(c, "markdown")
    assert md.startswith("| a sub-Gaussian tail $q_\\delta \\propto \\sqrt{\\log(1/\\delta)}$ \\| b |")
    assert "**undecided: interval straddles the boundary**" in md and "`cfm-jax claims --quick`" in md
    text = R.claim_line(c, "text")
    assert "$" not in text and "\\" not in text
    first, *rest = text.splitlines()
    assert first == "[undecided: interval straddles the boundary] a sub-Gaussian tail q_δ ∝ √(log(1/δ)) | b"
    assert rest == ["    measured: log q_δ: 0.5", "    sizes: n = 16", "    command: cfm-jax claims --quick",
                    "    figure: f.png"]  # fmt: skip
    assert R.claim_line(c, "brief") == "- a sub-Gaussian tail q_δ ∝ √(log(1/δ)) | b: " + UNDECIDED
    assert R.claim_line(_claim(figure="", command=""), "text").splitlines()[1:] == [
        "    measured: log q_δ: 0.5",
        "    sizes: n = 16",
    ]


def test_the_claims_table_is_the_header_and_one_markdown_line_per_claim():
    c = _claim()
    table = claims_table([c, c]).splitlines()
    assert table[0].startswith("| claim |") and table[1].startswith("|---")
    assert table[2:] == [R.claim_line(c)] * 2
    assert R.claim_lines([c, c], "text").count("\n\n") == 1
