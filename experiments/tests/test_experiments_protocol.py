"""The experiment protocol: option rules (each bound stated here, not read from a declaration), settings,
claims and their verdicts, a part declared once (its class reads its declaration), and the lookup of
each declared part's class."""

import argparse

import pytest

from cfm_experiments.protocol import (
    SEED,
    VERDICTS,
    Claim,
    Declaration,
    Option,
    Part,
    Settings,
    Summary,
    declared,
    part_classes,
    resolve,
)

P = Declaration(
    "p",
    (
        Option("ns", (16, 64), "sizes", many=True, low=1, min_count=2, quick=(8, 16)),
        Option("eta", 0.1, "step", kind="real", low=0.0),
        Option("law", "gaussian", "law", kind="choice", choices=("gaussian", "ball")),
        Option("full", False, "full grid", kind="flag"),
    ),
)


class _Part(Part):
    declaration = P
    title = "a part"

    def check(self, settings: Settings) -> None:
        if settings["law"] == "ball" and settings["eta"] > 1:
            raise ValueError("--eta must be <= 1 with --law ball.")

    def configs(self, settings):
        return [{"n": n} for n in settings["ns"]]

    def run(self, config):
        return {}


def test_integer_rules_state_their_bounds():
    seeds = Option("seeds", 8, "seeds", low=2, why="a confidence interval needs two")
    assert seeds.check(2) == 2
    with pytest.raises(
        ValueError, match=r"^--seeds must be an integer >= 2 \(a confidence interval needs two\), got 1\.$"
    ):
        seeds.check(1)
    for bad in (2.0, True, "3", None):
        with pytest.raises(ValueError, match="--seeds must be an integer >= 2"):
            seeds.check(bad)
    import numpy as np

    assert seeds.check(np.int64(5)) == 5 and type(seeds.check(np.int64(5))) is int


def test_the_seed_rule():
    assert SEED.check(0) == 0 and SEED.check(2**62 - 1) == 2**62 - 1
    for bad in (-1, 2**62, 1.5):
        with pytest.raises(ValueError, match=r"--seed must be an integer in \[0, 2\*\*62\)"):
            SEED.check(bad)


def test_real_choice_flag_and_list_rules():
    eta = Option("eta", 0.1, "step", kind="real", low=0.0)
    assert eta.check(1) == 1.0
    for bad in (0.0, -1.0, float("nan"), float("inf"), "0.1", False):
        with pytest.raises(ValueError, match="--eta must be a finite number > 0"):
            eta.check(bad)
    share = Option("share", 0.5, "a share", kind="real", low=0.0, high=1.0)
    assert share.check(1 - 1e-12) == 1 - 1e-12 and share.check(1e-12) == 1e-12
    for bad in (1.0, 0.0, 1.5):
        with pytest.raises(ValueError, match=r"--share must be a finite number > 0 and < 1, got"):
            share.check(bad)
    law = Option("law", "a", "law", kind="choice", choices=("a", "b"))
    with pytest.raises(ValueError, match="--law must be one of a, b, got 'c'"):
        law.check("c")
    flag = Option("full", False, "f", kind="flag")
    with pytest.raises(ValueError, match="--full must be True or False"):
        flag.check(1)
    ns = Option("ns", (16, 64), "sizes", many=True, low=1, min_count=2)
    assert ns.check([4, 8]) == (4, 8)
    with pytest.raises(ValueError, match=r"--ns needs at least 2 value\(s\), got \[4\]"):
        ns.check([4])
    with pytest.raises(ValueError, match="--ns must be an integer >= 1, got 0"):
        ns.check([4, 0])
    with pytest.raises(ValueError, match="--ns must be a list of values"):
        ns.check(8)
    assert Option("m", None, "m", optional=True).check(None) is None


def test_resolve_uses_quick_defaults_checks_values_and_the_parts_rules():
    part = _Part()
    s = resolve([part])
    assert s["ns"] == (16, 64) and s.seed == 0 and not s.quick
    q = resolve([part], quick=True, seed=3)
    assert q["ns"] == (8, 16) and q.seed == 3 and q.quick
    assert resolve([part], quick=True, ns=[1, 2])["ns"] == (1, 2)  # a given value beats --quick's
    with pytest.raises(ValueError, match="--eta must be <= 1 with --law ball"):
        resolve([part], law="ball", eta=2.0)
    with pytest.raises(ValueError, match="--nope: not an option of the parts run"):
        resolve([part], nope=1)
    with pytest.raises(ValueError, match="--quick must be True or False"):
        resolve([part], quick=1)  # pyright: ignore[reportArgumentType]
    assert s.record() == {"quick": False, "seed": 0, "ns": [16, 64], "eta": 0.1, "law": "gaussian", "full": False}
    with pytest.raises(KeyError, match="no option 'zz'"):
        s["zz"]


def test_parts_may_share_an_option_only_if_identical():
    class Other(_Part):
        declaration = Declaration("q", (Option("eta", 0.2, "step", kind="real", low=0.0),))

    with pytest.raises(ValueError, match="declare the option --eta differently"):
        declared([_Part(), Other()])
    assert set(declared([_Part()])) == {"seed", "ns", "eta", "law", "full"}


