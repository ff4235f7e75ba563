"""The classic ``jax.jit`` pitfalls, found by reading a file (``autoflow check``).

Each is reported as ``path:line:col: warning: AFnnn message`` followed by
what to do; nothing is imported or run. A warning is silenced on its line
with a comment: ``# autoflow: ignore[AF104]`` (several codes separated by
commas), or ``# autoflow: ignore`` for every code.

* **AF101** a module global read by a jitted function and rebound elsewhere
  in the module: the value at trace time is frozen into the compiled code.
* **AF102** boolean-mask indexing (``x[x > 0]``, ``x[mask]``): its shape
  depends on values.
* **AF103** ``jnp.zeros/ones/empty/full/arange/eye/linspace...`` sized by a
  parameter that is not static.
* **AF104** ``jax.jit``/``autoflow.jit`` of a lambda or of a nested function
  inside a loop: a new function each iteration, so a new compilation.
* **AF105** ``print`` of values that will be traced: autoflow makes it a
  run-time print (``jax.debug.print``); plain ``jax.jit`` prints tracers once.
* **AF106** a Python ``for`` loop that will be unrolled with a large trip
  count (in a function jitted without conversion, or marked
  ``autoflow.unroll``): a huge graph and a long compile.
* **AF107** a static ``range`` loop under ``autoflow.jit`` whose body uses the
  index where a concrete number is needed (``x[:i]``, ``jnp.zeros(i)``): autoflow
  unrolls such a loop, one copy of the body per step.

* **AF108** a comprehension filtered by a traced condition (``[v for v in xs if v >
  0]``): its length depends on values (a reduction of it, ``sum(...)``, is fine).
* **AF109** a slice with a traced bound (``x[:n]``): its size must be static.
* **AF110** ``.item()``, ``.tolist()``, ``np.asarray`` or a NumPy function (``np.sin``)
  of a traced value.
* **AF111** a traced value written into a NumPy array (``buf[i] = x``).
* **AF112** ``jnp.nonzero``, ``jnp.unique``, ``jnp.argwhere``, one-argument ``jnp.where``
  of a traced value without ``size=``: the result's size depends on values.
* **AF113** a traced value used as a dict key or put in a set (``{x: 1}``, ``s.add(x)``):
  a traced value has no hash.

"Jitted" functions are those decorated with something named ``jit`` (or
``autoflow.convert``), or passed to a call of such a name in the module. The codes that
say the program fails (``FAILING``: AF102, AF103, AF108-AF113) are also looked for in
the functions the jitted ones call, or, in a module that jits nothing, in every function
and method, read as ``autoflow.jit`` with traced arguments would trace them
(``autoflow.traced``). No JAX here.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import re
import tokenize

from .traced import ast_target_names
from ._pitfall_reading import (_Module, _dotted, _first_mentioned, _jit_call, _jit_spelling, _locals,
                               _loops_containing, _mentions, _origin, _params, _range_count, _sized_args,
                               _unrolled_iterable, implicit_entries)


UNROLL_LIMIT = 100  # trip counts from which an unrolled loop is reported

CODES = {
    "AF101": "global read at trace time and rebound later",
    "AF102": "boolean-mask indexing",
    "AF103": "array size from a traced parameter",
    "AF104": "jit of a new function inside a loop",
    "AF105": "print of traced values",
    "AF106": "large Python loop unrolled under jit",
    "AF107": "loop index used where a concrete number is needed: the loop unrolls",
    "AF108": "comprehension filtered by a traced condition",
    "AF109": "traced slice bound",
    "AF110": "`.item()` or `np.asarray` of a traced value",
    "AF111": "traced value written into a NumPy array",
    "AF112": "array size that depends on traced values",
    "AF113": "traced value used as a dict key or in a set",
}


_IGNORE = re.compile(r"#\s*autoflow:\s*ignore(?:\[([A-Za-z0-9_,\s]+)\])?")


@dataclasses.dataclass
class Pitfall:
    filename: str
    line: int
    col: int          # 0-based
    code: str
    text: str
    fix: str

    def format(self) -> str:
        return f"{self.filename}:{self.line}:{self.col + 1}: warning: {self.code} {self.text}\n" \
               f"    fix: {self.fix}"


FAILING = frozenset({"AF102", "AF103", "AF108", "AF109", "AF110", "AF111", "AF112", "AF113"})


def find(source: str, filename: str = "<string>", tree=None, static=None):
    """The pitfalls of ``source``, sorted by position, silenced ones left out.

    ``static``: function name -> parameter names taken as static (besides what the
    module's own ``jit`` calls mark static)."""
    from .traced import traced_names

    tree = tree if tree is not None else ast.parse(source)
    mod = _Module(tree)
    out = []

    reading = {"implicit": False}  # reading a function that no jit names: FAILING only

    def add(node, code, text, fix):
        if code in FAILING or not reading["implicit"]:
            out.append(Pitfall(filename, node.lineno, node.col_offset, code, text, fix))

    entries = [(fn, info, False) for fn, info in mod.jitted.items()]
    entries += [(fn, ("autoflow.jit", st, True), True)
                for fn, st in implicit_entries(mod, static).items()]
    for fn, (jitname, static_names, converted), implicit in entries:
        reading["implicit"] = implicit
        static_names = set(static_names) | set((static or {}).get(fn.name, ()))
        params = [p for p in _params(fn)]
        traced = [p for p in params if p not in static_names and p != "self"]
        local = _locals(fn)
        derived = traced_names(fn, static_names)
        _failing(fn, derived, add)
        # AF101: globals rebound elsewhere
        reported = set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) \
                    and node.id not in local and node.id not in reported \
                    and len(mod.bindings.get(node.id, ())) > 1:
                reported.add(node.id)
                lines = sorted({b.lineno for b in mod.bindings[node.id]})
                add(node, "AF101",
                    f"`{fn.name}` reads the global `{node.id}`, which the module rebinds "
                    f"(lines {', '.join(map(str, lines))}); jit reads it once, when it traces "
                    f"`{fn.name}`, and later changes have no effect on the compiled code",
                    f"pass `{node.id}` as an argument of `{fn.name}` (mark it in "
                    "`static_argnames` if it is a Python value), or make it a constant "
                    "bound once.")
        for node in ast.walk(fn):
            # AF102: boolean masks
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                idx = node.slice
                mask = None
                if isinstance(idx, ast.Compare) and _mentions(idx, derived):
                    mask = ast.unparse(idx)
                elif isinstance(idx, ast.Name) and idx.id in derived and _is_bool_local(fn, idx.id):
                    mask = idx.id
                elif isinstance(idx, ast.BoolOp) or (isinstance(idx, ast.BinOp) and isinstance(
                        idx.op, (ast.BitAnd, ast.BitOr)) and isinstance(idx.left, ast.Compare)):
                    mask = ast.unparse(idx) if _mentions(idx, derived) else None
                if mask is not None:
                    base = ast.unparse(node.value)
                    add(node, "AF102",
                        f"boolean-mask indexing `{ast.unparse(node)}`: the result's size depends "
                        "on values, which a jitted function cannot have",
                        f"keep the shape: `jnp.where({mask}, {base}, 0)` (then reduce), "
                        f"`jnp.sum({base}, where={mask})`, or at most N items with "
                        f"`{base}[jnp.nonzero({mask}, size=N, fill_value=0)]`.")
            # AF103: shapes from parameters
            if isinstance(node, ast.Call):
                sized = _sized_args(node)
                if sized is not None:
                    name, args = sized
                    args += [k.value for k in node.keywords if k.arg in ("shape", "num", "N", "stop",
                                                                         "start")]
                    hit = next((h for h in (_first_mentioned(a, set(derived)) for a in args) if h),
                               None)
                    if hit:
                        origin = _origin(fn, hit, traced) or hit
                        via = f" (computed from `{origin}`)" if origin != hit else ""
                        add(node, "AF103",
                            f"`{name}` sized by `{hit}`{via}, a traced value: array shapes must "
                            "be known when compiling",
                            f"mark `{origin}` static: {_jit_spelling(jitname, fn, [origin])} "
                            "(each new value compiles once), or size it from a static shape "
                            "(`x.shape[0]`).")
            # AF105: print of traced values
            if isinstance(node, ast.Call) and _dotted(node.func) == "print":
                hit = next((h for h in (_first_mentioned(a, derived) for a in node.args) if h),
                           None)
                if hit:
                    if converted:
                        text = (f"`print` of `{hit}`, which is traced: autoflow turns it into "
                                "`jax.debug.print`, printed each time the compiled code runs "
                                "(not once at trace time)")
                        fix = ("write `jax.debug.print(\"{}\", " + hit + ")` to say so, or "
                               "silence this with `# autoflow: ignore[AF105]`.")
                    else:
                        text = (f"`print` of `{hit}`, which is traced: under `{jitname}` it runs "
                                "once, while tracing, and prints a tracer, not the values")
                        fix = ("use `jax.debug.print(\"{}\", " + hit + ")` (printed on every "
                               "run), or `autoflow.jit`, which makes this print a run-time print.")
                    add(node, "AF105", text, fix)
        # AF106: large unrolled loops
        for node in ast.walk(fn):
            if isinstance(node, (ast.For, ast.AsyncFor)):
                marked = _unrolled_iterable(node.iter)
                count = _range_count(marked if marked is not None else node.iter)
                if count is None or count < UNROLL_LIMIT:
                    continue
                if marked is not None:
                    why = "`autoflow.unroll` runs it as Python"
                    fix = ("drop `autoflow.unroll` (autoflow then stages the loop as one "
                           "`lax.fori_loop` when what it carries is traced), or use "
                           "`autoflow.roll(range(...))` to always stage it.")
                elif not converted:
                    why = f"`{jitname}` traces Python loops by running them"
                    fix = ("use `autoflow.jit`, which stages it as one `lax.fori_loop`, or write "
                           "`lax.fori_loop`/`lax.scan` yourself.")
                else:
                    continue
                add(node, "AF106",
                    f"this `for` loop runs {count} times and will be unrolled under jit ({why}): "
                    f"{count} copies of its body in the compiled graph, and a long compile", fix)
        # AF107: a static loop whose index must be concrete in the body: it unrolls
        if converted:
            for node in ast.walk(fn):
                if not (isinstance(node, (ast.For, ast.AsyncFor)) and isinstance(node.target, ast.Name)
                        and isinstance(node.iter, ast.Call) and _dotted(node.iter.func) == "range"
                        and not _mentions(node.iter, derived)):
                    continue
                use = _concrete_use(node, node.target.id)
                if use is not None:
                    i = node.target.id
                    add(node, "AF107",
                        f"the body of this `for` loop uses its index `{i}` where a concrete "
                        f"number is needed (`{use}`), so autoflow unrolls the loop under jit: "
                        "one copy of the body per iteration in the compiled graph",
                        f"keep the shapes fixed instead (`jnp.where(jnp.arange(n) < {i}, x, 0)` "
                        f"for `x[:{i}]`, `lax.dynamic_slice` for a window of fixed size), so the "
                        "loop stages as one `lax.fori_loop`; or, for a short loop, say the "
                        "unrolling is intended: `for ... in autoflow.unroll(range(...))`.")
    reading["implicit"] = False
    # AF104: jit of a lambda or nested function inside a loop (any function)
    for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))] \
            + [tree]:
        nested = {n.name for n in ast.walk(fn) if isinstance(n, (ast.FunctionDef,
                  ast.AsyncFunctionDef)) and n is not fn}
        inside = _loops_containing(fn)
        for node in ast.walk(fn):
            if id(node) not in inside or not isinstance(node, ast.Call):
                continue
            jitname = _jit_call(node)
            if not jitname or not node.args:
                continue
            target = node.args[0]
            if isinstance(target, ast.Lambda):
                what = "a lambda"
            elif isinstance(target, ast.Name) and target.id in nested:
                what = f"the nested function `{target.id}`"
            else:
                continue
            if _inside_nested(fn, node):
                continue
            add(node, "AF104",
                f"`{jitname}` of {what} inside a loop: a new function object each iteration, "
                "and jit's cache is keyed by the function, so it traces and compiles again "
                "every time",
                "create the jitted function once, before the loop, and pass what changes as "
                "arguments.")
    seen, unique = set(), []
    for p in sorted(out, key=lambda p: (p.line, p.col, p.code)):
        key = (p.line, p.col, p.code)
        if key not in seen:
            seen.add(key)
            unique.append(p)
    silenced = _silenced(source)
    return [p for p in unique if not _is_silenced(p, silenced)]


