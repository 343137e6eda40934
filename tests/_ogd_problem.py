"""The shared OGD problem: a teacher-student stream on the unit circle, d = 2, L = 2, H = 1, m = 4,
B = 4, n_ref = 256 (float64). One configuration, so that JAX compiles each loop once."""

import jax
import jax.numpy as jnp
import pytest

import cfm_jax
from cfm_jax import TeacherStudentStream, ogd, uniform_sphere

D, L, M, B = 2, 2, 4, 4
N_REF = 256
NS = (4, 16, 64)
ETA = 0.03
K = 300  # = 9/η
CK_LAM = 0.5


@pytest.fixture(scope="module")
def setup():
    teacher = cfm_jax.Transformer.init(jax.random.key(1), D, heads=1, mlp_width=M, layers=L, dtype=jnp.float64)
    student = cfm_jax.Transformer.init(jax.random.key(2), D, heads=1, mlp_width=M, layers=L, dtype=jnp.float64)
    # compact support (the paper's assumption): contexts uniform on the unit circle
    stream = TeacherStudentStream(teacher, uniform_sphere(D), jax.random.key(3), batch=B, context_size=N_REF)
    return teacher, student, stream


def _short_run(student, stream, **kw):
    """The 4-step coupled run (n = 8 and the reference) shared by several tests (one compile)."""
    return ogd.coupled_run(student, stream, (8,), ogd.ridge_sgd(ETA, CK_LAM), 4, record_params=True, **kw)