def test_claims_carry_a_known_verdict():
    assert "code check passed" in VERDICTS and "inconclusive at these sizes" in VERDICTS
    Claim("c", "m", "holds")
    with pytest.raises(ValueError, match="unknown verdict 'fine'"):
        Claim("c", "m", "fine")  # pyright: ignore[reportArgumentType]
    assert Summary().passed and Summary().claims == ()


def test_options_on_the_command_line_parse_to_what_the_rules_check():
    parser = argparse.ArgumentParser()
    for opt in _Part.options:
        opt.add_to(parser)
    args = vars(parser.parse_args(["--ns", "4", "8", "--eta", "0.5", "--full"]))
    assert args == {"ns": [4, 8], "eta": 0.5, "law": None, "full": True}
    assert vars(parser.parse_args([])) == {"ns": None, "eta": None, "law": None, "full": None}
    text = parser.format_help()
    assert "(default: 16 64; with --quick: 8 16)" in text and "(default: gaussian)" in text


def test_a_part_reads_its_name_options_and_optional_flag_from_its_declaration():
    assert (_Part.name, _Part.options, _Part.optional) == ("p", P.options, False)
    assert (_Part().name, _Part().options) == ("p", P.options)

    class Later(_Part):  # a subclass with a declaration of its own reads it; without, its base's
        declaration = Declaration("later", optional=True)

    class Same(_Part):
        pass

    assert (Later.name, Later.options, Later.optional) == ("later", (), True)
    assert (Same.name, Same.declaration) == ("p", P)


@pytest.mark.parametrize(
    "body",
    [
        {"declaration": P, "name": "other"},  # a class restating a different name
        {"declaration": P, "name": "p"},  # or the same one: written twice is the defect
        {"declaration": P, "options": P.options},
        {"declaration": P, "optional": True},
        {"name": "p"},  # a part without a declaration may not set them either
    ],
    ids=["name differs", "name same", "options", "optional", "no declaration"],
)
def test_a_part_that_restates_its_declaration_is_refused(body):
    restated = ", ".join(k for k in ("name", "options", "optional") if k in body)
    with pytest.raises(TypeError, match=f"Bad restates {restated}: a part takes them from its declaration"):
        type("Bad", (_Part,), body)


def test_a_declaration_is_checked():
    with pytest.raises(TypeError, match=r"Bad.declaration must be a Declaration, got str"):
        type("Bad", (_Part,), {"declaration": "p"})
    with pytest.raises(ValueError, match="a Declaration's name must be a non-empty string"):
        Declaration("")
    with pytest.raises(ValueError, match="the part 'x': options must be a tuple of Option"):
        Declaration("x", [Option("n", 1, "n")])  # pyright: ignore[reportArgumentType]


def _classes():
    """Three declared parts and a class for each, defined in the module ``pkg.parts``; a base
    without a declaration of its own."""
    a, b, c = Declaration("a"), Declaration("b"), Declaration("c", optional=True)
    base = type("Base", (_Part,), {"__module__": "pkg.parts"})
    classes = {d.name: type(d.name.upper(), (base,), {"declaration": d, "__module__": "pkg.parts"}) for d in (a, b, c)}
    return (a, b, c), base, classes


def test_each_declared_part_has_its_class_in_the_declared_order():
    (a, b, c), base, cls = _classes()
    found = part_classes((c, a, b), "pkg", [cls["a"], base, cls["b"], cls["c"]])
    assert found == (cls["c"], cls["a"], cls["b"])
    assert part_classes((a,), "elsewhere", [cls["a"], cls["b"], cls["c"]]) == (cls["a"],)  # strays in another package
    # by default, among every Part subclass defined so far
    assert part_classes((c, a, b), "nowhere") == (cls["c"], cls["a"], cls["b"])


def test_a_declared_part_without_a_class_is_refused():
    (a, b, c), _, cls = _classes()
    with pytest.raises(ValueError, match=r"pkg: the declared part 'c' has no class \(a Part subclass with its"):
        part_classes((a, b, c), "pkg", [cls["a"], cls["b"]])


def test_a_declared_part_with_two_classes_is_refused():
    (a, b, _), _, cls = _classes()
    twin = type("Twin", (_Part,), {"declaration": b, "__module__": "pkg.other"})
    with pytest.raises(ValueError, match=r"pkg: the part 'b' has 2 classes: pkg.parts.B, pkg.other.Twin\."):
        part_classes((a, b), "pkg", [cls["a"], cls["b"], twin])


def test_a_class_of_the_package_whose_part_is_not_declared_is_refused():
    (a, b, _), _, cls = _classes()
    with pytest.raises(ValueError, match=r"pkg.parts.C declares the part 'c', which pkg does not declare"):
        part_classes((a, b), "pkg", [cls["a"], cls["b"], cls["c"]])
    with pytest.raises(ValueError, match=r"pkg.parts.C declares the part 'c', which pkg.parts does not declare"):
        part_classes((a, b), "pkg.parts", [cls["a"], cls["b"], cls["c"]])
    assert part_classes((a, b), "pk", [cls["a"], cls["b"], cls["c"]])  # a prefix of the name is not the package


def test_a_part_declared_twice_is_refused():
    (a, b, _), _, cls = _classes()
    with pytest.raises(ValueError, match=r"pkg: the part 'a' is declared twice\."):
        part_classes((a, b, Declaration("a")), "pkg", [cls["a"], cls["b"]])
