"""Input checks shared by the public API: clear errors at the boundary, never a silent NaN.

Types, shapes and options are checked in Python when a function is traced (``ValueError`` or
``TypeError`` naming the argument). Values — finite tokens and parameters, weights that sum to one,
a covariance that is positive definite, a solve that did not fail — are checked by one function,
:func:`check`, whichever way the library was called. A failed value check raises
``equinox.EquinoxRuntimeError`` whose message names the argument:

- **Called at top level** (eagerly, the usual case): every compiled entry point (:func:`compiled`,
  public as ``cfm_jax.compiled``) is traced under ``jax.experimental.checkify.checkify``: each check
  is a functional ``checkify.check``, its outcome is data returned beside the result, and the first
  failed check is raised after the call, in Python, from the caller's own line. The checks hold
  through every ``lax.scan``, ``vmap``, ``grad`` or nested entry point inside the program, and the
  program holds no host callback, so JAX's persistent compilation cache stores it. The same holds
  for a user's own step wrapped in ``cfm_jax.compiled`` (a drop-in for ``eqx.filter_jit``).
- **Inside a caller's ``checkify.checkify``**: the checks are that ``checkify``'s functional checks
  (``err.throw()`` raises the library's message), with no host callback either.
- **Inside a caller's own ``jax.jit``/``eqx.filter_jit``/``vmap``/``grad``/``scan``**: the outcome is a
  traced value there, so the check is an ``eqx.branched_error_if`` host callback (the only way a
  check can fail from inside a program it does not own), tied both to the result and — through the
  tangent — to the gradient, so ``jax.jit(jax.grad(loss))`` raises even when the caller keeps only
  the gradient. Under ``eqx.filter_jit`` the error is ``equinox.EquinoxRuntimeError``; under a plain
  ``jax.jit`` JAX reports it as ``jax.errors.JaxRuntimeError`` carrying the same message (logged
  first on its own line: JAX's error opens with a traceback). Such a
  program has host callbacks, which the persistent cache does not store: wrap the step in
  ``cfm_jax.compiled`` (or ``checkify``) instead.
- **Called eagerly outside any entry point** (a constructor given arrays): the check fails at once.
``EQX_ON_ERROR`` (equinox's variable, read when a check fails or is traced) is honoured everywhere:
``raise`` (default), ``nan`` (the result, or the gradient, filled with NaN, nothing raised), ``off``
(no check), ``breakpoint`` (equinox's debugger, where a host callback runs; raised otherwise).

``throw`` (diffrax's name) exists only where a solve can fail (``forward``,
``loss_and_grad``, ``adjoint_trajectories``, ``token_adjoint``): ``throw=False`` leaves the checks
out and reports the outcome as ``result``. Every other function always checks (a sweep over its own
inputs runs in ``cfm_jax.compiled``, where the checks are data and the cache stores it).

Advice that is not an error — a warning that depends on values, such as the heavy-tail regime of a
model at a Gaussian context — travels beside the result (:func:`notice`) and is given after a
top-level call; inside a caller's own transformation there are no values to warn about and no
warning is given (the diagnostic the warning comes from can be called outside it).
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import functools
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar, cast

import diffrax
import equinox as eqx
import jax
import jax.extend.core as jex_core
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer
from jax.experimental import checkify

_P = ParamSpec("_P")
_R = TypeVar("_R")
_T = TypeVar("_T")


class _RepeatedCheckLog(logging.Filter):
    """JAX's log of a callback failed by an ``eqx.error_if`` check, made the check's sentence alone:
    under a plain ``jax.jit`` the error raised next opens with JAX's line and a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if record.getMessage() == "jax.pure_callback failed" and type(error).__module__.startswith("equinox"):
            record.msg, record.args = "%s", (str(error).split("\n\n\n")[0],)  # equinox's advice follows
            record.exc_info = record.exc_text = None
        return True


