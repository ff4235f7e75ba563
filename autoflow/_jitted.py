"""What ``autoflow.jit`` returns, and when it wraps ``jax.jit``'s function.

``_Jitted`` wraps it where a staged check can fire (``_may_raise``: a ``raise``, an
``assert``, a ``warn(...)`` or a call checked when the compiled code runs, in the
function or the helpers of its file it names), and re-raises the user's exception
from a run-time check as itself; ``_teaching`` re-issues JAX's tracing errors in the
user's terms; ``autoflow.jit`` of a generator function is refused
(``_generator_error``).
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys
import types
from typing import Any

from .core.caches import Bounded
from .core.origin import PACKAGE_DIR
from .errors import ConversionError


def _generator_error(fn):
    """What ``autoflow.jit`` of a generator function gives: calling it raises
    autoflow's error at the ``def`` (a generator is no value ``jax.jit`` can return)."""
    from .core.origin import Site, message

    code = inspect.unwrap(fn).__code__
    name = getattr(fn, "__qualname__", code.co_name)

    @functools.wraps(fn)
    def refuse(*args, **kwargs):
        raise ConversionError(message(
            Site(code.co_filename, code.co_firstlineno, None),
            f"`{name}` is a generator function (it has `yield`): calling it makes a "
            "generator, which a jitted function cannot return",
            f"Jit the code that consumes it instead (`autoflow.jit` of a function that runs "
            f"`for v in {code.co_name}(...)` or `list({code.co_name}(...))`), or make "
            f"`{name}` return an array (`jnp.stack([...])`)."))

    return refuse


# id(converted function) -> its `common.teach.teaching` wrapper: the wrapper holds the
# function, so the id cannot be reused while the entry exists. Held, not weakly: JAX's
# cache of compiled programs is keyed by the wrapper, and `autoflow.jit(f)(x)` made
# again at each call (the wrapper dropped in between) compiled again at each call.
_teachers: Bounded = Bounded(512)  # (key -> (fn, wrapper))


def _teaching(fn, fast=False, writes=False):
    """``fn`` re-issuing JAX's tracing errors in the user's terms (``runtime.common.teach``),
    with ``fast``, its run-time checks tied to its results (``effects.checks.fast_checks``),
    its list and dict arguments watched (``_arguments.watching``; with ``writes``, those it
    changes returned beside its result); one wrapper per function, so ``jax.jit``'s cache
    (keyed by the function) is shared."""
    from ._arguments import watching
    from .runtime.effects.checks import fast_checks
    from .runtime.common.teach import teaching

    key = (id(fn), fast, writes)
    hit = _teachers.get(key)
    if hit is None or hit[0] is not fn:  # (not `inspect.unwrap`: `fn` may wrap another)
        watched = watching(fn, writes)
        hit = _teachers[key] = (fn, teaching(fast_checks(watched) if fast else watched))
    return hit[1]


def _may_raise(fn, _seen=None) -> bool:
    """Can a staged check fire in ``fn`` or the helpers it calls in its file (a
    ``raise``, ``assert`` or ``warn(...)`` in ``fn``, a read after a loop of a
    variable only the loop binds, or in a function or class of the same file
    that ``fn`` names, directly or through others it names; a ``range`` with a
    step anywhere in the file), or, on a JAX without
    checkpointed loops, does the file have a ``while`` or ``for ... range(`` loop
    (which ``jax.grad`` may then fail to differentiate)? When in doubt, yes."""
    import linecache

    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    code = getattr(fn, "__code__", None) or getattr(getattr(type(fn), "__call__", None),
                                                    "__code__", None)
    if code is None:
        return True
    lines = linecache.getlines(code.co_filename)
    if not lines:
        return True
    if not _checkpointed_loops():
        if any(line.lstrip().startswith("while ") or line.lstrip().startswith("for ")
               and "range(" in line for line in lines):
            return True
    if any("range(" in line and line.count(",", line.index("range(")) >= 2 for line in lines):
        return True  # a `range` with a step: a traced step of 0 raises ValueError at run time
    if any(line.lstrip().startswith(("raise", "assert", "while ", "for ", "if ")) or "warn(" in line
           or any(word in line for word in _CHECKED_CALLS) for line in lines):
        try:
            if _reaches_a_raise(code, lines):
                return True
        except Exception:  # noqa: BLE001 - unreadable: keep the wrapper
            return True
    if _reads_an_undefined_global(fn, code):
        return True  # (Python's NameError, where the compiled code takes that path)
    return _elsewhere_may_raise(fn, code, _seen if _seen is not None else set())


