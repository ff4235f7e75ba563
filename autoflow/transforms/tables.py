"""Python tables indexed by a loop's index.

``coeffs[i]`` where ``i`` is a loop variable (a ``for`` target, or a name a
loop body assigns, like a ``while`` counter) or a parameter becomes ``af.getitem(coeffs,
i)``: the plain ``coeffs[i]`` unless ``coeffs`` is a Python list or tuple or
a NumPy array and ``i`` is traced, when it indexes the table stacked into one
``jnp`` array. A staged loop over ``i`` then stays a rolled loop instead of
running as Python (it used to need a concrete ``i`` for ``list[i]``).

``d["k"]`` and ``d.get("k", v)`` where a loop body sets ``d["k"]`` (and no dict
display bound to ``d`` holds ``"k"``) become
``af.getitem(d, "k")`` and ``af.get(d, "k", v)``: the key is unset in Python where
the loop ran no iteration (``KeyError``, the default), which a staged loop that
carries it from zeros tracks (``loops.flags._carrying_keys``).

Only reads whose index mentions such a name, of a table that can be a
Python table, are rewritten: a global or closure name (``BETA``, a module
constant), a local only ever bound to a list/tuple display or comprehension
or a ``list(...)``/``tuple(...)``/``np.``... call, or an attribute of a global
(``consts.BETA``). Parameters and other locals (arrays, most often) and
slices stay as written, so the converted code keeps reading ``xs[i]``.
"""

from __future__ import annotations

import gast

from ..core.nodes import Transformer, walk
from ..core.templates import replace_expr
from .util import param_names

_LOOPS = (gast.For, gast.While)


def _stored(target):
    return [n.id for n in walk(target) if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)]


def loop_names(fn, nodes=None):
    """Names bound as a ``for`` target or assigned in a loop body of ``fn``
    (``nodes``: ``walk(fn)``, when the caller has it)."""
    names = set()
    inside = set()  # ids of the nodes in the body of a loop walked already
    for loop in walk(fn) if nodes is None else nodes:
        if not isinstance(loop, _LOOPS):
            continue
        if isinstance(loop, gast.For):
            names.update(_stored(loop.target))
        if id(loop) in inside:
            # A loop in the body of another: its body was walked with that one
            # (`walk` is breadth first, so the outer loop came first), and a set
            # of names gains nothing from a second walk.
            continue
        for s in loop.body:
            for n in walk(s):
                inside.add(id(n))
                if isinstance(n, (gast.Assign, gast.AugAssign, gast.AnnAssign)):
                    for t in (n.targets if isinstance(n, gast.Assign) else [n.target]):
                        names.update(_stored(t))
                elif isinstance(n, gast.NamedExpr):
                    names.update(_stored(n.target))
                elif isinstance(n, gast.For):
                    names.update(_stored(n.target))
    return names


def _table_value(v, np_names):
    if isinstance(v, (gast.List, gast.Tuple, gast.ListComp)):
        return True
    if isinstance(v, gast.BinOp) and isinstance(v.op, gast.Mult):  # `[0] * (n + 1)`
        return isinstance(v.left, (gast.List, gast.Tuple)) or isinstance(v.right, (gast.List, gast.Tuple))
    if isinstance(v, gast.BinOp) and isinstance(v.op, gast.Add):  # `[1] + [0] * n`
        return _table_value(v.left, np_names) and _table_value(v.right, np_names)
    if isinstance(v, gast.Call):
        f = v.func
        if isinstance(f, gast.Name) and f.id in ("list", "tuple"):
            return True
        root = f
        while isinstance(root, gast.Attribute):
            root = root.value
        return isinstance(root, gast.Name) and root.id in np_names
    return False


def _updates_itself(n, af):
    """``xs = af.setitem(xs, ...)`` / ``xs = af.append(xs, v)`` / ``xs = af.sort(xs)`` (from
    ``index_assign``)."""
    v = n.value
    return (isinstance(v, gast.Call) and isinstance(v.func, gast.Attribute)
            and isinstance(v.func.value, gast.Name) and v.func.value.id == af
            and v.func.attr in ("setitem", "setitem_in", "append", "sort") and v.args
            and isinstance(v.args[0], gast.Name) and v.args[0].id == n.targets[0].id)


