"""The documentation site: the API pages list exactly the public names; the strict build passes offline;
the maths renders; the links name public paths; the code blocks name live public names (they run,
and print what their pages show, in experiments/tests/test_doc_examples.py). The site documents both
distributions, the library and its experiments, so its tests run where both are installed: here.

The API reference is the ``::: identifier`` entries of ``docs/api/*.md`` (mkdocstrings). Public
names are ``cfm_jax.__all__`` and the ``__all__`` of every public submodule listed there (each name
lives in one of them), and the experiments package's; the pages have one entry per public name, by
its public path, and no other (a deprecated or private name has none). The strict build
(``mkdocs build --strict``: a broken link, an unresolved cross-reference or a docstring role that
does not resolve is an error) needs the ``docs`` extra; without it the tests that need the site are
skipped, except in CI, where a missing extra is a failure. The site is built once for the module,
and only by the slow tests (``pytest -m slow``, CI's slow step): the build takes a dozen seconds.
On the built HTML, without a browser: no TeX-like maths outside maths delimiters and code
(``n^{-1/2}``, ``δ_{z_j}``, ``w_j`` show raw), and no link to, or naming, a private module.
``docs/check_site.py`` (also slow) looks at the built site in headless Chromium.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import cfm_jax

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api"
DOCS = ROOT / "docs"

# docs/check_site.py (a script, not a module of the package) holds the TeX detector the browser
# check uses too
_spec = importlib.util.spec_from_file_location("check_site", DOCS / "check_site.py")
assert _spec is not None and _spec.loader is not None
check_site = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_site)
_ENTRY = re.compile(r"^::: (\S+)\s*$", re.M)
_SCALAR = (str, bytes, int, float, bool, type(None))


def _resolve(path: str):
    """The object at a dotted public path ``cfm_jax.a.b``: attribute access from the package."""
    head, *rest = path.split(".")
    obj = importlib.import_module(head)
    for name in rest:
        obj = getattr(obj, name)
    return obj


def api_entries() -> dict[str, str]:
    """{identifier: page} for every ``::: identifier`` in docs/api/*.md."""
    entries: dict[str, str] = {}
    for page in sorted(API.glob("*.md")):
        for ident in _ENTRY.findall(page.read_text()):
            assert ident not in entries, f"{ident} has two entries ({entries[ident]}, {page.name})"
            entries[ident] = page.name
    return entries


def public_names() -> dict[str, object]:
    """{public path: object}: cfm_jax.__all__ and each public submodule's __all__, and the experiments
    package's __all__."""
    import cfm_experiments

    names = {}
    for name in cfm_jax.__all__:
        obj = getattr(cfm_jax, name)
        names[f"cfm_jax.{name}"] = obj
        if isinstance(obj, types.ModuleType):
            for sub in getattr(obj, "__all__", ()):
                names[f"cfm_jax.{name}.{sub}"] = getattr(obj, sub)
    for name in cfm_experiments.__all__:
        names[f"cfm_experiments.{name}"] = getattr(cfm_experiments, name)
    return names


def public_paths() -> set[str]:
    """The paths the API pages must list, each once: every public name, the public modules included."""
    return set(public_names()) | {"cfm_experiments"}


def unlisted_and_extra(entries: dict[str, str], public: set[str]) -> tuple[list[str], list[str]]:
    """(public paths with no entry, entries that are not public paths)."""
    return sorted(public - set(entries)), sorted(set(entries) - public)


def test_api_pages_list_exactly_the_public_names():
    unlisted, extra = unlisted_and_extra(api_entries(), public_paths())
    assert not unlisted, f"public names without an entry in docs/api/*.md: {unlisted}"
    assert not extra, f"entries in docs/api/*.md that are not public names: {extra}"


def test_every_public_name_lives_in_one_place():
    """No object is public under two paths (a module and a name of the same value aside): a name is the
    root's or a subpackage's, not both."""
    seen: dict[int, str] = {}
    twice = []
    for path, obj in public_names().items():
        if isinstance(obj, (types.ModuleType, *_SCALAR)):
            continue
        if id(obj) in seen:
            twice.append((seen[id(obj)], path))
        seen.setdefault(id(obj), path)
    assert not twice, twice


def test_api_entries_resolve_through_public_paths():
    """Every entry names a live object by a public path (never a private module or name)."""
    for ident in api_entries():
        assert ident.split(".")[0] in ("cfm_jax", "cfm_experiments"), ident
        assert not any(p.startswith("_") for p in ident.split(".")), ident
        _resolve(ident)


def test_the_exact_check_catches_a_missing_and_an_extra_entry():
    """The check fails when an entry is removed (a root name, a subpackage's) and when one is added
    for a name that is not public (a deprecated alias, a private helper)."""
    entries, public = api_entries(), public_paths()
    assert unlisted_and_extra(entries, public) == ([], [])
    for ident in ("cfm_jax.forward", "cfm_jax.stochastic.simulate", "cfm_jax.ogd.run_ogd", "cfm_jax.stats"):
        assert unlisted_and_extra({k: v for k, v in entries.items() if k != ident}, public) == ([ident], [])
    for ident in ("cfm_jax.CFM", "cfm_jax.run_ogd", "cfm_jax.chaos.program_count"):
        assert unlisted_and_extra({**entries, ident: "planted.md"}, public) == ([], [ident])


def _require_mkdocs():
    if os.environ.get("CI"):
        import mkdocs  # noqa: F401  (CI installs the docs extra: its absence is a failure)
    else:
        pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")


def build_site(site: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` into ``site`` (the notebooks are converted, not executed)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_MKDOCS_2_WARNING="1")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


# a resource the browser would fetch from elsewhere (links to other sites are fine: they are not loaded)
_REMOTE_LOAD = re.compile(
    r"<(?:script|img|iframe)\b[^>]*\bsrc=[\"'](?:https?:)?//|<link\b[^>]*\bhref=[\"'](?:https?:)?//[^>]*>", re.I
)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built once (strictly) for the tests of this module."""
    _require_mkdocs()
    site = tmp_path_factory.mktemp("docs") / "site"
    proc = build_site(site)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-6000:]
    return site


def _pages(site: Path) -> dict[str, str]:
    """{page URL relative to the site ("api/forward/"): HTML}."""
    return {
        p.relative_to(site).as_posix()[: -len("index.html")]: p.read_text(errors="replace")
        for p in site.rglob("*.html")
    }


@pytest.mark.slow  # the strict site build (mkdocs, every page and notebook converted)
def test_strict_build_offline(site):
    html = _pages(site)
    remote = [
        f"{page}: {m.group(0)[:120]}"
        for page, text in html.items()
        for m in _REMOTE_LOAD.finditer(text)
        if 'rel="canonical"' not in m.group(0)
    ]
    assert not remote, remote[:10]
    assert (site / "_mathjax" / "MathJax.js").is_file()
    # every API entry is rendered with its anchor, every docstring role became a link or code
    all_html = "\n".join(html.values())
    for ident in api_entries():
        assert f'id="{ident}"' in all_html, ident
    assert not re.search(r":(class|func|mod|meth|attr|data|obj|exc):`", all_html)
    # notebooks with their figures: the library's, and the experiments' (their folder in the site too)
    for folder, name in [("notebooks", "quickstart")] + [
        ("experiments/notebooks", n) for n in ("chaos", "ogd", "sync", "paper", "constants")
    ]:
        page = (site / folder / name / "index.html").read_text()
        assert "data:image/png;base64" in page, name


# --- maths that renders ------------------------------------------------------------------------

_HEADING = re.compile(r'<h[1-6][^>]*\bid="([^"]+)"')


def undelimited_tex_by_section(page: str, html: str) -> dict[str, list[str]]:
    """{"page#heading id": TeX-like fragments outside maths and code} for one built page; text
    before the first heading is under "page#"."""
    starts = [(0, "")] + [(m.start(), m.group(1)) for m in _HEADING.finditer(html)]
    found: dict[str, list[str]] = {}
    for (start, ident), (end, _) in zip(starts, starts[1:] + [(len(html), "")]):
        hits = check_site.undelimited_tex(check_site.visible_text(html[start:end]))
        if hits:
            found.setdefault(f"{page}#{ident}", []).extend(hits)
    return found


@pytest.mark.parametrize(
    "html,raw",
    [
        ("<p>falls like n^{-1/2} in n</p>", True),
        ("<p>μ = Σ_j w_j δ_{z_j} on R^d</p>", True),
        ("<li>weights w_j sum to one</li>", True),
        ("<p>the bound's e^{2‖Q‖‖K‖R²}</p>", True),
        (r"<p>\frac{a}{b} and \sqrt{2}</p>", True),
        ("<td>κ(1) = s_a² s_b²/2</td>", True),
        ("<p>tokens in R^d</p>", True),
        (r'<p>falls like <span class="arithmatex">\(n^{-1/2}\)</span></p>', False),
        ('<div class="arithmatex">\\[\n\\frac{dx}{ds} = V\n\\]</div>', False),
        ("<p>a notebook's $n^{-1/2}$ and $$\\sum_j w_j$$</p>", False),
        ("<p><code>n^{-1/2}</code>, <code>x_0</code></p><pre>θ_{k+1} = θ_k</pre>", False),
        ('<script type="math/tex">w_j</script><style>a_b{}</style>', False),
        ('<div class="clipboard-copy-txt">x_{l+1} = x_l</div>', False),  # a notebook cell's hidden copy
        ("<p>cfm_jax, max_steps, n_ref=16, 2^14 entries, W1 and L²</p>", False),
    ],
)
def test_undelimited_tex_detector(html, raw):
    """The check flags maths written outside delimiters and nothing inside maths spans or code."""
    assert bool(check_site.undelimited_tex(check_site.visible_text(html))) is raw


@pytest.mark.slow  # the strict site build (mkdocs, every page and notebook converted)
def test_no_undelimited_tex_in_the_site(site):
    """No page shows raw TeX: topic pages, notebooks' markdown and API docstrings alike (except the
    sections of check_site.PENDING_TEX, whose text is written outside docs/)."""
    found: dict[str, list[str]] = {}
    for page, html in _pages(site).items():
        found.update(undelimited_tex_by_section(page, html))
    raw = {section: hits[:3] for section, hits in found.items() if section not in check_site.PENDING_TEX}
    assert not raw, "undelimited maths (put it between $...$): " + "; ".join(f"{k}: {v}" for k, v in raw.items())


@pytest.mark.slow  # the strict site build (mkdocs, every page and notebook converted)
def test_tex_check_fails_on_a_planted_fragment(site):
    """An undelimited n^{-1/2} in a rendered page is caught, in the section it sits in."""
    html = (site / "getting-started" / "index.html").read_text()
    anchor = '<h2 id="the-commands"'
    assert anchor in html
    planted = html.replace(anchor, "<p>deviations fall like n^{-1/2}</p>" + anchor, 1)
    assert "getting-started/#is-the-exact-limit-within-reach-of-a-sample" not in undelimited_tex_by_section(
        "getting-started/", html
    )
    found = undelimited_tex_by_section("getting-started/", planted)
    assert list(found) == ["getting-started/#is-the-exact-limit-within-reach-of-a-sample"]
    assert ["n^{-1/2}" in hit for hit in found["getting-started/#is-the-exact-limit-within-reach-of-a-sample"]] == [
        True
    ]


# --- parameter tables with their types ----------------------------------------------------------

#: API entries whose parameter table has rows with no type: their constructor or function has
#: unannotated parameters, or a docstring documents two parameters in one line ("mu, nu:"), in
#: cfm_jax/. Fixed there (annotations), then removed from here.
PENDING_UNTYPED: frozenset[str] = frozenset()
_ROW = re.compile(r'<tr class="doc-section-item">\s*<td>\s*<code>([^<]*)</code>\s*</td>\s*<td>(.*?)</td>', re.S)


def untyped_parameters(html: str) -> dict[str, list[str]]:
    """{API entry id: names of its parameter-table rows whose type cell is empty}."""
    starts = [(m.start(), m.group(1)) for m in re.finditer(r'<h[1-6][^>]*\bid="(cfm_jax[^"]*)"', html)]
    found = {}
    for (start, ident), (end, _) in zip(starts, starts[1:] + [(len(html), "")]):
        if names := [name for name, cell in _ROW.findall(html[start:end]) if not cell.strip()]:
            found[ident] = names
    return found


def test_untyped_parameter_check_catches_an_empty_type_cell():
    row = '<tr class="doc-section-item"><td><code>{}</code></td><td>{}</td><td>d</td></tr>'
    html = (
        '<h3 id="cfm_jax.f">f</h3><table>' + row.format("x", "<code>Array</code>") + row.format("y", " ") + "</table>"
    )
    assert untyped_parameters(html) == {"cfm_jax.f": ["y"]}
    assert untyped_parameters(html.replace("<td> </td>", "<td><code>int</code></td>")) == {}


@pytest.mark.slow  # the strict site build (mkdocs, every page and notebook converted)
def test_api_parameter_tables_have_types(site):
    """Every parameter of the API reference shows its type (except the entries of PENDING_UNTYPED)."""
    found = {}
    for page, html in _pages(site).items():
        if page.startswith("api/"):
            found.update(untyped_parameters(html))
    assert not {k: v for k, v in found.items() if k not in PENDING_UNTYPED}


# --- links name public paths -------------------------------------------------------------------

_LINK = re.compile(r"<a\b([^>]*)>(.*?)</a>", re.S)
_PRIVATE = re.compile(r"cfm_jax(?:\.\w+)*\._[A-Za-z]")  # a private module or name under cfm_jax


def private_links(html: str) -> list[str]:
    """Links whose target, tooltip or text names a private module of cfm_jax (``cfm_jax._solve``)."""
    bad = []
    for m in _LINK.finditer(html):
        attrs, text = m.group(1), re.sub(r"<[^>]+>", "", m.group(2))
        href = re.search(r'href="([^"]*)"', attrs)
        title = re.search(r'title="([^"]*)"', attrs)
        for part in (href.group(1) if href else "", title.group(1) if title else "", text):
            if _PRIVATE.search(part) or re.search(r"(^|/)_[a-z]\w*/", part.split("#")[0]):
                bad.append(" ".join(m.group(0).split())[:160])
                break
    return bad


