"""Per-statement summaries, computed once per statement and reused at every level.

``control_flow`` converts outermost first: each ``if``/loop becomes generated
functions whose bodies are analysed again when they are converted. Walking a
whole subtree at every level of nesting made conversion quadratic in the
depth of nesting and in the length of ``elif`` chains. A ``Summaries`` object
(one per ``control_flow`` run) keeps, per statement node, what the analysis
needs from its subtree, computed bottom-up from its children's summaries:

* ``bound(s)``: ``activity.bound_names([s])``;
* ``live(s)``: the liveness transfer function of ``s`` as ``(G, K)``,
  ``live_in = G | (live_out - K)`` (``K`` is ``None`` when ``s`` kills every
  name: a ``return``/``raise``); equal to ``liveness._live_stmt``;
* ``defs(s)``: the definedness transfer ``(GM, GD, KD)``: after ``s``,
  ``maybe | GM`` and ``GD | (definitely - KD)``; equal to
  ``liveness.defined_block`` on ``[s]``;
* ``always_returns``, ``definitely_bound``, ``has_return``/``has_jump``
  (``util.contains`` for statements), ``shared_state``.

Liveness and definedness are annotated on a block's own statements only
(``annotate``); the statements inside a compound statement are annotated when
``expand`` is asked for them (a ``with``/``try`` body or a Python-kept
``if``/loop converted in place). Bodies that become generated functions get
their own ``annotate`` when converted, as before.

Summaries are keyed by node identity (the node is kept alive with its
summary). Conversion moves statements into generated functions without
copying or changing them, so a summary stays valid while its statement is
converted; a node the pass replaces is a new node with no summary yet.
Within ``checking()`` (a test's: ``tests/test_scaling.py``) every summary is
recomputed with the plain recursive analysis, failing loudly on any
difference.
"""

from __future__ import annotations

import collections
import contextlib

import gast

from ..core.nodes import clone
from . import activity
from .activity import SCOPES, TRY_TYPES, bound_names, expr_reads, target_names, walrus_targets
from .liveness import _target_reads, suppresses
from .liveness import defined_block as _defined_block_plain
from .genkill import _EMPTY, _ID, _apply, _minus, _plus, _then, _union


_LOOPS = (gast.For, gast.While, gast.AsyncFor)
_FOR = (gast.For, gast.AsyncFor)
_WITH = (gast.With, gast.AsyncWith)
_DEFS = (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)


_SIMPLE: dict = {}  # statement class -> does nothing nested count for its bound names?
_checks = 0  # how many `checking()` contexts are open (any: check every summary)


@contextlib.contextmanager
def checking():
    """Context, for tests: recompute every summary made while it is open with the
    plain recursive analysis, and fail on any difference."""
    global _checks
    _checks += 1
    try:
        yield
    finally:
        _checks -= 1


def checks() -> bool:
    """Is a ``checking()`` context open?"""
    return _checks > 0


