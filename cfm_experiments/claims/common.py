"""What the claims parts share: their common options, the configuration of one row, row selection."""

from __future__ import annotations

from ..protocol import Option

SEEDS = Option("seeds", 32, "random models (seeds) per configuration", low=2, quick=16, why="an interval needs two")
NS = Option(
    "ns",
    (10, 32, 100, 316, 1000),
    "context sizes n of the Gaussian n-sweeps",
    many=True,
    low=1,
    quick=(5, 16, 50, 158, 500),
    min_count=3,
    why="a rate needs three sizes",
)
LAYERS = Option("layers", 4, "layers L (one Euler step each: the residual network)", low=1)


def base_config(seed: int, **kw) -> dict:
    """One row's configuration: a Gaussian context of scale 1, d = 4, one head, no MLP, ‖Q‖‖K‖ = 1,
    ‖V‖ = 1, with ``kw`` on top (``ns`` as a list)."""
    cfg: dict = dict(law="gaussian", dim=4, heads=1, width=0, layers=4, scale=1.0, qk=1.0, v=1.0, seed=seed)
    cfg.update(kw)
    cfg["ns"] = [int(n) for n in cfg["ns"]]
    return cfg


def select(rows: list[dict], **match) -> list[dict]:
    """The rows whose configuration has every ``key=value`` of ``match``."""
    return [r for r in rows if all(r["config"].get(k) == v for k, v in match.items())]


def dim_of(row) -> int:
    return int(row["config"]["dim"])


__all__ = ["LAYERS", "NS", "SEEDS", "base_config", "dim_of", "select"]
