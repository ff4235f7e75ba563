"""The ordered list of passes that converts one function.

Order matters, and each step relies on the ones before it:

0. ``matching``: a ``match`` whose patterns are values, alternatives and
   a final capture becomes the equivalent ``if``/``elif`` chain (so every
   later step treats it as the ``if`` it is); any other ``match`` stays
   Python, its subject checked to be concrete.
   ``chains``: an ``if``/``elif`` chain of more than ``chains.CHUNK``
   branches becomes short chains run one after another under a flag (the
   nested branch functions of a long chain would be nested too deeply for
   Python to read back or run); ``control_flow`` makes each one flat
   ``af.if_chain``.
   ``index_assign`` and ``calls``: ``x[i] = v`` becomes ``x = af.setitem(x,
   i, v)`` (so the analysis sees ``x`` modified and carries it), user calls
   become ``af.call(f, ...)``, ``print``/``assert`` become operators. They
   only rewrite simple statements and expressions, so they go first.
   ``reductions`` (after ``calls``, which made ``sum`` into ``af.sum``; before
   ``logical``, which would make a comprehension's ``if`` a concrete-only
   test): ``sum(x for x in xs if p)`` and its kin hand the reduction each
   test with its item (a mask when the test is traced);
   ``operator.truth(x)`` -> ``af.truth(operator.truth, x)``.
   ``tables``: ``table[i]`` with ``i`` a loop's variable ->
   ``af.getitem(table, i)`` (a Python table indexed by a traced ``i`` is
   stacked, so the loop can stay rolled); ``d["k"]``/``d.get("k")`` where a
   loop body sets ``d["k"]`` -> ``af.getitem``/``af.get`` (after
   ``index_assign``, whose ``af.setitem`` shows the loop's write).
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
3. ``returns``: the code after an ``if`` that returns moves into the branches
   that fall through, so every returning ``if`` returns on both paths and a
   traced one can become one ``lax.cond`` whose value is returned.
   ``raises`` (after the above: the ``raise`` statements a ``try`` catches
   itself are flags now, and a ``raise`` after a returning ``if`` has moved
   into its branch): ``raise EXC`` in a branch or loop becomes ``raise
   af.exception(lambda: EXC)`` (a check at run time when the path is traced),
   and each ``try`` lets autoflow's own errors through first.
4. ``logical``: ``and``/``or``/``not``/``a if c else b``/chained comparisons,
   including the ``not broke`` tests steps 1-2 generated.
5. ``control_flow``: ``if``/``while``/``for`` become operator calls with
   explicit carries, from a liveness analysis of the code steps 1-4 left.

Steps 1-3 run on every function (the converted one and the ``def``s nested
in it); steps 4-5 walk the whole tree at once.
"""

from __future__ import annotations

import ast
import copy
import os
import sys

import gast

from ..analysis.activity import MUTATING_METHODS
from ..core import nodes
from ..core.nodes import walk
from . import chains
from .calls import Calls
from .chains import Chains
from .control_flow import ControlFlow
from .early_exits import EarlyExits
from .index_assign import IndexAssign
from .logical import Logical
from .matching import Matching
from .raises import Raises
from .reductions import Reductions
from .returns import Returns
from .tables import Tables
from .util import is_generator, marked_as_is, walk_local
from .writes import Writes, enclosing_names


_SCOPES = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ClassDef)
_YIELDS = (gast.Yield, gast.YieldFrom)


