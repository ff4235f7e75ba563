"""``raise`` on a traced path: a check that runs with the compiled code.

Both branches of a staged ``if`` are traced, so a ``raise`` in the branch
that a traced condition selects cannot happen while tracing: the rewriter
turns ``raise EXC`` (inside an ``if`` or a loop) into
``raise af.exception(lambda: EXC)``. Plain Python::

    def exception(make):
        return make()

On a concrete path that is what happens, so the user's own ``raise``
statement raises. Inside a staged branch or loop body ``exception`` does
not return: it signals ``StagedRaise`` to the staging code, which then

* treats the branch as one that does not fall through: the ``if`` takes
  its values from the other branch (``cond.statements._stage_branches``);
* stages a check (``effects.later.later``) that, when the compiled code runs and
  the path to the ``raise`` is taken, builds the user's exception from the
  run-time values (the message is formatted then, not at trace time) and
  raises it.

JAX reports an exception raised in a callback as ``JaxRuntimeError`` whose
message ends with the user's exception; ``autoflow.jit`` re-raises the
user's exception itself (see ``api.jit``).
"""

from __future__ import annotations

import jax

from ...core.origin import message, user_site
from ...errors import ConversionError
from .later import Thunk, later
from .checks import fail, last_user_exception  # noqa: F401 - api's
from ..common.values import in_staged_block


class Signal(BaseException):
    """autoflow's own trace-time signals: never caught by a user's ``except``."""


class StagedRaise(Signal):
    """A ``raise`` reached while tracing a staged branch or loop body."""

    def __init__(self, make, site, first=None, staged=None):
        super().__init__("internal: raise on a traced path")
        # ``make`` is None for an `if` both of whose branches raise: their
        # checks are staged already (``staged``: the second one's result, if it is a
        # ``effects.checks._Check``), and ``first`` is one branch's signal.
        self.make, self.site, self.first, self.staged = make, site, first, staged

    def emit(self):
        """Stage the run-time check for this ``raise`` in the current trace; where
        nothing raised, if that is a traced result (``emit_check``), else None."""
        if self.make is not None:
            return emit_check(self.make, self.site)
        return self.staged

    def at_trace_time(self):
        """The user's exception, for a ``raise`` that every traced path reaches."""
        if self.make is None:
            return self.first.at_trace_time()
        try:
            exc = self.make()
        except Exception as e:  # building it needed concrete values
            return e
        return exc() if isinstance(exc, type) else exc


def at_user_line(exc):
    """``exc`` with a traceback whose last entry is the user's line that the
    check stands for (``file``, ``line``, the source text, the function's name),
    as if the statement had raised there; no frame of JAX's callback machinery."""
    site = getattr(exc, "__autoflow_site__", None)
    exc = exc.with_traceback(None)
    if site is None or not site.filename or site.filename.startswith("<") or site.lineno < 2:
        return exc
    import linecache

    line = linecache.getline(site.filename, site.lineno).rstrip()
    body = line.lstrip()
    indent = max(len(line) - len(body), 1)
    name = _enclosing_function(site) or "_"
    # A function defined so that its `raise` sits on the user's line number
    # in the user's file: tracebacks show that line from the file itself. The
    # statement spans the line's text, so no caret is drawn under a part of it.
    gap = max(len(body) - len("raise__autoflow_exc__"), 1)
    text = ("\n" * (site.lineno - 2) + f"def {name}():\n" + " " * indent + "raise"
            + " " * gap + "__autoflow_exc__\n")
    space = {"__autoflow_exc__": exc}
    try:
        exec(compile(text, site.filename, "exec"), space)
        space[name]()
    except BaseException as e:  # noqa: BLE001 - the exception raised just above
        if e is exc:
            return exc.with_traceback(exc.__traceback__.tb_next)
    return exc


def _enclosing_function(site):
    """The name of the user's function whose body holds ``site``'s line."""
    import ast
    import linecache

    try:
        tree = ast.parse("".join(linecache.getlines(site.filename)))
    except (SyntaxError, ValueError):
        return None
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.lineno <= site.lineno <= (node.end_lineno or node.lineno):
            if best is None or node.lineno > best.lineno:
                best = node
    return best.name if best is not None else None


def _raise_made(make, site):
    exc = make()
    if isinstance(exc, type):
        exc = exc()
    raise fail(exc, site, f"(raised by the `raise` at {site}, checked when the compiled "
               "code ran)")


def emit_check(make, site):
    """Stage a check that raises ``make()``, built from run-time values, when
    the compiled code runs and the path to the ``raise`` is taken; its result where
    nothing raised, if it is a ``effects.checks._Check`` (else None)."""
    return later(_raise_made, (Thunk(make), site), site=site, raises=True)


def exception(make, handlers=None):
    """``make()``, the exception a user's ``raise`` raises (see the module doc).

    ``handlers`` (a thunk) gives the exception types of the ``except`` clauses
    around the ``raise`` in the same function: a traced ``raise`` they would
    catch cannot keep Python's meaning, and is an error at trace time.
    """
    if not in_staged_block():
        return make()
    site = user_site(2)
    if handlers is not None:
        try:
            exc = make()
            caught = isinstance(exc, handlers()) or isinstance(exc, type) and issubclass(
                exc, handlers())
        except Exception:
            caught = False
        if caught:
            raise ConversionError(message(
                site, "this `raise` is on a path chosen by a traced condition, and an "
                "`except` around it would catch it; a staged `raise` happens when the "
                "compiled code runs, where `except` cannot catch it",
                "Compute the fallback value without an exception (e.g. "
                "`jnp.where(b == 0, 0.0, a / b)`), or make the condition static."))
    raise StagedRaise(make, site)


def passthrough():
    """Exception types a user's ``except`` must not catch: autoflow's trace-time
    signals and errors, and JAX's errors about traced values."""
    return _PASSTHROUGH


_PASSTHROUGH = (Signal, ConversionError, jax.errors.ConcretizationTypeError,
                jax.errors.TracerBoolConversionError, jax.errors.TracerIntegerConversionError,
                jax.errors.TracerArrayConversionError, jax.errors.UnexpectedTracerError)

