"""One OGD update: the functional gradient L·∂ℓ/∂θ_l and the optimiser step."""

import equinox as eqx
import jax
import numpy as np
from _ogd_problem import CK_LAM, ETA, L, _short_run

import cfm_jax
from cfm_jax import ogd


def test_one_ogd_step_is_ridge_update_with_functional_gradient(setup):
    _, student, stream = setup
    res = _short_run(student, stream)
    after_one = eqx.combine(jax.tree.map(lambda a: a[0], res.ref_params), student)
    s = stream(0)
    # independent gradient source: autodiff through the residual network, scaled by L by hand
    loss, g = ogd.autodiff_value_and_grad(student, s.x0, cfm_jax.EmpiricalMeasure(s.context), s.y)
    for name, a in after_one.stacked_params().items():
        expect = (1 - ETA * CK_LAM) * getattr(student, name) - ETA * L * getattr(g, name)
        np.testing.assert_allclose(a, expect, rtol=1e-12, atol=1e-13, err_msg=name)
    np.testing.assert_allclose(res.losses[0, -1], loss, rtol=1e-12)
    assert int(res.state.step) == 4


def test_default_gradient_source_is_the_hand_adjoint_and_agrees_with_autodiff(setup):
    _, student, stream = setup
    s = stream(0)
    ctx = cfm_jax.EmpiricalMeasure(s.context[:16])
    _, g = ogd.autodiff_value_and_grad(student, s.x0, ctx, s.y)
    assert ogd.default_grad_fn() is cfm_jax.loss_and_grad
    _, g2 = ogd.default_grad_fn()(student, s.x0, ctx, s.y)
    for a, b in zip(jax.tree.leaves(g2), jax.tree.leaves(g)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
