"""What the claims parts share: their common options, the configuration of one row, row selection."""

from __future__ import annotations

from ..declarations.claims import LAYERS, NS, SEEDS


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