logging.getLogger("jax._src.callback").addFilter(_RepeatedCheckLog())


def _static(value):
    """A numpy integer or bool scalar as the Python value (``eqx.filter_jit`` would trace it)."""
    return bool(value) if isinstance(value, np.bool_) else int(value) if isinstance(value, np.integer) else value


def _on_error() -> str:
    """What a failed check does: equinox's ``EQX_ON_ERROR`` (raise, nan, off, breakpoint)."""
    return os.environ.get("EQX_ON_ERROR", "raise")


class _Mode(enum.Enum):
    FUNCTIONAL = enum.auto()  #: traced under checkify (ours, or a caller's): checks are ``checkify.check``


class _Flags:
    """The checks at the top level of a program traced by :func:`compiled` (a caller's transformation
    around it): ``(flag, message)`` pairs returned beside its result, a flag True when its check
    failed. ``trace`` is that top level: a check traced deeper (a ``scan`` body) is attached there."""

    def __init__(self):
        self.checks: list[tuple[jax.Array, str]] = []
        self.trace = jex_core.get_opaque_trace_state()


#: how a check is made in the program being traced: FUNCTIONAL under checkify, flags returned
#: beside the result inside a caller's transformation; None elsewhere
_MODE: contextvars.ContextVar[_Mode | _Flags | None] = contextvars.ContextVar("mode", default=None)

#: checkify's traced function: its frame on the stack means a caller's ``checkify.checkify`` is tracing
_CHECKIFY_CODE = checkify.checkify(lambda: None).__wrapped__.__code__  # pyright: ignore[reportFunctionMemberAccess]

#: the suffix checkify adds to a failed check's message
_CHECKIFY_SUFFIX = " (`check` failed)"
#: how checkify's refusal of a program it cannot rewrite begins
_CHECKIFY_UNSUPPORTED = "Checkify does not support"


def _level_flags() -> _Flags | None:
    """The flags of the compiled program whose top level this line is at (a check can leave it), else None."""
    mode = _MODE.get()
    return mode if isinstance(mode, _Flags) and mode.trace == jex_core.get_opaque_trace_state() else None


def _functional() -> bool:
    """Whether a check traced here is functionalised: inside an entry point traced under checkify,
    or anywhere under a caller's ``checkify.checkify``."""
    if _MODE.get() is _Mode.FUNCTIONAL:
        return True
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is _CHECKIFY_CODE:
            return True
        frame = frame.f_back
    return False


def _top_level() -> bool:
    """Whether no transformation is tracing here (an eager call)."""
    return jex_core.get_opaque_trace_state() == _TOP_LEVEL


def _untraced_state():
    """The trace state where nothing is tracing: read in a new thread, so that importing this module
    inside a caller's ``jit`` (the package is lazy) does not take that trace for the top level."""
    state: list = []
    reader = threading.Thread(target=lambda: state.append(jex_core.get_opaque_trace_state()))
    reader.start()
    reader.join()
    return state[0]


_TOP_LEVEL = _untraced_state()


def _escape(message: str) -> str:
    """``message`` as a ``str.format`` template that prints itself (checkify formats its messages)."""
    return message.replace("{", "{{").replace("}", "}}")


def _nan_like(x):
    """``x`` filled with NaN (inexact), the largest value (integers) or True, as ``EQX_ON_ERROR=nan``."""
    if not eqx.is_array(x):
        return x
    if jnp.issubdtype(x.dtype, jnp.inexact):
        return jnp.full_like(x, jnp.nan)
    if jnp.issubdtype(x.dtype, jnp.integer):
        return jnp.full_like(x, jnp.iinfo(x.dtype).max)
    return jnp.ones_like(x) if x.dtype == bool else x


def _fail(out, message: str):
    """A check failed where its outcome is known (an eager call): raise, or ``EQX_ON_ERROR``'s answer."""
    on_error = _on_error()
    if on_error == "off":
        return out
    if on_error == "nan":
        return jax.tree.map(_nan_like, out)
    raise eqx.EquinoxRuntimeError(message)