def _reads_an_undefined_global(fn, code) -> bool:
    """Does ``code`` (or a function it defines) read a global that neither ``fn``'s
    module nor the builtins define?"""
    import builtins
    import dis

    space = getattr(fn, "__globals__", None)
    if space is None:
        return False
    todo = [code]
    while todo:
        c = todo.pop()
        for ins in dis.get_instructions(c):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and ins.argval not in space \
                    and not hasattr(builtins, ins.argval):
                return True
        todo += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    return False


def _elsewhere_may_raise(fn, code, seen) -> bool:
    """May a function or class of another file of the user's that ``fn`` names (as a
    global, or an attribute of a module it names: ``helpers.checked``) raise?"""
    from .core.libraries import is_library_file

    names, todo = set(), [code]
    while todo:  # (the names its nested functions and lambdas read too)
        c = todo.pop()
        names.update(c.co_names)
        todo += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    space = getattr(fn, "__globals__", None) or {}
    for name in names:
        value = space.get(name)
        values = [getattr(value, n, None) for n in names] \
            if isinstance(value, types.ModuleType) else [value]
        for v in values:
            target = inspect.unwrap(getattr(v, "__func__", v)) if callable(v) else None
            other = getattr(getattr(target, "__code__", None), "co_filename", None) \
                or getattr(inspect.getmodule(target), "__file__", None) if target is not None \
                else None
            if other is None or other == code.co_filename or is_library_file(other) \
                    or id(target) in seen:
                continue
            seen.add(id(target))
            if _may_raise(target, seen):
                return True
    return False


# filename -> (its ast, {name: [(top-level def or class, raises?)]})
_RAISES: dict[str, Any] = Bounded(256)


def _reaches_a_raise(code, lines) -> bool:
    import ast

    from .core.parsing import _find, module_ast

    tree = module_ast(code.co_filename, lines)
    if tree is None:
        return True
    hit = _RAISES.get(code.co_filename)
    if hit is None or hit[0] is not tree:
        tops: dict[str, list[Any]] = {}
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stringy = _makes_strings(stmt)
                raises = any(_raises(n, stringy) for n in ast.walk(stmt))
                tops.setdefault(stmt.name, []).append((stmt, raises))
                if isinstance(stmt, ast.ClassDef):  # its methods, by their names too
                    for m in stmt.body:
                        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            tops.setdefault(m.name, []).append((stmt, raises))
        hit = _RAISES[code.co_filename] = (tree, tops)
    tops = hit[1]
    node = _find(tree.body, code.co_firstlineno, code.co_name)
    if node is None or isinstance(node, list):  # a lambda, or not found: every name it could
        return True                             # reach is unknown
    todo, seen = [node], set()
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if _zero_trip_read(n) or _table_read(n) or _loop_dict_key(n) or _divided_carry(n):
            return True
        stringy = _makes_strings(n)
        for sub in ast.walk(n):
            if _raises(sub, stringy):
                return True
            name = sub.id if isinstance(sub, ast.Name) else \
                sub.attr if isinstance(sub, ast.Attribute) else None
            for other, raises in tops.get(name or "", ()):
                if raises:
                    return True
                todo.append(other)
    return False


def _zero_trip_read(fn) -> bool:
    """Does a loop in ``fn`` bind a variable that code after the loop reads (or the
    body reads above where it binds it: the value of an earlier iteration), or an
    ``if`` on one of its paths only, and that nothing binds before it? (Such a read
    raises Python's ``UnboundLocalError`` when the compiled code runs and nothing
    bound it.) A ``del`` of a name in a loop, an ``if`` or a ``match`` leaves it unbound on
    a path: so does a ``match`` case that binds it."""
    def names(node, ctx):
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}

    loops = [n for n in ast.walk(fn) if isinstance(n, (ast.While, ast.For, ast.If, ast.Match))]
    if not loops:
        return False
    if any(names(loop, ast.Del) for loop in loops):
        return True
    for loop in loops:
        body = [s for case in loop.cases for s in case.body] if isinstance(loop, ast.Match) \
            else loop.body
        inside = set().union(set(), *(names(s, ast.Store) for s in body))
        if isinstance(loop, ast.For):
            inside |= names(loop.target, ast.Store)
        elif isinstance(loop, ast.If):  # bound on some paths only (an `if` can leave it unbound)
            inside |= set().union(set(), *(names(s, ast.Store) for s in loop.orelse))
            always = _always([loop])
            inside = set() if always is None else inside - always
        before = _bound_before(fn, loop.lineno)
        end = loop.end_lineno or loop.lineno
        loads = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
        for name in inside - before:
            first = min((n.lineno for s in body for n in ast.walk(s)
                         if isinstance(n, ast.Name) and n.id == name
                         and isinstance(n.ctx, ast.Store)), default=end)
            # read after the loop, or in the body above its first binding (an
            # earlier iteration's value) or on its line (`m = m + 1`)
            if any(n.id == name and (n.lineno > end or loop.lineno < n.lineno <= first)
                   for n in loads):
                return True
    return False


