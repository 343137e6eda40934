"""Sample streams for online training: k ↦ (x_0^k, context^k, y^k), pure functions of k.

A stream is an Equinox module ``stream(k) -> Sample`` (``k`` a traced int32 step index), so a
training loop can draw sample k inside ``jax.lax.scan`` and a run restarted at step k sees the
same samples as an uninterrupted one. Streams carry their own PRNG key and use
``jax.random.fold_in(key, k)`` per step.

- :class:`TeacherStudentStream`: x_0 ~ N(0, I), a fresh context of ``context_size`` i.i.d.
  points from a population law, y = teacher CFM's x_1 under that context (plus optional noise).
  In coupled runs (``cfm_jax.ogd.coupled_run``) this context is the *reference sample* of the
  population; the n-point context is its first n points (docs/theory.md §4).
- :class:`ArrayStream`: user data already in memory (leading step axis K).
- :class:`FunctionStream`: any user function ``k -> Sample`` (or ``(x0, context, y)``).

Population laws ``(key, n) -> (n, d)`` come from :mod:`cfm_jax._populations` (Gaussian, mixture,
sphere, …) or any user function.
"""

from __future__ import annotations

import abc
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from ._arguments import static_int
from ._measures import EmpiricalMeasure
from ._paths import AbstractCFM
from ._random import as_key
from ._solve import forward
from ._validation import check, is_concrete


class Sample(eqx.Module):
    """One training sample: targets ``x0: (B, d)``, context points ``context: (n, d)``
    (uniform weights), labels ``y: (B, d)``."""

    x0: Float[Array, "B d"]
    context: Float[Array, "n d"]
    y: Float[Array, "B d"]


class AbstractStream(eqx.Module):
    """``stream(k) -> Sample`` for a (possibly traced) integer step ``k``.

    Subclasses implement ``__call__``; ``length`` is the number of available samples (None:
    unbounded, the default; finite streams override it).
    """

    @abc.abstractmethod
    def __call__(self, k) -> Sample:
        """Sample ``k``: a pure function of the (possibly traced) step index."""

    @property
    def length(self) -> int | None:
        """The number of available samples (None: unbounded)."""
        return None


# --- streams ----------------------------------------------------------------------------------


class TeacherStudentStream(AbstractStream):
    """Labels from a teacher CFM run with the sample's own context.

    Sample k: with $k_x, k_z, k_e$ = ``split(fold_in(key, k))``, $x_0 ∼ N(0, s^2 I)$ ($s$ = ``x_scale``) of shape
    ``(batch, d)``, context = ``population(k_z, context_size)``, y = $x_1$ of the teacher's
    L-layer residual network (= ``forward`` with Euler, one step per layer) + ``noise``·N(0, I).

    Args:
        teacher: any cfm_jax model.
        population: ``(key, n) -> (n, d)``, e.g. ``cfm_jax.isotropic_gaussian(d)``.
        key: PRNG key of the stream.
        batch: B, target tokens per sample.
        context_size: points per context (the reference size $n_{ref}$ in coupled runs).
        noise: label-noise standard deviation.
        x_scale: standard deviation of $x_0$.

    The teacher's parameters are checked (finite) when the stream is built from concrete arrays;
    the samples it generates are not re-checked inside compiled code, so a program that draws
    from it holds no host callback and is stored in the persistent compilation cache.
    """

    teacher: AbstractCFM
    population: Callable
    key: Array
    batch: int = eqx.field(static=True)
    context_size: int = eqx.field(static=True)
    noise: float = eqx.field(static=True)
    x_scale: float = eqx.field(static=True)

    def __init__(
        self,
        teacher: AbstractCFM,
        population: Callable,
        key: PRNGKeyArray,
        *,
        batch: int = 4,
        context_size: int = 1024,
        noise: float = 0.0,
        x_scale: float = 1.0,
    ):
        if not isinstance(teacher, AbstractCFM):
            raise ValueError(f"`teacher` must be a cfm_jax model, got {type(teacher).__name__}.")
        if not callable(population):
            raise ValueError("`population` must be a callable (key, n) -> (n, d).")
        batch, context_size = static_int("batch", batch), static_int("context_size", context_size)
        if not (np.isfinite(noise) and noise >= 0):
            raise ValueError(f"`noise` must be finite and >= 0, got {noise!r}.")
        if not (np.isfinite(x_scale) and x_scale > 0):
            raise ValueError(f"`x_scale` must be finite and > 0, got {x_scale!r}.")
        params = jax.tree.leaves(eqx.filter(teacher, eqx.is_inexact_array))
        if all(is_concrete(a) for a in params):  # NumPy on given values: no eager program
            failed = not all(np.isfinite(np.asarray(a)).all() for a in params)
        else:
            failed = ~jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in params]))
        teacher = check(teacher, failed, "`teacher` parameters contain non-finite values (nan/inf).")
        shape = jax.eval_shape(lambda k: population(k, 2), jax.random.key(0)).shape
        if shape != (2, teacher.dim):
            raise ValueError(f"`population(key, n)` must return (n, d) = (n, {teacher.dim}), got {shape} for n=2.")
        self.teacher = teacher
        self.population = population
        self.key = as_key(key)
        self.batch = int(batch)
        self.context_size = int(context_size)
        self.noise = float(noise)
        self.x_scale = float(x_scale)

    def __call__(self, k) -> Sample:
        kx, kz, ke = jax.random.split(jax.random.fold_in(self.key, k), 3)
        dtype = jnp.result_type(*jax.tree.leaves(self.teacher.stacked_params()))
        x0 = self.x_scale * jax.random.normal(kx, (self.batch, self.teacher.dim), dtype)
        z = self.population(kz, self.context_size).astype(dtype)
        y = forward(self.teacher, x0, z, throw=False).x1  # generated inputs, teacher checked at construction
        if self.noise:
            y = y + self.noise * jax.random.normal(ke, y.shape, dtype)
        return Sample(x0, z, jax.lax.stop_gradient(y))


