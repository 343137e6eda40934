"""What each command's parts declare to the command line, importing no JAX and no experiment.

A command's declaration module (:attr:`cfm_experiments.registry.Command.declares`) defines
``PARTS``: one :class:`~cfm_experiments.protocol.Declaration` per part, in the command's order (the
one place that order is written), each holding the part's name, whether it is optional and its
options. ``cfm-jax <command> --help`` is built from them alone; each part's class names its
declaration and takes its name, options and optional flag from it
(:class:`~cfm_experiments.protocol.Part`), so each is written once.
"""
