"""Input checks shared by the public API: clear errors at the boundary, not NaNs inside XLA."""

from __future__ import annotations

import numpy as np
from jax.core import Tracer


def is_concrete(x) -> bool:
    """True when `x` holds actual values (not a tracer inside jit/vmap/grad)."""
    return not isinstance(x, Tracer)


def check_finite(name: str, x) -> None:
    """Raise `ValueError` naming `name` if a concrete array has nan/inf entries."""
    if is_concrete(x) and not bool(np.isfinite(np.asarray(x)).all()):
        raise ValueError(f"`{name}` contains non-finite values (nan/inf).")
