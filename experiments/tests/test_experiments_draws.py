"""draws: a part run at independent seeds reads a verdict only where its draws agree; the first
draw's rows are a one-draw run's; each draw is summarised by the part itself."""

from pathlib import Path

import pytest

from cfm_experiments import draws as D
from cfm_experiments.protocol import Claim, Declaration, Part, Settings, Summary

HOLDS, REFUTED = "holds", "refuted at these sizes"
UNDECIDED = "undecided: the draws disagree"


class Toy(Part):
    """Two configurations per seed; its one line holds for even seeds and is refuted for odd ones
    unless ``same`` (then every seed holds). Its parts (:func:`_toy`) declare it."""

    title = "toy"
    same = False

    def configs(self, settings: Settings) -> list[dict]:
        return [{"seed": settings.seed, "x": x} for x in (1, 2)]

    def run(self, config: dict) -> dict:
        return {"y": config["x"] * 10 + config["seed"]}

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        assert {r["config"]["seed"] for r in rows} == {settings.seed}  # one draw's rows, its own settings
        verdict = HOLDS if self.same or settings.seed % 2 == 0 else REFUTED
        y = sum(r["y"] for r in rows)
        return Summary(text=f"y {y}", data={"y": y}, claims=(Claim("c", f"y = {y}", verdict, sizes="s"),))

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        return [out / f"seed{r['config']['seed']}-x{r['config']['x']}" for r in rows]


def _toy(draws: int, same: bool = False) -> Part:
    """A part of a fresh class declaring ``toy`` (``redrawn`` decorates a class once), run at ``draws`` seeds."""

    class Declared(Toy):
        declaration = Declaration("toy")

    Declared.same = same
    return D.redrawn(Declared, draws)()


def test_the_redrawn_class_is_the_one_its_command_finds():
    """The decorated class takes over the declaration: the command's lookup finds it, not the original."""
    from cfm_experiments.protocol import part_classes

    class Original(Toy):
        declaration = Declaration("toy")

    made = D.redrawn(Original, 2)
    assert "declaration" not in vars(Original) and made.declaration.name == "toy" and made.name == "toy"
    assert part_classes([made.declaration], "nowhere", [Original, made]) == (made,)
    assert issubclass(made, Original) and made.__qualname__ == Original.__qualname__


def _rows(part, settings):
    return [{"config": c, **part.run(c)} for c in part.configs(settings)]


def test_the_draws_are_the_part_at_consecutive_seeds():
    settings = Settings(False, {"seed": 4})
    part = _toy(3)
    assert isinstance(part, Toy) and part.name == "toy"
    configs = part.configs(settings)
    assert configs[:2] == Toy().configs(settings)  # the first draw: a one-draw run's rows
    assert [c["seed"] for c in configs] == [4, 4, 5, 5, 6, 6]
    assert [s.seed for s in D.draw_settings(settings, 2)] == [4, 5]
    with pytest.raises(ValueError, match="draws"):
        D.draw_settings(settings, 0)


def test_draws_that_disagree_read_that_they_disagree_and_say_each_verdict():
    settings = Settings(False, {"seed": 0})
    part = _toy(2)
    summary = part.summarize(_rows(part, settings), settings)
    (line,) = summary.claims
    assert line.verdict == UNDECIDED
    assert "2 independent draws (seeds 0, 1) disagree: seed 0: holds; seed 1: refuted" in line.sizes
    assert line.measured == "seed 0: y = 30" and line.claim == "c"
    assert summary.data["y"] == 30 and summary.data["other_draws"][0]["data"] == {"y": 32}
    assert "independent draw, seed 1" in summary.text


def test_draws_that_agree_keep_their_verdict_and_say_so():
    settings = Settings(False, {"seed": 0})
    part = _toy(2, same=True)  # the decorated class keeps the original's attributes
    (line,) = part.summarize(_rows(part, settings), settings).claims
    assert line.verdict == HOLDS and line.sizes == "s; 2 independent draws (seeds 0, 1): their verdicts agree"


def test_a_line_one_draw_lacks_is_not_measured_there():
    first = Summary(claims=(Claim("c", "m", HOLDS), Claim("only first", "m", HOLDS)))
    second = Summary(claims=(Claim("c", "m", HOLDS),))
    lines = D.combine([first, second], [0, 1]).claims
    assert [c.verdict for c in lines] == [HOLDS, UNDECIDED]
    assert "seed 1: not measured" in lines[1].sizes


def test_the_figures_show_the_first_draw(tmp_path):
    settings = Settings(False, {"seed": 2})
    part = _toy(2)
    rows = _rows(part, settings)
    drawn = part.figures(rows, Summary(), tmp_path)
    assert [p.name for p in drawn] == ["seed2-x1", "seed2-x2"]


def test_a_code_check_failing_in_a_later_draw_fails_the_command():
    """``passed`` is every draw's: a check that fails only in the second draw fails the combined run."""
    ok, failed = Summary(claims=(Claim("c", "m", HOLDS),)), Summary(claims=(Claim("c", "m", HOLDS),), passed=False)
    assert D.combine([ok, ok], [0, 1]).passed
    assert not D.combine([ok, failed], [0, 1]).passed
    assert not D.combine([failed, ok], [0, 1]).passed


def test_a_pooled_line_replaces_the_draws_line_and_says_each_draws_verdict():
    first = Summary(claims=(Claim("c", "m0", HOLDS), Claim("d", "m", HOLDS)))
    second = Summary(claims=(Claim("c", "m1", REFUTED), Claim("d", "m", HOLDS)))
    pooled = (Claim("c", "pooled m", HOLDS, sizes="s"),)
    c, d = D.combine([first, second], [3, 4], pooled).claims
    assert c.verdict == HOLDS and c.measured == "pooled m"
    assert (
        c.sizes == "s; pooled over 2 independent draws (seeds 3, 4); each draw alone: seed 3: holds; seed 4: " + REFUTED
    )
    assert d.verdict == HOLDS and "their verdicts agree" in d.sizes