def test_private_link_check_catches_a_private_link():
    assert private_links('<a href="#cfm_jax.forward" title="cfm_jax.forward"><code>forward</code></a>') == []
    assert private_links('<a href="#cfm_jax._solve.forward">forward</a>')
    assert private_links('<a href="#cfm_jax.sobol_normal"><code>cfm_jax._qmc.sobol_normal</code></a>')
    assert private_links(
        '<a href="#cfm_jax.AbstractCFM" title="cfm_jax.AbstractCFM (cfm_jax._paths.AbstractCFM)">x</a>'
    )
    assert private_links('<a href="../_adjoint/memory/">memory</a>')
    assert (
        private_links('<a href="../api/forward/#cfm_jax.forward">x</a> <a href="../../assets/_mkdocstrings.css">') == []
    )


@pytest.mark.slow  # the strict site build (mkdocs, every page and notebook converted)
def test_api_links_are_public(site):
    """No link of the site points at, or names, a private module (cfm_jax._measures, ...)."""
    bad = {page: links[:3] for page, html in _pages(site).items() if (links := private_links(html))}
    assert not bad, bad


# --- the code blocks name live public names ---------------------------------------------------


def python_blocks(page: Path) -> list[str]:
    """The ```python blocks of a markdown page, in order."""
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), re.S | re.M)


