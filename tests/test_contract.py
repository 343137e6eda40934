"""The public API's contract, from the user's side: one table row per public name.

Every name in the ``__all__`` of ``cfm_jax`` and its public subpackages has a row in ``ROWS``
(``tests/_contract_rows.py``) that calls it as a JAX user would: typed and legacy keys (the same
numbers for the same seed), NumPy and JAX arrays, NumPy integer scalars, float32 and float64, under
``jax.jit``/``vmap``/``grad`` where documented, and at least one bad input refused with a message
naming the argument. (The experiments' names have theirs in ``experiments/tests``.) Types, constants and
abstract classes get a row saying what is checked. ``test_every_public_name_has_a_row`` fails for a
public name without a row (and for a row whose name is no longer public).
"""

import importlib

import pytest
from _contract_rows import PUBLIC_MODULES, ROWS


def public_names() -> list[str]:
    """Every public name, qualified by the module whose ``__all__`` lists it."""
    return [f"{m}.{n}" for m in PUBLIC_MODULES for n in importlib.import_module(m).__all__]


def test_every_public_name_has_a_row():
    names = set(public_names())
    rowed = {key.split("::")[0] for key in ROWS}
    missing = sorted(names - rowed)
    stale = sorted(rowed - names)
    assert not missing, f"public names without a contract row: {missing}"
    assert not stale, f"contract rows for names that are not public: {stale}"


def _unique_rows() -> dict[str, list]:
    """Row id (its first name) -> marks: a row covering several names runs once."""
    first: dict[object, str] = {}
    for name, r in ROWS.items():
        first.setdefault(r.fn, name)
    return {name: list(ROWS[name].marks) for name in first.values()}


@pytest.mark.parametrize("name", [pytest.param(n, marks=m) for n, m in _unique_rows().items()])
def test_contract(name):
    ROWS[name].fn()
