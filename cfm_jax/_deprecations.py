"""Names kept for one release after a rename or a move: each access warns and says what replaced it.

A package lists its deprecated names in a table ``{old name: Deprecated(...)}`` and serves them
from its module ``__getattr__`` (PEP 562) through :func:`deprecated_attribute`; they are not in
its ``__all__`` nor in its API pages. The value is looked up on every access (never cached in the
module), so every use warns, with the warning pointing at the line that used the old name: the first
frame outside cfm_jax and equinox (which wraps a Module's properties). ``from package import old`` reads
the attribute twice (the import system's ``hasattr`` probe, then the binding): only the binding warns.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from typing import Any, NamedTuple


class Deprecated(NamedTuple):
    """An old name's value (``name`` in the module ``module``, an absolute module path) and the public
    name that replaces it (``use``, written as a user writes it)."""

    module: str
    name: str
    use: str


def _user_level() -> int:
    """``warnings.warn``'s ``stacklevel``, for a call of it in this function's caller, that names the
    first frame outside cfm_jax and equinox (counted as ``warnings`` counts: importlib's frames skipped)."""
    level, frame = 1, sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] in ("cfm_jax", "equinox"):
        frame = frame.f_back
        while (
            frame is not None and "importlib" in frame.f_code.co_filename and "_bootstrap" in frame.f_code.co_filename
        ):
            frame = frame.f_back
        level += 1
    return level


def _import_probe() -> bool:
    """Whether the first frame outside cfm_jax is the import system's ``hasattr`` probe of a
    ``from package import name`` (``_handle_fromlist``), which the binding of the name follows."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "cfm_jax":
        frame = frame.f_back
    return frame is not None and frame.f_code.co_name == "_handle_fromlist" and "importlib" in frame.f_code.co_filename


def deprecated_attribute(owner: str, old: str, entry: Deprecated) -> Any:
    """The value of the deprecated ``owner.old``, after a ``DeprecationWarning`` naming its replacement
    (once per use: not for the import system's probe before ``from owner import old`` binds it)."""
    if not _import_probe():
        warnings.warn(
            f"{owner}.{old} is deprecated and will be removed in the next release: use {entry.use}.",
            DeprecationWarning,
            stacklevel=_user_level(),
        )
    return getattr(importlib.import_module(entry.module), entry.name)


def warn_renamed(owner: str, old: str, new: str) -> None:
    """The ``DeprecationWarning`` of a renamed attribute ``owner.old`` (a property kept for one release)."""
    warnings.warn(
        f"{owner}.{old} is deprecated and will be removed in the next release: use {owner}.{new}.",
        DeprecationWarning,
        stacklevel=_user_level(),
    )


def warn_renamed_key(owner: str, old: str, new: str) -> None:
    """The ``DeprecationWarning`` of a renamed key ``old`` of the dict the function ``owner`` returns
    (read for one release)."""
    warnings.warn(
        f"{owner}(...)[{old!r}] is deprecated and will be removed in the next release: use [{new!r}].",
        DeprecationWarning,
        stacklevel=_user_level(),
    )


__all__ = ["Deprecated", "deprecated_attribute", "warn_renamed", "warn_renamed_key"]
