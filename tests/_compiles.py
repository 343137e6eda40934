"""Count the programs JAX lowers (one per compilation, whether or not the persistent compilation cache
then serves the binary): a compile counter for "compiled once" tests, never a timer. Both are
:class:`cfm_jax.CompileRecorder`'s ``lowered`` count, shaped for the tests that use them."""

import contextlib

import cfm_jax


@contextlib.contextmanager
def count_compilations():
    """``with count_compilations() as count: ...`` then ``count()`` is the number of programs lowered."""
    with cfm_jax.CompileRecorder() as rec:
        yield lambda: rec.lowered


@contextlib.contextmanager
def lowered_programs():
    """``with lowered_programs() as names: ...`` then ``names`` lists the programs lowered in the block
    by name (``"jit(forward)"``), in order."""
    with cfm_jax.CompileRecorder() as rec:
        yield rec.lowered_names
