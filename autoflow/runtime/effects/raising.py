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

import copy
import sys
import threading

import jax

from .. import jax as jx
from ...core.origin import message, user_site
from ...core.libraries import is_library_file
from ...errors import AutoflowError, ConversionError, TracingError
from . import later as later_module, path_condition
from .later import Thunk, later
from .checks import fail, last_user_exception
from ..common.values import in_staged_block
from ..jax import current_trace


class Signal(BaseException):
    """autoflow's own trace-time signals: never caught by a user's ``except``."""


class StagedRaise(Signal):
    """A ``raise`` reached while tracing a staged branch or loop body."""

    def __init__(self, make, site, first=None, staged=None, what="the `raise`"):
        super().__init__("internal: raise on a traced path")
        # ``make`` is None for an `if` both of whose branches raise: their
        # checks are staged already (``staged``: the second one's result, if it is a
        # ``effects.checks._Check``), and ``first`` is one branch's signal.
        self.make, self.site, self.first, self.staged = make, site, first, staged
        self.what = what  # (for the note: what raised, at `site`)

    def emit(self):
        """Stage the run-time check for this ``raise`` in the current trace; where
        nothing raised, if that is a traced result (``emit_check``), else None."""
        if self.make is not None:
            return emit_check(self.make, self.site, self.what)
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


def users_exception(e):
    """The user's exception that JAX's error ``e`` reports (a staged check that failed
    in a callback: ``checks.last_user_exception``), at the user's line; else None."""
    user = last_user_exception()
    if user is None or not jx.raised_in_callback(e, user):
        return None
    return at_user_line(user)


jx.callbacks.on_users_exception(users_exception)


def _caught_around(exc, frame):
    """Would an ``except`` of the user's code around ``frame``'s line, or around a call
    that led there in the code being traced, catch ``exc``? (Read from each frame's
    source, up to the first user frame that is not converted code above converted code:
    the caller of the traced function, whose ``except`` the run-time error reaches; an
    ``except`` whose type cannot be evaluated counts as catching it.)"""
    import ast
    import linecache

    from ...core.loading import converted
    from ...core.parsing import module_ast

    seen_converted = False
    while frame is not None:
        code = frame.f_code
        if not is_library_file(code.co_filename):
            if converted(code):
                seen_converted = True
            elif seen_converted:
                return False
            tree = module_ast(code.co_filename, linecache.getlines(code.co_filename))
            line = frame.f_lineno
            for node in ast.walk(tree) if tree is not None else ():
                if isinstance(node, ast.Try) and node.body \
                        and node.body[0].lineno <= line <= node.body[-1].end_lineno:
                    for h in node.handlers:
                        if h.type is None or _catches(h.type, exc, frame):
                            return True
                if isinstance(node, ast.With) and node.body \
                        and node.body[0].lineno <= line <= node.body[-1].end_lineno:
                    # `with contextlib.suppress(E):` catches E
                    for item in node.items:
                        call = item.context_expr
                        if isinstance(call, ast.Call) and (getattr(call.func, "attr", None) or getattr(
                                call.func, "id", None)) == "suppress" and call.args \
                                and _catches(ast.Tuple(elts=call.args, ctx=ast.Load()), exc, frame):
                            return True
        frame = frame.f_back
    return False


def _catches(node, exc, frame):
    import ast

    try:
        kinds = eval(compile(ast.Expression(node), "<except>", "eval"),  # noqa: S307
                     frame.f_globals, dict(frame.f_locals))
        return isinstance(exc, kinds)
    except Exception:  # noqa: BLE001 - unknown: as if it caught it
        return True


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


def _raise_made(make, site, what="the `raise`"):
    exc = make()
    if isinstance(exc, type):
        exc = exc()
    raise fail(exc, site, f"(raised by {what} at {site}, checked when the compiled "
               "code ran)")


