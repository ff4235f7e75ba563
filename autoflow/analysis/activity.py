"""Which names a piece of code reads and which it binds.

Scoping follows Python: a nested ``def``/``lambda``/``class`` binds its own
name in the enclosing scope, and every name it reads from outside counts as
read where it is defined (a closure may run at any later time, so this is the
safe choice). Comprehension targets are local to the comprehension, but a
walrus inside one binds in the enclosing function.
"""

from __future__ import annotations

import functools

import gast

from ..core.methods import MUTATING_METHODS
from ..core.nodes import append_children, children, walk
# Nodes that open a scope of their own, and try statements (TryStar from 3.11).
SCOPES = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ClassDef)
TRY_TYPES = tuple(t for t in (getattr(gast, "Try", None), getattr(gast, "TryStar", None)) if t)
_COMPS = (gast.ListComp, gast.SetComp, gast.GeneratorExp, gast.DictComp)
_SCOPE_CLASSES = frozenset(SCOPES)
_COMP_CLASSES = frozenset(_COMPS)


def target_names(target) -> list[str]:
    """Names bound by an assignment target, in order (``a, (b, c)`` -> a b c)."""
    out = []
    if isinstance(target, gast.Name):
        out.append(target.id)
    elif isinstance(target, (gast.Tuple, gast.List)):
        for elt in target.elts:
            out.extend(target_names(elt))
    elif isinstance(target, gast.Starred):
        out.extend(target_names(target.value))
    return out


def _add(seq, names):
    for n in names:
        if n not in seq:
            seq.append(n)


def _scope_reads(node):
    """Names a nested scope reads from its enclosing scope."""
    inner_bound = set()
    reads = []
    args = node.args if not isinstance(node, gast.ClassDef) else None
    if args is not None:
        for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
            if a is not None:
                inner_bound.add(a.id)
    body = node.body if isinstance(node.body, list) else [node.body]
    for stmt in body:
        if isinstance(stmt, gast.stmt):
            inner_bound.update(bound_names([stmt]))
        else:  # a lambda's expression: a walrus in it binds in the lambda
            inner_bound.update(walrus_targets(stmt))
    for sub in body:
        for n in walk(sub):
            if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load):
                if n.id not in inner_bound and n.id not in reads:
                    reads.append(n.id)
    # Defaults and decorators are evaluated in the enclosing scope.
    outer_parts = []
    if args is not None:
        outer_parts += list(args.defaults) + [d for d in args.kw_defaults if d is not None]
    outer_parts += list(getattr(node, "decorator_list", []))
    if isinstance(node, gast.ClassDef):
        outer_parts += list(node.bases) + [k.value for k in node.keywords]
    for part in outer_parts:
        _add(reads, expr_reads(part))
    return reads


def expr_reads(node) -> list[str]:
    """Names read by an expression (or by any node, not entering statements' bindings),
    in the order a preorder walk meets them."""
    reads: list[str] = []
    Name, Load = gast.Name, gast.Load
    todo = [node]
    kids: list = []
    while todo:  # (a stack, children pushed in reverse: preorder)
        n = todo.pop()
        cls = n.__class__
        if cls is Name:
            if n.ctx.__class__ is Load and n.id not in reads:
                reads.append(n.id)
            continue
        if cls in _SCOPE_CLASSES:
            _add(reads, _scope_reads(n))
            continue
        if cls in _COMP_CLASSES:
            local = set()
            for gen in n.generators:
                local.update(target_names(gen.target))
            for sub in walk(n):
                if sub.__class__ is Name and sub.ctx.__class__ is Load:
                    if sub.id not in local and sub.id not in reads:
                        reads.append(sub.id)
            continue
        append_children(n, kids)
        kids.reverse()
        todo += kids
        kids.clear()
    return reads


def walrus_targets(e) -> tuple:
    """Names bound by walruses in expression ``e`` (cached on the node: the
    analysis asks again for every enclosing block)."""
    cached = getattr(e, "af_walrus", None)
    if cached is None:
        cached = tuple(t for n in walk(e) if isinstance(n, gast.NamedExpr)
                       for t in target_names(n.target))
        e.af_walrus = cached
    return cached


# The fields that hold statement lists (and the lists of except clauses and
# match cases, whose bodies are statement lists in turn).
BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


