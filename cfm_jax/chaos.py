r"""Finite vs infinite context: synchronously coupled deviations (propagation of chaos, ``docs/chaos.md``).

The infinite-context system is approximated by a reference sample of ``n_ref`` points drawn from
the population P; the n-point system is coupled synchronously to it: its context is the first n
points of the reference sample, and both carry the same target tokens $x_0$ (and loss targets y).
At every layer boundary $s = l/L$ we measure

- ``token``    $‖x_s − \hat x_s‖$ for each target token (then sup over s, mean over tokens);
- ``context``  $Σ_i w_i ‖z_i(s) − \hat z_i(s)‖ = \frac1n Σ_{i<n} ‖z_i(s) − \hat z_i(s)‖$, the coupled context
  particles; it bounds $W_1(μ_s, (\hat Φ_s)_\# μ_0)$, the transport of the *same* initial sample by the
  population flow;
- ``w1``       $W_1(μ_s, \hat μ_s)$ between the n-point measure and the reference measure (its first
  ``w1_size`` particles), which contains the initial sampling error $W_1(μ_0, P) \sim n^{-1/d'}$;
- ``adjoint``  $‖p_s − \hat p_s‖$ per target token (p for the per-token loss $½‖x_1 − y‖^2$);
- ``grad_phi`` $\sup_{z ∈ \mathrm{probes}} ‖∇φ_s(z) − ∇\hat φ_s(z)‖$ on fixed probe points in the ball of
  radius R (φ for the batch-mean loss).

Every quantity is reported as a sup over s. The reference's own error ("floor") is measured by
the same code between two independent references.

Compiled programs sized for the compiler (:func:`run_seeds`): one program holds the references
of a configuration (the two independent references of a floor through one ``lax.map`` body), and
one program per **bucket** (:func:`buckets`) holds one n-point system: the n measured alike are
padded to the bucket's largest n, with weights 1/n on the first n atoms and exactly 0 on the rest
(zero-weight atoms move with the flow but act on nothing, so the deviations equal the unpadded
system's to round-off). n is an argument of the program, so every n of a bucket, every seed and
every configuration of the same shapes reuse it; the loops over buckets and n run outside. A
sweep compiles ``1 + len(buckets(spec))`` programs per configuration (per number of seeds and set
of devices). The seeds run one after another on a CPU and vmapped on accelerators
(:func:`map_seeds`) and, with several local devices, are split across them.

Exact references (``ChaosSpec.reference``, the default of ``cfm-jax rates``): ``"gaussian"``
(attention fields with no MLP or a linear one, Gaussian population) compares with the exact
infinite-context flow (:func:`cfm_jax.forward` on a Gaussian context): tokens, the passive motion
of the n context particles in the population field (``context``) and the token adjoint
(:func:`cfm_jax.token_adjoint`: the limit's token map is a product of affine maps, so its
Jacobian is too) are exact (floor 0); W1 in d = 1 is the exact quantile formula against the
limit's law $N(m_s, Σ_s)$ (:func:`wasserstein1_to_normal_1d`, floor 0), in d >= 2 Sinkhorn against
``w1_size`` scrambled-Sobol points of the Gaussian pushed by the exact flow (floor: two such
samples); ``grad_phi`` has no closed form ($∇\hat φ_s$ involves the particle adjoints over the whole
Gaussian) and is compared with a QMC reference of ``n_ref`` points (floor: two of them), so it
keeps n_ref solves: only up to ``grad_phi_max_n``. :func:`quantity_reference` names the reference of
every quantity. ``"qmc"`` compares with a scrambled-Sobol reference of ``n_ref`` points. In both,
the n-point contexts are i.i.d. draws independent of the reference (prefixes of one sample of
max(ns) points), coupled by moving them passively in the reference field, so max(ns) may exceed
n_ref and no nested-sample correction is needed. Each quantity has its own sizes
(:meth:`ChaosSpec.quantity_ns`: ``w1_ns`` for W1, n <= ``grad_phi_max_n`` for ∇φ). The token adjoint
of every n-point system is the token-only discrete adjoint (:func:`token_adjoint_states`, O(B·n)
a layer); the particle adjoints (O(n²) a layer) run only where ∇φ is measured.

Expected (paper's table): transformer token quantities $\sim n^{-1/2}$ whatever d; $W_1$ between
measures $\sim n^{-1/d'}$ (d' the intrinsic dimension of P; $n^{-1/2}$ up to a log at $d' ≤ 2$); the
general $W_1$-Lipschitz control field (:class:`~cfm_jax.W1ControlField`) drives its
tokens at the slower $n^{-1/d'}$.
"""

from __future__ import annotations

from typing import Any

from ._chaos.batching import map_seeds, seed_batch_size
from ._chaos.deviations import (
    adjoint_states,
    coupled_deviations,
    prefix_weights,
    token_adjoint_states,
    uniform_attention_deviation,
    wasserstein1_to_normal_1d,
)
from ._chaos.programs import (
    attention_regimes,
    exact_reference_deviations,
    run_seeds,
    seed_deviations,
    seed_devices,
)
from ._chaos.references import seed_inputs
from ._chaos.spec import (
    QUANTITIES,
    Bucket,
    ChaosSpec,
    buckets,
    build_model,
    expected_slope,
    quantity_reference,
    size_buckets,
    validate_spec,
    wasserstein_slope,
)
from ._deprecations import Deprecated, deprecated_attribute

__all__ = [
    "QUANTITIES",
    "Bucket",
    "ChaosSpec",
    "adjoint_states",
    "attention_regimes",
    "buckets",
    "build_model",
    "coupled_deviations",
    "exact_reference_deviations",
    "expected_slope",
    "map_seeds",
    "prefix_weights",
    "quantity_reference",
    "run_seeds",
    "seed_batch_size",
    "seed_deviations",
    "seed_devices",
    "seed_inputs",
    "size_buckets",
    "token_adjoint_states",
    "uniform_attention_deviation",
    "validate_spec",
    "wasserstein1_to_normal_1d",
    "wasserstein_slope",
]

#: old name -> its value and what to write instead; removed in the next release
_DEPRECATED = {
    "program_count": Deprecated(
        "cfm_jax._chaos.programs",
        "program_count",
        "1 + len(cfm_jax.chaos.buckets(spec)), the programs a sweep compiles",
    ),
    "run_seeds_loop": Deprecated(
        "cfm_jax._chaos.programs",
        "run_seeds_loop",
        "cfm_jax.chaos.run_seeds (the loop over seeds was a benchmark's baseline)",
    ),
}


def __getattr__(name: str) -> Any:
    """A deprecated name (PEP 562), with a warning naming its replacement."""
    if name in _DEPRECATED:
        return deprecated_attribute(__name__, name, _DEPRECATED[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
