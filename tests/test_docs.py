"""The documentation site: every public name has an API entry; the strict build passes offline.

The API reference is the ``::: identifier`` entries of ``docs/api/*.md`` (mkdocstrings). Public
names are ``cfm_jax.__all__`` and the ``__all__`` of every public submodule listed there; a name
re-exported in several places is covered by one entry of the same object. The strict build
(``mkdocs build --strict``: a broken link, an unresolved cross-reference or a docstring role that
does not resolve is an error) needs the ``docs`` extra; without it the test is skipped, except in
CI, where a missing extra is a failure. ``docs/check_site.py`` (slow test) looks at the built site
in headless Chromium.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import cfm_jax

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api"
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
    """{public path: object}: cfm_jax.__all__ and each public submodule's __all__."""
    names = {}
    for name in cfm_jax.__all__:
        obj = getattr(cfm_jax, name)
        names[f"cfm_jax.{name}"] = obj
        if isinstance(obj, types.ModuleType):
            for sub in getattr(obj, "__all__", ()):
                names[f"cfm_jax.{name}.{sub}"] = getattr(obj, sub)
    return names


def missing_entries(entries: dict[str, str], names: dict[str, object]) -> list[str]:
    """Public names with no API entry of their own path or of the same (non-scalar) object."""
    documented = {id(_resolve(ident)) for ident in entries}
    missing = []
    for path, obj in names.items():
        if path in entries:
            continue
        if isinstance(obj, types.ModuleType):
            continue  # a module is covered by its names' entries
        if not isinstance(obj, _SCALAR) and id(obj) in documented:
            continue
        missing.append(path)
    return missing


def test_every_public_name_has_an_api_entry():
    missing = missing_entries(api_entries(), public_names())
    assert not missing, f"public names without an entry in docs/api/*.md: {missing}"


def test_api_entries_resolve_through_public_paths():
    """Every entry names a live object by a public path (never a private module or name)."""
    for ident in api_entries():
        assert ident.startswith("cfm_jax") and not any(p.startswith("_") for p in ident.split(".")), ident
        _resolve(ident)


def test_coverage_check_catches_a_missing_entry():
    """The check fails when an entry is removed: both a top-level name and a submodule-only one."""
    entries, names = api_entries(), public_names()
    for ident in ("cfm_jax.forward", "cfm_jax.stochastic.simulate", "cfm_jax.ogd.autodiff_value_and_grad"):
        assert ident in entries
        missing = missing_entries({k: v for k, v in entries.items() if k != ident}, names)
        assert ident in missing and all(names[m] is names[ident] for m in missing)  # re-exports of it too


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


def test_strict_build_offline(tmp_path):
    _require_mkdocs()
    site = tmp_path / "site"
    proc = build_site(site)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-6000:]
    html = {p: p.read_text(errors="replace") for p in site.rglob("*.html")}
    remote = [
        f"{p.relative_to(site)}: {m.group(0)[:120]}"
        for p, text in html.items()
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
    for name in ("quickstart", "chaos", "ogd", "sync", "paper", "constants"):  # notebooks with their figures
        page = (site / "notebooks" / name / "index.html").read_text()
        assert "data:image/png;base64" in page, name


@pytest.mark.slow
def test_site_in_headless_chromium(tmp_path):
    """Home, the forward and DiscreteAdjoint entries, a notebook and the theory render (maths, no console error)."""
    _require_mkdocs()
    if shutil.which("chromium") is None and shutil.which("chromium-browser") is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    site = tmp_path / "site"
    proc = build_site(site)
    assert proc.returncode == 0, proc.stderr[-6000:]
    check = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "check_site.py"), "--site", str(site), "--screenshots", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert check.returncode == 0, check.stdout[-4000:] + check.stderr[-4000:]
    assert len(list(tmp_path.glob("site_*.png"))) == 5
