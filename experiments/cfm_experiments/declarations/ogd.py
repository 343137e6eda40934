"""The options of ``cfm-jax ogd`` (:mod:`cfm_experiments.ogd`); ``bounds`` and ``curvature`` are
parts of ``cfm-jax claims`` too."""

from __future__ import annotations

from ..protocol import Declaration, Option

ABLATION = Declaration(
    "ablation",
    (
        Option("dim", 3, "token dimension d", low=1, quick=2),
        Option("layers", 4, "layers L", low=1, quick=2),
        Option("mlp_width", 8, "MLP width m", low=0, quick=4, why="0: no MLP"),
        Option("n_ref", 512, "reference (population) sample size", low=1, quick=256),
        Option("ns", (4, 16, 64), "context sizes n", many=True, low=1, min_count=2),
        Option("eta", 0.03, "learning rate η", kind="real", low=0),
        Option("steps", 600, "OGD steps K", low=4, quick=200),
        Option("seeds", 4, "seeds (streams) per regime", low=2, quick=2, why="a confidence interval needs two"),
        Option(
            "population",
            "uniform_sphere",
            "context law",
            kind="choice",
            choices=("uniform_sphere", "gaussian", "gaussian_mixture"),
        ),
    ),
)
BOUNDS = Declaration(
    "bounds",
    (
        Option("ogd_dims", (2, 4, 8, 16), "dimensions d of the claims", many=True, low=1, quick=(2, 4), min_count=2),
        Option("ogd_d0", 4, "the dimension of the regime lines (one of --ogd-dims)", low=1, quick=2),
        Option(
            "ogd_ns",
            (4, 16, 64, 256, 512),
            "context sizes n of the claims",
            many=True,
            low=1,
            quick=(4, 16, 64),
            min_count=2,
        ),
        Option("ogd_steps", 400, "OGD steps K of the claims", low=19, quick=48, why="K must exceed k_c + 16 = 18"),
        Option("ogd_seeds", 6, "seeds of the claims", low=2, quick=3, why="a confidence interval needs two"),
        Option(
            "ogd_scan",
            (0.25, 0.5, 1.0),
            "ridges λ/λ_c at --ogd-d0 besides 0, 1/8 and 1.5, to locate the threshold",
            kind="real",
            many=True,
            low=0,
            quick=(0.5, 1.0),
        ),
    ),
    optional=True,
)
CURVATURE = Declaration(
    "curvature",
    (
        Option("curvature_ns", (16, 256), "context sizes n of the curvature part", many=True, low=1, min_count=1),
        Option(
            "curvature_ratios",
            (0.0, 0.25, 0.5, 1.0, 2.0, 4.0),
            "ridges λ/λ_c scanned (0 first: the pilot)",
            kind="real",
            many=True,
            low=-1e-300,
            min_count=2,
        ),
        Option("curvature_eta", 0.2, "learning rate η of the curvature part", kind="real", low=0),
        Option("curvature_steps", 400, "OGD steps K of the curvature part", low=8, quick=200),
        Option(
            "curvature_seeds", 6, "seeds of the curvature part", low=2, quick=3, why="a confidence interval needs two"
        ),
    ),
    optional=True,
)

PARTS = (ABLATION, BOUNDS, CURVATURE)
#: the parts ``cfm-jax claims`` runs as well.
CLAIM_PARTS = (BOUNDS, CURVATURE)

__all__ = ["ABLATION", "BOUNDS", "CLAIM_PARTS", "CURVATURE", "PARTS"]