def emit_check(make, site, what="the `raise`"):
    """Stage a check that raises ``make()``, built from run-time values, when
    the compiled code runs and the path to the ``raise`` is taken; its result where
    nothing raised, if it is a ``effects.checks._Check`` (else None)."""
    return later(_raise_made, (Thunk(make), site, what), site=site, raises=True)


def on_its_path(exc):
    """A ``StagedRaise`` for ``exc``, an exception Python raised in the user's own code
    while autoflow traced a staged branch (``d["b"]``, ``1 // 0``, ``obj.missing``), so
    that it is raised where the compiled code takes that path, as Python raises it only
    there (its own ``except`` around the ``if`` no longer sees it while tracing); None
    for any other: autoflow's and JAX's errors, one that shows a tracer (an operation
    eager Python would not fail on), one raised in library code or autoflow's."""
    if not isinstance(exc, Exception) or isinstance(exc, _PASSTHROUGH + (AutoflowError,)) \
            or type(exc).__module__.split(".")[0] in ("jax", "jaxlib", "autoflow") \
            or jx.matches_jax_error("tracer named", str(exc)):
        return None
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or is_library_file(tb.tb_frame.f_code.co_filename):
        return None
    site = user_site(frame=tb.tb_frame)  # (the innermost frame: the failing line and column)
    refuse_if_caught(exc, tb.tb_frame, site, f"this line raises {type(exc).__name__} on a "
                     "path chosen by a traced condition",
                     "Test for the case instead of catching the error (`if key in d:`), or "
                     "make the condition static.")

    # (strings made from traced values among its arguments, `raise E("says " + m)` in a
    # helper: carried as the check's operands and made from the run-time values)
    args = exc.args if any(isinstance(a, later_module.Deferred) for a in exc.args) else None

    def make():
        try:  # (a fresh one at each run: notes and traceback are its own)
            new = copy.copy(exc)
        except Exception:  # noqa: BLE001 - an exception that cannot be copied
            new = exc
        if args is not None:
            new.args = args
        for name in ("__notes__", "__autoflow_site__"):
            new.__dict__.pop(name, None)
        if "__notes__" in exc.__dict__:
            new.__notes__ = list(exc.__notes__)
        return new.with_traceback(None)
    return StagedRaise(make, site, what="this line")


def exception(make, handlers=None, what="this `raise` is on a path chosen by a traced condition",
              kind="the `raise`", cause=None):
    """``make()``, the exception a user's ``raise`` raises (see the module doc).

    ``handlers`` (a thunk) gives the exception types of the ``except`` clauses
    around the ``raise`` in the same function; an ``except`` of a caller in the traced
    code is read from its source (``_caught_around``): a traced ``raise`` they would
    catch cannot keep Python's meaning, and is an error at trace time. ``cause`` (a
    thunk): the ``C`` of ``raise E from C``, made where ``E`` is.
    """
    if cause is not None:
        make = _caused(make, cause)
    if not in_staged_block():
        return make()
    site = user_site(2)
    try:
        made = make()
    except Exception:  # (it needs run-time values: not known here)
        made = None
    caught = False
    if handlers is not None and made is not None:
        try:
            caught = isinstance(made, handlers()) or isinstance(made, type) and issubclass(
                made, handlers())
        except Exception:
            caught = False
    if not caught and made is not None:
        # an `except` of a caller in the traced code (`try: y = self.inv(x)`): the
        # frames around this one, read from their source
        try:
            caught = _caught_around(made() if isinstance(made, type) else made,
                                    sys._getframe(1))
        except Exception:  # noqa: BLE001 - an exception class that needs arguments
            caught = False
    if caught:
        _refuse(site, what)
    raise StagedRaise(make, site, what=kind)


