"""A tiny experiment planted by the tests: one part, written as a user would, with no code of its own
for results folders, resuming, progress, timing, interrupts or summaries (the driver's).

``python experiments/tests/_planted.py ARGS`` runs it as ``cfm-jax planted ARGS``: the one command line, with
this part registered as the command ``planted``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp

from cfm_experiments import Claim, Declaration, Option, Part, Settings, Summary
from cfm_experiments.plotting import figure, save
from cfm_experiments.registry import COMMANDS, Command

PLANTED = Declaration(
    "planted",
    (
        Option("sizes", (2, 3, 4, 5), "sample sizes", many=True, low=1, quick=(2, 3), min_count=2),
        Option("pause", 0.0, "seconds each row sleeps (to be interrupted)", kind="real", low=-1.0),
    ),
)
#: a second, optional part (run only when named).
OTHER = Declaration("other", optional=True)
#: the command's parts, in order.
PARTS = (PLANTED, OTHER)


class Planted(Part):
    declaration = PLANTED
    title = "a planted experiment: sums of n standard normals"

    def configs(self, settings: Settings) -> list[dict]:
        return [{"n": n, "seed": settings.seed, "pause": settings["pause"]} for n in settings["sizes"]]

    def run(self, config: dict) -> dict:
        time.sleep(config["pause"])
        x = jax.random.normal(jax.random.key(config["seed"]), (config["n"],))
        return {"sum": float(jnp.sum(x)), "sumsq": float(jnp.sum(x**2))}

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        total = sum(r["sumsq"] for r in rows)
        n = sum(r["config"]["n"] for r in rows)
        claim = Claim("E x² = 1", f"mean of x² over {n} draws: {total / n:.3f}", "holds", figure="planted.png")
        return Summary(
            text=f"{len(rows)} rows", data={"mean_square": total / n}, claims=(claim,), files={"note.txt": "hi"}
        )

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        fig, (ax,) = figure(1)
        ax.plot([r["config"]["n"] for r in rows], [r["sum"] for r in rows], "o")
        ax.set_xlabel("n")
        ax.set_ylabel("sum")
        return [save(fig, out / "planted.png")]


class Other(Part):
    declaration = OTHER
    title = "another part"

    def configs(self, settings: Settings) -> list[dict]:
        return [{"seed": settings.seed}]

    def run(self, config: dict) -> dict:
        return {"value": config["seed"] + 1}


COMMAND = Command("planted", __name__, "a planted experiment (tests)")


def register() -> None:
    COMMANDS[COMMAND.name] = COMMAND


if __name__ == "__main__":
    from cfm_experiments.cli import main

    COMMANDS["planted"] = Command("planted", "_planted", "a planted experiment (tests)")
    sys.exit(main(["planted", *sys.argv[1:]]))
