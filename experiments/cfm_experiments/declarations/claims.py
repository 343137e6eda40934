"""The options of ``cfm-jax claims`` (:mod:`cfm_experiments.claims`); its last two parts are
``cfm-jax ogd``'s (:data:`cfm_experiments.declarations.ogd.CLAIM_PARTS`)."""

from __future__ import annotations

from ..protocol import Declaration, Option
from .ogd import CLAIM_PARTS

INTERVAL = "an interval needs two"

SEEDS = Option("seeds", 32, "random models (seeds) per configuration", low=2, quick=16, why=INTERVAL)
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
SUP_N = Option("sup_n", 128, "context size n of the ascents", low=2, quick=64)
SUP_STEPS = Option("sup_steps", 60, "projected-ascent steps (of each stretch of the suprema's ascent)", low=1, quick=30)
SUP_CONTEXTS = Option("sup_contexts", 16, "common random contexts of each ascent", low=1, quick=8)
SUP_STRETCHES = Option(
    "sup_stretches",
    8,
    "most stretches of --sup-steps steps of each ascent (it stops earlier once no start gains half a percent)",
    low=2,
    quick=4,
    why="a gain needs two stretches",
)
SUP_AT_DIM = Option("sup_at_dim", 4, "d of the heads sweeps (one of --sup-dims and --uni-dims)", low=1, quick=2)
HEADS_SWEEPS = Option(
    "heads_sweeps",
    False,
    "also run the heads sweeps of suprema and uniform (--sup-heads, --uni-heads): half of the default run's time, "
    "and at its sizes their searches at H = 8 hit the stretch cap, so those lines read not tested",
    kind="flag",
)

PREFACTORS = Declaration(
    "prefactors",
    (
        Option(
            "dims", (2, 4, 8, 16, 32, 64), "dimensions d of the d-sweep", many=True, low=1, quick=(4, 16), min_count=2
        ),
        Option("heads", (2, 4, 8), "head counts H > 1 of the heads sweeps", many=True, low=2, quick=(4,)),
        Option("widths", (8, 64), "linear-MLP widths m (each >= the heads sweeps' d)", many=True, low=1, quick=(32,)),
        Option("at_dim", 8, "d of the heads and width sweeps (one of --dims)", low=1, quick=4),
        NS,
        SEEDS,
        LAYERS,
    ),
)
SCALES = Declaration(
    "scales",
    (
        Option(
            "betas",
            (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0),
            "β of the Gaussian sweeps (must include 1)",
            kind="real",
            many=True,
            low=0,
            quick=(0.25, 1.0, 4.0, 16.0),
            min_count=3,
        ),
        Option(
            "ball_betas",
            (0.25, 1.0, 4.0, 16.0),
            "β = ‖Q‖‖K‖R² of the ball sweep",
            kind="real",
            many=True,
            low=0,
            min_count=3,
        ),
        Option(
            "ball_ns",
            (5, 16, 50, 158, 500),
            "context sizes n of the ball sweep",
            many=True,
            low=1,
            quick=(4, 13, 40, 126, 400),
            min_count=3,
            why="a rate needs three sizes",
        ),
        Option("n_ref", 2048, "points of the ball's scrambled-Sobol reference", low=2, quick=1024),
        NS,
        SEEDS,
        LAYERS,
    ),
)
TAILS = Declaration(
    "tails",
    (
        Option("contexts", 512, "contexts (one model) of the tail quantiles", low=2, quick=256, why=INTERVAL),
        NS,
        LAYERS,
    ),
)
SUPREMA = Declaration(
    "suprema",
    (
        Option(
            "sup_dims",
            (2, 4, 8, 16, 32),
            "dimensions d of the supremum's d-sweep",
            many=True,
            low=1,
            quick=(2, 8),
            min_count=2,
        ),
        Option(
            "sup_heads",
            (1, 2, 4, 8),
            "head counts H of the supremum's heads sweep (include 1)",
            many=True,
            low=1,
            quick=(1, 4),
            min_count=2,
        ),
        SUP_AT_DIM,
        HEADS_SWEEPS,
        Option(
            "sup_restarts",
            2,
            "random starts of each ascent (besides the constructions: 3 with one head, 4 with more)",
            low=0,
        ),
        Option("sup_randoms", 8, "random fixed-norm models of the mean beside the supremum", low=2, why=INTERVAL),
        Option(
            "sup_eval_ns",
            (32, 128, 512),
            "context sizes n of the held-out measurement (include --sup-n)",
            many=True,
            low=2,
            quick=(16, 64, 256),
            min_count=2,
        ),
        Option("sup_eval_contexts", 32, "held-out contexts", low=2, quick=16, why=INTERVAL),
        SUP_N,
        SUP_STEPS,
        SUP_STRETCHES,
        SUP_CONTEXTS,
        LAYERS,
    ),
)
UNIFORM = Declaration(
    "uniform",
    (
        Option(
            "uni_dims",
            (2, 4, 8, 16),
            "dimensions d of the uniform quantity's d-sweep",
            many=True,
            low=1,
            quick=(2, 8),
            min_count=2,
        ),
        Option(
            "uni_heads",
            (1, 2, 4, 8),
            "head counts H of its heads sweep (include 1)",
            many=True,
            low=1,
            quick=(1, 4),
            min_count=2,
        ),
        Option("uni_contexts", 16, "contexts (one ascent each)", low=2, quick=8, why=INTERVAL),
        SUP_AT_DIM,
        HEADS_SWEEPS,
        SUP_N,
        SUP_STEPS,
        SUP_STRETCHES,
        LAYERS,
    ),
)
RHO = Declaration(
    "rho",
    (
        Option(
            "rho_beta_range",
            (0.5, 16.0),
            "low and high β = ‖Q‖‖K‖σ² of the candidate models (log-uniform between them)",
            kind="real",
            many=True,
            low=0,
            min_count=2,
        ),
        Option(
            "rho_per_bin",
            16,
            "random models kept in every ρ bin (candidates drawn until each bin has them)",
            low=2,
            quick=8,
            why="a bin's interval needs two",
        ),
        Option(
            "rho_ns",
            (10, 40, 160, 640, 2560, 10240),
            "context sizes n (10⁵ on a GPU: add 40960 163840)",
            many=True,
            low=1,
            quick=(10, 40, 160, 640, 2560),
            min_count=3,
            why="local slopes need three sizes",
        ),
        Option("rho_contexts", 2, "contexts per model", low=2, why=INTERVAL),
        Option(
            "rho_draws",
            6,
            "independent draws of models pooled in the ρ line (each fills every bin with --rho-per-bin models)",
            low=1,
            quick=1,
        ),
        LAYERS,
    ),
)
TAIL_EXPONENT = Declaration(
    "tail_exponent",
    (
        Option(
            "tail_rhos",
            (0.5, 1.5, 2.5, 4.0),
            "ρ = 2‖QᵀK‖σ²/d of the tail-exponent models (one random model scaled to each)",
            kind="real",
            many=True,
            low=0,
            quick=(0.5, 4.0),
        ),
        Option(
            "tail_samples",
            25_000,
            "contexts per model and n of the tail-exponent runs (δ down to 10/contexts; 100000: 10⁻⁴)",
            low=400,
            quick=10_000,
            why="a tail exponent needs two δ with 10 contexts beyond",
        ),
        Option("tail_ns", (16, 64), "context sizes n of the tail-exponent runs", many=True, low=1),
        Option("n_lin", 2048, "points of the linearisation sample (first variation)", low=2, quick=1024),
        Option("tail_n_ref", 4096, "points of the ball's QMC reference", low=2, quick=2048),
        LAYERS,
    ),
)

