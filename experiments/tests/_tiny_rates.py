"""A tiny ``cfm-jax rates`` sweep for the command-line tests."""

#: a two-row `cfm-jax rates` sweep small enough for subprocess tests (CLI errors, signals, resume)
TINY_RATES = [
    "rates",
    "--dims",
    "1",
    "--control-dims",
    "1",
    "--ns",
    "4",
    "8",
    "--control-ns",
    "4",
    "8",
    "--n-ref",
    "32",
    "--control-n-ref",
    "32",
    "--seeds",
    "2",
    "--no-subspace",
    "--no-progress",
    "--no-adjoint",
    "--layers",
    "2",
]
