"""The first paper's OGD claims against the exact infinite-context limit, at the default sizes.

Runs :mod:`cfm_jax.experiments.ogd_claims` (the OGD part of ``cfm-jax constants``) through its
resumable sweep and writes ``benchmarks/results/constants_ogd/`` (``rows.jsonl``, the figures,
``summary.json`` with the claim lines, ``run.json``); prints the claim lines. About 7 minutes on
a loaded 2-core CPU (compilation dominates: one program per d), ``--quick`` about a minute.

Run: ``python benchmarks/ogd_claims.py [--quick] [--out DIR] [--overwrite]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from cfm_jax.experiments import ogd_claims

RESULTS = Path(__file__).parent / "results" / "constants_ogd"


def main() -> None:
    parser = argparse.ArgumentParser(
        description="The first paper's OGD claims against the exact infinite-context limit."
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"results folder (default {RESULTS})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true", help="start over instead of resuming")
    args = parser.parse_args()
    t0 = time.perf_counter()
    claims = ogd_claims.run_part(args.quick, args.seed, args.out, resume=not args.overwrite)
    for c in claims:
        print(f"- {c['claim']}\n    measured: {c['measured']}\n    verdict: {c['verdict']} ({c['figure']})")
    print(f"{time.perf_counter() - t0:.0f} s; wrote {args.out}")


if __name__ == "__main__":
    main()
