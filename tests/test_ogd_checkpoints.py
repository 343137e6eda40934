"""OGD checkpoints restore the state and stream bit for bit."""

import equinox as eqx
import jax
import numpy as np
import pytest
from _ogd_problem import CK_LAM, ETA, _short_run

from cfm_jax import ogd


@pytest.mark.slow  # a run interrupted and restored
def test_checkpoint_restore_is_bitwise(setup, tmp_path):
    _, student, stream = setup
    opt = ogd.ridge_sgd(ETA, CK_LAM)
    full = ogd.coupled_run(student, stream, (8,), opt, 8, record_params=True)
    first = _short_run(student, stream)
    path = ogd.save_checkpoint(tmp_path / "ckpt.eqx", first.state, stream)
    like = ogd.init_state(student, opt, (8, None))
    other = eqx.tree_at(lambda s: s.key, stream, jax.random.key(99))
    state, stream2 = ogd.load_checkpoint(path, like, other)
    assert int(state.step) == 4
    np.testing.assert_array_equal(jax.random.key_data(stream2.key), jax.random.key_data(stream.key))
    second = _short_run(student, stream2, state=state)
    for a, b in zip(jax.tree.leaves(full.state), jax.tree.leaves(second.state)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(full.deviations[4:], second.deviations)
