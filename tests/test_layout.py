"""The package layout: imports only go down the layers, no private helper crosses a module, every
library module has its own test file.

Layers (low to high; a module may import its own layer and the ones below):

    _validation, stats, qmc → measures → fields → paths → flow (gaussian_limit) → adjoint → solve → gradients
    → (ogd, wasserstein, populations, streams, sharding, distributed, control, chaos)
    → experiments → cli

``stochastic`` sits beside them: it may use the layers up to ``fields`` (and stats), and only
the experiments, the CLI and the package root use it.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "cfm_jax"

LAYERS = [
    ("_validation", "stats", "qmc"),
    ("measures",),
    ("fields",),
    ("paths",),
    ("flow", "gaussian_limit"),
    ("adjoint",),
    ("solve",),
    ("gradients",),
    ("ogd", "wasserstein", "populations", "streams", "sharding", "distributed", "control", "chaos"),
    ("experiments",),
    ("cli", "__main__", "_demo"),
]
RANK = {name: i for i, group in enumerate(LAYERS) for name in group}
STOCHASTIC_MAY_USE = {"_validation", "stats", "measures", "fields"}


def _modules():
    return sorted(p for p in PKG.rglob("*.py") if p.name != "__init__.py" or p.parent != PKG)


def _top(path: Path) -> str:
    """The layer name of a module: its top-level package or module under cfm_jax."""
    rel = path.relative_to(PKG).with_suffix("")
    return rel.parts[0]


def _imports(path: Path):
    """(target top-level name, imported names, line) for every cfm_jax import of ``path``."""
    tree = ast.parse(path.read_text())
    pkg_parts = path.relative_to(PKG).parent.parts
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(pkg_parts[: len(pkg_parts) - (node.level - 1)])
                parts = base + (node.module.split(".") if node.module else [])
                if not parts:  # `from . import x` at the package root
                    for a in node.names:
                        yield a.name, [], node.lineno
                    continue
                yield parts[0], [a.name for a in node.names], node.lineno
            elif node.module and node.module.split(".")[0] == "cfm_jax":
                yield "<absolute cfm_jax>", [a.name for a in node.names], node.lineno
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "cfm_jax":
                    yield "<absolute cfm_jax>", [], node.lineno


def test_every_module_has_a_layer():
    unknown = sorted({_top(p) for p in _modules()} - set(RANK) - {"stochastic"})
    assert not unknown, f"assign these modules a layer in tests/test_layout.py: {unknown}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_imports_only_go_down(path):
    me = _top(path)
    bad = []
    for target, names, line in _imports(path):
        if target == "<absolute cfm_jax>":
            bad.append(f"line {line}: `import cfm_jax` inside the library")
            continue
        private = [n for n in names if n.startswith("_") and n != "__version__"]
        if private and target != me:
            bad.append(f"line {line}: private {private} imported from {target}")
        if me == "stochastic":
            if target not in STOCHASTIC_MAY_USE | {"stochastic"}:
                bad.append(f"line {line}: stochastic imports {target}")
            continue
        if target == "stochastic":
            if RANK[me] < RANK["experiments"]:
                bad.append(f"line {line}: {me} imports stochastic")
            continue
        if target in RANK and RANK[target] > RANK[me]:
            bad.append(f"line {line}: {me} (layer {RANK[me]}) imports {target} (layer {RANK[target]})")
    assert not bad, f"{path.relative_to(ROOT)}: " + "; ".join(bad)


def _test_file_for(path: Path) -> str:
    rel = path.relative_to(PKG).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return "test_" + "_".join(parts).lstrip("_") + ".py"


EXEMPT = {"__main__", "_validation", "_demo"}  # entry points and the input checks, tested through their callers


@pytest.mark.parametrize(
    "path", [p for p in _modules() if p.stem not in EXEMPT and p.name != "__init__.py"],
    ids=lambda p: str(p.relative_to(PKG)),
)
def test_every_module_has_its_test_file(path):
    name = _test_file_for(path)
    assert (ROOT / "tests" / name).exists(), f"{path.relative_to(ROOT)} has no tests/{name}"


def test_nothing_points_outside_the_repository():
    """No code, test, doc or notebook cites the shared SPEC or an issue number."""
    import re

    hits = []
    for p in [*PKG.rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *(ROOT / "docs").rglob("*.md"),
              *(ROOT / "notebooks").glob("*.ipynb"), ROOT / "README.md", *(ROOT / "benchmarks").rglob("*.py")]:
        if p == Path(__file__):
            continue
        text = p.read_text()
        for pat in (r"SPEC\.md", r"SPEC §", r"shared folder", r"\(issue \d+\)", r"\bissue \d+\b"):
            if re.search(pat, text):
                hits.append(f"{p.relative_to(ROOT)}: {pat}")
    assert not hits, hits
