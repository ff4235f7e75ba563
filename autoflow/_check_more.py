"""``autoflow check``: more statements that fail when traced, read from the source only,
as ``traced`` reads the rest.

* an object of a plain class made again in a traced loop or ``if``: a class the module
  defines that is no JAX pytree (no ``register_*``, not a ``NamedTuple``, an Equinox or
  Flax module...) cannot be a carry of a staged loop or a result of a staged ``if``
  (``s = State(...)`` before a loop whose trip count is traced, and again in its body);
* a list appended to after a ``break``/``continue``/``return`` under a traced condition
  in a loop (``if x == 0: break`` then ``history.append(x)``): its length would depend on
  the data (the run's error is at that ``if``);
* Python objects a staged statement changes (``_python_state``): an iterator advanced
  with ``next()``, a list a traced loop pops from, a list appended to on one path of a
  traced ``if`` only, a traced value added to a set;
* a sequence, mapping or class pattern on a traced ``match`` subject;
* a recursion ended by an ``if`` on a traced value.
"""

from __future__ import annotations

import ast

from . import traced

# bases and decorators that make a class a pytree (by their last dotted part)
_PYTREE_BASES = ("NamedTuple", "Module", "PyTreeNode", "Struct", "Pytree", "Object")
_PYTREE_WORDS = ("register", "pytree", "struct", "Pytree")