class Summaries:
    def __init__(self, walrus=True):
        # walrus=False: the code holds no `:=` (the passes make none, so the
        # user's code tells), and the walruses' bindings need no search.
        self.walrus = walrus
        # kind -> {id(node): (node, summary)}: a dict per kind, so a lookup
        # needs no (kind, id) key tuple (there are dozens per statement)
        self._memo = collections.defaultdict(dict)
        self._expanded: dict = {}

    def _get(self, kind, node, compute):
        memo = self._memo[kind]
        hit = memo.get(id(node))
        if hit is not None:
            return hit[1]
        value = compute(node)
        memo[id(node)] = (node, value)
        return value

    # ---- bound names ------------------------------------------------------
    def bound(self, s) -> tuple:
        value = self._get("bound", s, self._bound)
        if _checks:
            assert list(value) == bound_names([s]), ("bound", s)
        return value

    def _bound(self, s):
        out: list = []
        activity._bind(s, out, False, self.walrus)
        seen = set(out)
        for sub in self._nested_stmts(s):
            for n in self.bound(sub):
                if n not in seen:
                    seen.add(n)
                    out.append(n)
        if type(s).__name__ == "Match":  # the patterns' captures, in the recursive order
            out = []
            activity._bind(s, out, True, self.walrus)
        return tuple(out)

    def _own_bound(self, s):
        """``bound_names([s], include_nested=False)`` as a frozenset: for a simple
        statement or a def, the memo of ``bound`` (nothing nested counts there)."""
        cls = s.__class__
        simple = _SIMPLE.get(cls)
        if simple is None:
            simple = _SIMPLE[cls] = issubclass(cls, _DEFS) or not any(
                f in cls._fields for f in ("body", "orelse", "finalbody", "handlers", "cases"))
        if simple:
            return frozenset(self.bound(s))
        return frozenset(bound_names([s], include_nested=False))

    @staticmethod
    def _nested_stmts(s):
        """The statements directly inside compound statement ``s``, in ``_bind``'s order."""
        if isinstance(s, _DEFS):
            return []
        out = []
        for field in ("body", "orelse", "finalbody"):
            for sub in getattr(s, field, None) or []:
                if isinstance(sub, gast.stmt):
                    out.append(sub)
        if isinstance(s, TRY_TYPES):
            for h in s.handlers:
                out.extend(h.body)
        return out

    def bound_block(self, stmts) -> list:
        out, seen = [], set()
        memo = self._memo["bound"]
        for s in stmts:
            hit = None if _checks else memo.get(id(s))
            for n in (self.bound(s) if hit is None else hit[1]):
                if n not in seen:
                    seen.add(n)
                    out.append(n)
        return out

    # ---- statement flags ----------------------------------------------------
    def always_returns(self, stmts) -> bool:
        value = self._always_returns(stmts)
        if _checks:
            from .liveness import always_returns
            assert value == always_returns(stmts), ("always_returns", stmts)
        return value

    def _always_returns(self, stmts) -> bool:
        for s in stmts:
            if isinstance(s, (gast.Return, gast.Raise)):
                return True
            if isinstance(s, gast.If) and s.orelse and self._get("ret", s, self._if_returns):
                return True
        return False

    def _if_returns(self, s):
        return self.always_returns(s.body) and self.always_returns(s.orelse)

    def definitely_bound(self, stmts) -> set:
        """``control_flow._definitely_bound``."""
        out = set()
        for s in stmts:
            out |= self._get("dbound", s, self._definitely_bound)
        return out

    def _definitely_bound(self, s):
        if isinstance(s, gast.If):
            r1, r2 = self.always_returns(s.body), self.always_returns(s.orelse)
            b1, b2 = self.definitely_bound(s.body), self.definitely_bound(s.orelse)
            if r1 and not r2:
                return frozenset(b2)
            if r2 and not r1:
                return frozenset(b1)
            return frozenset(b1 & b2)
        if isinstance(s, _LOOPS) or (TRY_TYPES and isinstance(s, TRY_TYPES)):
            return _EMPTY
        if isinstance(s, _WITH):
            return frozenset(self.definitely_bound(s.body))
        return self._own_bound(s)

    def _stmt_children(self, s):
        """Nodes below ``s`` that may hold statements (``walk_local`` order does not matter)."""
        out = []
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            v = getattr(s, field, None)
            if v.__class__ is list:
                out.extend(x for x in v if isinstance(x, gast.AST))
        return out

    def _deep(self, node, types, stop_at_loops, kind):
        """Is there a node of ``types`` (statements) strictly below ``node``,
        not inside nested scopes (nor loops with ``stop_at_loops``)? As
        ``util.walk_local``."""
        hit = self._memo[kind].get(id(node))  # (asked often: no closure made for a hit)
        if hit is not None:
            return hit[1]

        def compute(n):
            for c in self._stmt_children(n):
                if isinstance(c, types):
                    return True
                if isinstance(c, SCOPES) or (stop_at_loops and isinstance(c, _LOOPS)):
                    continue
                if self._deep(c, types, stop_at_loops, kind):
                    return True
            return False
        return self._get(kind, node, compute)

    def contains(self, node_or_list, types, stop_at_loops, kind):
        """``util.contains`` for statement ``types`` (statements are only found
        in statement lists: an expression holds none outside lambdas)."""
        nodes = node_or_list if isinstance(node_or_list, list) else [node_or_list]
        for node in nodes:
            if isinstance(node, types):
                return True
            if isinstance(node, SCOPES):
                continue
            if self._deep(node, types, stop_at_loops, kind):
                if _checks:
                    from ..transforms.util import contains
                    assert contains(node, types, stop_at_loops), ("contains", node)
                return True
        if _checks:
            from ..transforms.util import contains
            assert not contains(node_or_list, types, stop_at_loops), ("contains", node_or_list)
        return False

    def has_return(self, node_or_list):
        return self.contains(node_or_list, gast.Return, False, "has_return")

    def has_jump(self, node_or_list):
        """``break``/``continue`` not inside a nested loop."""
        return self.contains(node_or_list, (gast.Break, gast.Continue), True, "has_jump")

    def has_exit(self, node_or_list):
        return self.contains(node_or_list, (gast.Break, gast.Continue, gast.Return), True,
                             "has_exit")

    # ---- shared state ---------------------------------------------------------
    def shared_state(self, stmts):
        """``activity.shared_state(stmts)``, from per-statement memos."""
        attrs, objects, seen = [], [], set()
        for s in stmts:
            for key, kind, node in self._get("state", s, self._state):
                if key not in seen:
                    seen.add(key)
                    (attrs if kind == "attr" else objects).append(node)
        if _checks:
            a2, o2 = activity.shared_state(stmts)
            assert [activity.chain_text(a) for a in attrs] == [activity.chain_text(a) for a in a2]
            assert [activity.chain_text(a) for a in objects] == [activity.chain_text(a) for a in o2]
        return attrs, objects

    def _state(self, s):
        """``(key, kind, node)`` events of ``s`` in ``shared_state``'s order (preorder)."""
        if isinstance(s, SCOPES):
            return ()
        events, seen = [], set()

        def add(key, kind, node):
            if key not in seen:
                seen.add(key)
                events.append((key, kind, node))

        # The statement's own node and its non-statement children, in preorder;
        # nested statements come from their memos.
        todo = [s]
        while todo:
            n = todo.pop()
            if isinstance(n, SCOPES) and not activity._thunk(n):
                continue
            if n is not s and isinstance(n, gast.stmt):
                for ev in self._get("state", n, self._state):
                    add(*ev)
                continue
            attrs, objects = activity.shared_state_node(n)
            for kind, node in attrs + objects:
                add((kind, activity.chain_text(node)), kind, node)
            todo.extend(reversed(activity.children(n)))
        return tuple(events)

    # ---- liveness ---------------------------------------------------------------
    def live(self, s):
        return self._get("live", s, self._live)

    def live_block_fn(self, stmts):
        f = _ID
        memo = self._memo["live"]
        for s in reversed(stmts):
            hit = memo.get(id(s))
            f = _then(f, self.live(s) if hit is None else hit[1])
        return f

    def live_in(self, stmts, live_out) -> set:
        """What ``liveness.live_block(stmts, live_out)`` returns."""
        value = _apply(self.live_block_fn(stmts), set(live_out))
        if _checks:
            plain = _plain_live(clone(stmts), set(live_out))
            assert value == plain, ("live_in", value, plain)
        return value

    def _live(self, s):
        R = expr_reads
        if isinstance(s, gast.Assign):
            kills = set(walrus_targets(s.value)) if self.walrus else set()
            gen = set(R(s.value))
            for t in s.targets:
                kills.update(target_names(t))
                gen.update(_target_reads(t))
            return frozenset(gen), frozenset(kills)
        if isinstance(s, gast.AugAssign):
            return (frozenset(set(R(s.value)) | set(target_names(s.target))
                              | set(_target_reads(s.target))), _EMPTY)
        if isinstance(s, gast.AnnAssign):
            if s.value is None:
                return _ID
            return (frozenset(set(R(s.value)) | set(_target_reads(s.target))),
                    frozenset(target_names(s.target)))
        if isinstance(s, gast.Return):
            return frozenset(R(s.value)) if s.value is not None else _EMPTY, None
        if isinstance(s, gast.Raise):
            out = set()
            for e in (s.exc, s.cause):
                if e is not None:
                    out |= set(R(e))
            return frozenset(out), None
        if isinstance(s, gast.If):
            return _union((frozenset(R(s.test)), None), self.live_block_fn(s.body),
                          self.live_block_fn(s.orelse))
        if isinstance(s, gast.While):
            after = self.live_block_fn(s.orelse) if s.orelse else _ID
            # head = after | test | G_body: the fixpoint of liveness._live_stmt
            return _plus(after, frozenset(R(s.test)) | self.live_block_fn(s.body)[0])
        if isinstance(s, _FOR):
            after = self.live_block_fn(s.orelse) if s.orelse else _ID
            extra = getattr(s, "af_extra_test", None)
            gen = (self.live_block_fn(s.body)[0] - set(target_names(s.target))) \
                | set(_target_reads(s.target)) | set(R(s.iter))
            if extra is not None:
                gen |= set(R(extra))
            return _plus(after, frozenset(gen))
        if isinstance(s, _DEFS):
            return frozenset(R(s)), frozenset({s.name})
        if isinstance(s, (gast.Import, gast.ImportFrom)):
            return _EMPTY, frozenset(bound_names([s]))
        if isinstance(s, _WITH):
            f = self.live_block_fn(s.body)
            if suppresses(s):  # what is live after it is live throughout its body
                f = (f[0], _EMPTY)
            for item in reversed(s.items):
                g = set(R(item.context_expr))
                k = _EMPTY
                if item.optional_vars is not None:
                    g |= set(_target_reads(item.optional_vars))
                    k = frozenset(target_names(item.optional_vars))
                f = _then(f, (frozenset(g), k))
            return f
        if TRY_TYPES and isinstance(s, TRY_TYPES):
            after = self.live_block_fn(s.finalbody) if s.finalbody else _ID
            handlers = []
            for h in s.handlers:
                hf = _then(after, self.live_block_fn(h.body))
                if isinstance(h.name, gast.Name):
                    hf = _minus(hf, frozenset({h.name.id}))
                if h.type is not None:
                    hf = _plus(hf, frozenset(R(h.type)))
                handlers.append(hf)
            hs = _union(*handlers) if handlers else (_EMPTY, None)
            orelse = _then(after, self.live_block_fn(s.orelse)) if s.orelse else after
            body = _then(_union(orelse, hs), self.live_block_fn(s.body))
            parts = [body, hs] + ([after] if s.finalbody else [])
            return _union(*parts)
        if type(s).__name__ == "Match":
            parts = [(frozenset(R(s.subject)), None), _ID]
            for case in s.cases:
                bound = {getattr(n, "name", None) for n in activity.walk(case.pattern)} - {None}
                cf = _minus(self.live_block_fn(case.body), frozenset(bound))
                extra = set(R(case.pattern))
                if case.guard is not None:
                    extra |= set(R(case.guard))
                parts.append(_plus(cf, frozenset(extra)))
            return _union(*parts)
        if isinstance(s, gast.Delete):
            f = _ID
            for t in s.targets:
                # (`del x` reads its binding: see liveness)
                f = _then(f, (frozenset(_target_reads(t)) | frozenset(target_names(t)),
                              frozenset(target_names(t))))
            return f
        return frozenset(R(s)), _EMPTY

    # ---- definedness -------------------------------------------------------------
    def defs(self, s):
        return self._get("defs", s, self._defs)

    def defs_block(self, stmts):
        gm, gd, kd = set(), set(), set()
        memo = self._memo["defs"]
        for s in stmts:
            hit = memo.get(id(s))
            m, g, k = self.defs(s) if hit is None else hit[1]
            gm |= m
            gd = g | (gd - k)
            kd = (kd | k) - g
        return frozenset(gm), frozenset(gd), frozenset(kd)

    def _defs(self, s):
        if isinstance(s, gast.If):
            m1, g1, k1 = self.defs_block(s.body)
            m2, g2, k2 = self.defs_block(s.orelse)
            r1, r2 = self.always_returns(s.body), self.always_returns(s.orelse)
            gm = (_EMPTY if r1 else m1) | (_EMPTY if r2 else m2)
            if r1 and r2:
                return gm, g1 | g2, (k1 & k2) - (g1 | g2)
            if r1:
                return gm, g2, k2
            if r2:
                return gm, g1, k1
            g = g1 & g2
            return gm, g, (k1 | k2) - g
        if isinstance(s, (gast.While, gast.For, gast.AsyncFor)):
            inner = set(self.bound_block(s.body))
            if not isinstance(s, gast.While):
                inner |= set(target_names(s.target))
            if s.orelse:
                m, g, k = self.defs_block(s.orelse)
                return frozenset(inner) | m, g, k
            return frozenset(inner), _EMPTY, _EMPTY
        if isinstance(s, _WITH):
            own = set()
            for item in s.items:
                if item.optional_vars is not None:
                    own |= set(target_names(item.optional_vars))
            m, g, k = self.defs_block(s.body)
            g = g | (own - k)
            return m | own, g, k - g
        if TRY_TYPES and isinstance(s, TRY_TYPES):
            allb = frozenset(self.bound(s))
            m, g, k = self.defs_block(s.finalbody)
            return allb | m, g, k
        if type(s).__name__ == "Match":
            return frozenset(self.bound(s)), _EMPTY, _EMPTY
        if isinstance(s, gast.Delete):
            return _EMPTY, _EMPTY, frozenset(n for t in s.targets for n in target_names(t))
        b = self._own_bound(s)
        return b, b, _EMPTY

    # ---- annotation ----------------------------------------------------------------
    def annotate(self, stmts, live_out, maybe, definitely):
        """``liveness.live_block`` then ``defined_block`` on ``stmts``' own statements."""
        self.annotate_live(stmts, set(live_out))
        self.annotate_defined(stmts, maybe, definitely)
        if _checks:
            twin = clone(stmts)
            _plain_live(twin, set(live_out))
            _defined_block_plain(twin, set(maybe), set(definitely))
            for a, b in zip(stmts, twin):
                for attr in ("af_live_out", "af_live_in", "af_live_head", "af_maybe_before",
                             "af_def_before"):
                    assert getattr(a, attr, None) == getattr(b, attr, None), (attr, a, b)

    def annotate_live(self, stmts, live, leak=None):
        live = set(live)
        memo = self._memo["live"]
        for s in reversed(stmts):
            s.af_live_out = live
            if isinstance(s, (gast.While,) + _FOR):
                after = _apply(self.live_block_fn(s.orelse), live) if s.orelse else set(live)
                g_body = self.live_block_fn(s.body)[0]
                if isinstance(s, gast.While):
                    head = after | set(expr_reads(s.test)) | g_body
                else:
                    head = after | (g_body - set(target_names(s.target))) \
                        | set(_target_reads(s.target))
                    extra = getattr(s, "af_extra_test", None)
                    if extra is not None:
                        head |= set(expr_reads(extra))
                s.af_live_head = head
            hit = memo.get(id(s))
            live = _apply(self.live(s) if hit is None else hit[1], live)
            if leak:
                live = live | leak
            s.af_live_in = live
        return live

    def annotate_defined(self, stmts, maybe, definitely):
        maybe, definitely = set(maybe), set(definitely)
        memo = self._memo["defs"]
        for s in stmts:
            s.af_maybe_before = maybe
            s.af_def_before = definitely
            hit = memo.get(id(s))
            m, g, k = self.defs(s) if hit is None else hit[1]
            if not m <= maybe:
                maybe = maybe | m
            if k & definitely or not g <= definitely:
                definitely = g | (definitely - k)
        return maybe, definitely

    def expand(self, s):
        """Annotate the statements inside compound statement ``s`` (as the
        plain recursive analysis of its block would have)."""
        if id(s) in self._expanded:
            return
        self._expanded[id(s)] = s  # (no reference from the node back: no cycle for the GC)
        L, maybe, definitely = s.af_live_out, s.af_maybe_before, s.af_def_before
        live, defined = self.annotate_live, self.annotate_defined
        if isinstance(s, gast.If):
            live(s.body, L)
            live(s.orelse, L)
            defined(s.body, maybe, definitely)
            defined(s.orelse, maybe, definitely)
        elif isinstance(s, (gast.While,) + _FOR):
            if s.orelse:
                live(s.orelse, L)
            live(s.body, s.af_live_head)
            inner = set(self.bound_block(s.body))
            targets = set() if isinstance(s, gast.While) else set(target_names(s.target))
            defined(s.body, maybe | inner | targets, definitely | targets)
            if s.orelse:
                defined(s.orelse, maybe | inner | targets, definitely)
        elif isinstance(s, _WITH):
            live(s.body, L, L if suppresses(s) else None)
            own = set()
            for item in s.items:
                if item.optional_vars is not None:
                    own |= set(target_names(item.optional_vars))
            defined(s.body, maybe | own, definitely | own)
        elif TRY_TYPES and isinstance(s, TRY_TYPES):
            after = live(s.finalbody, L) if s.finalbody else set(L)
            handlers = set()
            for h in s.handlers:
                hl = set(live(h.body, after))
                if isinstance(h.name, gast.Name):
                    hl.discard(h.name.id)
                if h.type is not None:
                    hl |= set(expr_reads(h.type))
                handlers |= hl
            orelse = live(s.orelse, after) if s.orelse else set(after)
            live(s.body, orelse | handlers)
            allb = set(self.bound(s))
            defined(s.body, maybe, definitely)
            for h in s.handlers:
                defined(h.body, maybe | allb, definitely)
            defined(s.orelse, maybe | set(self.bound_block(s.body)), definitely)
            defined(s.finalbody, maybe | allb, definitely)
        elif type(s).__name__ == "Match":
            allb = set(self.bound(s))
            for case in s.cases:
                live(case.body, L)
                defined(case.body, maybe | allb, definitely)


def _plain_live(stmts, live_out):
    from .liveness import live_block
    return live_block(stmts, live_out)
