"""Synthetic rows of the tail-exponent part: one model at n = 16 and 64 with known statistics."""

from cfm_experiments.claims import tail_exponent as T


def size(n, gamma, gamma_lin, median=1.0, ratio=(1.0, 0.9, 1.1), spread=0.02):
    """One n's entry: γ ± 0.03, the median of √n·dev ``median`` ± ``spread`` (relative) and every q_δ over
    the limit's ``ratio`` (value, low, high)."""
    D = len(T.TAIL_DELTAS)
    return {
        "n": n,
        "gamma": {"value": gamma, "ci_low": gamma - 0.03, "ci_high": gamma + 0.03, "level": 0.95},
        "gamma_lin": gamma_lin,
        "quantiles": [1.0] * D,
        "quantiles_lin": [1.0] * D,
        "median_ci": {
            "value": median,
            "ci_low": (1 - spread) * median,
            "ci_high": (1 + spread) * median,
            "level": 0.95,
        },
        "ratio": {k: [v] * D for k, v in zip(T.RATIO_KEYS, ratio)},
    }


def model(
    rho=0.5, gamma=0.52, growth=1.0, ratio=(1.0, 0.9, 1.1), model=0, contexts=100_000, gamma_lin=0.52, spread=0.02
):
    """One model's row, n = 16 and 64: √n·dev's median grows by ``growth`` (1: the deviation decays like
    n^{-1/2}; 2: it does not decay); at n = 64 the quantiles are ``ratio`` × the limit's."""
    return {
        "config": {"law": "ball", "model": model, "rho": rho, "tail_samples": contexts},
        "rho": rho,
        "floor": 0.0,
        "deltas": list(T.TAIL_DELTAS),
        "sizes": [
            size(16, gamma, gamma_lin, spread=spread),
            size(64, gamma, gamma_lin, median=growth, ratio=ratio, spread=spread),
        ],
    }


def decaying(exponent, spread=0.002):
    """A model whose median decays like n^exponent from n = 16 to 64 (medians ± ``spread``)."""
    return model(growth=4.0 ** (exponent + 0.5), spread=spread)
