"""Griffe extension: turn the docstrings' Sphinx roles into mkdocstrings cross-references.

``:class:`DiscreteAdjoint```, ``:func:`~cfm_jax.forward```, ``:mod:`.memory``` and the like are
resolved in the scope of the object whose docstring holds them (its members, its module's imports,
then its parents, as Python would), and rewritten as ``[`name`][full.path]``. A target outside
cfm_jax (``:func:`jax.grad```) becomes plain code. A cfm_jax target that cannot be resolved is
a warning, so ``mkdocs build --strict`` fails on it; a resolved one that the site does not
document fails there too (autorefs reports it). A target written by its implementation path
(``:func:`cfm_jax._qmc.sobol_normal```) is shown and linked by its public name
(``cfm_jax.sobol_normal``), so the site never names a private module.
"""

from __future__ import annotations

import logging
import re

import griffe

_ROLE = re.compile(r":(?:py:)?(class|func|meth|mod|attr|data|obj|exc):`(~?)([^`]+)`")
logger = logging.getLogger("mkdocs.plugins.cfm_jax_roles")


def _resolve(obj: griffe.Object, target: str) -> str | None:
    """Full path of ``target`` as seen from ``obj``; None when it is not cfm_jax's."""
    if target.startswith("."):  # relative to the enclosing package (Sphinx's leading-dot form)
        module = obj if obj.is_module else obj.module
        package = module if module.is_init_module else module.parent
        dots = len(target) - len(target.lstrip("."))
        for _ in range(dots - 1):
            assert package is not None, target  # more leading dots than enclosing packages
            package = package.parent
        assert package is not None, target
        return f"{package.path}.{target.lstrip('.')}"
    head = target.split(".")[0]
    if head == "cfm_jax":
        return target
    try:
        first = obj.resolve(head) if head else None
    except griffe.NameResolutionError:
        first = None
    if first is None:
        if head in {"jax", "jnp", "np", "numpy", "eqx", "equinox", "diffrax", "optax", "ott", "scipy"}:
            return None
        # methods and attributes named from inside their class (``:meth:`paper```)
        owner = obj if obj.is_class else obj.parent
        while owner is not None and not owner.is_module:
            if head in owner.all_members:
                return f"{owner.path}.{target}"
            owner = owner.parent
        raise griffe.NameResolutionError(target)
    rest = target[len(head) :]
    return first + rest if first.startswith("cfm_jax") else None


def _is_private(path: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in path.split("."))


def public_paths(pkg: griffe.Module) -> dict[str, str]:
    """{implementation path: public path} for every name cfm_jax or one of its public submodules
    re-exports, through chains of re-exports (``cfm_jax._fields.AbstractField`` and
    ``cfm_jax._fields.base.AbstractField`` both map to ``cfm_jax.AbstractField``)."""
    modules = [pkg] + [
        m for name, m in pkg.members.items() if not name.startswith("_") and not m.is_alias and m.is_module
    ]
    public: dict[str, str] = {}
    for module in modules:
        exported = set(module.exports or ())
        for name, member in module.members.items():
            if name.startswith("_") or not member.is_alias or (exported and name not in exported):
                continue
            target: griffe.Object | griffe.Alias | None = member
            while isinstance(target, griffe.Alias):
                path = target.target_path
                # the shortest public path wins (cfm_jax.X over cfm_jax.sub.X)
                if path not in public or public[path].count(".") > member.path.count("."):
                    public[path] = member.path
                try:
                    target = pkg.modules_collection.get_member(path)
                except (KeyError, ValueError):
                    target = None
    return public


def _rewrite(obj: griffe.Object, public: dict[str, str]) -> None:
    docstring = obj.docstring
    if docstring is None or ":" not in docstring.value:
        return

    def replace(match: re.Match) -> str:
        role, tilde, target = match.groups()
        target = target.strip()
        shown = target.split(".")[-1] if tilde else target.lstrip(".")
        try:
            path = _resolve(obj, target)
        except griffe.NameResolutionError:
            logger.warning("%s: cannot resolve the cross-reference %s", obj.path, match.group(0))
            return f"`{shown}`"
        if path is None or (role == "mod" and path.count(".") > 1):
            return f"`{shown}`"  # outside cfm_jax, or an implementation module (documented by its names)
        if _is_private(path) and path in public:
            path = public[path]
            shown = path.split(".")[-1] if tilde else path
        return f"[`{shown}`][{path}]"

    docstring.value = _ROLE.sub(replace, docstring.value)


def _walk(obj: griffe.Object, seen: set[str], public: dict[str, str]) -> None:
    if obj.path in seen:
        return
    seen.add(obj.path)
    _rewrite(obj, public)
    for member in obj.members.values():
        if not isinstance(member, griffe.Alias):
            _walk(member, seen, public)


class SphinxRoles(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        if pkg.path == "cfm_jax":
            _walk(pkg, set(), public_paths(pkg))
