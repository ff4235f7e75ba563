"""What fails under ``autoflow.jit`` with traced arguments, read from the source.

``autoflow check`` reads a function as ``autoflow.jit`` will first trace it: every
parameter is traced unless a ``jit`` of the module marks it static (``static_argnames``,
``static_argnums``), and so is every value computed from a traced one or made by a
``jnp``/``jax``/``lax`` operation (under ``jit`` even ``jnp.ceil(2.5)`` is traced);
``x.shape``, ``x.ndim``, ``x.dtype``, ``x.size`` and ``len(x)`` are static. A ``for``
over a ``range`` with static bounds has a static index. From that it says which
converted statements fail when traced, and why, in the user's terms:

* a list that a loop with a traced trip count appends to (its length would be traced);
* a loop carry that starts as ``None`` or a string and becomes something else, or that
  grows (``jnp.concatenate``, ``jnp.append``...) in a loop with a traced trip count;
* a variable that a traced ``if`` leaves as a string on one path and another value on
  the other, ``None`` on one path only, a different function on each path, tuples of
  different lengths, arrays of different literal shapes, or a dict with a key added on
  one path only; an ``a if c else b`` whose values are such, with ``c`` traced;
* ``return`` statements under traced conditions that give different structures (a
  value and ``None``, falling off the end; tuples of different lengths; literal shapes);
* a walrus (``:=``) in a later operand of ``and``/``or`` whose first operand is traced;
* an ``if``/``while`` on a traced value in a function marked ``do_not_convert``.

What it cannot know (the shapes of the arguments...) is listed in ``docs/cli.md``.
Nothing here imports JAX; it reads the standard library's ``ast``."""

from __future__ import annotations

import ast
import dataclasses

from ._scope_walks import SCOPES as _SCOPES, local_walk as _local_walk, none_test as _none_test
from ._scope_walks import returns_text as _returns

_STATIC_ATTRS = frozenset({"shape", "ndim", "dtype", "size"})
_STATIC_CALLS = frozenset({"len", "isinstance", "type", "callable", "hasattr", "id", "repr",
                           "str"})
_ARRAY_MODULES = ("jnp", "jax.numpy", "jax", "lax", "jax.lax", "jax.random", "random")
# `jnp`/`jax` functions of shapes and types: their results are static
_STATIC_JAX = frozenset({"dtype", "result_type", "issubdtype", "finfo", "iinfo", "shape",
                         "ndim", "size", "promote_types", "can_cast", "ShapeDtypeStruct",
                         "tree_map", "tree_leaves", "tree_structure", "tree_flatten",
                         "tree_unflatten", "eval_shape", "devices", "device_count",
                         "local_device_count", "process_index", "process_count"})
_GROWS = frozenset({"concatenate", "append", "hstack", "vstack", "stack", "column_stack",
                    "row_stack", "dstack", "pad", "insert", "repeat", "tile"})
_SHAPED = {"zeros": 0, "ones": 0, "empty": 0, "full": 0, "zeros_like": None, "eye": 0}
_NUMPY = ("np", "numpy", "onp")


def dotted(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _jax_call(node) -> bool:
    """A call of a ``jnp``/``jax``/``lax`` function whose result is traced under jit."""
    if not isinstance(node, ast.Call):
        return False
    name = dotted(node.func)
    base, _, last = name.rpartition(".")
    return bool(base) and (base in _ARRAY_MODULES or base.startswith("jax.")) \
        and last not in _STATIC_JAX


def _static_expr(node) -> bool:
    if isinstance(node, ast.Attribute) and node.attr in _STATIC_ATTRS:
        return True
    if isinstance(node, ast.Call):
        name = dotted(node.func)
        if name in _STATIC_CALLS:
            return True
        base, _, last = name.rpartition(".")
        if base in _ARRAY_MODULES and last in _STATIC_JAX:
            return True
    return False


def mentions(node, names) -> bool:
    """Is ``node`` traced given the traced ``names`` (through static properties not)?
    (A loop, not recursion: a sum of thousands of terms nests as deep.)"""
    todo = [node]
    while todo:
        n = todo.pop()
        if n is None or _static_expr(n) or isinstance(n, (ast.Lambda, ast.FunctionDef)):
            continue
        if isinstance(n, ast.Name) and n.id in names or _jax_call(n):
            return True
        todo.extend(ast.iter_child_nodes(n))
    return False


def params(fn) -> list[str]:
    a = fn.args
    out = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    out += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return out


def ast_target_names(t):
    """Names an assignment target binds (``ast`` nodes; ``analysis.activity.
    target_names`` for gast), in order: ``a, (b, *c)`` -> a b c."""
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, (ast.Tuple, ast.List)):
        return [n for e in t.elts for n in ast_target_names(e)]
    if isinstance(t, ast.Starred):
        return ast_target_names(t.value)
    return []


