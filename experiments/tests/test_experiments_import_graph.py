"""The experiments' import graph has no circle: no module imports, through any chain of imports
(those under ``TYPE_CHECKING`` included), a module that imports it.

The graph is read from the sources (ast), one edge per import a module writes: ``from .a import b``
is an edge to the module ``a.b`` when there is one, else to ``a``; ``import a.b`` to ``a.b``.
"""

import ast
from pathlib import Path

import cfm_experiments

PACKAGE = Path(cfm_experiments.__file__).parent


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module name -> the package's modules it imports, for every ``*.py`` under ``root``."""
    files = {}
    for path in root.rglob("*.py"):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in files.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = here[: len(here) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                targets |= {f"{module}.{a.name}" if f"{module}.{a.name}" in files else module for a in node.names}
        graph[name] = {t for t in targets if t in files and t != name}
    return graph


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``graph`` (its modules in import order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done (no circle through it)
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (circle := visit(nxt)):
                return circle
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (circle := visit(node)):
            return circle
    return None


def test_the_experiments_import_no_module_that_imports_them():
    graph = import_graph(PACKAGE, "cfm_experiments")
    assert len(graph) > 50 and "cfm_experiments.verdicts" in graph["cfm_experiments.protocol"]
    assert "cfm_experiments.protocol" in graph["cfm_experiments.rendering"]
    circle = find_circle(graph)
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_a_planted_circle_is_found(tmp_path):
    """Three modules importing round (one under TYPE_CHECKING, one through a subpackage's relative
    import) are a circle; the same without the closing import is none."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "sub" / "__init__.py").write_text("")
    (tmp_path / "a.py").write_text("from .sub import b\n")
    (tmp_path / "sub" / "b.py").write_text("import pkg.c\nimport os\n")
    (tmp_path / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import X\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.c"} and graph["pkg.c"] == {"pkg.a"}
    assert find_circle(graph) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]
    (tmp_path / "c.py").write_text("X = 1\n")
    assert find_circle(import_graph(tmp_path, "pkg")) is None