@functools.partial(jax.custom_jvp, nondiff_argnums=(3,))
def _tied(x, pred, index, messages: tuple[str, ...]):
    """``eqx.branched_error_if(x, pred, index, messages)`` whose check also guards the tangent, so a
    caller that keeps only a gradient (``jax.jit(jax.grad(f))``) still runs it: the tangent (and so,
    transposed, the cotangent) is multiplied by a checked one."""
    return eqx.branched_error_if(x, pred, index, messages)


@_tied.defjvp
def _tied_jvp(messages, primals, tangents):
    x, pred, index = primals
    one = eqx.branched_error_if(jnp.ones(()), pred, index, messages)
    tx = jax.tree.map(lambda t: t * one.astype(t.dtype), tangents[0])
    return _tied(x, pred, index, messages), tx


def _attach(x, pred, index, messages: Sequence[str]):
    """``x`` carrying the traced check ``pred`` (message ``messages[index]``) inside a caller's
    transformation: a functional check under a caller's checkify, else a host callback tied to ``x``
    and to its tangent (module docstring)."""
    messages = tuple(messages)
    if _functional():
        for i, message in enumerate(messages):
            checkify.check(~(pred & (index == i)), _escape(message))
        return x
    pred, index = jnp.any(pred), jnp.asarray(index, jnp.int32)
    inexact, rest = eqx.partition(x, eqx.is_inexact_array)
    if jax.tree.leaves(inexact):
        inexact = _tied(inexact, pred, index, messages)
    if jax.tree.leaves(rest):  # integer and boolean arrays: no tangent to guard
        rest = eqx.branched_error_if(rest, pred, index, messages)
    return eqx.combine(inexact, rest)


def check(x: _T, failed, message: str) -> _T:
    """``x``, with the value check ``failed`` (a boolean array: any True fails) raising ``message``.

    One function for every value check, whatever traces it (module docstring): a functional check
    under checkify (every entry point's own program, and a caller's ``checkify``), the failure raised
    at once when the values are known, a host callback tied to ``x`` and its gradient inside a
    caller's own ``jit``/``vmap``/``grad``.
    """
    if _on_error() == "off":
        return x
    if not isinstance(failed, Tracer):  # known now (given values, or decided by shapes)
        return _fail(x, message) if bool(np.any(np.asarray(failed))) else x
    if _functional():
        checkify.check(~jnp.any(failed), _escape(message))
        return x
    flags = _level_flags()
    if flags is not None:
        flags.checks.append((jnp.any(failed), message))
        return x
    return _attach(x, jnp.any(failed), 0, (message,))


#: the notices of the program being traced by :func:`compiled` at top level: ``(values, advise)`` pairs
_NOTICES: contextvars.ContextVar[list[tuple[object, Callable]] | None] = contextvars.ContextVar("notices", default=None)


def notice(values, advise: Callable) -> None:
    """Call ``advise(values)`` on the host after the compiled call that traces this line, when
    ``values`` (a pytree of arrays) have values there: at top level, not inside a caller's
    ``jit``/``vmap``/``grad`` (module docstring). ``advise`` is static: the same function for every
    trace of one structure (a module-level function, not a closure over traced values). Outside a
    program traced by :func:`compiled` it is called at once if the values are concrete."""
    notices = _NOTICES.get()
    if notices is None:
        _advise(values, advise)
    else:
        notices.append((values, advise))


def _advise(values, advise: Callable) -> None:
    if all(is_concrete(a) for a in jax.tree.leaves(values)):
        advise(values)


@contextlib.contextmanager
def _tracing(mode: _Mode | _Flags, notices: list | None):
    """While a program is traced: how its checks are made, and where its notices go."""
    tokens = _MODE.set(mode), _NOTICES.set(notices)
    try:
        yield
    finally:
        _MODE.reset(tokens[0])
        _NOTICES.reset(tokens[1])