def is_static_range(it, names) -> bool:
    """``range(...)`` (or ``autoflow.unroll(...)``) whose bounds are static."""
    if isinstance(it, ast.Call) and dotted(it.func).rsplit(".", 1)[-1] == "unroll":
        return True
    return isinstance(it, ast.Call) and dotted(it.func) == "range" \
        and not any(mentions(a, names) for a in it.args)


def defaulted(fn) -> set[str]:
    """Parameters with a default value: ``jax.jit`` passes a default it is not given as
    the Python value, so ``autoflow check`` takes them as static (``tol=1e-6``,
    ``max_iter=50``)."""
    a = fn.args
    positional = a.posonlyargs + a.args
    out = {x.arg for x in positional[len(positional) - len(a.defaults):]} if a.defaults else set()
    out |= {x.arg for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None}
    return out


def traced_names(fn, static=()) -> set[str]:
    """The names of ``fn`` (nested functions included) that hold traced values: its
    parameters but the ``static`` ones and those with defaults, and what is computed
    from them."""
    skip = set(static) | defaulted(fn) | {"self", "cls"}
    out = {p for p in params(fn) if p not in skip}
    changed = True
    while changed:
        changed = False

        def add(names):
            nonlocal changed
            for n in names:
                if n not in out:
                    out.add(n)
                    changed = True

        for node in ast.walk(fn):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) \
                    and node.value is not None and mentions(node.value, out):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                add(n for t in targets for n in ast_target_names(t))
            elif isinstance(node, ast.NamedExpr) and mentions(node.value, out):
                add([node.target.id])
            elif isinstance(node, (ast.For, ast.comprehension)) \
                    and mentions(node.iter, out) and not is_static_range(node.iter, out):
                add(ast_target_names(node.target))
            elif isinstance(node, (ast.FunctionDef, ast.Lambda)) and node is not fn:
                # a nested function is called with traced values, as a loop body is
                add(p for p in params(node))
    return out


# -- kinds of values, as far as the source says ------------------------------

UNKNOWN = ("unknown",)


def kind(node, before=None, traced=()):
    """What ``node`` evaluates to, as far as its text says: ``("none",)``, ``("str",
    value)``, ``("function", name)``, ``("tuple", (kinds...))``, ``("list",)``,
    ``("dict", keys)``, ``("shape", dims)`` (a ``jnp.zeros``-like of a literal shape),
    ``("traced",)`` (an array computed from traced values) or ``UNKNOWN``. ``before``:
    kinds of names bound earlier (a name reads as its kind); ``traced``: traced names."""
    before = before or {}
    found = _kind(node, before, traced)
    if found == UNKNOWN and traced and mentions(node, traced) and not isinstance(
            node, (ast.Name, ast.Subscript, ast.IfExp, ast.Call)):
        return ("traced",)
    return found