def table_names(tree, np_names, af="af", nodes=None):
    """(names only ever bound to a table display or call, names bound in ``tree``);
    ``nodes``: ``walk(tree)``, when the caller has it."""
    if nodes is None:
        nodes = walk(tree)
    table_targets = set()
    for n in nodes:
        if isinstance(n, gast.Assign) and len(n.targets) == 1 \
                and isinstance(n.targets[0], gast.Name) and (
                    _table_value(n.value, np_names) or _updates_itself(n, af)):
            table_targets.add(id(n.targets[0]))
    bound, other = set(), set()
    for n in nodes:
        if isinstance(n, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda)):
            a = n.args
            for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
                if arg is not None:
                    other.add(arg.id)
            if not isinstance(n, gast.Lambda):
                other.add(n.name)
        elif isinstance(n, gast.Name) and isinstance(n.ctx, (gast.Store, gast.Del)):
            bound.add(n.id)
            if id(n) not in table_targets:
                other.add(n.id)
    return bound - other, bound | other


def params(tree, nodes=None):
    """Parameters of the functions in ``tree`` (traced when the caller traces);
    ``nodes``: ``walk(tree)``, when the caller has it."""
    out = set()
    for n in walk(tree) if nodes is None else nodes:
        if isinstance(n, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda)):
            a = n.args
            out.update(arg.id for arg in a.posonlyargs + a.args + a.kwonlyargs)
    return out


def loop_dicts(fn, af, nodes=None):
    """``{name: keys}``: the string keys a loop body sets of a dict (``d["k"] = v``, which
    ``index_assign`` made ``d = af.setitem(d, 'k', v)``) and that no dict display bound
    to the name holds (``d = {"k": 0.0}``): keys that a loop that runs no iteration
    may leave unset in Python."""
    nodes = walk(fn) if nodes is None else nodes
    out = {}
    for loop in nodes:
        if not isinstance(loop, _LOOPS):
            continue
        for s in loop.body:
            for n in walk(s):
                if isinstance(n, gast.Assign) and len(n.targets) == 1 \
                        and isinstance(n.targets[0], gast.Name) and _updates_itself(n, af) \
                        and n.value.func.attr == "setitem" and len(n.value.args) >= 2 \
                        and isinstance(n.value.args[1], gast.Constant) \
                        and isinstance(n.value.args[1].value, str):
                    out.setdefault(n.targets[0].id, set()).add(n.value.args[1].value)
    if out:
        for n in nodes:  # `d = {"k": 0.0, ...}`: "k" is there before any loop runs
            if isinstance(n, gast.Assign) and isinstance(n.value, gast.Dict):
                held = {k.value for k in n.value.keys if isinstance(k, gast.Constant)}
                for t in n.targets:
                    if isinstance(t, gast.Name) and t.id in out:
                        out[t.id] -= held
    return {k: frozenset(v) for k, v in out.items() if v}


def _of_parameter(read, params):
    """Is ``read`` (``x[...]``, ``x.a[...][...]``) an item of a parameter in ``params``,
    with no string key (``d["k"]``)?"""
    root = read.value
    while root.__class__ is gast.Subscript or root.__class__ is gast.Attribute:
        root = root.value
    return root.__class__ is gast.Name and root.id in params and _key_of(read.slice) is None


def _key_of(node):
    return node.value if isinstance(node, gast.Constant) and isinstance(node.value, str) else None


