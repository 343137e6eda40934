"""The package layout: the library and its experiments apart, imports only going down the layers, no
private helper crossing a module, every module with its own test file, no module over 450 lines.

Two packages. ``cfm_jax`` is the numerical library; its layers (low to high; a module may import its
own layer and the ones below):

    _arguments, _deprecations, _validation, stats, _qmc, _random, _compilation → _measures → _fields → _paths
    → _flow (_gaussian_limit, _regime) → _adjoint → _solve → _gradients
    → (ogd, _wasserstein, _populations, _streams, _sharding, distributed, _control, _chaos, chaos)

``stochastic`` sits beside them: it may use the layers up to ``_fields`` (and stats), and only the
package root uses it. Implementation modules are private (``_name``); the public API is
``cfm_jax.__all__`` and the public subpackages' ``__all__``. The library imports no plotting or
progress package and nothing of the experiments.

``cfm_experiments`` (the papers' experiments and the ``cfm-jax`` command) is a second distribution
in ``experiments/`` (``experiments/pyproject.toml``, its tests in ``experiments/tests/``): it sits
on top and uses ``cfm_jax``'s public names only, and the library's tests import nothing of it.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "cfm_jax"
APP = ROOT / "experiments" / "cfm_experiments"
APP_TESTS = ROOT / "experiments" / "tests"
#: the longest module either package may hold
MAX_LINES = 450

LAYERS = [
    ("_arguments", "_deprecations", "_validation", "stats", "_qmc", "_random", "_compilation"),
    ("_measures",),
    ("_fields",),
    ("_paths",),
    ("_flow", "_gaussian_limit", "_regime"),
    ("_adjoint",),
    ("_solve",),
    ("_gradients",),
    (
        "ogd",
        "_wasserstein",
        "_populations",
        "_streams",
        "_sharding",
        "distributed",
        "_control",
        "_chaos",
        "chaos",
    ),
]
RANK = {name: i for i, group in enumerate(LAYERS) for name in group}
STOCHASTIC_MAY_USE = {"_arguments", "_validation", "stats", "_random", "_measures", "_fields"}
PUBLIC_SUBPACKAGES = ("chaos", "distributed", "ogd", "stats", "stochastic")


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
            bad.append(f"line {line}: {me} imports stochastic")
            continue
        if target in RANK and RANK[target] > RANK[me]:
            bad.append(f"line {line}: {me} (layer {RANK[me]}) imports {target} (layer {RANK[target]})")
    assert not bad, f"{path.relative_to(ROOT)}: " + "; ".join(bad)


def _test_file_for(path: Path) -> str:
    rel = path.relative_to(PKG).with_suffix("")
    parts = [p.lstrip("_") for p in rel.parts if p != "__init__"]
    return "test_" + "_".join(parts) + ".py"


EXEMPT = {"_arguments"}  # the static argument checks, tested through their callers


@pytest.mark.parametrize(
    "path",
    [p for p in _modules() if p.stem not in EXEMPT and p.name != "__init__.py"],
    ids=lambda p: str(p.relative_to(PKG)),
)
def test_every_module_has_its_test_file(path):
    name = _test_file_for(path)
    assert (ROOT / "tests" / name).exists(), f"{path.relative_to(ROOT)} has no tests/{name}"


def test_nothing_points_outside_the_repository():
    """No code, test, doc or notebook cites the shared SPEC or an issue number."""
    import re

    hits = []
    for p in [
        *PKG.rglob("*.py"),
        *(ROOT / "tests").rglob("*.py"),
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "notebooks").glob("*.ipynb"),
        *(ROOT / "experiments").rglob("*.py"),
        *(ROOT / "experiments").rglob("*.ipynb"),
        *(ROOT / "experiments").glob("*.md"),
        ROOT / "README.md",
        *(ROOT / "benchmarks").rglob("*.py"),
    ]:
        if p == Path(__file__):
            continue
        text = p.read_text()
        for pat in (r"SPEC\.md", r"SPEC §", r"shared folder", r"\(issue \d+\)", r"\bissue \d+\b"):
            if re.search(pat, text):
                hits.append(f"{p.relative_to(ROOT)}: {pat}")
    assert not hits, hits


def test_implementation_modules_are_private():
    """Every module under cfm_jax is private (``_name``) except the public subpackages and the root."""
    public_ok = set(PUBLIC_SUBPACKAGES) | {"__init__"}
    bad = []
    for path in _modules():
        rel = path.relative_to(PKG).with_suffix("").parts
        if any(part.startswith("_") for part in rel[:-1]):
            continue  # modules inside a private package
        name = rel[-1]
        if not name.startswith("_") and not (len(rel) == 1 and name in public_ok):
            bad.append(str(path.relative_to(PKG)))
    assert not bad, f"make these implementation modules private (_name.py): {bad}"


def test_public_names_are_listed_once_and_resolve():
    """``cfm_jax.__all__`` has no duplicates, every name resolves, no implementation helper leaks, and no
    public name shadows a JAX transformation with another meaning."""
    import jax

    import cfm_jax

    names = cfm_jax.__all__
    assert len(names) == len(set(names))
    for name in names:
        getattr(cfm_jax, name)
    leaked = {
        "finish",
        "model_grads",
        "system_vjp",
        "check_inputs",
        "solve",
        "prepare",
        "integrate",
        "loop",
        "stacked_velocity",
        "flow",
        "adjoint",
        "fields",
        "measures",
        "paths",
        "gradients",
    }
    assert not leaked & set(names)
    shadowing = {n for n in names if n in dir(jax) and callable(getattr(jax, n)) and n != "value_and_grad"}
    assert not shadowing, shadowing
    for sub in PUBLIC_SUBPACKAGES:
        module = getattr(cfm_jax, sub)
        for name in getattr(module, "__all__", ()):
            getattr(module, name)


def _type_checking_imports(init: Path) -> dict[str, str]:
    """{name: module it is imported from, relative to the package} of the ``if TYPE_CHECKING:`` block."""
    tree = ast.parse(init.read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    found = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1, ast.unparse(node)
        for a in node.names:
            found[a.asname or a.name] = node.module or a.name  # `from . import ogd`: the subpackage itself
    return found


def test_the_root_lists_its_public_names_once():
    """``cfm_jax.__all__`` is made from ``_EXPORTS`` alone, and the ``TYPE_CHECKING`` imports (for static
    analysers) name exactly the names of ``_EXPORTS``, each from the module ``_EXPORTS`` gives; deprecated
    names are in neither."""
    import cfm_jax

    assert cfm_jax.__all__ == sorted(cfm_jax._EXPORTS, key=str.lower)
    assert _type_checking_imports(PKG / "__init__.py") == cfm_jax._EXPORTS
    assert not set(cfm_jax._DEPRECATED) & set(cfm_jax._EXPORTS)


def test_the_experiments_list_their_public_names_once():
    """The same for the experiments' root, read from its source (the library's tests import nothing
    of the experiments): ``__all__`` is ``sorted(_EXPORTS)`` and the ``TYPE_CHECKING`` imports match."""
    tree = ast.parse((APP / "__init__.py").read_text())
    assigned = {
        t.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    exports = ast.literal_eval(assigned["_EXPORTS"])
    assert ast.unparse(assigned["__all__"]) == "sorted(_EXPORTS)"
    assert _type_checking_imports(APP / "__init__.py") == exports


def test_the_type_checking_check_catches_a_missing_or_stale_import(tmp_path):
    import cfm_jax

    text = (PKG / "__init__.py").read_text()
    for planted in (
        text.replace("        PallasAttention,\n", ""),  # a public name static analysers do not see
        text.replace(
            "from ._solve import default_adjoint, forward", "from ._solve import default_adjoint, forward, prepare"
        ),
    ):
        assert planted != text
        (tmp_path / "__init__.py").write_text(planted)
        assert _type_checking_imports(tmp_path / "__init__.py") != cfm_jax._EXPORTS


def test_no_attribute_probing():
    """Behaviour is chosen by types, never by hasattr/getattr probing of objects (argparse namespaces
    aside, where the CLI reads options a subcommand may not define)."""
    bad = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("hasattr", "getattr")
            ):
                target = node.args[0] if node.args else None
                if isinstance(target, ast.Name) and target.id == "args":
                    continue
                if path.name == "_deprecations.py":  # a deprecated name's value, looked up by its name (as the root's)
                    continue
                bad.append(f"{path.relative_to(PKG)}:{node.lineno}")
    assert not bad, bad


def test_modules_are_abstract_or_final():
    """Equinox's pattern: a concrete Module is never subclassed; only abstract ones (named Abstract*) are."""
    import inspect

    import equinox as eqx

    import cfm_jax

    classes = set()
    for name in cfm_jax.__all__:
        obj = getattr(cfm_jax, name)
        if inspect.isclass(obj) and issubclass(obj, eqx.Module):
            classes.add(obj)
    bad = []
    for cls in classes:
        for base in cls.__mro__[1:]:
            if (
                base.__module__.startswith("cfm_jax")
                and issubclass(base, eqx.Module)
                and not base.__name__.startswith("Abstract")
            ):
                bad.append(f"{cls.__name__} subclasses concrete {base.__name__}")
    assert not bad, bad


