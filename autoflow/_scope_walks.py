"""Walks of a function's own code (not into the functions and classes it defines), for
``autoflow check`` (``traced``). Nothing here imports JAX; it reads ``ast``."""

from __future__ import annotations

import ast

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
# str methods giving a number or a truth, not a string: what a `return` may give of a
# string a traced `if` chose (computed from its characters when the compiled code runs)
_NOT_TEXT = frozenset("count endswith find index isalnum isalpha isascii isdecimal isdigit "
                      "isidentifier islower isnumeric isprintable isspace istitle isupper "
                      "rfind rindex startswith".split())


def local_walk(nodes, skip=None):
    """The nodes of ``nodes`` (statements), not into nested functions or classes, nor
    into the nodes ``skip`` (a predicate) holds true for."""
    todo = list(nodes)
    while todo:
        n = todo.pop()
        if skip is not None and skip(n):
            continue
        yield n
        if not isinstance(n, SCOPES):
            todo.extend(ast.iter_child_nodes(n))


def none_test(test, name) -> bool:
    """Does ``test`` ask ``name is None`` (``if best is None or x > best:``, Python's)?"""
    return any(isinstance(c, ast.Compare) and isinstance(c.left, ast.Name) and c.left.id == name
               and isinstance(c.ops[0], (ast.Is, ast.IsNot)) for c in ast.walk(test))


def _not_text(n) -> bool:
    """A number or truth computed from a string: ``s == "a"``, ``len(s)``, ``s.find("a")``."""
    return isinstance(n, ast.Compare) or isinstance(n, ast.Call) and (
        isinstance(n.func, ast.Name) and n.func.id == "len"
        or isinstance(n.func, ast.Attribute) and n.func.attr in _NOT_TEXT)


def returns_text(fn, names) -> bool:
    """Does a ``return`` of ``fn`` give one of ``names``, or a string made from one (not
    a number or truth computed from its characters)?"""
    values = [r.value for r in local_walk(fn.body) if isinstance(r, ast.Return) and r.value]
    return any(isinstance(n, ast.Name) and n.id in names for n in local_walk(values, _not_text))