class Tables(Transformer):
    def __init__(self, ctx):
        self.ctx = ctx
        self.names = frozenset()
        self._fn = self._nodes = None
        self._dicts = self._tables = None

    def run(self, fn):
        nodes = walk(fn)  # one walk for every question (the tree does not change)
        # Only reads `x[...]` and calls `d.get(...)` can be rewritten: without them,
        # or where none of them qualifies (asked below), nothing is visited.
        # A read of a parameter's item (`xs[i]`, `p.w[i]`) is never a table's (parameters
        # are not tables), unless it reads a dict's key: most reads are such.
        own = set(param_names(fn))
        reads = [n for n in nodes if n.__class__ is gast.Subscript
                 and n.ctx.__class__ is gast.Load and not _of_parameter(n, own)]
        gets = [n for n in nodes if n.__class__ is gast.Call
                and n.func.__class__ is gast.Attribute and n.func.attr == "get"]
        if not reads and not gets:
            return fn
        self.names = frozenset(loop_names(fn, nodes) | params(fn, nodes))
        if not self.names:
            return fn
        # (the tables and the loops' dicts are found when a read or call asks)
        self._fn, self._nodes = fn, nodes
        # The visit rewrites bottom up, and the first node it rewrites has its
        # children as written: where no node as written qualifies, none would.
        if any(self._rewritten_get(n) for n in gets) \
                or any(self._rewritten_read(n) for n in reads):
            self.visit(fn)
        return fn

    def _loop_dicts(self, name, key):
        """Is ``key`` a key that a loop sets of the dict ``name`` (``loop_dicts``)?"""
        if key is None:
            return False
        if self._dicts is None:
            self._dicts = loop_dicts(self._fn, self.ctx.af, self._nodes)
        return key in self._dicts.get(name, ())

    def _rewritten_get(self, node):
        """Does ``d.get(k, default)`` of a dict a loop sets a key of become ``af.get``?"""
        func = node.func
        return isinstance(func, gast.Attribute) and func.attr == "get" \
            and isinstance(func.value, gast.Name) and bool(node.args) \
            and not node.keywords and len(node.args) <= 2 \
            and self._loop_dicts(func.value.id, _key_of(node.args[0]))

    def visit_Call(self, node):
        # `d.get(k, default)` of a dict a loop sets a key of: `af.get(d, k, default)`,
        # which answers where the key is set (a loop that ran no iteration set none)
        self.generic_visit(node)
        if self._rewritten_get(node):
            func = node.func
            node.args = [func.value] + node.args
            node.func = replace_expr("AF.get", AF=self.ctx.af, at=func)
        return node

    def _may_be_table(self, v):
        if self._tables is None:
            np_names = {n for n in self.ctx.library_names if n in ("np", "numpy", "onp")} | {"np"}
            self._tables = table_names(self._fn, np_names, self.ctx.af, self._nodes)
        tables, bound = self._tables
        if isinstance(v, gast.Name):
            return v.id in tables or v.id not in bound
        root = v
        while isinstance(root, gast.Attribute):
            root = root.value
        return isinstance(root, gast.Name) and root.id not in bound \
            and root.id not in ("self", "cls") and root.id not in self.ctx.library_names

    def _table_root(self, v):
        """``dp`` of ``dp[0]`` or of ``af.getitem(dp, i)`` (a row of a table), else None."""
        while True:
            if isinstance(v, gast.Subscript):
                v = v.value
            elif isinstance(v, gast.Call) and isinstance(v.func, gast.Attribute) \
                    and v.func.attr == "getitem" and isinstance(v.func.value, gast.Name) \
                    and v.func.value.id == self.ctx.af and len(v.args) == 2:
                v = v.args[0]
            else:
                return v if isinstance(v, (gast.Name, gast.Attribute)) else None

    def _rewritten_read(self, node):
        """Is the read ``node`` (a ``Subscript`` in a ``Load``) rewritten: ``"key"`` (a
        dict's key a loop sets), ``"table"`` (a table indexed by a loop's name) or
        ``None``."""
        value = node.value
        if isinstance(value, gast.Name) and self._loop_dicts(value.id, _key_of(node.slice)):
            return "key"
        display = isinstance(value, (gast.List, gast.Tuple))  # `[1, 5, 10][i]`
        if not display and not isinstance(value, (gast.Name, gast.Attribute)):
            value = self._table_root(value)  # `dp[i][j]`: an item of a row of `dp`
            if value is None:
                return None
        index = walk(node.slice)
        if any(isinstance(n, gast.Slice) for n in index):
            return None
        if not any(isinstance(n, gast.Name) and n.id in self.names for n in index):
            return None
        if not display and (isinstance(value, gast.Name) and value.id == self.ctx.af
                            or not self._may_be_table(value)):
            return None
        return "table"

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if not isinstance(node.ctx, gast.Load):
            return node
        if self._rewritten_read(node) is None:
            return node
        # a table indexed by a loop's name; or `d["k"]` of a dict a loop sets a key
        # of: Python's KeyError where the loop ran no iteration (`af.getitem`,
        # `effects.unset.read_key`)
        return replace_expr("AF.getitem(TABLE, INDEX)", AF=self.ctx.af, TABLE=node.value,
                            INDEX=node.slice, at=node)
