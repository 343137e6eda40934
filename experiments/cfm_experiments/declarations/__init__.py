"""What each command's parts declare to the command line, importing no JAX and no experiment.

A command's declaration module (:attr:`cfm_experiments.registry.Command.declares`) defines
``PARTS``: one :class:`Declaration` per part, in the command's order, holding the part's name,
whether it is optional and its options. ``cfm-jax <command> --help`` is built from them alone; the
parts themselves (:mod:`cfm_experiments.protocol`) take their options from here, so each option
and its rule is written once.
"""

from __future__ import annotations

import dataclasses

from ..protocol import Option


@dataclasses.dataclass(frozen=True)
class Declaration:
    """A part as the command line sees it: its ``name``, its ``options``, and ``optional`` (run only
    when named by ``--parts``)."""

    name: str
    options: tuple[Option, ...] = ()
    optional: bool = False


__all__ = ["Declaration"]
