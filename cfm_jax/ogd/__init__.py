r"""Ridge-regularised online gradient descent (OGD) on contextual flow maps (docs/theory.md §3).

Update, in the $L^2([0, 1])$ geometry of the parameter path (functional gradient, docs/theory.md §2):

$$
θ_{k+1} = (1 − ηλ) θ_k − η \frac{δℓ}{δθ}(θ_k; x_0^k, μ^k, y^k),
$$

realised as ``optax.chain(optax.add_decayed_weights(λ), optax.sgd(η))`` (:func:`ridge_sgd`)
applied to the functional gradient $L\,∂ℓ/∂θ_l$ (so step sizes do not depend on L). Any optax
``GradientTransformation`` can replace it; the gradient source is any callable
``(model, x0, context, y) -> (loss, grads)`` (default [`loss_and_grad`][cfm_jax.loss_and_grad],
the hand adjoint; ``autodiff_value_and_grad`` differentiates by autodiff instead).

The loop (:func:`run_ogd`) is one jit-compiled ``jax.lax.scan`` over the stream and advances
several *trajectories* at once, all fed by the same samples $(x_0^k, y^k)$: trajectory t uses the
first ``context_sizes[t]`` points of the sample's context (None: all of them). The last
trajectory is the reference; the deviation of every other one from it,

$$
‖θ_k − \hat θ_k‖_{L^∞} = \sup_s ‖θ(s) − \hat θ(s)‖ = \max_l \big( \sum_a ‖a_l − \hat a_l‖_F^2 \big)^{1/2},
$$

(over the parameter arrays a: the Euclidean norm of *all* parameters of layer l, maximised over layers; for a
piecewise-linear path the max over nodes, which is the sup over s by convexity) is recorded at
every step. :func:`coupled_run` is the finite- vs population-context coupling of docs/theory.md §3–4.

Stability along a run: :func:`finite_time_lyapunov` gives $\log σ_{\max}$ of the product of the OGD
map's Jacobians $J_k = (1 − ηλ)I − η∇g_k$ along a trajectory (the finite-time Lyapunov exponent),
by Jacobian-vector products of the gradient.

State (:class:`OGDState`: parameters, optimiser states, step) is a pytree; checkpoints are
:func:`save_checkpoint`/:func:`load_checkpoint` (the stream is a pure function of the step, so
the step is the stream position).
"""

from ._checkpoints import load_checkpoint, save_checkpoint
from ._lipschitz import LipschitzEstimate, estimate_lipschitz
from ._loop import coupled_run, run_ogd
from ._lyapunov import finite_time_lyapunov
from ._norms import sup_distance, sup_norm
from ._state import OGDResult, OGDState, init_state
from ._steps import check_step_sizes, ridge_sgd
from ._updates import GradFn, autodiff_value_and_grad, default_grad_fn, functional_scale

__all__ = [
    "GradFn",
    "LipschitzEstimate",
    "OGDResult",
    "OGDState",
    "autodiff_value_and_grad",
    "check_step_sizes",
    "coupled_run",
    "default_grad_fn",
    "estimate_lipschitz",
    "finite_time_lyapunov",
    "functional_scale",
    "init_state",
    "load_checkpoint",
    "ridge_sgd",
    "run_ogd",
    "save_checkpoint",
    "sup_distance",
    "sup_norm",
]
