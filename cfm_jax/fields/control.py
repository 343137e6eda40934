"""Moved: the W1 control field is :mod:`cfm_jax.control` (it needs ``cfm_jax.wasserstein``, a layer above ``fields``).

Kept only so ``from cfm_jax.fields.control import W1ControlField`` works until the package root
imports it from :mod:`cfm_jax.control`; delete this module then.
"""

from ..control import W1ControlField

__all__ = ["W1ControlField"]