def _bound_before(fn, line) -> set:
    """The names ``fn``'s text binds above ``line``: its parameters and what it assigns
    (``y: float`` alone binds nothing)."""
    declared = {id(n.target) for n in ast.walk(fn) if isinstance(n, ast.AnnAssign) and n.value is None}
    return {a.arg for a in ast.walk(fn) if isinstance(a, ast.arg)} | {
        n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        and n.lineno < line and id(n) not in declared}


def _divided_carry(fn) -> bool:
    """Does a ``while`` loop, or a ``for`` over ``range(...)``, in ``fn`` divide a variable
    bound before it and assign it the result (``x = x / 2``, ``x /= 2``, ``x = 1 / x``,
    ``x = x ** 0.5``)? Of an integer array that is a float carried from the first
    iteration on, and where the loop runs no iteration autoflow's error when the compiled
    code runs (``runtime.loops.flags._kept_dtypes``). (Not a division of other values:
    ``p = r + (a / b) * p``, common in numeric loops, keeps ``p``'s dtype.)"""
    for loop in ast.walk(fn):
        if not (isinstance(loop, ast.While) or isinstance(loop, ast.For) and isinstance(
                loop.iter, ast.Call) and getattr(loop.iter.func, "id", None) == "range"):
            continue
        before = _bound_before(fn, loop.lineno)
        for s in (n for b in loop.body for n in ast.walk(b)):
            targets: list[ast.expr]
            if isinstance(s, ast.AugAssign) and isinstance(s.op, (ast.Div, ast.Pow)):
                targets, value = [s.target], None
            elif isinstance(s, ast.Assign):
                targets, value = s.targets, s.value
            else:
                continue
            names = {t.id for t in targets if isinstance(t, ast.Name) and t.id in before}
            if names and (value is None or any(
                    isinstance(o, ast.BinOp) and isinstance(o.op, (ast.Div, ast.Pow))
                    and any(isinstance(v, ast.Name) and v.id in names for v in (o.left, o.right))
                    for o in ast.walk(value))):
                return True
    return False


def _always(stmts):
    """The names every path through ``stmts`` binds (None: no path gets through them, a
    ``return`` or ``raise`` on each), as far as their text says; a loop may run no
    iteration, so it binds nothing for sure."""
    out: set = set()
    for s in stmts:
        if isinstance(s, (ast.Return, ast.Raise, ast.Break, ast.Continue)):
            return None
        if isinstance(s, ast.If):
            a, b = _always(s.body), _always(s.orelse)
            if a is None and b is None:
                return None
            out |= b if a is None else a if b is None else a & b
        elif isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and (
                not isinstance(s, ast.AnnAssign) or s.value is not None):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            out |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(s, (ast.With, ast.Try)):
            inner = _always(s.body)
            if inner is None:
                return None
            out |= inner
    return out


def _table_read(fn) -> bool:
    """Does ``fn`` read or write a Python table at an index that may be traced (``T[i]``,
    ``T`` a global, a closure variable or a local only ever bound to a list or tuple
    display, a comprehension or a ``list``/``tuple``/``np.`` call; ``i`` not a constant):
    Python's ``IndexError`` when the compiled code runs with ``i`` out of range."""
    args = {a.arg for a in ast.walk(fn) if isinstance(a, ast.arg)}
    other = set(args)  # names bound to something else than a table
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign):
            table = isinstance(n.value, (ast.List, ast.Tuple, ast.ListComp, ast.BinOp)) or (
                isinstance(n.value, ast.Call) and (
                    getattr(n.value.func, "id", None) in ("list", "tuple")
                    or isinstance(n.value.func, ast.Attribute)))
            if not table:
                other.update(t.id for t in n.targets if isinstance(t, ast.Name))
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For, ast.NamedExpr)):
            other.update(t.id for t in ast.walk(n.target) if isinstance(t, ast.Name))
    for n in ast.walk(fn):
        if isinstance(n, ast.Subscript) and isinstance(n.value, (ast.Name, ast.Subscript)) \
                and not any(isinstance(k, ast.Slice) for k in ast.walk(n.slice)) \
                and any(isinstance(k, ast.Name) for k in ast.walk(n.slice)):
            root: ast.expr = n.value
            while isinstance(root, ast.Subscript):
                root = root.value
            if isinstance(root, ast.Name) and root.id not in other:
                return True
    return False