class Inventory:
    """What one walk over the tree tells the pipeline before the passes run.

    ``classes``: the node classes present (a pass with nothing to rewrite is
    skipped); ``functions``: the ``def``s whose statements are lowered, in
    ``walk`` order (generators run as Python). The passes before
    ``control_flow`` make no ``def``s, so the list stays right for them.
    """

    def __init__(self, tree):
        nodes = walk(tree)
        # One loop over the nodes gathers everything below (this runs for
        # every conversion, on every node of the user's function).
        classes = set()
        defs = []
        ifs = 0
        attrs = set()
        item_writes = attr_writes = set_attr = truth = False
        FunctionDef, If, Subscript, Attribute, Name, Load = (
            gast.FunctionDef, gast.If, gast.Subscript, gast.Attribute, gast.Name, gast.Load)
        for n in nodes:
            cls = n.__class__
            classes.add(cls)
            if cls is Name:
                if n.id in ("setattr", "delattr", "truth", "next"):
                    if n.id == "truth":
                        truth = True
                    else:  # (`next(it)` advances an iterator in place)
                        set_attr = True
            elif cls is Attribute:
                attrs.add(n.attr)
                if n.ctx.__class__ is not Load:
                    attr_writes = True
            elif cls is Subscript:
                # `x[i] = v`, `x[i] += v`, `del x[i]` (a Subscript not in Load context)
                if n.ctx.__class__ is not Load:
                    item_writes = True
            elif cls is If:
                ifs += 1
            elif cls is FunctionDef:
                defs.append(n)
        self.classes = classes
        generators = set()
        if _YIELDS[0] in classes or _YIELDS[1] in classes:
            generators = {id(n) for n in nodes if isinstance(n, gast.FunctionDef)
                          and is_generator(n)}
        self.ifs = ifs
        # `operator.truth(x)` / `truth(x)` (reductions.py)
        self.truth = truth or "truth" in attrs
        self.item_writes = item_writes
        self.attrs = attrs
        self.attr_writes = attr_writes
        self.set_attr = set_attr  # (`setattr`/`delattr`/`next` called by name)
        # Can a statement change state besides variables (activity.shared_state)?
        # Only the user's code can: the passes add no such writes.
        self.state_writes = bool(item_writes or attr_writes or attrs & MUTATING_METHODS
                                 or set_attr)
        self.defs = len(defs)
        self.functions = [n for n in defs if id(n) not in generators]
        # The nodes, for a pass that needs them while no pass changed the tree
        # yet (`unchanged`: set False by each pass that runs before `calls`).
        self.nodes = nodes
        self.unchanged = True

    def has(self, *classes):
        present = self.classes
        for c in classes:  # (a loop, not any(...): asked many times per conversion)
            if c is not None and c in present:
                return True
        return False

    def nested_scopes(self) -> bool:
        """Has the user's code a scope inside the converted function?"""
        return self.defs > 1 or self.has(gast.Lambda, gast.ClassDef, gast.AsyncFunctionDef)


def _functions(tree):
    """The functions whose statements are lowered (generators run as Python)."""
    return [n for n in walk(tree) if isinstance(n, gast.FunctionDef) and not is_generator(n)]


# Each pass takes (tree, ctx, inventory). A pass whose constructs are absent
# from the user's code (`inventory.classes`, taken before any pass ran) is
# skipped; the conditions only name classes that no earlier pass creates.
_TRY = tuple(c for c in (getattr(gast, "Try", None), getattr(gast, "TryStar", None)) if c)


def _matching(tree, ctx, inv):
    if inv.has(getattr(gast, "Match", None)):
        inv.unchanged = False
        Matching(ctx).run(tree)


def _chains(tree, ctx, inv):
    # only a chain of more than CHUNK branches changes (`match` makes chains)
    if inv.ifs > chains.CHUNK or inv.has(getattr(gast, "Match", None)):
        inv.unchanged = False
        for fn in inv.functions:
            Chains(ctx).run(fn)


def _tables(tree, ctx, inv):
    if inv.has(gast.Subscript):  # it rewrites `table[i]` only
        Tables(ctx).run(tree)


def _index_assign(tree, ctx, inv):
    # `x[i] = v`, `x[i] += v`, `xs.sort()` and `xs.append(v)` in a loop
    if inv.item_writes or "sort" in inv.attrs or "append" in inv.attrs \
            and inv.has(gast.For, gast.While):
        inv.unchanged = False
        IndexAssign(ctx).visit(tree)


def _calls(tree, ctx, inv):
    Calls(ctx).run(tree, inv.nodes if inv.unchanged else None)
    inv.unchanged = False


def _reductions(tree, ctx, inv):
    # filtered comprehensions reduced at once, `operator.truth(x)`
    if inv.has(gast.GeneratorExp, gast.ListComp) or inv.truth:
        Reductions(ctx).visit(tree)


def _writes(tree, ctx, inv):
    # writes to attributes and items, mutating method calls, by statements;
    # rebindings of names declared global or nonlocal
    if inv.item_writes or inv.attr_writes or inv.attrs & MUTATING_METHODS or inv.set_attr \
            or inv.has(gast.Global, gast.Nonlocal):
        # (the names of the scopes around each nested def: none without one)
        enclosing = enclosing_names(tree) if inv.nested_scopes() else {}
        for fn in inv.functions:
            Writes(ctx).run(fn, enclosing.get(id(fn), frozenset()))


def _raises(tree, ctx, inv):
    if inv.has(gast.Raise, *_TRY):
        Raises(ctx).visit(tree)