_HOLDS_BLOCKS: dict = {}  # node class -> has it statement-list fields?


def holds_blocks(node) -> bool:
    """Can ``node`` (by its class) hold statement lists? (A compound statement,
    an except clause or match case, a def or class; not a simple statement.)"""
    cls = node.__class__
    hit = _HOLDS_BLOCKS.get(cls)
    if hit is None:
        hit = _HOLDS_BLOCKS[cls] = any(f in cls._fields for f in BLOCK_FIELDS)
    return hit


def bound_falling(stmts, leaves=(gast.Return, gast.Raise), memo=None):
    """Names bound on every path through ``stmts`` that falls through (reaches
    the end of the block); None when every path leaves it.

    ``leaves``: the statements that end a path (``return`` and ``raise``, and
    a transform's own markers: ``early_exits._Exit``); ``memo``: a dict that
    keeps the answer for each ``if`` (by id), for a transform that asks again
    about blocks holding the same ``if``s (``returns.Returns``). An ``if``
    binds what both its branches bind on their falling paths; a compound
    statement other than ``if`` (a loop, ``with``, ``try``, ``match``, a
    ``def`` or ``class``) counts as binding nothing: a loop may run no
    iteration, a ``match`` another case.
    """
    out = set()
    for s in stmts:
        if isinstance(s, leaves):
            return None
        if isinstance(s, gast.If):
            both = memo.get(id(s), False) if memo is not None else False
            if both is False:
                a = bound_falling(s.body, leaves, memo)
                b = bound_falling(s.orelse, leaves, memo)
                both = b if a is None else a if b is None else a & b
                if memo is not None:
                    memo[id(s)] = both
            if both is None:
                return None
            out |= both
        elif not holds_blocks(s):
            out.update(bound_names([s]))
    return out


def bound_names(stmts, include_nested=True) -> list[str]:
    """Names bound (assigned) by statements, in order of first binding.

    With ``include_nested`` the bodies of compound statements (if/while/for/
    with/try) count too; nested function and class bodies never do.
    """
    out: list[str] = []
    for s in stmts:
        _bind(s, out, include_nested)
    return out


def _bind(stmt, out, include_nested, walrus=True):
    """``bound_names`` of one statement, appended to ``out``. ``walrus=False``:
    the code is known to hold no ``:=`` (its walruses need no search)."""
    if isinstance(stmt, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)):
        _add(out, [stmt.name])
        return
    if isinstance(stmt, gast.Assign):
        if walrus:
            _add(out, walrus_targets(stmt.value))
        for t in stmt.targets:
            _add(out, target_names(t))
    elif isinstance(stmt, (gast.AugAssign, gast.AnnAssign)):
        if stmt.value is not None:
            if walrus:
                _add(out, walrus_targets(stmt.value))
            _add(out, target_names(stmt.target))  # a bare `y: float` binds nothing
    elif isinstance(stmt, (gast.For, gast.AsyncFor)):
        if walrus:
            _add(out, walrus_targets(stmt.iter))
        _add(out, target_names(stmt.target))
    elif isinstance(stmt, (gast.Import, gast.ImportFrom)):
        for alias in stmt.names:
            if alias.name != "*":
                _add(out, [(alias.asname or alias.name).split(".")[0]])
    elif isinstance(stmt, (gast.With, gast.AsyncWith)):
        for item in stmt.items:
            if walrus:
                _add(out, walrus_targets(item.context_expr))
            if item.optional_vars is not None:
                _add(out, target_names(item.optional_vars))
    elif isinstance(stmt, gast.Delete):
        for t in stmt.targets:
            _add(out, target_names(t))
    elif walrus:
        for field in ("test", "value"):
            e = getattr(stmt, field, None)
            if isinstance(e, gast.expr):
                _add(out, walrus_targets(e))
    if isinstance(stmt, TRY_TYPES):
        for h in stmt.handlers:
            if isinstance(h.name, gast.Name):
                _add(out, [h.name.id])
            elif isinstance(h.name, str):
                _add(out, [h.name])
    if include_nested:
        for field in ("body", "orelse", "finalbody"):
            for sub in getattr(stmt, field, None) or []:
                if isinstance(sub, gast.stmt):
                    _bind(sub, out, True, walrus)
        if isinstance(stmt, TRY_TYPES):
            for h in stmt.handlers:
                for sub in h.body:
                    _bind(sub, out, True, walrus)
        if type(stmt).__name__ == "Match":
            for case in stmt.cases:
                for n in walk(case.pattern):
                    nm = getattr(n, "name", None)
                    if isinstance(nm, str):
                        _add(out, [nm])
                for sub in case.body:
                    _bind(sub, out, True, walrus)


