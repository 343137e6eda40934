"""The options of ``cfm-jax rates`` (:mod:`cfm_experiments.rates.parts`)."""

from __future__ import annotations

from ..protocol import Declaration, Option

SEEDS_WHY = "a confidence interval needs two"

#: the options both parts read.
SHARED = (
    Option("dims", (1, 2, 4, 8, 16), "attention dimensions d", many=True, low=1, quick=(2, 8), min_count=0),
    Option("control_dims", (1, 2, 4, 8), "control-field dimensions d", many=True, low=1, quick=(4,), min_count=0),
    Option(
        "seeds",
        8,
        "seeds per configuration, split across the devices; on each, one after another on a CPU, "
        "vmapped together on an accelerator (cfm_jax.chaos.map_seeds)",
        low=2,
        quick=6,
        why=SEEDS_WHY,
    ),
    Option("layers", 4, "layers L", low=1),
    Option(
        "no_subspace",
        False,
        "skip the population on a dʹ = 2 subspace of R^8 (skipped with --quick)",
        kind="flag",
        quick=True,
    ),
    Option("no_adjoint", False, "skip the adjoint quantities (p, ∇φ)", kind="flag"),
)


def _sizes(name, default, help, quick=None, **kw) -> Option:
    extra = {} if quick is None else {"quick": quick}
    return Option(name, default, help, many=True, low=1, min_count=2, **extra, **kw)


EXACT = Declaration(
    "exact",
    SHARED
    + (
        _sizes("ns", (16, 64, 256, 1024, 4096), "context sizes n, attention", quick=(16, 64, 256, 1024)),
        _sizes("control_ns", (8, 16, 32, 64, 128), "context sizes n, control"),
        Option("n_ref", 2048, "QMC points of the attention references (subspace row, ∇φ)", low=1, quick=1024),
        Option("control_n_ref", 512, "QMC points of the control references", low=1),
        _sizes("w1_ns", (16, 32, 64, 128), "context sizes of the Sinkhorn W1 (dʹ = 2 rows)"),
    ),
)
SAMPLE = Declaration(
    "sample",
    SHARED
    + (
        _sizes("sample_ns", (16, 32, 64, 128), "context sizes n, attention, of the sample part"),
        _sizes("sample_control_ns", (8, 16, 32, 64), "context sizes n, control, of the sample part"),
        Option("sample_n_ref", 2048, "i.i.d. reference points, attention, of the sample part", low=1, quick=1024),
        Option("sample_control_n_ref", 512, "i.i.d. reference points, control, of the sample part", low=1, quick=256),
    ),
    optional=True,
)

PARTS = (EXACT, SAMPLE)

__all__ = ["EXACT", "PARTS", "SAMPLE", "SHARED"]