def _kind(node, before, traced):
    if isinstance(node, ast.Constant):
        if node.value is None:
            return ("none",)
        if isinstance(node.value, str):
            return ("str", node.value)
        return UNKNOWN
    if isinstance(node, ast.JoinedStr):
        return ("str", None)
    if isinstance(node, ast.Lambda):
        return ("function", ast.unparse(node))
    if isinstance(node, ast.Tuple):
        return ("tuple", tuple(kind(e, before, traced) for e in node.elts))
    if isinstance(node, (ast.List, ast.ListComp)):
        return ("list",)
    if isinstance(node, ast.Dict):
        keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
        return ("dict", frozenset(keys)) if len(keys) == len(node.keys) else UNKNOWN
    if isinstance(node, ast.Name):
        return before.get(node.id, ("traced",) if node.id in traced else UNKNOWN)
    if isinstance(node, ast.Attribute) and dotted(node.value) in _ARRAY_MODULES + _NUMPY + (
            "math",) and not node.attr[:1].isupper() and node.attr not in ("pi", "e", "inf",
                                                                         "nan", "newaxis"):
        return ("function", dotted(node))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # (`_kind`: one walk)
        left = _kind(node.left, before, traced)
        if left[0] == "str":
            return ("str", None)
    if isinstance(node, ast.Call):
        name = dotted(node.func)
        base, _, last = name.rpartition(".")
        if base in ("jnp", "jax.numpy") and last in _SHAPED and _SHAPED[last] is not None \
                and node.args:
            try:
                shape = ast.literal_eval(node.args[0])
            except ValueError:
                return UNKNOWN
            if isinstance(shape, int):
                shape = (shape,)
            if isinstance(shape, tuple) and all(isinstance(d, int) for d in shape):
                return ("shape", shape)
    return UNKNOWN


def differ(a, b) -> bool:
    """Do kinds ``a`` and ``b`` certainly differ in a way a staged value cannot?"""
    ka, kb = a[0], b[0]
    if ka == "unknown" or kb == "unknown":
        return (ka == "none") != (kb == "none")
    if ka in ("traced", "shape") and kb in ("traced", "shape"):
        return ka == kb == "shape" and a[1] != b[1]
    if "traced" in (ka, kb) and {ka, kb} & {"list", "dict"}:
        return False  # (a traced argument may be a list or dict of arrays)
    if ka != kb:
        return True
    if a[0] == "str":
        return a[1] is None or b[1] is None or a[1] != b[1]
    if a[0] == "function":
        return a[1] != b[1]
    if a[0] == "tuple":
        return len(a[1]) != len(b[1]) or any(differ(x, y) for x, y in zip(a[1], b[1]))
    if a[0] == "shape":
        return a[1] != b[1]
    if a[0] == "dict":
        return a[1] != b[1]
    return False


def show(k) -> str:
    if k[0] == "none":
        return "None"
    if k[0] == "str":
        return repr(k[1]) if k[1] is not None else "a string"
    if k[0] == "function":
        return f"the function `{k[1]}`" if not k[1].startswith("lambda") else "a function"
    if k[0] == "tuple":
        return f"a tuple of {len(k[1])}"
    if k[0] == "shape":
        return f"an array of shape {k[1]}"
    if k[0] == "dict":
        return f"a dict with keys {sorted(map(str, k[1]))}"
    if k[0] == "list":
        return "a list"
    if k[0] == "traced":
        return "an array"
    return "a value"


# -- statements that fail when traced ----------------------------------------

@dataclasses.dataclass
class Problem:
    line: int
    col: int
    kind: str  # 'if', 'while', 'for', 'ternary' (as `check`'s findings)
    reason: str


_LOOPS = (ast.For, ast.While)
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")
_COMPOUND = (ast.If, ast.For, ast.While, ast.With, ast.Try)


def _stmt_kind(s):
    return "if" if isinstance(s, ast.If) else "while" if isinstance(s, ast.While) else "for"


