"""JAX's tracing errors, re-issued in the user's terms.

Inside converted code, JAX's own errors about traced values
(``ConcretizationTypeError``, ``NonConcreteBooleanIndexError``, "Shapes must
be 1D sequences of concrete values"...) point at generated functions
(``if_true``, ``loop_body``) and at JAX's carries (``argument c[1][0]``).
``reissue`` turns such an error into one that reads like autoflow's own:

* ``file:line:col`` of the user's line, the line itself and a caret under the
  expression that needed a concrete value;
* the user's variable that is traced there and, when it is a parameter of the
  user's function, that it is that argument;
* what to do about this situation (``static_argnames`` for a shape,
  ``jnp.nonzero(..., size=...)`` for a boolean mask, ``jnp.sqrt`` for
  ``math.sqrt``, no ``.item()``...).

The new exception is an instance of the original JAX type *and* of
``autoflow.AutoflowError`` (a class made for the pair), so
``except jax.errors.ConcretizationTypeError`` still catches it; the original
stays on ``exc.jax_error``. Plain Python: nothing here runs unless an error
is already on its way out.
"""

from __future__ import annotations

import ast
import re
import types

import jax

from ...core.loading import generated, loop_body
from ...core.origin import PACKAGE_DIR, Site, message
from ...errors import TracingError
from .. import jax as jx


# Functions the rewriter generates: never shown to the user as "their" function.
# (Compiled branches and loop bodies carry the user function's name: `loading`
# knows them; the thunks of `and`/`or` are lambdas.)
_GENERATED = re.compile(r"^(if_true|if_false|loop_test|loop_body|__autoflow_factory__|<lambda>)"
                        r"(_\d+)?$")


def is_generated(code) -> bool:
    """Is ``code`` a function the rewriter made (a branch, a loop body, a thunk)?"""
    return generated(code) or _GENERATED.match(code.co_name) is not None
_JAX_PARTS = ("/jax/", "/jaxlib/", "/contextlib.py", "/functools.py")

_TYPES = (jax.errors.ConcretizationTypeError, jax.errors.NonConcreteBooleanIndexError,
          jax.errors.TracerIntegerConversionError, jax.errors.TracerArrayConversionError,
          jax.errors.TracerBoolConversionError)




_classes: dict[str, type] = {}


def _class_for(jax_type, name=None):
    name = name or {TypeError: "TracedShapeError", IndexError: "TracedSliceError"}.get(
        jax_type, jax_type.__name__)
    cls = _classes.get(name)
    if cls is None:
        def __init__(self, text):  # JAX's error classes take other arguments
            Exception.__init__(self, text)

        cls = type(name, (TracingError, jax_type),
                   {"__init__": __init__, "__str__": TracingError.__str__,
                    "__module__": "autoflow.errors", "__qualname__": name})
        _classes[name] = cls
    return cls


def traced_shape_error():
    """The class of a re-issued "shapes must be concrete" error (``TracingError``
    and ``TypeError``): a static loop whose body builds a shape from its index
    runs as Python instead."""
    return _class_for(TypeError)


def _is_shape_error(exc):
    return isinstance(exc, TypeError) and jx.matches_jax_error("traced shape", str(exc))


def _is_slice_error(exc):
    """``x[:n]`` with a traced ``n``: JAX's IndexError (a slice's size must be static)."""
    return isinstance(exc, IndexError) and jx.matches_jax_error("traced slice", str(exc))


def _is_unhashable(exc):
    """``seen.add(x)``, ``d[x] = v`` with a traced ``x``: Python's TypeError (a tracer
    has no hash)."""
    return isinstance(exc, TypeError) and jx.matches_jax_error("unhashable", str(exc))


def handles(exc) -> bool:
    """Is ``exc`` a JAX tracing error that ``reissue`` rewrites?"""
    return not isinstance(exc, TracingError) and (isinstance(exc, _TYPES) or _is_shape_error(exc)
                                                  or _is_slice_error(exc) or _is_unhashable(exc))


def _internal(filename):
    return filename.startswith(PACKAGE_DIR) or any(p in filename for p in _JAX_PARTS)