_REDUCTIONS = frozenset({"sum", "any", "all", "max", "min", "len"})
_NP = ("np", "numpy", "onp")
# NumPy functions that turn their argument into a NumPy array (no method of a JAX array
# stands in for them, as `x.sum()` does for `np.sum(x)`): a traced argument fails
_NP_CONVERTS = frozenset(
    "sin cos tan arcsin arccos arctan arctan2 sinh cosh tanh arcsinh arccosh arctanh exp "
    "exp2 expm1 log log2 log10 log1p sqrt cbrt square abs absolute fabs sign floor ceil "
    "trunc rint clip where maximum minimum fmax fmin power hypot mod fmod remainder dot "
    "matmul einsum outer concatenate stack hstack vstack isnan isinf isfinite "
    "float16 float32 float64 int8 int16 int32 int64 uint8 uint32 bool_".split())
_NP_MADE = frozenset({"zeros", "ones", "empty", "full", "array", "arange", "zeros_like",
                      "ones_like", "empty_like", "full_like", "eye", "identity", "linspace",
                      "copy"})


# Functions whose result's size is the number of items that pass a test, unless `size=`.
_DATA_SIZED = frozenset({"nonzero", "flatnonzero", "argwhere", "unique", "unique_values",
                         "unique_counts", "extract", "compress"})