class _Reader:
    def __init__(self, fn, static):
        self.fn = fn
        self.traced = traced_names(fn, static)
        self.found: dict = {}
        self.bound: dict = {}
        self.loads = [(n.lineno, n.col_offset, n.id) for n in _local_walk(fn.body)
                      if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]

    def add(self, stmt, reason, kind=None):
        key = (stmt.lineno, stmt.col_offset, kind or _stmt_kind(stmt))
        self.found.setdefault(key, reason)

    # -- what is traced ---------------------------------------------------------
    def traced_test(self, s) -> bool:
        return isinstance(s, (ast.If, ast.While)) and mentions(s.test, self.traced)

    def traced_count(self, s) -> bool:
        """A loop whose trip count is traced (a ``while`` on a traced test, a ``for``
        over a ``range`` with a traced bound)."""
        if isinstance(s, ast.While):
            return self.traced_test(s)
        it = getattr(s, "iter", None) if isinstance(s, ast.For) else None
        return isinstance(it, ast.Call) and dotted(it.func) == "range" \
            and any(mentions(a, self.traced) for a in it.args)

    def staged(self, s) -> bool:
        if isinstance(s, (ast.If, ast.While)):
            return self.traced_test(s)
        if isinstance(s, ast.For):
            return mentions(s.iter, self.traced) and not is_static_range(s.iter, self.traced)
        return False

    def used_after(self, name, stmt, loops) -> bool:
        end = (stmt.end_lineno, stmt.end_col_offset)
        if any((line, col) > end and n == name for line, col, n in self.loads):
            return True
        for loop in loops:
            span = ((loop.lineno, loop.col_offset), (loop.end_lineno, loop.end_col_offset))
            if any(span[0] <= (line, col) <= span[1] and n == name for line, col, n in self.loads):
                return True
        return False

    # -- walking ----------------------------------------------------------------
    def run(self):
        self.block(self.fn.body, {p: ("traced",) for p in params(self.fn) if p in self.traced},
                   [])
        self.returns()
        return [Problem(line, col, k, r) for (line, col, k), r in sorted(self.found.items())]

    def block(self, stmts, kinds, loops):
        """Walk ``stmts`` in order, keeping the kind of each name bound so far."""
        for s in stmts:
            if isinstance(s, _SCOPES):
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    kinds[s.name] = ("function", s.name)
                    self.block(s.body, {}, [])
                continue
            self.conditional_expressions(s, kinds)
            if isinstance(s, ast.If):
                self.if_stmt(s, kinds, loops)
            elif isinstance(s, _LOOPS):
                self.loop(s, kinds, loops)
            else:
                for child in ("body", "orelse", "finalbody"):
                    if isinstance(getattr(s, child, None), list):
                        self.block(getattr(s, child), kinds, loops)
                for h in getattr(s, "handlers", ()) or ():
                    self.block(h.body, kinds, loops)
            self.bind(s, kinds)

    def bind(self, s, kinds):
        if isinstance(s, ast.Assign):
            k = kind(s.value, kinds, self.traced)
            for t in s.targets:
                if isinstance(t, ast.Name):
                    kinds[t.id] = k
                else:
                    for n in ast_target_names(t):
                        kinds[n] = UNKNOWN
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) \
                            and kinds.get(t.value.id, UNKNOWN)[0] == "dict" \
                            and isinstance(t.slice, ast.Constant):
                        keys = kinds[t.value.id][1] | {t.slice.value}
                        kinds[t.value.id] = ("dict", frozenset(keys))
        elif isinstance(s, (ast.AugAssign, ast.AnnAssign)) and isinstance(s.target, ast.Name):
            if isinstance(s, ast.AugAssign):
                kinds[s.target.id] = ("str", None) if kinds.get(s.target.id, UNKNOWN)[0] == "str" \
                    else UNKNOWN
            elif s.value is not None:
                kinds[s.target.id] = kind(s.value, kinds, self.traced)
        elif isinstance(s, _COMPOUND):
            for name in self.bound_in(s):
                kinds[name] = kinds[name] if kinds.get(name, UNKNOWN)[0] == "dict" else UNKNOWN

    def bound_in(self, s):
        """The names compound statement ``s`` binds (kept: an `elif` chain nests)."""
        hit = self.bound.get(id(s))
        if hit is None:
            hit, todo = set(), list(ast.iter_child_nodes(s))
            while todo:
                n = todo.pop()
                if isinstance(n, _COMPOUND):
                    hit |= self.bound_in(n)
                    continue
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) or \
                        isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    hit.add(getattr(n, "id", None) or n.name)
                if not isinstance(n, _SCOPES):
                    todo.extend(ast.iter_child_nodes(n))
            self.bound[id(s)] = hit
        return hit

    # -- a if c else b ---------------------------------------------------------------
    def conditional_expressions(self, s, kinds):
        """``a if c else b`` in ``s``'s own expressions (not its blocks, not a lambda's
        body), ``c`` traced: its values must make one array, read afterwards or not."""
        own = [x for f, v in ast.iter_fields(s) if f not in _BLOCKS
               for x in (v if isinstance(v, list) else [v]) if isinstance(x, ast.AST)]
        for n in _local_walk(own):
            if isinstance(n, ast.IfExp) and mentions(n.test, self.traced):
                a, b = kind(n.body, kinds, self.traced), kind(n.orelse, kinds, self.traced)
                named = {t.id for t in getattr(s, "targets", ()) if isinstance(t, ast.Name)}
                if differ(a, b) and not (a[0] == b[0] == "str" and not isinstance(  # (chosen
                        s, ast.Return) and not _returns(self.fn, named)):  # when the code runs)
                    self.add(n, f"this conditional expression (`a if c else b`) gives {show(a)} when "
                             f"the condition is true and {show(b)} when it is false; with a traced "
                             "condition both must make one array", kind="ternary")

    # -- if -----------------------------------------------------------------------
    def _branch_kinds(self, stmts, kinds):
        """The kinds names have after ``stmts``, from ``kinds`` before them (None
        where a nested statement leaves it unknown)."""
        out = dict(kinds)
        for s in stmts:
            if isinstance(s, (ast.Return, ast.Raise, ast.Break, ast.Continue)):
                return None  # this path leaves the block
            self.bind(s, out)
        return out

    def if_stmt(self, s, kinds, loops):
        traced = self.traced_test(s)
        if traced and isinstance(s.test, ast.BoolOp):
            later = [n for v in s.test.values[1:] for n in ast.walk(v)
                     if isinstance(n, ast.NamedExpr)]
            if later and mentions(s.test.values[0], self.traced):
                self.add(s, f"`{later[0].target.id} := ...` is in a later operand of "
                         f"`{'and' if isinstance(s.test.op, ast.And) else 'or'}`, so the "
                         "condition stays Python, and its first operand is traced")
        self.block(s.body, dict(kinds), loops)
        self.block(s.orelse, dict(kinds), loops)
        if not traced:
            return
        true, false = self._branch_kinds(s.body, kinds), self._branch_kinds(s.orelse, kinds)
        if true is None or false is None:
            return
        for name in sorted(set(true) | set(false)):
            if name not in true or name not in false or _none_test(s.test, name):
                continue  # (one path only: the converter's check; `x is None`: see there)
            a, b = true[name], false[name]
            if a == kinds.get(name) and b == kinds.get(name):
                continue
            if a[0] == b[0] == "str" and not _returns(self.fn, {name}):
                continue  # (a string chosen when the compiled code runs, unless returned)
            if differ(a, b) and self.used_after(name, s, loops):
                if a[0] == "dict" and b[0] == "dict":
                    what = (f"`{name}` gets different keys on the two paths ({show(a)} when the "
                            f"condition is true, {show(b)} when false)")
                else:
                    what = (f"`{name}` is {show(a)} when the condition is true and {show(b)} "
                            "when it is false")
                self.add(s, what + "; a traced `if` must give it one structure and shape on "
                         "both paths")
                return

    # -- loops --------------------------------------------------------------------
    def loop(self, s, kinds, loops):
        inner = loops + [s]
        body_kinds = dict(kinds)
        self.block(s.body, body_kinds, inner)
        self.block(s.orelse, dict(kinds), loops)
        if not self.traced_count(s):
            return
        assigned = {n.id for n in _local_walk(s.body)
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        for n in _local_walk(s.body):
            # a list the loop appends to, bound before it
            grown = None
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr in ("append", "extend", "insert") \
                    and isinstance(n.func.value, ast.Name):
                grown = n.func.value.id
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) \
                    and kinds.get(n.target.id, UNKNOWN)[0] == "list":
                grown = n.target.id
            if grown is not None and grown not in assigned and (
                    kinds.get(grown, UNKNOWN)[0] == "list" or grown in kinds):
                self.add(s, f"`{grown}` grows in each iteration (`{ast.unparse(n)}`), and the "
                         "loop's trip count is traced, so its length would be traced: make the "
                         f"loop's bound static, or write into a buffer of fixed size at a count")
                return
            # a carry that grows, or changes kind
            if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                    and isinstance(n.targets[0], ast.Name):
                name = n.targets[0].id
                if name not in kinds:
                    continue
                v = n.value
                if isinstance(v, ast.Call):
                    base, _, last = dotted(v.func).rpartition(".")
                    if base in ("jnp", "jax.numpy") and last in _GROWS and any(
                            isinstance(a, ast.Name) and a.id == name
                            for a in ast.walk(v)):
                        self.add(s, f"`{name}` changes shape in each iteration "
                                 f"(`{ast.unparse(v)[:60]}`), and a loop with a traced trip "
                                 "count carries arrays of one shape: preallocate it and write "
                                 "with `.at[i].set(...)`, or make the loop's bound static")
                        return
                before, after = kinds[name], kind(v, kinds, self.traced)
                if before[0] in ("none", "str") and differ(before, after) \
                        and self.used_after(name, s, loops + [s]):
                    self.add(s, f"`{name}` is {show(before)} before this loop and "
                             f"{show(after) if after != UNKNOWN else 'another value'} after "
                             "an iteration; a loop with a traced trip count carries values of "
                             f"one type: give `{name}` its final type (an array) before the "
                             "loop")
                    return

    # -- returns ------------------------------------------------------------------
    def returns(self):
        rets = []  # (return node, the outermost traced statement around it or None)

        def visit(stmts, around):
            for s in stmts:
                if isinstance(s, _SCOPES):
                    continue
                if isinstance(s, ast.Return):
                    rets.append((s, around))
                here = around
                if here is None and isinstance(s, (ast.If, ast.While, ast.For)) \
                        and self.staged(s):
                    here = s
                for child in ("body", "orelse", "finalbody"):
                    if isinstance(getattr(s, child, None), list):
                        visit(getattr(s, child), here)
                for h in getattr(s, "handlers", ()) or ():
                    visit(h.body, here)

        visit(self.fn.body, None)
        staged = [a for _, a in rets if a is not None]
        if not staged or any(isinstance(n, (ast.Yield, ast.YieldFrom))
                             for n in _local_walk(self.fn.body)):
            return
        kinds = [kind(r.value, {}, self.traced) if r.value is not None else ("none",)
                 for r, _ in rets]
        if _falls_off(self.fn.body):
            kinds.append(("none",))
        for i, a in enumerate(kinds):
            for b in kinds[i + 1:]:
                if differ(a, b):
                    self.add(staged[0], f"this function returns {show(a)} on one path and "
                             f"{show(b)} on another, and a traced condition chooses between "
                             "them: return values of one structure and shape on every path")
                    return


def _falls_off(stmts) -> bool:
    """Can the end of ``stmts`` be reached (no ``return``/``raise`` on every path)?"""
    if not stmts:
        return True
    last = stmts[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return False
    if isinstance(last, ast.If):
        return _falls_off(last.body) or _falls_off(last.orelse)
    if isinstance(last, ast.While) and isinstance(last.test, ast.Constant) and last.test.value \
            and not any(isinstance(n, ast.Break) for n in _local_walk(last.body)):
        return False
    if isinstance(last, (ast.With, ast.AsyncWith)):
        return _falls_off(last.body)
    if isinstance(last, ast.Try):
        return _falls_off(last.body + last.orelse) or any(_falls_off(h.body)
                                                         for h in last.handlers)
    return True  # (a `match`, among others: a case may fall through)


def problems(fn, static=()) -> list[Problem]:
    """The converted statements of ``fn`` (an ``ast.FunctionDef``) that fail when traced."""
    return _Reader(fn, frozenset(static)).run()
