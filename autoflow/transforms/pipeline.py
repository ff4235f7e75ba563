"""The ordered list of passes that converts one function.

Order matters, and each step relies on the ones before it:

0. ``matching``: a ``match`` whose patterns are values, alternatives and
   a final capture becomes the equivalent ``if``/``elif`` chain (so every
   later step treats it as the ``if`` it is); any other ``match`` stays
   Python, its subject checked to be concrete.
   ``index_assign`` and ``calls``: ``x[i] = v`` becomes ``x = af.setitem(x,
   i, v)`` (so the analysis sees ``x`` modified and carries it), user calls
   become ``af.call(f, ...)``, ``print``/``assert`` become operators. They
   only rewrite simple statements and expressions, so they go first.
   ``tables``: ``table[i]`` with ``i`` a loop's variable ->
   ``af.getitem(table, i)`` (a Python table indexed by a traced ``i`` is
   stacked, so the loop can stay rolled).
   ``writes``: ``af.mutates(obj, 'a')`` before a write to state that outlives
   the call (an attribute of a parameter or a global, a container changed in
   place), so that a caller's staged statement can carry it.
1. ``early_exits.lower_loop_returns``: ``return`` inside a loop becomes
   ``retval = ...; returned = True; break`` and one ``if returned: return
   retval`` after the loop, so no ``return`` is left inside a loop.
   ``early_exits.lower_block_exits``: likewise ``return`` inside ``with``/
   ``try`` (the jump happens after the statement, so its exit and
   ``finally`` run first) and a ``raise`` the ``try``'s own ``except`` catches.
2. ``early_exits.lower_jumps``: ``break``/``continue`` (including the ones
   step 1 made) become boolean flags; a loop ``else`` becomes ``if not
   broke:``. Loops are now plain loops.
   ``raises`` (after the above, which turned the ``raise`` statements a
   ``try`` catches itself into flags): ``raise EXC`` in a branch or loop
   becomes ``raise af.exception(lambda: EXC)`` (a check at run time when the
   path is traced), and each ``try`` lets autoflow's own errors through first.
3. ``returns``: the code after an ``if`` that returns moves into the branches
   that fall through, so every returning ``if`` returns on both paths and a
   traced one can become one ``lax.cond`` whose value is returned.
4. ``logical``: ``and``/``or``/``not``/``a if c else b``/chained comparisons,
   including the ``not broke`` tests steps 1-2 generated.
5. ``control_flow``: ``if``/``while``/``for`` become operator calls with
   explicit carries, from a liveness analysis of the code steps 1-4 left.

Steps 1-3 run on every function (the converted one and the ``def``s nested
in it); steps 4-5 walk the whole tree at once.
"""

from __future__ import annotations

import ast
import os
import sys

import gast

from ..core import nodes
from ..core.nodes import walk
from .calls import Calls
from .control_flow import ControlFlow
from .early_exits import EarlyExits
from .index_assign import IndexAssign
from .logical import Logical
from .matching import Matching
from .raises import Raises
from .returns import Returns
from .tables import Tables
from .util import is_generator
from .writes import Writes


def _functions(tree):
    """The functions whose statements are lowered (generators run as Python)."""
    return [n for n in walk(tree) if isinstance(n, gast.FunctionDef) and not is_generator(n)]


def _matching(tree, ctx):
    Matching(ctx).run(tree)


def _tables(tree, ctx):
    Tables(ctx).run(tree)


def _index_assign(tree, ctx):
    IndexAssign(ctx).visit(tree)


def _calls(tree, ctx):
    Calls(ctx).run(tree)


def _writes(tree, ctx):
    for fn in _functions(tree):
        Writes(ctx).run(fn)


def _raises(tree, ctx):
    Raises(ctx).visit(tree)


def _lower_exits(tree, ctx):
    for fn in _functions(tree):
        exits = EarlyExits(ctx)
        fn.body = exits.lower_loop_returns(fn.body)
        fn.body = exits.lower_block_exits(fn.body)
        fn.body = exits.lower_jumps(fn.body)


def _lower_returns(tree, ctx):
    for fn in _functions(tree):
        Returns(ctx).lower(fn)


def _logical(tree, ctx):
    logical = Logical(ctx)
    logical.visit(tree)
    for node in walk(tree):
        extra = getattr(node, "af_extra_test", None)
        if extra is not None:
            node.af_extra_test = logical.visit(extra)


def _control_flow(tree, ctx):
    ControlFlow(ctx).convert_function(tree)


PASSES = [
    ("matching", _matching),
    ("index_assign", _index_assign),
    ("calls", _calls),
    ("tables", _tables),
    ("writes", _writes),
    ("early_exits", _lower_exits),
    ("raises", _raises),
    ("returns", _lower_returns),
    ("logical", _logical),
    ("control_flow", _control_flow),
]


def debug_enabled(ctx) -> bool:
    return bool(ctx.options.get("debug")) or os.environ.get("AUTOFLOW_DEBUG_PASSES") == "1"


def run(fn_node, ctx):
    """Convert ``fn_node`` (a gast FunctionDef) in place and return it."""
    debug = debug_enabled(ctx)
    for name, pass_fn in PASSES:
        pass_fn(fn_node, ctx)
        if debug:
            print(f"# autoflow: after pass {name!r}\n{to_source(fn_node)}", file=sys.stderr)
    return fn_node


def to_ast(node):
    """``node`` (a gast statement) as a standard ``ast`` node with locations."""
    return nodes.to_ast(node)


def to_source(node) -> str:
    return ast.unparse(to_ast(node))