def _loop_dict_key(fn) -> bool:
    """Does a loop in ``fn`` set a string key of a dict (``d["k"] = v``)? A read of it
    after a loop that ran no iteration is Python's ``KeyError`` at run time."""
    for loop in ast.walk(fn):
        if isinstance(loop, (ast.For, ast.While)):
            for n in ast.walk(loop):
                if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) \
                        and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
                    return True
    return False


# Calls whose traced forms check their arguments when the compiled code runs (Python's
# ValueError from `math.comb(-1, 2)`, `xs.index(v)`, `int("12-")`, `math.sqrt(-1.0)`...).
_MATH_CHECKED = ("sqrt", "log", "log2", "log10", "log1p", "exp", "expm1", "exp2", "sin", "cos",
                 "tan", "sinh", "cosh", "asin", "acos", "acosh", "atanh", "fmod", "pow",
                 "gamma", "lgamma", "floor", "ceil", "trunc")
_CHECKED_CALLS = ("isqrt(", "comb(", "perm(", "factorial(", "lcm(", ".index(", "int(", "math.",
                  "[", "max(", "min(") + tuple(f"{n}(" for n in _MATH_CHECKED)
_CHECKED_NAMES = frozenset({"isqrt", "comb", "perm", "factorial", "lcm", "index",
                            *_MATH_CHECKED})


_STRING_MAKERS = frozenset({"str", "repr", "format", "bin", "hex", "oct", "chr", "join"})


def _makes_strings(node) -> bool:
    """Does ``node`` make strings from values (an f-string, ``str(...)``, ``bin(...)``...),
    which an ``int(...)`` in it may parse?"""
    for n in ast.walk(node):
        if isinstance(n, ast.JoinedStr) or isinstance(n, ast.Call) and (
                getattr(n.func, "id", None) or getattr(n.func, "attr", None)) in _STRING_MAKERS:
            return True
    return False


def _raises(node, stringy=True) -> bool:
    """A ``raise``, an ``assert``, a ``warn(...)`` (an error where the filters say so), or a
    call whose traced form checks its arguments at run time (``_CHECKED_CALLS``; ``int``
    of a string or a float; ``max``/``min`` of a generator with no ``default``). (``stringy``:
    the code around makes strings.)"""
    if isinstance(node, (ast.Raise, ast.Assert)):
        return True
    if isinstance(node, ast.Call):
        f = node.func
        name = getattr(f, "attr", None) or getattr(f, "id", None)
        if name == "int" and isinstance(f, ast.Name):  # (of a string, or of a float:
            # NaN, an infinity or a value too large raise, as `math.trunc`'s)
            return bool(node.args) and not isinstance(node.args[0], ast.Constant)
        if name in _MATH_CHECKED and isinstance(f, ast.Attribute):  # `math.sqrt`, not `jnp.sqrt`
            return isinstance(f.value, ast.Name) and f.value.id == "math"
        if name in ("max", "min") and isinstance(f, ast.Name):  # of an empty generator: ValueError
            return len(node.args) == 1 and isinstance(node.args[0], (ast.GeneratorExp, ast.ListComp)) \
                and not any(k.arg == "default" for k in node.keywords)
        return name == "warn" or name in _CHECKED_NAMES
    return False


def _checkpointed_loops() -> bool:
    """Can ``jax.grad`` differentiate a staged data-dependent loop (``runtime.loops.while_primitive``)?
    (As far as is known now: the self-check runs when a loop is first staged.)"""
    from .runtime import jax as jx

    return jx.primitives(check=False)