class ArrayStream(AbstractStream):
    """A finite stream from arrays with a leading step axis: ``x0s: (K, B, d)``,
    ``contexts: (K, n, d)``, ``ys: (K, B, d)``."""

    x0s: Array
    contexts: Array
    ys: Array

    def __init__(self, x0s, contexts, ys):
        x0s, contexts, ys = (jnp.asarray(a) for a in (x0s, contexts, ys))
        if x0s.ndim != 3 or contexts.ndim != 3 or ys.ndim != 3:
            raise ValueError(
                "ArrayStream needs `x0s: (K, B, d)`, `contexts: (K, n, d)`, `ys: (K, B, d)`; got "
                f"{x0s.shape}, {contexts.shape}, {ys.shape}."
            )
        K, B, d = x0s.shape
        if ys.shape != x0s.shape:
            raise ValueError(f"`ys` must have the shape of `x0s` {x0s.shape}, got {ys.shape}.")
        if contexts.shape[0] != K or contexts.shape[2] != d:
            raise ValueError(f"`contexts` must have shape (K={K}, n, d={d}), got {contexts.shape}.")
        self.x0s, self.contexts, self.ys = x0s, contexts, ys

    @property
    def length(self) -> int:
        return self.x0s.shape[0]

    def __call__(self, k) -> Sample:
        take = lambda a: jax.lax.dynamic_index_in_dim(a, k, keepdims=False)  # noqa: E731
        return Sample(take(self.x0s), take(self.contexts), take(self.ys))


class FunctionStream(AbstractStream):
    """Wrap a user function ``fn(k) -> Sample | (x0 (B, d), context (n, d), y (B, d))``.

    ``fn`` must be a pure JAX function of the traced step ``k`` (e.g. ``fold_in`` a key)."""

    fn: Callable
    _length: int | None = eqx.field(static=True)

    def __init__(self, fn, length: int | None = None):
        if not callable(fn):
            raise ValueError("`fn` must be callable k -> (x0, context, y).")
        self.fn = fn
        self._length = length

    @property
    def length(self) -> int | None:
        return self._length

    def __call__(self, k) -> Sample:
        out = self.fn(k)
        if isinstance(out, Sample):
            return out
        x0, context, y = out
        if isinstance(context, EmpiricalMeasure):
            context = context.points
        return Sample(jnp.asarray(x0), jnp.asarray(context), jnp.asarray(y))


def as_stream(stream) -> AbstractStream:
    """Accept a stream, a callable ``k -> sample`` or a tuple ``(x0s, contexts, ys)``."""
    if isinstance(stream, AbstractStream):
        return stream
    if isinstance(stream, tuple) and len(stream) == 3:
        return ArrayStream(*stream)
    if callable(stream):
        return FunctionStream(stream)
    raise ValueError(
        "`stream` must be an AbstractStream, a callable k -> (x0, context, y) or a tuple of arrays "
        f"(x0s, contexts, ys); got {type(stream).__name__}."
    )


def check_stream(stream: AbstractStream, dim: int, *, min_context: int = 1, start: int = 0, num_steps: int = 0):
    """Validate a stream against the model dimension (by tracing one sample); return its shapes."""
    try:
        s = jax.eval_shape(stream, jnp.asarray(start, jnp.int32))
    except ValueError:
        raise
    except Exception as e:  # a user function that cannot be traced
        raise ValueError(f"`stream(k)` failed when traced: {type(e).__name__}: {e}") from e
    if not isinstance(s, Sample):
        raise ValueError("`stream(k)` must return a Sample.")
    if len(s.x0.shape) != 2 or s.x0.shape[-1] != dim:
        raise ValueError(f"stream samples: `x0` must have shape (B, d={dim}), got {s.x0.shape}.")
    if s.y.shape != s.x0.shape:
        raise ValueError(f"stream samples: `y` must have the shape of `x0` {s.x0.shape}, got {s.y.shape}.")
    if len(s.context.shape) != 2 or s.context.shape[-1] != dim:
        raise ValueError(f"stream samples: `context` must have shape (n, d={dim}), got {s.context.shape}.")
    if s.context.shape[0] < min_context:
        raise ValueError(
            f"stream samples: the context has {s.context.shape[0]} points but {min_context} are needed "
            "(the n-point context is the first n points of the reference sample)."
        )
    if stream.length is not None and start + num_steps > stream.length:
        raise ValueError(
            f"the stream has {stream.length} samples but steps {start}..{start + num_steps - 1} were requested."
        )
    return s


__all__ = [
    "AbstractStream",
    "ArrayStream",
    "FunctionStream",
    "Sample",
    "TeacherStudentStream",
    "as_stream",
    "check_stream",
]
