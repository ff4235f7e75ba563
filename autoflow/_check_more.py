"""``autoflow check``: more statements that fail when traced, read from the source only,
as ``traced`` reads the rest.

* an object of a plain class made again in a traced loop or ``if``: a class the module
  defines that is no JAX pytree (no ``register_*``, not a ``NamedTuple``, an Equinox or
  Flax module...) cannot be a carry of a staged loop or a result of a staged ``if``
  (``s = State(...)`` before a loop whose trip count is traced, and again in its body);
* a list appended to after a ``break``/``continue``/``return`` under a traced condition
  in a loop (``if x == 0: break`` then ``history.append(x)``): its length would depend on
  the data (the run's error is at that ``if``).
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


def problems(fn, static, plain) -> list[traced.Problem]:
    """Both kinds of the module's docstring in ``fn`` (``plain``: ``plain_classes``)."""
    reader = traced._Reader(fn, frozenset(static))  # (what is traced, read once)
    return _plain_objects(fn, reader, plain) + _exits_then_appends(fn, reader)


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
            if not (isinstance(s, ast.If) and reader.traced_test(s) and any(
                    isinstance(n, (ast.Break, ast.Continue, ast.Return))
                    for n in traced._local_walk(s.body + s.orelse))):
                continue
            for n in traced._local_walk(loop.body[k + 1:]):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                        and n.func.attr in ("append", "extend", "insert") \
                        and isinstance(n.func.value, ast.Name) \
                        and _bound_before(fn, n.func.value.id, loop):
                    name = n.func.value.id
                    out.append(traced.Problem(s.lineno, s.col_offset, "if", (
                        f"`{name}` is appended to after this `if` leaves the iteration on a "
                        f"traced condition, so its length would depend on the data: "
                        f"preallocate an array and set `{name} = {name}.at[i].set(value)`, "
                        "or make the condition static")))
                    break
            else:
                continue
            break
    return out


def _bound_before(fn, name, stmt) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
               and n.lineno < stmt.lineno for n in traced._local_walk(fn.body)) \
        or name in traced.params(fn)