def declared_nonlocal(stmts) -> set[str]:
    """Names declared ``global`` or ``nonlocal`` in this scope."""
    out = set()
    for stmt in stmts:
        if isinstance(stmt, SCOPES):  # a nested def's declarations are its own
            continue
        for n in _walk_scope(stmt):
            if isinstance(n, (gast.Global, gast.Nonlocal)):
                out.update(n.names)
    return out


def _walk_scope(node):
    """Like gast.walk, without entering nested function or class bodies."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        for child in children(n):
            if isinstance(child, SCOPES):
                continue
            todo.append(child)


def _nested_scopes(fn):
    """The user's scopes (def/lambda/class) directly nested in function ``fn``.

    (The lambdas autoflow makes for `and`/`or` operands run at once: not these.)
    """
    todo = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, SCOPES) and getattr(node, "af_user", False):
            yield node
            continue
        append_children(node, todo)


def _nonlocals(scope):
    return {n for sub in walk(scope) if isinstance(sub, gast.Nonlocal) for n in sub.names}


def nested_nonlocal_names(fn) -> set[str]:
    """Names that functions nested in ``fn`` declare ``nonlocal`` (they may
    rebind ``fn``'s variables whenever they are called)."""
    return set().union(*(_nonlocals(s) for s in _nested_scopes(fn)))


def private_cells(fn, names, af=None) -> set[str]:
    """Those of ``names`` (variables of ``fn`` its nested functions rebind) that no code
    can read once ``fn`` has returned: every scope nested in ``fn`` that reads or rebinds
    one is an undecorated ``def`` that ``fn``'s own statements only call by name (never
    store, pass, return, or name inside another nested scope). ``af``: the runtime's
    alias, where calls are ``af.call(f, ...)`` already."""
    scopes = [(s, _nonlocals(s) | set(_scope_reads(s))) for s in _nested_scopes(fn)]
    callees = _callees(fn, af)
    plain = {}  # def name -> only called (asked once per name)

    def only_called(s):
        if s.__class__ is not gast.FunctionDef or s.decorator_list:
            return False
        if s.name not in plain:
            plain[s.name] = _only_called(fn, s.name, callees)
        return plain[s.name]
    return {n for n in names if all(only_called(s) for s, seen in scopes if n in seen)}


def _callees(fn, af=None) -> set[int]:
    """Ids of the names ``fn``'s own scope calls (``name(...)``, or ``af.call(name, ...)``),
    the lambdas autoflow made included (they run at once), the user's not."""
    callees = set()
    todo = list(fn.body)
    while todo:
        n = todo.pop()
        if isinstance(n, SCOPES) and getattr(n, "af_user", False):
            continue
        append_children(n, todo)
        if n.__class__ is not gast.Call:
            continue
        f = n.func
        if f.__class__ is gast.Name:
            callees.add(id(f))
        elif af is not None and f.__class__ is gast.Attribute and f.attr == "call" \
                and f.value.__class__ is gast.Name and f.value.id == af and n.args:
            callees.add(id(n.args[0]))
    return callees


def _only_called(fn, name, callees) -> bool:
    """Is ``name`` read in ``fn`` only as one of ``callees`` (``_callees``), and declared
    ``global``/``nonlocal`` nowhere?"""
    for n in walk(fn):
        if n.__class__ is gast.Name and n.id == name and n.ctx.__class__ is gast.Load \
                and id(n) not in callees:
            return False
        if n.__class__ in (gast.Global, gast.Nonlocal) and name in n.names:
            return False
    return True


def nested_free_names(fn) -> set[str]:
    """Names that scopes nested in function ``fn`` read or declare ``nonlocal``.

    Those of ``fn``'s own variables are *cells*: a closure reads them when it
    runs, so converted code must keep the shared variable current.
    """
    return set().union(*(set(_scope_reads(s)) | _nonlocals(s) for s in _nested_scopes(fn)))




def _chain(node):
    """``a.b.c`` -> ``['a', 'b', 'c']`` for a chain of plain attributes on a name."""
    parts = []
    while isinstance(node, gast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, gast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _root(node):
    """The name or attribute chain a subscript chain hangs from (``cfg['a'][i]`` -> cfg)."""
    while isinstance(node, gast.Subscript):
        node = node.value
    return node if _chain(node) is not None else None


def shared_state(stmts):
    """What ``stmts`` change besides variables, in order of first appearance.

    Returns ``(attrs, objects)``: ``attrs`` are the attribute targets assigned
    (``s.x = v``, ``self.n += 1``, ``a.b.c = v``) as attribute nodes;
    ``objects`` the expressions (a name or an attribute chain) whose list,
    dict or set contents are changed in place (``out.append(v)``,
    ``del d[k]``, ``cfg['a']['b'] = v``). Nested scopes are not entered, but for a
    lambda of no parameters (a thunk: ``af.and_(a, lambda: stack.pop() > x)``, which
    the ``logical`` pass makes of ``a and stack.pop() > x``), whose names are the
    statement's.
    (``x[k] = v`` on a local ``x`` reaches here as ``x = af.setitem(x, k, v)``:
    ``x`` is a carried variable, and ``af.setitem`` copies a list or dict
    inside a staged branch unless the statement manages it.)
    """
    attrs, objects, seen = [], [], set()
    for stmt in stmts:
        todo = [stmt]
        while todo:
            n = todo.pop()
            if isinstance(n, SCOPES) and not _thunk(n):
                continue
            a, o = shared_state_node(n)
            for kind, node in a + o:
                key = (kind, ".".join(_chain(node)))
                if key not in seen:
                    seen.add(key)
                    (attrs if kind == "attr" else objects).append(node)
            todo.extend(reversed(list(children(n))))
    return attrs, objects


def _thunk(n) -> bool:
    a = n.args if isinstance(n, gast.Lambda) else None
    return a is not None and not (a.posonlyargs or a.args or a.vararg or a.kwonlyargs
                                  or a.kwarg)


def _state_target(attrs, objects, t):
    if isinstance(t, (gast.Tuple, gast.List)):
        for e in t.elts:
            _state_target(attrs, objects, e)
    elif isinstance(t, gast.Starred):
        _state_target(attrs, objects, t.value)
    elif isinstance(t, gast.Attribute) and _chain(t) is not None:
        attrs.append(("attr", t))
    elif isinstance(t, gast.Subscript):
        root = _root(t)
        if root is not None:
            objects.append(("obj", root))


def shared_state_node(n):
    """The ``shared_state`` events of node ``n`` itself (not its children):
    ``([("attr", node)...], [("obj", node)...])`` in order."""
    attrs, objects = [], []
    target = functools.partial(_state_target, attrs, objects)
    if isinstance(n, gast.Assign):
        for t in n.targets:
            target(t)
    elif isinstance(n, (gast.AugAssign, gast.AnnAssign)):
        target(n.target)
    elif isinstance(n, gast.Delete):
        for t in n.targets:
            target(t)
    elif isinstance(n, gast.Call) and isinstance(n.func, gast.Name) \
            and n.func.id in ("setattr", "delattr") and len(n.args) >= 2 \
            and isinstance(n.args[1], gast.Constant) and isinstance(n.args[1].value, str) \
            and _chain(n.args[0]) is not None:
        # setattr(obj, "x", v): the attribute `obj.x`
        attrs.append(("attr", gast.Attribute(value=n.args[0], attr=n.args[1].value,
                                             ctx=gast.Store())))
    elif isinstance(n, gast.Call) and isinstance(n.func, gast.Name) and n.func.id == "next" \
            and n.args and _root(n.args[0]) is not None:
        # next(it): advances an iterator (``runtime.state``: refused when staged)
        objects.append(("obj", _root(n.args[0])))
    elif isinstance(n, gast.Call) and isinstance(n.func, gast.Attribute) \
            and n.func.attr in MUTATING_METHODS:
        root = _root(n.func.value)
        if root is not None:
            objects.append(("obj", root))
    return attrs, objects


def chain_text(node) -> str:
    return ".".join(_chain(node))