def _checkified(fn):
    """``fn`` traced under ``checkify.checkify`` with its checks functional, returning
    ``(error, out, (values, advice))``: checkify's error value, ``fn``'s result and its notices (the
    values and their host functions). Arrays pass through checkify; the rest of the result (static
    fields, the advice functions) is carried around it."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        static: list = []

        def arrays_only():
            notices: list[tuple[object, Callable]] = []
            with _tracing(_Mode.FUNCTIONAL, notices):
                out = fn(*args, **kwargs)
            result = (out, _split(notices))
            dynamic, rest = eqx.partition(result, eqx.is_array)
            static.append(rest)
            return dynamic

        error, dynamic = checkify.checkify(arrays_only)()
        out, notices = eqx.combine(dynamic, static[0])
        return error, out, notices

    return run


def _in_functional(fn):
    """``fn`` traced with its checks functional, for an outer checkify (an enclosing entry point's or
    the caller's) to collect; no notices (module docstring)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with _tracing(_Mode.FUNCTIONAL, None):
            return fn(*args, **kwargs)

    return run


def _message(error) -> str | None:
    """The library's message of checkify's concrete ``error``, None if no check failed."""
    text = error.get()
    if text is None:
        return None
    return text[: -len(_CHECKIFY_SUFFIX)] if text.endswith(_CHECKIFY_SUFFIX) else text


def compiled(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """``eqx.filter_jit(fn)`` whose value checks are data: arrays traced, everything else static, one
    program per structure; a failed value check raised as ``equinox.EquinoxRuntimeError`` naming the
    argument after the call, and the library's warnings that depend on values given after that.

    The decorator of every entry point of the library, public for a user's own step: the checks of
    the library's functions called inside (through ``scan``, ``vmap`` and ``grad`` too) become the
    step's own data, with no host callback, so the persistent compilation cache stores the step.
    Inside another ``compiled`` function or a caller's ``checkify`` its checks join the enclosing
    ones; inside a caller's own ``jit``/``vmap``/``grad`` they are host callbacks tied to the result
    and its gradient. A program ``checkify`` cannot rewrite (a ``vmap`` of a while loop) keeps its
    checks as data at its top level and as host callbacks deeper.

    Numpy integer and bool scalars among the top-level arguments are turned into Python values
    first, so that ``steps=np.int64(4)`` is static like ``steps=4`` (``eqx.filter_jit`` traces every
    numpy value).

    ``step.lower(*args, **kwargs)`` lowers the program a top-level call runs (checks as data).

    Example: ``step = cfm_jax.compiled(lambda model, x0, context, y: cfm_jax.loss_and_grad(model, x0,
    context, y))``.
    """
    top = eqx.filter_jit(_checkified(fn))
    inner = eqx.filter_jit(_in_functional(fn))
    traced = eqx.filter_jit(_flagged(fn))
    # checkify cannot rewrite every program (a vmap of a while loop, e.g. batched Sinkhorn or
    # adaptive solves): such a function's checks are flags at its top level, host callbacks deeper
    flags_only = [False]

    @functools.wraps(fn)
    def call(*args, **kwargs):
        args, kwargs = tuple(map(_static, args)), {k: _static(v) for k, v in kwargs.items()}
        if _functional():  # inside an entry point, or a caller's checkify: the checks join its own
            return inner(*args, **kwargs)  # pyright: ignore[reportCallIssue]
        if _top_level() and not flags_only[0]:
            try:
                error, out, notices = top(*args, **kwargs)  # pyright: ignore[reportCallIssue]
            except ValueError as e:
                if not str(e).startswith(_CHECKIFY_UNSUPPORTED):
                    raise
                flags_only[0] = True
            else:
                message = _message(error)
                return _advised(out if message is None else _fail(out, message), notices)
        # inside a caller's own transformation (or a program checkify cannot rewrite)
        out, (flags, messages), notices = traced(*args, **kwargs)  # pyright: ignore[reportCallIssue]
        return _advised(_raise_flagged(out, flags, messages), notices)

    lower = lambda *a, **kw: top.lower(*map(_static, a), **{k: _static(v) for k, v in kw.items()})  # noqa: E731
    call.lower = lower  # pyright: ignore[reportAttributeAccessIssue]
    return cast(Callable[_P, _R], call)


def _flagged(fn):
    """``fn`` returning ``(out, (flags, messages), (values, advice))``: the flags ``(k,)`` of the
    checks at the top level of its program, their (static) messages (:class:`_Flags`), and its
    notices."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        flags, notices = _Flags(), []
        with _tracing(flags, notices):
            out = fn(*args, **kwargs)
        stacked = jnp.stack([f for f, _ in flags.checks]) if flags.checks else jnp.zeros((0,), bool)
        return out, (stacked, tuple(m for _, m in flags.checks)), _split(notices)

    return run


def _split(notices: list[tuple[object, Callable]]) -> tuple[tuple, tuple]:
    """``(values, advice)`` of a program's notices."""
    return tuple(v for v, _ in notices), tuple(a for _, a in notices)


def _advised(out, notices):
    """``out``, after giving the notices ``(values, advice)`` whose values are known (top level)."""
    for value, advise in zip(*notices, strict=True):
        _advise(value, advise)
    return out


def _raise_flagged(out, flags, messages: tuple[str, ...]):
    """``out`` carrying the checks ``flags`` of a call inside a caller's transformation: joined to an
    enclosing program's flags at the same level; raised at once when they carry values (an eager
    ``grad``); else attached to ``out`` and its gradient (:func:`_attach`)."""
    if not messages:
        return out
    enclosing = _level_flags()
    if enclosing is not None:
        enclosing.checks.extend(zip(flags, messages, strict=True))
        return out
    try:
        values = np.array([bool(f) for f in flags])  # a tracer that carries values (an eager grad)
    except jax.errors.ConcretizationTypeError:  # abstract: inside a caller's jit or vmap
        return _attach(out, jnp.any(flags), jnp.argmax(flags), messages)
    failed = np.flatnonzero(values)
    return _fail(out, messages[int(failed[0])]) if failed.size else out


def check_solved(x, result, prefix: str = ""):
    """``x`` with a check (:func:`check`) that the solve reporting ``result`` (``diffrax.RESULTS``)
    succeeded: one check per way diffrax can fail, raising diffrax's own message for it after
    ``prefix``."""
    result = jax.lax.stop_gradient(result)  # an integer code, not differentiated
    # the enumeration's items, as diffrax declares them (eqx.Enumeration's class table)
    for name, item in diffrax.RESULTS._name_to_item.items():
        if name != "successful":
            x = check(x, result == item, prefix + str(diffrax.RESULTS[item]))
    return x


def is_concrete(x) -> bool:
    return not isinstance(x, Tracer)  # actual values, not a tracer inside jit/vmap/grad


def check_finite(name: str, x) -> None:
    """:func:`finite` now on a concrete array (a constructor given values); a traced one is left to its entry point."""
    if is_concrete(x):
        check(x, ~np.isfinite(np.asarray(x)).all(), f"`{name}` contains non-finite values (nan/inf).")


def finite(name: str, x):
    """``x`` with a check (:func:`check`) that its entries are finite, the error naming ``name``."""
    return check(x, ~jnp.all(jnp.isfinite(x)), f"`{name}` contains non-finite values (nan/inf).")


def finite_params(model):
    """``model`` with a check, inside compiled code (:func:`check`), that its floating parameters are finite."""
    leaves = jax.tree.leaves(eqx.filter(model, eqx.is_inexact_array))
    ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in leaves])) if leaves else jnp.array(True)
    return check(model, ~ok, "`model` parameters contain non-finite values (nan/inf).")