def _hashed(fn, node, traced, mentions):
    """The traced expression ``node`` hashes (a dict display's key, a set display's item,
    ``s.add(x)`` on a set ``fn`` made before it), or None."""
    if isinstance(node, ast.Dict):
        return next((k for k in node.keys if k is not None and mentions(k, traced)), None)
    if isinstance(node, ast.Set):
        return next((e for e in node.elts if mentions(e, traced)), None)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "add" and isinstance(node.func.value, ast.Name) \
            and len(node.args) == 1 and mentions(node.args[0], traced):
        from ._check_more import _set_before

        if _set_before(fn, node.func.value.id, node):
            return node.args[0]
    return None


def _failing(fn, traced, add):
    """AF108-AF113: a traced value where Python needs a concrete one."""
    from .traced import mentions

    reduced = {id(n.args[0]) for n in ast.walk(fn) if isinstance(n, ast.Call)
               and _dotted(n.func) in _REDUCTIONS and n.args}
    numpy_arrays = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            base, _, last = _dotted(node.value.func).rpartition(".")
            if base in _NP and last in _NP_MADE:
                numpy_arrays |= {n for t in node.targets for n in ast_target_names(t)}
    for node in ast.walk(fn):
        # AF112: a size that depends on values
        if isinstance(node, ast.Call) and node.args and not any(
                k.arg == "size" for k in node.keywords):
            base, _, last = _dotted(node.func).rpartition(".")
            if base in ("jnp", "jax.numpy") and (
                    last in _DATA_SIZED or last == "where" and len(node.args) == 1) \
                    and mentions(node.args[0], traced):
                add(node, "AF112",
                    f"`{ast.unparse(node)}`: the size of its result depends on the values of "
                    "a traced array, and a jitted function's shapes must be known when "
                    "compiling",
                    f"give it a fixed size (`{_dotted(node.func)}(..., size=N, fill_value=0)`), "
                    "or keep the whole array and mask it (`jnp.where(cond, x, 0)`).")
        # AF113: a traced value hashed
        hashed = _hashed(fn, node, traced, mentions)
        if hashed is not None:
            add(node, "AF113",
                f"`{ast.unparse(hashed)}` is traced, and a dict key or a set item needs a hash, "
                "which a traced value has not",
                "use static keys (strings, Python numbers), or an array of flags indexed by the "
                "value (`seen = seen.at[x].set(True)`) instead of the set.")
        # AF108: a comprehension filtered by a traced condition
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)) \
                and id(node) not in reduced:
            cond = next((c for g in node.generators for c in g.ifs if mentions(c, traced)), None)
            if cond is not None:
                add(cond, "AF108",
                    f"this comprehension keeps the items for which `{ast.unparse(cond)}` holds, "
                    "a traced condition: the number of items would depend on values, which a "
                    "jitted function cannot have",
                    f"keep every item and mask: `jnp.where({ast.unparse(cond)}, item, 0)` over "
                    "an array, reduce it directly (`sum(... if ...)` is a masked sum), or "
                    "write a `for` loop that updates an array.")
        # AF109: a slice bound that is traced
        if isinstance(node, ast.Subscript):
            for part in ([node.slice] if not isinstance(node.slice, ast.Tuple)
                         else node.slice.elts):
                if isinstance(part, ast.Slice):
                    bound = next((b for b in (part.lower, part.upper, part.step)
                                  if b is not None and mentions(b, traced)), None)
                    if bound is not None:
                        name = _first_mentioned(bound, traced) or ast.unparse(bound)
                        base = ast.unparse(node.value)
                        add(node, "AF109",
                            f"`{ast.unparse(node)}`: the slice bound `{ast.unparse(bound)}` is "
                            "traced, and the size of a slice must be known when compiling",
                            f"slice a fixed size at a traced start (`lax.dynamic_slice_in_dim("
                            f"{base}, start, size)`), or keep the whole array and mask it "
                            f"(`jnp.where(jnp.arange(len({base})) < {name}, {base}, 0)`); or "
                            f"mark `{name}` static if it is an argument.")
                        break
        # AF110: a traced value made a Python or NumPy value
        if isinstance(node, ast.Call):
            called = _dotted(node.func)
            base, _, last = called.rpartition(".")
            concrete = None
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("item", "tolist") \
                    and not node.args and mentions(node.func.value, traced):
                concrete = f".{node.func.attr}()"
            elif base in _NP and last in ("asarray", "array", "asanyarray") and node.args \
                    and mentions(node.args[0], traced):
                concrete = called
            elif base in _NP and last in _NP_CONVERTS \
                    and any(mentions(a, traced) for a in node.args):
                add(node, "AF110",
                    f"`{called}` makes its argument a NumPy array, but the argument is traced "
                    "(known only when the compiled code runs)",
                    f"use `jnp.{last}` instead of `{called}` on traced values.")
            if concrete is not None:
                add(node, "AF110",
                    f"`{ast.unparse(node)}` needs a concrete value, but its argument is traced "
                    "(known only when the compiled code runs)",
                    f"remove `{concrete}` and keep the `jnp` array (it works in arithmetic and "
                    "in traced conditions); use `jnp` instead of NumPy on traced values.")
        # AF111: a traced value written into a NumPy array
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                and t.value.id in numpy_arrays for t in node.targets) \
                and mentions(node.value, traced):
            target = next(t for t in node.targets if isinstance(t, ast.Subscript))
            name = target.value.id
            add(node, "AF111",
                f"`{ast.unparse(target)} = ...` writes a traced value into `{name}`, a NumPy "
                "array, which can only hold concrete values",
                f"make `{name}` a JAX array (`jnp.zeros(...)`) and update it functionally: "
                f"`{name} = {name}.at[{ast.unparse(target.slice)}].set(...)`.")


