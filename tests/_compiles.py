"""Count the programs JAX lowers (one per compilation, whether or not the persistent compilation cache
then serves the binary): a compile counter for "compiled once" tests, never a timer."""

import contextlib

from jax import monitoring

_LOWERING = "/jax/core/compile/jaxpr_to_mlir_module_duration"


@contextlib.contextmanager
def count_compilations():
    """``with count_compilations() as count: ...`` then ``count()`` is the number of programs lowered."""
    with lowered_programs() as names:
        yield lambda: len(names)


@contextlib.contextmanager
def lowered_programs():
    """``with lowered_programs() as names: ...`` then ``names`` lists the programs lowered in the block
    by name (``"jit(forward)"``), in order."""
    names: list[str] = []

    def listener(event: str, duration_secs: float, **kwargs: str | int) -> None:
        if event == _LOWERING:
            names.append(str(kwargs.get("fun_name", "")))

    monitoring.register_event_duration_secs_listener(listener)
    try:
        yield names
    finally:
        monitoring.unregister_event_duration_listener(listener)