def _caused(make, cause):
    """``make``, whose exception gets ``cause()`` as its ``__cause__`` (``raise E from C``)."""
    make, cause = Thunk(make), Thunk(cause)  # (their traced values are the check's operands)

    def made():
        exc, why = make(), cause()
        exc = exc() if isinstance(exc, type) else exc
        if not (why is None or isinstance(why, BaseException)
                or isinstance(why, type) and issubclass(why, BaseException)):
            raise TypeError("exception causes must derive from BaseException")
        exc.__cause__ = why() if isinstance(why, type) else why
        exc.__suppress_context__ = True
        return exc
    return made


_FALLBACK = ("Compute the fallback value without an exception (e.g. "
             "`jnp.where(b == 0, 0.0, a / b)`), or make the condition static.")


def _refuse(site, what, advice=_FALLBACK):
    raise ConversionError(message(
        site, f"{what}, and an `except` around it would catch it (or a "
        "`contextlib.suppress`); there it is raised when the compiled code runs, where "
        "`except` cannot catch it", advice)) from None


def user_frame(exc):
    """The innermost frame of the user's code in ``exc``'s traceback, or None."""
    tb, frame = exc.__traceback__, None
    while tb is not None:
        if not is_library_file(tb.tb_frame.f_code.co_filename):
            frame = tb.tb_frame
        tb = tb.tb_next
    return frame


def refuse_if_caught(exc, frame, site, what, advice=_FALLBACK):
    """autoflow's error at ``site`` where an ``except`` of the user's around ``frame``
    (the user's code that raises ``exc`` on a traced path: a staged ``raise``, a
    failed ``assert``, a read of a variable left unbound) would catch ``exc``: raised
    when the compiled code runs, it would reach the caller instead."""
    try:
        caught = _caught_around(exc, frame)
    except Exception:  # noqa: BLE001 - unreadable source: nothing to tell
        caught = False
    if caught:
        _refuse(site, what, advice)


class _Held:
    """The checks staged in one trace (``later.stage``'s collector), kept to be staged later."""

    holds = True

    def __init__(self, trace):
        self.trace, self.records = trace, []

    def record(self, call, operands, pred):
        if current_trace() is not self.trace:
            return False
        self.records.append((call, list(operands), pred))
        return True


_finally = threading.local()


class checks_after_finally:
    """Context (the rewriter's, around a ``try`` with a ``finally`` clause): a check
    staged in the ``try`` body (a traced ``raise``, a failed ``assert``) stops what
    follows it there, but raises only after the ``finally`` clause (``finally_part``),
    which runs on every path, as Python runs it on the way out."""

    def __enter__(self):
        self.held = _Held(current_trace())
        self.mark = path_condition.raise_mark()
        self.released = False
        later_module.collect(self.held)
        _finally.__dict__.setdefault("stack", []).append(self)
        return self

    def release(self):
        if not self.released:
            self.released = True
            later_module.uncollect(self.held)

    def __exit__(self, *exc):
        self.release()
        _finally.stack.pop()
        return False


class finally_part:
    """Context (the rewriter's, around a ``finally`` clause's statements): they run
    whether a check of the ``try`` body failed; then those checks are staged."""

    def __enter__(self):
        self.outer = _finally.stack[-1]
        self.outer.release()
        path_condition.drop_raises_since(self.outer.mark)
        return self

    def __exit__(self, kind, exc, tb):
        if kind is None:
            for call, operands, pred in self.outer.held.records:
                later_module.stage(call, operands, when=pred, check=True)
        return False


def passthrough():
    """Exception types a user's ``except`` must not catch: autoflow's trace-time
    signals and errors, and JAX's errors about traced values."""
    return _PASSTHROUGH


# (TracingError: JAX's errors about traced values as autoflow re-issues them, pointing at
# the user's line: `TracedShapeError` for `jnp.zeros(n)` with a traced `n`...)
_PASSTHROUGH = (Signal, ConversionError, TracingError, jax.errors.ConcretizationTypeError,
                jax.errors.TracerBoolConversionError, jax.errors.TracerIntegerConversionError,
                jax.errors.TracerArrayConversionError, jax.errors.UnexpectedTracerError,
                jax.errors.NonConcreteBooleanIndexError)

