"""Small helpers shared by the passes."""

from __future__ import annotations

import gast

from ..core.nodes import children
from ..analysis.activity import SCOPES as _SCOPES
_LOOPS = (gast.For, gast.While, gast.AsyncFor)


def walk_local(node, stop_at_loops=False):
    """Walk ``node``'s subtree without entering nested scopes (or loops)."""
    todo = list(children(node))
    while todo:
        n = todo.pop()
        yield n
        if isinstance(n, _SCOPES):
            continue
        if stop_at_loops and isinstance(n, _LOOPS):
            continue
        todo.extend(children(n))


def contains(node_or_list, types, stop_at_loops=False):
    nodes = node_or_list if isinstance(node_or_list, list) else [node_or_list]
    for node in nodes:
        if isinstance(node, types):
            return True
        if isinstance(node, _SCOPES):  # a nested def's `return` is its own
            continue
        for n in walk_local(node, stop_at_loops=stop_at_loops):
            if isinstance(n, types):
                return True
    return False


def contains_return(node_or_list):
    return contains(node_or_list, gast.Return)


def stamp(nodes, anchor):
    """Position template-made ``nodes`` at ``anchor``; user nodes keep theirs.

    Call on the template's output *before* splicing user code into it, or on
    nodes made purely from templates.
    """
    # Generated nodes are stamped when they are made, so the walk stops at
    # user nodes and at nodes already placed: it does not re-walk the user
    # code spliced into each level of generated functions.
    todo = list(nodes) if isinstance(nodes, list) else [nodes]
    while todo:
        n = todo.pop()
        if getattr(n, "af_user", False) or getattr(n, "af_placed", False):
            continue
        todo.extend(children(n))
        if "lineno" in n._attributes:
            n.af_placed = True
            n.lineno = anchor.lineno
            n.col_offset = getattr(anchor, "col_offset", 0)
            # Generated code sits on the anchor's first line: a frame
            # inside it then reports that line (the `if`/`for` itself).
            n.end_lineno = anchor.lineno
            same_line = getattr(anchor, "end_lineno", None) == anchor.lineno
            n.end_col_offset = (anchor.end_col_offset if same_line and
                                anchor.end_col_offset is not None else n.col_offset + 1)
    return nodes


def is_generator(fn) -> bool:
    """Does function ``fn`` (a gast def) contain ``yield`` (its own, not a nested scope's)?"""
    return any(isinstance(n, (gast.Yield, gast.YieldFrom)) for n in walk_local(fn))