def _lower_exits(tree, ctx, inv):
    loops = inv.has(gast.For, gast.While, gast.AsyncFor)
    blocks = inv.has(gast.With, gast.AsyncWith, *_TRY)
    if not (loops or blocks):  # returns, breaks, raises to lower sit in loops, with, try
        return
    for fn in inv.functions:
        exits = EarlyExits(ctx, fn)
        # Each step rewrites only statements of its kind: returns in loops,
        # exits from with/try, loops' jumps; one whose statements are absent
        # has nothing to do (the steps before it make no loops, with or try).
        if loops:
            fn.body = exits.lower_loop_returns(fn.body)
        if blocks:
            fn.body = exits.lower_block_exits(fn.body)
        if loops:
            fn.body = exits.lower_jumps(fn.body)


def _lower_returns(tree, ctx, inv):
    if inv.has(gast.Return):
        for fn in inv.functions:
            Returns(ctx).lower(fn)


def _logical(tree, ctx, inv):
    Logical(ctx).visit(tree)


def _control_flow(tree, ctx, inv):
    ControlFlow(ctx).convert_function(tree)


PASSES = [
    ("matching", _matching),
    ("chains", _chains),
    ("index_assign", _index_assign),
    ("calls", _calls),
    ("reductions", _reductions),
    ("tables", _tables),
    ("writes", _writes),
    ("early_exits", _lower_exits),
    ("returns", _lower_returns),
    ("raises", _raises),
    ("logical", _logical),
    ("control_flow", _control_flow),
]


def debug_enabled(ctx) -> bool:
    return bool(ctx.options.get("debug")) or os.environ.get("AUTOFLOW_DEBUG_PASSES") == "1"


def run(fn_node, ctx):
    """Convert ``fn_node`` (a gast FunctionDef) in place and return it."""
    debug = debug_enabled(ctx)
    inventory = ctx.inventory = Inventory(fn_node)
    held = _hold_back(fn_node, inventory)
    if held:
        inventory = ctx.inventory = Inventory(fn_node)
    if inventory.has(gast.AnnAssign):
        _declare_annotated(fn_node)
    try:
        for name, pass_fn in PASSES:
            pass_fn(fn_node, ctx, inventory)
            if debug:
                print(f"# autoflow: after pass {name!r}\n{to_source(fn_node)}", file=sys.stderr)
    finally:
        ctx.inventory = None  # the passes may keep ctx in cycles: do not hold the tree there
        for node, body in held:
            node.body = body
    return fn_node


def _declare_annotated(fn_node):
    """``y: int`` (no value) inside a statement that becomes a function of its own
    binds nothing but makes ``y`` local to the user's function: the same annotation
    first in that function keeps it so (a read where nothing bound it is
    ``UnboundLocalError``, not a global's value or ``NameError``)."""
    top = {id(s) for s in fn_node.body}
    names = {}
    for n in walk_local(fn_node):
        if isinstance(n, gast.AnnAssign) and n.value is None and id(n) not in top \
                and isinstance(n.target, gast.Name) and n.target.id not in names:
            names[n.target.id] = n.annotation
    fn_node.body[:0] = [ast.copy_location(gast.AnnAssign(
        target=gast.Name(id=name, ctx=gast.Store(), annotation=None, type_comment=None),
        annotation=copy.deepcopy(annotation), value=None, simple=1), fn_node)
        for name, annotation in names.items()]


def _hold_back(fn_node, inventory):
    """The nested defs marked ``@autoflow.do_not_convert``, each with its body: while
    the passes run, a stand-in takes the body's place (its ``global``/``nonlocal``
    declarations and a read of every name the body reads, for the analyses of the
    code around it), and the body comes back as written."""
    if inventory.defs < 2:
        return []
    held = []
    for n in inventory.nodes:
        if isinstance(n, (gast.FunctionDef, gast.AsyncFunctionDef)) and n is not fn_node \
                and marked_as_is(n) and not any(n is h for h, _ in held):
            reads = sorted({m.id for m in walk(n) if isinstance(m, gast.Name)
                            and isinstance(m.ctx, gast.Load)})
            declared = [s for s in walk_local(n) if isinstance(s, (gast.Global, gast.Nonlocal))]
            stand_in = gast.Expr(value=gast.Tuple(elts=[gast.Name(
                id=r, ctx=gast.Load(), annotation=None, type_comment=None) for r in reads],
                ctx=gast.Load()))
            held.append((n, n.body))
            n.body = declared + [ast.copy_location(stand_in, n)]
    return held


def to_ast(node):
    """``node`` (a gast statement) as a standard ``ast`` node with locations.

    It consumes ``node``: the gast nodes become the ast nodes (see
    ``nodes.into_ast``). A caller that goes on using the gast tree takes a
    copy with ``nodes.to_ast`` instead.
    """
    return nodes.into_ast(node)


def to_source(node) -> str:
    return ast.unparse(nodes.to_ast(node))  # (the tree stays gast: a copy)