def _app_modules():
    return sorted(APP.rglob("*.py"))


def _imported_modules(path: Path):
    """(dotted module, imported names, line) of every absolute import of ``path``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            yield node.module, [a.name for a in node.names], node.lineno
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, [], node.lineno


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_library_imports_no_plotting_progress_or_experiments(path):
    bad = [
        f"line {line}: {module}"
        for module, _, line in _imported_modules(path)
        if module.split(".")[0] in ("matplotlib", "tqdm", "cfm_experiments")
    ]
    assert not bad, f"{path.relative_to(ROOT)}: " + "; ".join(bad)


def test_importing_and_using_the_library_loads_no_plotting_or_progress_package():
    import subprocess
    import sys

    code = (
        "import sys, jax, cfm_jax\n"
        "m = cfm_jax.Transformer.init(jax.random.key(0), 2, heads=1, mlp_width=0, layers=1)\n"
        "cfm_jax.forward(m, jax.numpy.ones((1, 2)), jax.numpy.ones((3, 2)))\n"
        "for sub in ('chaos', 'ogd', 'stats', 'stochastic', 'distributed'):\n"
        "    getattr(cfm_jax, sub)\n"
        "print(sorted({n.split('.')[0] for n in sys.modules} & {'matplotlib', 'tqdm', 'cfm_experiments'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


@pytest.mark.parametrize("path", _app_modules(), ids=lambda p: str(p.relative_to(APP)))
def test_experiments_use_only_public_library_names(path):
    bad = []
    for module, names, line in _imported_modules(path):
        parts = module.split(".")
        if parts[0] != "cfm_jax":
            continue
        if any(p.startswith("_") for p in parts[1:]):
            bad.append(f"line {line}: private module {module}")
        private = [n for n in names if n.startswith("_") and n != "__version__"]
        if private:
            bad.append(f"line {line}: private {private} from {module}")
    assert not bad, f"{path.relative_to(ROOT)}: " + "; ".join(bad)


@pytest.mark.parametrize("path", _modules() + _app_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_the_size_limit(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines (> {MAX_LINES}): split it"


#: packages of the experiments whose modules share one test file: the declarations, data of one
#: shape per command, held to their parts by one parametrised test.
SHARED_TEST_FILE = {"declarations": "test_experiments_declarations.py"}


@pytest.mark.parametrize(
    "path", [p for p in _app_modules() if p.name not in ("__init__.py", "__main__.py")], ids=lambda p: p.name
)
def test_every_experiments_module_has_its_test_file(path):
    rel = path.relative_to(APP).with_suffix("").parts
    name = "test_experiments_" + "_".join(p.lstrip("_") for p in rel if p != "__init__") + ".py"
    name = SHARED_TEST_FILE.get(rel[0], name) if len(rel) > 1 else name
    assert (APP_TESTS / name).exists(), f"{path.relative_to(ROOT)} has no experiments/tests/{name}"


@pytest.mark.parametrize("path", sorted((ROOT / "tests").rglob("*.py")), ids=lambda p: p.name)
def test_the_librarys_tests_import_nothing_of_the_experiments(path):
    """The library's tests run with the library alone installed: the experiments' tests live beside
    their package (``experiments/tests/``)."""
    bad = [
        f"line {line}: {module}"
        for module, _, line in _imported_modules(path)
        if module.split(".")[0] in ("cfm_experiments", "_planted", "_tiny_rates")
    ]
    assert not bad, f"{path.relative_to(ROOT)}: " + "; ".join(bad)


def test_the_library_wheel_holds_no_experiments():
    """The library's distribution packages ``cfm_jax`` only, with no experiments' extra or command;
    the experiments' own distribution owns the command and depends on a range of the library."""
    import tomllib

    lib = tomllib.loads((ROOT / "pyproject.toml").read_text())
    app = tomllib.loads((ROOT / "experiments" / "pyproject.toml").read_text())["project"]
    assert lib["tool"]["setuptools"]["packages"]["find"]["include"] == ["cfm_jax*"]
    project = lib["project"]
    assert "scripts" not in project and "experiments" not in project.get("optional-dependencies", {})
    assert not {"matplotlib", "tqdm"} & {d.split(">")[0].split("=")[0] for d in project["dependencies"]}
    assert app["scripts"] == {"cfm-jax": "cfm_experiments.cli:main"}
    assert any(d.startswith("cfm_jax>=") and "<" in d for d in app["dependencies"])