def plain_classes(tree) -> set[str]:
    """The names of the module's top-level classes that are not pytrees."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    registered = set()
    for n in ast.walk(tree):  # `jax.tree_util.register_pytree_node(C, ...)`, `register_dataclass(C)`
        if isinstance(n, ast.Call) and "register" in traced.dotted(n.func):
            registered |= {a.id for a in n.args[:1] if isinstance(a, ast.Name)}
    plain = set()
    for name, c in classes.items():
        marks = [traced.dotted(d.func if isinstance(d, ast.Call) else d) for d in c.decorator_list]
        bases = [traced.dotted(b).rpartition(".")[2] for b in c.bases]
        if name in registered or any(w in m for m in marks for w in _PYTREE_WORDS) \
                or any(b in _PYTREE_BASES or b in classes and b not in plain for b in bases if b):
            continue
        plain.add(name)
    return plain


_CONTAINER_MAKERS = frozenset("list dict set defaultdict deque Counter OrderedDict".split())


def module_containers(tree) -> set[str]:
    """The names the module binds at its top level to a list, dict or set (a literal, a
    comprehension, ``list()``, ``collections.defaultdict(...)``...)."""
    out = set()
    for n in tree.body:
        targets = n.targets if isinstance(n, ast.Assign) else \
            [n.target] if isinstance(n, ast.AnnAssign) and n.value is not None else []
        value = getattr(n, "value", None)
        made = isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp,
                                  ast.SetComp)) or isinstance(value, ast.Call) and \
            traced.dotted(value.func).rpartition(".")[2] in _CONTAINER_MAKERS
        if made:
            out |= {t.id for t in targets if isinstance(t, ast.Name)}
    return out


def problems(fn, static, plain, module=frozenset()) -> list[traced.Problem]:
    """Both kinds of the module's docstring in ``fn`` (``plain``: ``plain_classes``;
    ``module``: ``module_containers``)."""
    reader = traced._Reader(fn, frozenset(static))  # (what is traced, read once)
    return (_plain_objects(fn, reader, plain) + _exits_then_appends(fn, reader)
            + _python_state(fn, reader) + _module_state(fn, reader, module)
            + _structural_cases(fn, reader)
            + _traced_recursion(fn, reader, static) + _carried_shapes(fn, reader))


def _module_state(fn, reader, module) -> list[traced.Problem]:
    """A module-level list, dict or set that a staged statement changes in place
    (``HISTORY.append(x)``, ``CONFIG["calls"] += 1``): it outlives every call, and the
    compiled code cannot change it at each call, path and iteration as Python does."""
    from .analysis.activity import MUTATING_METHODS

    local = {n.id for n in traced._local_walk(fn.body)
             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} | set(traced.params(fn))
    names = set(module) - local
    if not names:
        return []
    out = []
    for s, loop in _staged_statements(fn, reader):
        parts = s.body + s.orelse + ([ast.Expr(s.test)] if isinstance(s, ast.While) else [])
        for n in traced._local_walk(parts):
            target = n.value if isinstance(n, ast.Subscript) and not isinstance(
                n.ctx, ast.Load) else n.func.value if isinstance(n, ast.Call) and isinstance(
                n.func, ast.Attribute) and n.func.attr in MUTATING_METHODS else None
            while isinstance(target, ast.Subscript):
                target = target.value
            if isinstance(target, ast.Name) and target.id in names:
                what = "loop" if loop else "`if`"
                out.append(traced.Problem(s.lineno, s.col_offset, traced._stmt_kind(s), (
                    f"`{target.id}` is module state (a module-level list, dict or set), and "
                    f"this traced {what} changes it: it outlives every call, and the compiled "
                    "code cannot change it at each call as Python does: return the values "
                    "instead, or make the condition static")))
                break
    return out


def _staged_statements(fn, reader):
    """``(statement, is a loop)`` for each loop ``fn`` stages and each ``if`` on a traced
    condition in it."""
    for s in traced._local_walk(fn.body):
        loop = isinstance(s, (ast.For, ast.While))
        if reader.staged(s) if loop else isinstance(s, ast.If) and reader.traced_test(s):
            yield s, loop


def _traced_exit(reader, s, exits=(ast.Break, ast.Continue, ast.Return)) -> bool:
    """Is ``s`` an ``if`` on a traced condition that holds one of ``exits``?"""
    return isinstance(s, ast.If) and reader.traced_test(s) and any(
        isinstance(n, exits) for n in traced._local_walk(s.body + s.orelse))


def _exits_on_traced(reader, stmts) -> bool:
    """Do ``stmts`` (a loop's body) leave it (``break``, ``continue``, ``return``) in an
    ``if`` on a traced condition (which stages the loop)?"""
    return any(_traced_exit(reader, s) for s in traced._local_walk(stmts))


def _carried_shapes(fn, reader) -> list[traced.Problem]:
    """The loops staged by a traced trip count or a traced exit whose body sizes an array
    (``jnp.arange(n)``, ``jnp.zeros((n,))``...) by a variable the loop changes, bound
    before it: the staged loop carries it, a traced value, even where Python numbers
    alone make it."""
    from ._pitfall_reading import _sized_args

    out = []
    for loop in traced._local_walk(fn.body):
        if not isinstance(loop, (ast.For, ast.While)) or not (
                reader.traced_count(loop) or _exits_on_traced(reader, loop.body)):
            continue
        carried = _carried(fn, loop)
        for n in traced._local_walk(loop.body):
            sized = _sized_args(n) if isinstance(n, ast.Call) else None
            hit = next((a.id for arg in (sized[1] if sized else ()) for a in ast.walk(arg)
                        if isinstance(a, ast.Name) and a.id in carried), None)
            if hit is not None:
                out.append(traced.Problem(loop.lineno, loop.col_offset, traced._stmt_kind(loop), (
                    f"`{hit}` sizes an array in this loop's body (`{ast.unparse(n)[:60]}`), and "
                    f"the loop is staged, so it carries `{hit}` as a traced value: let the "
                    "loop run as Python (no traced `break`/`return` in a `for` over a static "
                    "`range`: write the exit as a flag), or give every iteration one shape")))
                break
    return out


def _recurses(stmts, name) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
               for n in traced._local_walk(stmts))


def _traced_recursion(fn, reader, static) -> list[traced.Problem]:
    """The ``if`` that ends the recursion of a function that calls itself (the first, in
    the source's order, with a branch that calls it and one that does not), where its
    condition is traced: both of its branches are traced, the recursive call included,
    so the recursion has no end while tracing. (A parameter with a default is the
    Python value a call does not pass; traced in the calls the function makes itself
    where those go through ``jit``, a decorator, unless declared static.)"""
    if not _recurses(fn.body, fn.name):
        return []
    through_jit = any("jit" in ast.unparse(d) for d in fn.decorator_list)
    names = reader.traced | (traced.defaulted(fn) - set(static) if through_jit else set())
    ifs = sorted((s for s in traced._local_walk(fn.body) if isinstance(s, ast.If)),
                 key=lambda s: (s.lineno, s.col_offset))
    for s in ifs:
        if _recurses(s.body, fn.name) == _recurses(s.orelse, fn.name) and (
                s.orelse or not any(isinstance(n, ast.Return)
                                    for n in traced._local_walk(s.body))):
            continue  # (not where the recursion ends)
        if traced.mentions(s.test, names):
            return [traced.Problem(s.lineno, s.col_offset, "if", (
                f"`{fn.name}` calls itself, and this `if` that would end the recursion is "
                "on a traced value: both of its branches are traced, the recursive call "
                f"included, so tracing never ends (rewrite `{fn.name}` as a `while` loop, "
                "or make the value that ends the recursion static)"))]
        return []
    return []


_STRUCTURAL = tuple(getattr(ast, n) for n in ("MatchSequence", "MatchMapping", "MatchClass")
                    if hasattr(ast, n))


def _structural_cases(fn, reader) -> list[traced.Problem]:
    """The first sequence, mapping or class pattern of a ``match`` whose subject is a
    traced array (no tuple, list or dict display): Python tests its structure, which a
    traced array has not."""
    out = []
    for m in traced._local_walk(fn.body):
        if type(m).__name__ != "Match" or isinstance(m.subject, (ast.Tuple, ast.List, ast.Dict)) \
                or not traced.mentions(m.subject, reader.traced):
            continue
        for case in m.cases:
            p = case.pattern
            while isinstance(p, ast.MatchAs) and p.pattern is not None:
                p = p.pattern
            hit = next((q for q in (p.patterns if isinstance(p, ast.MatchOr) else [p])
                        if isinstance(q, _STRUCTURAL)), None)
            if hit is not None:
                out.append(traced.Problem(case.pattern.lineno, case.pattern.col_offset, "case", (
                    f"the subject `{ast.unparse(m.subject)}` is traced, and this case's "
                    f"{type(hit).__name__[5:].lower()} pattern tests its structure in "
                    "Python, which a traced array has not: use value patterns and guards, "
                    "or match a tuple of traced values (`match (x, y):`)")))
                break
    return out


def _plain_objects(fn, reader, plain) -> list[traced.Problem]:
    """The traced loops and ``if`` statements of ``fn`` that bind a variable, bound before
    them, to a new object of a class of ``plain``."""
    if not plain:
        return []
    out = []
    for s in traced._local_walk(fn.body):
        staged = reader.traced_count(s) if isinstance(s, (ast.For, ast.While)) else \
            isinstance(s, ast.If) and reader.traced_test(s)
        if not staged:
            continue
        for n in traced._local_walk(s.body + s.orelse):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                    and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Call) \
                    and isinstance(n.value.func, ast.Name) and n.value.func.id in plain \
                    and _bound_before(fn, n.targets[0].id, s):
                name, cls = n.targets[0].id, n.value.func.id
                what = "after an iteration" if not isinstance(s, ast.If) else "on a path"
                out.append(traced.Problem(s.lineno, s.col_offset, traced._stmt_kind(s), (
                    f"`{name}` is a new `{cls}` {what}, and `{cls}` is not a JAX pytree: a "
                    f"traced {'loop carries' if what != 'on a path' else '`if` chooses'} "
                    f"only arrays and pytrees of them (make `{cls}` a pytree, or change "
                    f"`{name}`'s attributes in place)")))
                break
    return out


def _exits_then_appends(fn, reader) -> list[traced.Problem]:
    """The ``if`` statements on a traced condition, in a loop's body, that hold a
    ``break``, ``continue`` or ``return``, followed in that body by an append to a list
    bound before the loop."""
    out = []
    for loop in traced._local_walk(fn.body):
        if not isinstance(loop, (ast.For, ast.While)):
            continue
        for k, s in enumerate(loop.body):
            if not _traced_exit(reader, s):
                continue
            ends = _traced_exit(reader, s, (ast.Break, ast.Return))  # (the trip count changes)
            for n in traced._local_walk(loop.body[k + 1:] + (loop.body[:k] if ends else [])):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                        and n.func.attr in ("append", "extend", "insert") \
                        and isinstance(n.func.value, ast.Name) \
                        and _bound_before(fn, n.func.value.id, loop):
                    name = n.func.value.id
                    where = ("after this `if` leaves the iteration" if n.lineno > s.lineno
                             else "in each iteration, and this `if` leaves the loop")
                    out.append(traced.Problem(s.lineno, s.col_offset, "if", (
                        f"`{name}` is appended to {where} on a traced condition, so its "
                        f"length would depend on the data: "
                        f"keep a buffer of fixed size and a count (`{name} = "
                        f"{name}.at[count].set(item)`, `count = count + 1`), "
                        "or make the condition static")))
                    break
            else:
                continue
            break
    return out


def _calls_on(stmts, methods):
    """``(call, name)`` of each ``name.method(...)`` (``methods``), or ``next(name)`` where
    ``methods`` holds "next", in ``stmts`` (nested functions not entered)."""
    for n in traced._local_walk(stmts):
        if not isinstance(n, ast.Call):
            continue
        if isinstance(n.func, ast.Attribute) and n.func.attr in methods \
                and n.func.attr != "next" and isinstance(n.func.value, ast.Name):
            yield n, n.func.value.id  # (`obj.next()` is a user's method: no iterator has it)
        elif isinstance(n.func, ast.Name) and n.func.id == "next" and "next" in methods \
                and n.args and isinstance(n.args[0], ast.Name):
            yield n, n.args[0].id


_SHRINK = ("next", "pop", "popitem")
_GROW = ("append", "extend", "insert")
_STATE_METHODS = _SHRINK + _GROW + ("add",)


def _python_state(fn, reader) -> list[traced.Problem]:
    """Python objects that a staged loop or ``if`` changes, bound before it: an iterator
    advanced with ``next()`` (a loop's body is traced once, both paths of an ``if``); a
    list a loop with a traced trip count takes items from (``pop``: its length would be
    traced); a list appended to on one path of a traced ``if`` only."""
    out = []
    found = list(_calls_on(fn.body, _STATE_METHODS))
    if not found and not any(_numpy_made(n) or isinstance(n, ast.Dict) or isinstance(
            n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "dict"
            for n in traced._local_walk(fn.body)):
        return out

    def calls(stmts, methods):  # (those of `found` inside `stmts`: one walk in all)
        if not stmts:
            return []
        first, last = stmts[0], stmts[-1]
        lo, hi = (first.lineno, first.col_offset), (last.end_lineno, last.end_col_offset)
        return [(c, name) for c, name in found if lo <= (c.lineno, c.col_offset) <= hi
                and (c.func.attr if isinstance(c.func, ast.Attribute) else "next") in methods]

    for s, loop in _staged_statements(fn, reader):
        kind, what = traced._stmt_kind(s), "loop" if loop else "`if`"
        said = None
        counted = not loop or reader.traced_count(s)  # (else it may run as Python, unrolled)
        test = [s.test] if isinstance(s, ast.While) else []  # (evaluated per iteration too)
        for call, name in calls(test, _SHRINK) + calls(s.body, _SHRINK) + calls(s.orelse, _SHRINK):
            if not counted or not _bound_before(fn, name, s):
                continue
            if isinstance(call.func, ast.Name):
                said = (f"`{name}` is an iterator advanced with `next()` in this traced {what}"
                        + (", whose body is traced once, not run per iteration" if loop else
                           ", whose two paths are both traced") + ": index an array with a "
                        f"traced count instead of `{name}`, or make the condition static")
            elif loop:
                said = (f"`{name}` shrinks in each iteration (`{ast.unparse(call)}`), and the "
                        "loop's trip count is traced, so its length would be traced: hold the "
                        "items in an array with a count, or make the loop's bound static")
            if said:
                break
        items = {n.id for n in ast.walk(s.target) if isinstance(n, ast.Name)} \
            if isinstance(s, ast.For) else set()  # (the items of a staged loop: traced)
        for call, name in calls(s.body, ("add",)) + calls(s.orelse, ("add",)) \
                if said is None else ():
            if not _set_before(fn, name, s):
                continue
            if call.args and traced.mentions(call.args[0], reader.traced | items):
                said = (f"`{name}.add({ast.unparse(call.args[0])})` puts a traced value in a "
                        "set, but a traced value has no hash: use an array of flags "
                        f"(`{name} = {name}.at[i].set(True)`) instead of the set")
            else:
                said = (f"`{name}` (a set) is changed in place inside this traced {what}, "
                        "whose paths (or body) are traced once each: keep flags in an array "
                        f"(`{name} = {name}.at[i].set(True)`) instead of the set")
            break
        for name in (_numpy_written(s, fn) if said is None else ()):
            said = (f"`{name}`, a NumPy array made before this traced {what}, is written "
                    "inside it, whose paths (or body) are traced once each: make it a JAX "
                    f"array and write `{name} = {name}.at[i].set(v)`")
            break
        for name, key in (_items_written(s) if said is None else ()):
            # (in a staged loop, what its body rebinds and was bound before it is carried:
            # traced, as `i` of `d[i] = x; i += 1`)
            carried = _carried(fn, s) if loop and counted else set()
            if _dict_before(fn, name, s) and traced.mentions(key, reader.traced | items | carried):
                said = (f"`{name}[{ast.unparse(key)}] = ...` sets a dict item whose key is "
                        f"traced in this {what}: a dict key must be a concrete Python value; "
                        "keep the values in an array indexed by it, or make the key static")
                break
        if said is None and not loop:
            grown = {name for _, name in calls(s.body, _GROW)}
            other = {name for _, name in calls(s.orelse, _GROW)}
            grown = sorted(n for n in grown ^ other if _bound_before(fn, n, s))
            if grown:
                said = (f"`{grown[0]}` is appended to on one path of this traced `if` only, so "
                        "its length would depend on the data: keep a buffer of fixed size and "
                        f"a count (`{grown[0]} = {grown[0]}.at[count].set(item)`, `count = "
                        "count + 1`), or make the condition static")
        if said:
            out.append(traced.Problem(s.lineno, s.col_offset, kind, said))
    return out


_NUMPY_MAKERS = frozenset("zeros ones empty full array asarray arange zeros_like ones_like "
                          "empty_like full_like copy".split())


def _numpy_written(stmt, fn):
    """Names written by item (``buf[i] = v``) inside ``stmt`` that are bound, before it,
    to a NumPy array made there (``np.zeros(...)``, ``numpy.array(...)``)."""
    written = {name for name, _ in _items_written(stmt)}
    return [n.targets[0].id for n in traced._local_walk(fn.body)
            if isinstance(n, ast.Assign) and n.lineno < stmt.lineno and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name) and n.targets[0].id in written
            and _numpy_made(n.value)]


def _numpy_made(node) -> bool:
    """Is ``node`` a call that makes a NumPy array (``np.zeros(3)``)?"""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and node.func.attr in _NUMPY_MAKERS and isinstance(node.func.value, ast.Name) \
        and node.func.value.id in ("np", "numpy", "onp")


def _items_written(stmt):
    """``(name, key)`` of each ``name[key] = ...`` (or ``+=``) in ``stmt``'s blocks."""
    return [(t.value.id, t.slice) for n in traced._local_walk(stmt.body + stmt.orelse)
            if isinstance(n, (ast.Assign, ast.AugAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)]


def _carried(fn, loop) -> set:
    """The names ``loop``'s body rebinds that are bound before it: what a staged loop
    carries (traced values)."""
    return {n.id for n in traced._local_walk(loop.body) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store) and _bound_before(fn, n.id, loop)}


def _made_before(fn, name, stmt, literal, maker) -> bool:
    """Is ``name`` bound before ``stmt`` to a ``literal`` (an ``ast`` class) or a call of
    the builtin ``maker``?"""
    return any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                 for t in n.targets)
               and (isinstance(n.value, literal) or isinstance(n.value, ast.Call)
                    and isinstance(n.value.func, ast.Name) and n.value.func.id == maker)
               and n.lineno < stmt.lineno for n in traced._local_walk(fn.body))


def _dict_before(fn, name, stmt) -> bool:
    """Is ``name`` bound to a dict (``{}``, ``dict()``) before ``stmt``?"""
    return _made_before(fn, name, stmt, ast.Dict, "dict")


def _set_before(fn, name, stmt) -> bool:
    """Is ``name`` bound to a set (``set()``, ``{a, b}``) before ``stmt``?"""
    return _made_before(fn, name, stmt, ast.Set, "set")


def _bound_before(fn, name, stmt) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
               and n.lineno < stmt.lineno for n in traced._local_walk(fn.body)) \
        or name in traced.params(fn)