#: the peer's attention scales (Bohbot et al.'s Gaussian experiment): 12 from 0.05 to 50, log-spaced.
TOKEN_SCALES = (0.05, 0.0937, 0.176, 0.329, 0.616, 1.16, 2.16, 4.06, 7.6, 14.2, 26.7, 50.0)
TOKEN_SAMPLE = Declaration(
    "token_sample",
    (
        Option(
            "token_scales",
            TOKEN_SCALES,
            "attention scales s of the one-layer sweep (Q, K ← √s·Q, √s·K)",
            kind="real",
            many=True,
            low=0,
            quick=(0.05, 1.16, 50.0),
        ),
        Option(
            "token_ns",
            (300, 475, 753, 1194, 1892, 3000),
            "context sizes n of the one-layer sweep",
            many=True,
            low=2,
            quick=(300, 753, 1892),
            min_count=3,
            why="a slope and its spread need three sizes",
        ),
        Option("token_contexts", 8, "contexts per n and seed (the output moments' errors averaged over them)", low=1),
        Option(
            "token_seeds",
            6,
            "repetitions of the one-layer sweep, each with its own contexts and Monte-Carlo reference",
            low=2,
            quick=3,
            why=INTERVAL,
        ),
        Option("token_n_ref", 10_000, "tokens of the Monte-Carlo reference", low=2),
        Option("token_dim", 50, "token dimension d of the one-layer sweep", low=1),
        Option("token_rho", 0.1, "the context law N(0, ρI)", kind="real", low=0),
        Option(
            "token_paper_grid",
            False,
            "the paper's sizes: 12 n from 1000 to 30000, 200 contexts per n (instead of --token-ns and "
            "--token-contexts; a GPU's job)",
            kind="flag",
        ),
    ),
    optional=True,
)

PARTS = (PREFACTORS, SCALES, TAILS, SUPREMA, UNIFORM, RHO, TAIL_EXPONENT, *CLAIM_PARTS, TOKEN_SAMPLE)

__all__ = [
    "HEADS_SWEEPS",
    "LAYERS",
    "NS",
    "PARTS",
    "PREFACTORS",
    "RHO",
    "SCALES",
    "SEEDS",
    "SUPREMA",
    "SUP_AT_DIM",
    "SUP_CONTEXTS",
    "SUP_N",
    "SUP_STEPS",
    "SUP_STRETCHES",
    "TAILS",
    "TAIL_EXPONENT",
    "TOKEN_SAMPLE",
    "TOKEN_SCALES",
    "UNIFORM",
]