def _user_frames(tb):
    """``(frame, lineno, lasti)`` of the traceback's frames in user files, outermost first."""
    out = []
    while tb is not None:
        if not _internal(tb.tb_frame.f_code.co_filename):
            out.append((tb.tb_frame, tb.tb_lineno, tb.tb_lasti))
        tb = tb.tb_next
    return out


def _site(frame, lineno, lasti):
    col = end = None
    try:
        pos = list(frame.f_code.co_positions())[lasti // 2]
        if pos[0] == lineno and pos[2] is not None:
            col = pos[2]
            if pos[1] == lineno:
                end = pos[3]
    except (AttributeError, IndexError, ValueError):
        pass
    return Site(frame.f_code.co_filename, lineno, col), end


def _expression(site, end):
    """The source text the caret points at (the failing call), or the line."""
    line = site.source_line()
    if site.col is not None and end is not None:
        return line[site.col:end]
    return line.strip()


def _parsed(text):
    """``text`` (a source line, or its part) parsed as an expression, else as the
    head of a compound statement; None where it is neither."""
    try:
        return ast.parse(text.strip().rstrip(":"), mode="eval")
    except SyntaxError:
        try:
            return ast.parse(text.strip().rstrip(":") + "\n    pass")
        except SyntaxError:
            return None


def _names(text):
    tree = _parsed(text)
    if tree is None:
        return []
    seen = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in seen:
            seen.append(node.id)
    return seen


def _slice_names(text):
    """The names read in the slices of ``text``'s subscripts (``n`` of ``v[:n]``)."""
    tree = _parsed(text)
    if tree is None:
        return []
    seen = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            for sub in ast.walk(node.slice):
                if isinstance(sub, ast.Name) and sub.id not in seen:
                    seen.append(sub.id)
    return seen


def _traced_names(frame, names):
    """The names among ``names`` whose value in ``frame`` holds a tracer."""
    out = []
    f_locals = frame.f_locals
    for n in names:
        if n not in f_locals:
            continue
        leaves = jax.tree_util.tree_leaves(f_locals[n], is_leaf=lambda x: x is None)
        if any(isinstance(x, jax.core.Tracer) for x in leaves):
            out.append(n)
    return out


def _user_function(frames):
    """The innermost user frame that is not a generated function: the user's function."""
    for frame, _, _ in reversed(frames):
        if not is_generated(frame.f_code):
            return frame
    # Re-issued by a runtime operator: the user's function is further up the stack.
    frame = frames[-1][0] if frames else None
    while frame is not None:
        code = frame.f_code
        if not _internal(code.co_filename) and not is_generated(code):
            return frame
        frame = frame.f_back
    return None


def _params(frame):
    code = frame.f_code
    n = code.co_argcount + code.co_kwonlyargcount
    return list(code.co_varnames[:n])


def _mentions_shape(text):
    """Does JAX's ``text`` say that a shape or size was needed, not a truth value or a
    Python number? (``runtime.jax.jax_error_wants_shape``.)"""
    return jx.jax_error_wants_shape(text)


def _truth_advice(v, static):
    """A traced value converted to a Python bool (``bool(x)``, ``if``, ``and``...
    in code autoflow did not convert, or a library's)."""
    what = (f"{v} is traced, but Python needs its truth value here (`bool()` of it, or an "
            "`if`/`while`/`and`/`or`/`not` that autoflow did not convert): the truth value of "
            "a traced array is known only when the compiled code runs")
    todo = ("Choose between values with `jnp.where(cond, a, b)` or between computations with "
            "`lax.cond(cond, f, g, x)`, use `jnp.logical_and/or/not` for `and`/`or`/`not`, "
            "or make sure the function doing this is converted (not marked "
            "`do_not_convert`)")
    todo += f"; or {static[0].lower()}{static[1:]}." if static else "."
    return what, todo


_MATH = re.compile(r"\b(math|np|numpy|onp)\.(\w+)\s*\(")


def from_constants_only(exc) -> bool:
    """Does JAX's text say the traced value came from constants alone (no argument of
    the traced function flows into it: ``jnp.ceil((b - a) / h)`` of Python numbers)?
    JAX says which arguments a value depends on, or else which operations made it a
    tracer."""
    text = str(exc)
    return jx.matches_jax_error("from constants", text) \
        and not jx.matches_jax_error("argument", text)


def _constant_advice(v, need):
    what = (f"{v} is {need}, but it is traced: it is computed only from constants, but with "
            "`jnp` operations, and under `jit` every `jnp` result is a traced value (its "
            "value is known only when the compiled code runs)")
    todo = ("Compute it with Python numbers instead: `math` (`math.ceil((b - a) / h)`) or "
            "NumPy (`int(np.ceil((b - a) / h))`) give a concrete value; or compute it inside "
            "`with jax.ensure_compile_time_eval():`, which runs `jnp` on constants at once.")
    return what, todo


def _carried_advice(v, need):
    what = (f"{v} is {need}, but it is traced: the staged loop around this line carries it "
            "(a variable a loop changes is a traced value in every iteration of a staged "
            "loop, even one computed from Python numbers)")
    todo = ("Make the loop run as Python, so that it stays a Python number: a `for` over a "
            "static `range` whose body needs it runs unrolled, unless a traced `break`, "
            "`continue` or `return` stages it (write the exit as a flag instead, `done = done | "
            "(err < tol)`, and keep the values where it is set, `x = jnp.where(done, x, new_x)`); "
            "or give every iteration one shape, the largest, masked with `jnp.where`.")
    return what, todo


def _carried_by_a_loop(frames, var) -> bool:
    """Is ``var`` a carry of a staged loop's body among ``frames`` (a parameter of the
    ``loop_body`` the rewriter made)?"""
    for frame, _, _ in frames:
        code = frame.f_code
        if loop_body(code) and var in code.co_varnames[:code.co_argcount]:
            return True
    return False


def _advice(exc, expr, line, var, param, fn_name, static_ok=True, carried=False):
    """``(what happened, what to do)`` for the situation."""
    v = f"`{var}`" if var else "this value"
    shape = _is_shape_error(exc) or (isinstance(exc, jax.errors.ConcretizationTypeError)
                                     and _mentions_shape(str(exc)))
    if param is None and carried and shape \
            and not isinstance(exc, jax.errors.TracerBoolConversionError):
        return _carried_advice(v, "used as a shape here")
    if param is None and from_constants_only(exc) \
            and not isinstance(exc, jax.errors.TracerBoolConversionError):
        return _constant_advice(v, "used as a shape here" if shape else "needed as a concrete "
                                "value here")
    if var is not None and param == var:
        v += f" (an argument of `{fn_name}`)"
    elif var is not None and param is not None:
        v += f" (computed from the argument `{param}`)"
    static = (f"Make it static: `autoflow.jit({fn_name}, static_argnames=(\"{param}\",))` "
              f"(each new value of `{param}` compiles once)" if param and static_ok else None)
    if isinstance(exc, jax.errors.TracerBoolConversionError):
        # (before the shape test: JAX's text says "traced array with shape bool[]")
        return _truth_advice(v, static)
    if _is_slice_error(exc):
        what = (f"{v} is a bound of this slice and is traced: the size of a slice must "
                "be known when compiling, and this one is known only when the compiled code "
                "runs")
        todo = ("Slice a static size at a traced start, `lax.dynamic_slice_in_dim(x, start, "
                "size)`, or keep the whole array and mask it, `jnp.where(jnp.arange(len(x)) < "
                "n, x, 0)`")
        todo += f"; or {static[0].lower()}{static[1:]}." if static else \
            "; or make the bound static (`static_argnames`)."
        return what, todo
    if _is_shape_error(exc) or (isinstance(exc, jax.errors.ConcretizationTypeError)
                                and _mentions_shape(str(exc))):
        what = f"{v} is used as a shape here, but it is traced: its value is known only when " \
               "the compiled code runs, and shapes must be known when compiling"
        todo = (static + ", or compute the shape from static values (`x.shape`)." if static else
                "Use static values for the shape (`x.shape`, or a parameter marked with "
                "`static_argnames`), or keep the full shape and mask with `jnp.where`.")
        return what, todo
    if _is_unhashable(exc):
        what = (f"{v} is traced, and a traced value cannot be an element of a set or a key "
                "of a dict: it has no hash, its value being known only when the compiled "
                "code runs")
        todo = ("Use an array instead of the set or dict: flags indexed by value "
                "(`seen = seen.at[i].set(True)`), `jnp.unique(xs, size=N, fill_value=0)` for "
                "distinct values, or a concrete (static) key.")
        return what, todo
    if isinstance(exc, jax.errors.NonConcreteBooleanIndexError):
        what = (f"boolean-mask indexing of {v} gives an array whose size depends on traced "
                "values, which compiled code cannot have")
        base, mask = "x", "mask"
        try:
            node = ast.parse(expr.strip(), mode="eval").body
            if isinstance(node, ast.Subscript):
                base, mask = ast.unparse(node.value), ast.unparse(node.slice)
        except SyntaxError:
            pass
        todo = (f"Keep the shape and mask instead: `jnp.where({mask}, {base}, 0)` (then "
                f"reduce), `jnp.sum({base}, where={mask})`, or a size-bounded "
                f"`{base}[jnp.nonzero({mask}, size=N, fill_value=0)]` for at most N selected "
                "items.")
        return what, todo
    m = _MATH.search(expr) or _MATH.search(line)
    if m is not None:
        mod, fn = m.group(1), m.group(2)
        what = f"`{mod}.{fn}` needs a concrete value, but {v} is traced"
        return what, (f"Use `jnp.{fn}` instead of `{mod}.{fn}` on traced values "
                      f"(`jnp.{fn}` works on arrays under `jit`).")
    if ".item()" in expr or ".item()" in line:
        what = f"`.item()` needs a concrete value, but {v} is traced"
        return what, ("Remove `.item()` and keep the value as a 0-d array (it works in "
                      "arithmetic and in traced `if`/`while` conditions).")
    for conv, fix in (("float(", "`x.astype(float)`/`jnp.asarray(x, float)`"),
                      ("int(", "`x.astype(int)`"), ("bool(", "the array itself as a condition"),
                      ("complex(", "`x.astype(complex)`")):
        if re.search(r"(?<![\w.])" + re.escape(conv), expr):
            what = f"`{conv[:-1]}()` needs a concrete value, but {v} is traced"
            return what, (f"Remove `{conv[:-1]}(...)` and keep the array ({fix} converts "
                          "its dtype without leaving the trace).")
    if isinstance(exc, jax.errors.TracerArrayConversionError):
        what = f"{v} is traced, and a NumPy function cannot read a traced value"
        return what, "Use the `jax.numpy` function (`jnp.`) instead of NumPy's here."
    if isinstance(exc, jax.errors.TracerIntegerConversionError) and _repeats(expr):
        what = (f"{v} is traced, but repeating a string or a list (`s * k`) needs a Python "
                "int: the length of the result must be known when compiling")
        todo = ("Pad to a static width instead (`s.rjust(8, \"0\")`, `s.zfill(8)`, `[0] * N` "
                "with a static `N`), or make the count static.")
        return what, todo
    if isinstance(exc, jax.errors.TracerIntegerConversionError):
        what = f"{v} is traced, but a Python int is needed here (an index into a Python " \
               "list or tuple, a `range` bound...)"
        todo = (static + "; or use an array (`jnp.asarray(items)[i]`) instead of a Python list."
                if static else "Index an array (`jnp.asarray(items)[i]`) instead of a Python "
                "list, or make the value static.")
        return what, todo
    what = f"this needs a concrete value, but {v} is traced"
    todo = (static + "." if static else
            "Keep the value as a `jnp` array, or mark the argument it comes from with "
            "`static_argnames`.")
    return what, todo


def _repeats(expr):
    """Is ``expr`` a string or a list display times something (``"0" * k``, ``[0] * k``)?"""
    tree = _parsed(expr)
    node = getattr(tree, "body", None)
    if not isinstance(node, ast.BinOp) or not isinstance(node.op, ast.Mult):
        return False
    seq = (ast.List, ast.Tuple, ast.JoinedStr)
    return any(isinstance(x, seq) or isinstance(x, ast.Constant) and isinstance(x.value, str)
               for x in (node.left, node.right))


def reissue(exc):
    """The user-terms exception for JAX tracing error ``exc`` (``None`` if no
    user line can be found in its traceback)."""
    frames = _user_frames(exc.__traceback__)
    if not frames:
        return None
    frame, lineno, lasti = frames[-1]
    site, end = _site(frame, lineno, lasti)
    line = site.source_line()
    expr = _expression(site, end)
    traced = _traced_names(frame, _names(expr)) or _traced_names(frame, _names(line))
    if _is_slice_error(exc) or isinstance(exc, jax.errors.TracerIntegerConversionError):
        # the bound or index that is traced, not the list or array indexed
        traced = _traced_names(frame, _slice_names(expr)) \
            or _traced_names(frame, _slice_names(line)) or traced
    var = traced[0] if traced else None
    fn_frame = _user_function(frames)
    fn_name = fn_frame.f_code.co_name if fn_frame is not None else "f"
    params = _params(fn_frame) if fn_frame is not None else []
    param = None
    if var is not None:
        if var in params:
            param = var
        else:
            # JAX's own text names the argument the value depends on; use it
            # when that is one of the user's parameters (not `c[1][0]`).
            named = jx.jax_error_argument(str(exc))
            if named in params:
                param = named
    # (static only for what a user can pass as a Python number: a size, a count)
    static_ok = param is not None and fn_frame is not None \
        and static_candidate(fn_frame.f_locals.get(param))
    carried = var is not None and param is None and _carried_by_a_loop(frames, var)
    what, todo = _advice(exc, expr, line, var, param, fn_name, static_ok, carried)
    # (the most derived: a TracerBoolConversionError is a ConcretizationTypeError too)
    base = type(exc) if type(exc) in _TYPES else next(
        (t for t in _TYPES if isinstance(exc, t)), IndexError if _is_slice_error(exc) else TypeError)
    new = _class_for(base, "UnhashableTracerError" if _is_unhashable(exc) else None)(
        message(site, what, todo))
    new.jax_error = exc
    new.variable, new.argument = var, param
    new.__traceback__ = _user_traceback(frames)
    return new


def _user_traceback(frames):
    """A traceback through the user's own frames, generated functions left out."""
    tb = None
    for frame, lineno, lasti in reversed(frames):
        if is_generated(frame.f_code):
            continue
        tb = types.TracebackType(tb, frame, lasti, lineno)
    return tb


def teaching(fn):
    """``fn`` whose JAX tracing errors are re-issued in the user's terms (only
    while tracing: the wrapper runs when ``jax.jit`` traces, not per call)."""
    from ..python.strings import check_output
    from ..state.reach import left_traced

    def check(out, f):
        check_output(out, f)  # (a string made from traced values cannot leave `jit`)
        left_traced(f)  # (nor a traced value stay in an object that outlives the call)
    return _reissuing(fn, check)


def _reissuing(fn, check=None):
    """``fn``, re-raising a JAX tracing error it raises as ``reissue`` words it
    (``teaching`` and ``reissuing``); ``check(out, fn)`` runs on what it returns."""
    import functools

    @functools.wraps(fn)
    def run(*args, **kwargs):
        __tracebackhide__ = True  # noqa: F841 - pytest hides this frame
        try:
            out = fn(*args, **kwargs)
        except Exception as e:
            new = reissue(e) if handles(e) else None
            if new is None:
                raise
            raise new.with_traceback(new.__traceback__) from None
        if check is not None:
            check(out, fn)
        return out

    return run


def static_candidate(value) -> bool:
    """Can ``value`` (a traced argument) be made static as a user passes it: a scalar
    integer or bool, as a trip count or a size is (an array, or a float one computes
    with, cannot: jit would need it hashable, and would compile for each value)."""
    aval = getattr(value, "aval", None)
    dtype = getattr(aval, "dtype", None)
    return aval is not None and getattr(aval, "shape", None) == () and dtype is not None \
        and (jax.numpy.issubdtype(dtype, jax.numpy.integer) or jax.numpy.issubdtype(dtype, jax.numpy.bool_))


def reissuing(operator):
    """Decorator for the runtime operators that stage ``lax`` control flow:
    a JAX tracing error raised by the user's code in a staged branch or body
    leaves them re-issued (for ``jax.jit(autoflow.convert(f))``, where no
    ``autoflow.jit`` wrapper is there to do it). Runs only on staged paths."""
    return _reissuing(operator)