def _concrete_use(loop, name):
    """The first expression in ``loop``'s body that needs ``name`` as a concrete number
    (a slice bound ``x[:i]``, an array size ``jnp.zeros(i)``), or None. (A ``range(i)``
    bound does not: autoflow stages the inner loop with a traced bound.)"""
    for stmt in loop.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Slice) and any(
                    b is not None and _mentions(b, {name}) for b in (node.lower, node.upper, node.step)):
                return _enclosing_subscript(stmt, node)
            if isinstance(node, ast.Call):
                sized = _sized_args(node)
                if sized is not None and any(_mentions(a, {name}) for a in sized[1]):
                    return ast.unparse(node)
    return None


def _enclosing_subscript(stmt, slice_node):
    for node in ast.walk(stmt):
        if isinstance(node, ast.Subscript) and (node.slice is slice_node or (
                isinstance(node.slice, ast.Tuple) and slice_node in node.slice.elts)):
            return ast.unparse(node)
    return ast.unparse(slice_node)


def _inside_nested(fn, node):
    """Is ``node`` inside a function nested in ``fn`` (reported for that one instead)?"""
    for inner in ast.walk(fn):
        if inner is not fn and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(n is node for n in ast.walk(inner)):
                return True
    return False


def _is_bool_local(fn, name):
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and any(name in ast_target_names(t) for t in node.targets):
            v = node.value
            if isinstance(v, ast.Compare) or isinstance(v, ast.UnaryOp) and isinstance(
                    v.op, ast.Not) or isinstance(v, ast.BinOp) and isinstance(
                    v.op, (ast.BitAnd, ast.BitOr)) and isinstance(v.left, ast.Compare):
                return True
    return False


def _silenced(source):
    """line -> set of codes silenced there (``None``: all)."""
    out = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return out
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            m = _IGNORE.search(tok.string)
            if m:
                codes = None if m.group(1) is None else {c.strip().upper()
                                                         for c in m.group(1).split(",")}
                out[tok.start[0]] = codes
    return out


def _is_silenced(p, silenced):
    if p.line not in silenced:
        return False
    codes = silenced[p.line]
    return codes is None or p.code in codes
