"""The forward solve of the contextual flow map: its options and result (:mod:`.spec`) and the one
loop every strategy runs (:mod:`.loop`)."""

from .loop import (
    AbstractCarriedContext,
    EmpiricalContext,
    Loop,
    Segment,
    advance,
    first_failure,
    layer_ends,
    loop,
    merge_leading,
    solution,
    solve_segment,
    state_before,
    vary_alike,
    with_progress,
)
from .spec import Ctx, Emit, FlowSolution, FlowSpec, SaveAt, fixed_controller, flow_spec, saved

__all__ = [
    "AbstractCarriedContext",
    "Ctx",
    "EmpiricalContext",
    "Emit",
    "FlowSolution",
    "FlowSpec",
    "Loop",
    "SaveAt",
    "Segment",
    "advance",
    "first_failure",
    "fixed_controller",
    "flow_spec",
    "layer_ends",
    "loop",
    "merge_leading",
    "saved",
    "solution",
    "solve_segment",
    "state_before",
    "vary_alike",
    "with_progress",
]