class _Jitted:
    """What ``autoflow.jit`` returns: ``jax.jit``'s function, whose attributes
    (``lower``, ``trace``, ``eval_shape``...) it passes through, and which
    re-raises a user's exception from a traced ``raise`` as itself.

    JAX reports an exception raised by a run-time check as ``JaxRuntimeError``
    with the user's exception at the end of its message; the user's own
    ``except ValueError`` expects the ``ValueError``.
    """

    __slots__ = ("_jitted", "_converted", "_inline", "_writes", "__dict__", "__weakref__")

    def __init__(self, jitted, converted=None, writes=False):
        self._jitted, self._converted, self._writes = jitted, converted, writes
        # (decided once: a call only pays for what this JAX can need)
        self._inline = converted is not None and not _checkpointed_loops()
        functools.update_wrapper(self, jitted)

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True  # noqa: F841 - pytest hides this frame
        if self._inline and _linearizing():
            # jax.grad around it, on a JAX without checkpointed loops: trace the
            # function inline, so that its loops are staged knowing they are
            # differentiated (a scan where one can be, autoflow's error otherwise).
            return self._converted(*args, **kwargs)
        if self._writes:
            from ._arguments import refuse_aliases

            refuse_aliases(self._converted, args, kwargs)
        try:
            return _run(self._jitted, self._writes, args, kwargs)
        except Exception as e:  # (this frame's entry too: the user's frames only)
            e.__traceback__ = without_own_frames(e.__traceback__)
            raise

    # `trace`, `lower` and `eval_shape` are methods of the class, not only passed through
    # by `__getattr__`: from Python 3.12, `isinstance(f, jax.stages.Wrapped)` (which
    # `jax.export.export` asks) looks for a protocol's methods on the class.
    def trace(self, *args, **kwargs):
        return _Stage(self._jitted.trace(*args, **kwargs), self._writes)

    def lower(self, *args, **kwargs):
        return _Stage(self._jitted.lower(*args, **kwargs), self._writes)

    def eval_shape(self, *args, **kwargs):
        out = self._jitted.eval_shape(*args, **kwargs)
        return out[0] if self._writes else out

    def __getattr__(self, name):
        if name == "_jitted":  # not set yet (unpickling)
            raise AttributeError(name)
        return getattr(self._jitted, name)

    def __reduce__(self):
        return (_Jitted, (self._jitted, self._converted, self._writes))

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def __repr__(self):
        return f"autoflow.jit({self._jitted!r})"


def _run(compiled, writes, args, kwargs):
    """``compiled(*args, **kwargs)`` (a ``jax.jit`` function, or what its ``lower``
    compiled), with what it changed in place written back (``writes``: see
    ``_arguments``), and a user's exception from a run-time check re-raised as itself."""
    __tracebackhide__ = True  # noqa: F841 - pytest hides this frame
    try:
        out = compiled(*args, **kwargs)
        if writes:  # (see `_arguments`: lists and dicts it changed in place)
            out, changed = out
            if changed:
                from ._arguments import write_back

                write_back(args, kwargs, changed)
        return out
    except Exception as e:  # (JaxRuntimeError; a KeyboardInterrupt in a callback too)
        from .runtime.jax import interrupted_in_callback
        from .runtime.effects.raising import users_exception

        user = users_exception(e)
        if user is None and interrupted_in_callback(e):
            # Ctrl-C, delivered inside a callback (`debug_loops` reports)
            raise KeyboardInterrupt("interrupted while the compiled code ran") from None
        try:
            if user is None:
                raise
            raise user from user.__cause__  # (`raise E from C`: its C; else no context)
        finally:  # (the exception in flight has this frame's entry by now)
            err = sys.exc_info()[1]
            if err is not None:
                err.__traceback__ = without_own_frames(err.__traceback__)


class _Stage:
    """What ``trace``/``lower``/``compile`` of an ``autoflow.jit`` function give (``jax.
    stages``' ``Traced``, ``Lowered``, ``Compiled``): a compiled call re-raises a user's
    exception as a call of the function does, and (``writes``) writes back what it
    changed; their results are the function's, not its ``(result, changes)``."""

    def __init__(self, stage, writes):
        self._stage, self._writes = stage, writes

    def lower(self, *args, **kwargs):
        return _Stage(self._stage.lower(*args, **kwargs), self._writes)

    def compile(self, *args, **kwargs):
        return _Stage(self._stage.compile(*args, **kwargs), self._writes)

    @property
    def out_info(self):
        info = self._stage.out_info
        return info[0] if self._writes else info

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True  # noqa: F841 - pytest hides this frame
        try:
            return _run(self._stage, self._writes, args, kwargs)
        except Exception as e:  # (this frame's entry too: the user's frames only)
            e.__traceback__ = without_own_frames(e.__traceback__)
            raise

    def __getattr__(self, name):
        if name in ("_stage", "_writes"):
            raise AttributeError(name)
        return getattr(self._stage, name)


def without_own_frames(tb):
    """Traceback ``tb`` without the entries of autoflow's own files (as JAX leaves
    its own out): what the user sees of a run-time failure is their own code."""
    entries = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(PACKAGE_DIR):
            entries.append(tb)
        tb = tb.tb_next
    out = None
    for entry in reversed(entries):
        out = types.TracebackType(out, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return out


def _linearizing() -> bool:
    """Is ``jax.grad``/``jax.vjp`` linearizing the caller?"""
    from .runtime.jax import is_linearizing

    return is_linearizing()
