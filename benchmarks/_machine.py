"""The machine description every benchmark writes next to its numbers."""

from __future__ import annotations

import os
import platform

import jax


def machine(**extra) -> dict:
    """Processor, CPU count, platform, Python/JAX versions, backend and devices (plus ``extra``)."""
    return {
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        **extra,
    }