@pytest.mark.parametrize("page", ["README.md"] + sorted(p.name for p in DOCS.glob("*.md")))
def test_code_blocks_use_live_public_names(page):
    """Every ``cfm_jax.X`` the blocks name exists (cheap: parsing only; experiments/tests/test_doc_examples.py
    runs them)."""
    import ast

    for block in python_blocks((ROOT if page == "README.md" else DOCS) / page):
        tree = ast.parse(block)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                path, inner = [node.attr], node.value
                while isinstance(inner, ast.Attribute):
                    path.append(inner.attr)
                    inner = inner.value
                if isinstance(inner, ast.Name) and inner.id == "cfm_jax":
                    dotted = "cfm_jax." + ".".join(reversed(path))
                    obj = cfm_jax
                    for name in reversed(path):
                        if isinstance(obj, types.ModuleType) or hasattr(obj, name):
                            obj = getattr(obj, name, None)
                        else:
                            break  # an attribute of a result (sol.x1): not checked here
                    assert obj is not None, f"{page}: {dotted} does not exist"
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cfm_jax"):
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name) or importlib.util.find_spec(f"{node.module}.{alias.name}"), (
                        f"{page}: from {node.module} import {alias.name}"
                    )


@pytest.mark.slow
def test_site_in_headless_chromium(site, tmp_path):
    """The pages of docs/check_site.py render in Chromium (maths typeset, no raw TeX, no console error)."""
    if shutil.which("chromium") is None and shutil.which("chromium-browser") is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    check = subprocess.run(
        [sys.executable, str(DOCS / "check_site.py"), "--site", str(site), "--screenshots", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert check.returncode == 0, check.stdout[-4000:] + check.stderr[-4000:]
    assert len(list(tmp_path.glob("site_*.png"))) == len(check_site.PAGES)
