"""``if``, ``while`` and ``for`` -> runtime operators with explicit carries.

Runs last. Earlier passes have removed ``break``/``continue``, moved every
``return`` out of loops, and shaped every ``if`` that returns into one whose
branches all return. For each statement (outermost first) the pass:

1. finds the variables the statement modifies that matter afterwards, from
   the liveness annotations of ``analysis.liveness``: the outputs of an
   ``if`` are the variables a branch binds that are live after it; the
   carries of a loop are the variables the body binds that are live at the
   loop's test. Everything else the statement binds is a temporary and stays
   local to the generated function.
2. emits the branch/body functions, which take the carried variables as
   parameters and return them, and a call of the operator.
3. converts the bodies of the generated functions the same way, with a fresh
   analysis of each (they are functions now, so liveness ends at their
   ``return``).

A variable that must be passed in but is unbound before the statement is
first set to ``af.Undefined('name')``; the operator reports it if it reaches
a traced branch or loop unassigned.
"""

from __future__ import annotations

import gast

from ..analysis.activity import TRY_TYPES as _TRY
from ..analysis.activity import (chain_text, declared_nonlocal, nested_free_names, nested_nonlocal_names,
                                 private_cells)
from ..analysis.summaries import Summaries
from ..core.nodes import clone, walk
from ..core.templates import names_tuple, operand_tuple, replace, replace_expr, str_tuple
from .loop_statements import LoopStatements
from .util import _SCOPES, contains, holds_blocks, is_generator, param_names, stamp, walk_local


def _drop_annotations(stmts, names):
    """``x: T = v`` -> ``x = v`` for ``names`` (a ``nonlocal`` name cannot be
    annotated; a local's annotation is never evaluated, so nothing changes)."""
    out = []
    for s in stmts:
        if isinstance(s, gast.AnnAssign) and isinstance(s.target, gast.Name) \
                and s.target.id in names:
            if s.value is None:
                continue
            new = gast.Assign(targets=[s.target], value=s.value, type_comment=None)
            gast.copy_location(new, s)
            new.af_user = getattr(s, "af_user", False)
            out.append(new)
            continue
        if not isinstance(s, _SCOPES):
            for field in ("body", "orelse", "finalbody"):
                val = getattr(s, field, None)
                if isinstance(val, list) and val and isinstance(val[0], gast.stmt):
                    setattr(s, field, _drop_annotations(val, names) or [gast.Pass()])
            for h in getattr(s, "handlers", None) or []:
                h.body = _drop_annotations(h.body, names) or [gast.Pass()]
            for c in getattr(s, "cases", None) or []:
                c.body = _drop_annotations(c.body, names) or [gast.Pass()]
        out.append(s)
    return out


# A test that binds a name or suspends cannot move into a thunk.
_BINDING_EXPRS = (gast.NamedExpr, gast.Await, gast.Yield, gast.YieldFrom)


class ControlFlow(LoopStatements):
    """Converts one function's ``if``/``while``/``for`` (the loops: ``LoopStatements``)."""

    def __init__(self, ctx):
        self.ctx = ctx
        # The cells of the user function being converted: its variables that a
        # nested function or lambda reads. Generated functions bind them with
        # `nonlocal`, so that a closure called inside a branch or loop body
        # sees the current value (see `_share_cells`).
        self.cells = frozenset()
        self.called_cells = frozenset()  # cells that nested functions rebind (`nonlocal`)
        # those of them nothing reads once the function returns (`private_cells`)
        self.private_cells = frozenset()
        self.generated = False  # converting a function autoflow made (a branch, a body)
        self.user_local = set()  # the user function's own variables
        # Variables some statement may leave unbound (`af.Undefined`): user
        # reads of them go through `af.ld`, which raises Python's error.
        self.maybe_unbound = set()
        # Those a loop (first bound in its body) or an `if` (bound on one path) may
        # leave unbound: a staged loop or `if` gives them zeros there, so every read
        # goes through `af.ld`, which checks when the compiled code runs that the
        # variable is bound (arithmetic on zeros would not fail by itself).
        self.loop_unbound = set()
        # Those a `del` in a loop or `if` may leave unbound where the analysis counts
        # them bound (it reads `del` as no binding): guarded however bound before.
        self.deleted = set()
        # What the analysis needs from each statement's subtree, computed once
        # (not once per level of nesting): see analysis.summaries.
        inv = getattr(ctx, "inventory", None)  # pipeline.Inventory of the user's code
        self.sums = Summaries(walrus=inv is None or inv.has(gast.NamedExpr))
        self.deletes = inv is None or inv.has(gast.Delete)  # (else no statement is walked for one)

    # ---- functions and blocks ---------------------------------------------
    def convert_function(self, fn):
        params = param_names(fn)
        user = getattr(fn, "af_user", False)
        saved = (self.cells, self.maybe_unbound, self.called_cells, self.generated,
                 self.user_local, self.loop_unbound, self.private_cells, self.deleted)
        self.generated = not user
        if user:
            self.maybe_unbound, self.loop_unbound, self.deleted = set(), set(), set()
        inv = getattr(self.ctx, "inventory", None)  # pipeline.Inventory of the user's code
        declarations = inv is None or inv.has(gast.Global, gast.Nonlocal)
        scopes = inv is None or inv.nested_scopes()
        if user:
            declared = declared_nonlocal(fn.body) if declarations else set()
        else:
            declared = set(getattr(fn, "af_nonlocal", ()))
        local = (set(self.sums.bound_block(fn.body)) | set(params)) - declared
        if user:
            # (a parameter whose default is a list or dict made once, `acc=[]`: the
            # object outlives the call, as module state does)
            self.user_local = local - _mutable_defaults(fn)
            self.cells = frozenset(nested_free_names(fn) & local) if scopes else frozenset()
            self.called_cells = (frozenset(nested_nonlocal_names(fn) & local)
                                 if scopes and declarations else frozenset())
            self.private_cells = (frozenset(private_cells(fn, self.called_cells, self.ctx.af))
                                  if self.called_cells else frozenset())
        else:
            local |= declared & self.cells  # cells of the user function, shared by name
        live_out = self.cells if not user else ()
        # Names bound for sure where a generated function is called are bound
        # in it too; other parameters may hold `af.Undefined`.
        outer = getattr(fn, "af_outer_defined", set())
        self.sums.annotate(fn.body, set(live_out), set(params),
                           (set(params) - (self.maybe_unbound - outer)) | outer)
        fn.body = self._block(fn.body, local) or [gast.Pass()]
        if user:
            (self.cells, self.maybe_unbound, self.called_cells, self.generated,
             self.user_local, self.loop_unbound, self.private_cells, self.deleted) = saved
        else:
            self.generated = saved[3]

    def _guard(self, stmt):
        """Reads in ``stmt`` of a variable that may hold ``af.Undefined`` here
        become ``af.ld(x)``, which raises Python's ``UnboundLocalError``.

        Only ``stmt``'s own expressions: nested statement lists are guarded
        when their block is converted, nested user scopes have their own
        variables.
        """
        names = (self.maybe_unbound - stmt.af_def_before) | self.deleted
        if not names:
            return
        if isinstance(stmt, (gast.FunctionDef, gast.AsyncFunctionDef)) \
                and getattr(stmt, "af_user", False):
            self._guard_nested(stmt, names)
        todo = [stmt]
        while todo:
            n = todo.pop()
            for field, value in list(n.__dict__.items()):
                if field in ("body", "orelse", "finalbody", "handlers", "cases"):
                    continue
                items = value if isinstance(value, list) else [value]
                for i, v in enumerate(items):
                    if isinstance(v, gast.Name):
                        if self._guardable(v, names) and (
                                v.id in self.loop_unbound or not self._fails_anyway(n, field)):
                            self._put_ld(n, field, value, i, v)
                    elif isinstance(v, gast.AST) and not (
                            isinstance(v, (gast.FunctionDef, gast.AsyncFunctionDef,
                                           gast.ClassDef, gast.Lambda))
                            and getattr(v, "af_user", False)):
                        todo.append(v)
                    elif isinstance(v, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda)):
                        self._guard_nested(v, names)

    def _guard_nested(self, fn, names):
        """Reads, in the user's function or lambda ``fn`` (nested in the one converted),
        of the variables ``names`` of the enclosing function that ``fn`` does not bind
        itself: ``af.ld``, as there (a closure reads the cell when it is called, zeros
        where a staged statement left it unbound, and Python raises `NameError`)."""
        own = set(param_names(fn))
        body = fn.body if isinstance(fn.body, list) else [fn.body]
        if not isinstance(fn, gast.Lambda):
            own |= {n.id for s in body for n in [s, *walk_local(s)] if isinstance(n, gast.Name)
                    and isinstance(n.ctx, (gast.Store, gast.Del))} - declared_nonlocal(body)
        free = names - own
        if not free:
            return
        todo = list(body)
        while todo:
            n = todo.pop()
            for field, value in list(n.__dict__.items()):
                items = value if isinstance(value, list) else [value]
                for i, v in enumerate(items):
                    if isinstance(v, gast.Name) and self._guardable(v, free):
                        self._put_ld(n, field, value, i, v)
                    elif isinstance(v, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda)):
                        self._guard_nested(v, free)
                    elif isinstance(v, gast.AST) and not isinstance(v, gast.ClassDef):
                        todo.append(v)

    @staticmethod
    def _fails_anyway(parent, field):
        """Does using ``af.Undefined`` in ``parent.field`` raise by itself
        (arithmetic, indexing, attribute access, a call, a truth test)?"""
        return (isinstance(parent, (gast.BinOp, gast.UnaryOp))
                or field == "value" and isinstance(parent, (gast.Subscript, gast.Attribute))
                or field == "func" and isinstance(parent, gast.Call)
                or field == "test")

    @staticmethod
    def _guardable(node, names):
        return (node.id in names and isinstance(node.ctx, gast.Load)
                and getattr(node, "af_user", False))

    def _put_ld(self, parent, field, value, i, name):
        """Read ``name`` (item ``i`` of ``parent.field``, whose value is ``value``) through
        ``af.ld``."""
        if isinstance(value, list):
            value[i] = self._ld(name)
        else:
            setattr(parent, field, self._ld(name))

    def _ld(self, node):
        return replace_expr("AF.ld(X)", AF=self.ctx.af, X=node, at=node)

    def _block(self, stmts, local):
        out = []
        for s in stmts:
            if self.maybe_unbound:
                self._guard(s)
            if isinstance(s, (gast.If, gast.While, gast.For)):
                # (a `del` inside: after the statement the name may be unbound)
                deleted = {t.id for n in walk_local(s) if isinstance(n, gast.Delete)
                           for t in n.targets if isinstance(t, gast.Name) and t.id in local} \
                    if self.deletes else set()
                if not isinstance(s, gast.If):
                    # (a loop: a read in its body may follow a `del` of an earlier iteration)
                    self._unbinds(deleted)
                out += self._if(s, local) if isinstance(s, gast.If) else \
                    self._while(s, local) if isinstance(s, gast.While) else self._for(s, local)
                self._unbinds(deleted)
            elif isinstance(s, gast.FunctionDef):
                if not is_generator(s):  # a generator's loops run as Python
                    self.convert_function(s)
                out.append(s)
            elif isinstance(s, _SCOPES) or isinstance(s, gast.AsyncFunctionDef):
                out.append(s)
            elif isinstance(s, gast.Delete) and self.generated and all(
                    isinstance(t, gast.Name) and t.id in local for t in s.targets):
                out += self._unbind(s)
            elif not holds_blocks(s):  # a simple statement: nothing inside to annotate
                out.append(s)
            else:
                self.sums.expand(s)
                for field in ("body", "orelse", "finalbody"):
                    val = getattr(s, field, None)
                    if isinstance(val, list) and val and isinstance(val[0], gast.stmt):
                        setattr(s, field, self._block(val, local))
                if _TRY and isinstance(s, _TRY):
                    for h in s.handlers:
                        h.body = self._block(h.body, local)
                if type(s).__name__ == "Match":
                    for case in s.cases:
                        case.body = self._block(case.body, local)
                out.append(s)
        return out

    def _unbinds(self, deleted):
        """After a ``del`` of ``deleted`` in a staged statement: every read checks (a staged
        statement leaves zeros where it deleted, which arithmetic would not fail on)."""
        self.maybe_unbound |= deleted
        self.loop_unbound |= deleted
        self.deleted |= deleted

    def _ordered(self, names, local, keep):
        return [n for n in names if n in local and n in keep]

    def _undefined_inits(self, names, stmt):
        out = []
        guard = getattr(stmt, "af_exit_guard", ())  # see early_exits.lower_block_exits
        for n in names:
            if n not in stmt.af_maybe_before:
                self.maybe_unbound.add(n)
                guarded = guard is True or n in guard
                if isinstance(stmt, (gast.While, gast.For)) or not guarded:
                    self.loop_unbound.add(n)
                template = ("NAME = AF.Undefined(TEXT, guarded=True)"
                            if guarded else "NAME = AF.Undefined(TEXT)")
                out += replace(template, NAME=n, AF=self.ctx.af,
                               TEXT=gast.Constant(value=n, kind=None), at=stmt)
        return out

    def _finish(self, generated, stmt):
        """Convert the generated functions' bodies (fresh analysis of each)."""
        for g in generated:
            if isinstance(g, gast.FunctionDef):
                g.af_outer_defined = stmt.af_def_before
                self.convert_function(g)
        return generated

    def _as_python(self, s, local, reason):
        """Keep ``s`` as a Python ``if``/``while``; its test must then be concrete."""
        self.sums.expand(s)
        for field in ("body", "orelse"):
            if getattr(s, field):
                setattr(s, field, self._block(getattr(s, field), local))
        kind = "if" if isinstance(s, gast.If) else "while"
        s.test = replace_expr("AF.python_condition(TEST, REASON)", AF=self.ctx.af,
                              TEST=s.test, REASON=gast.Constant(
                                  value=f"this `{kind}` stays Python because {reason}",
                                  kind=None), at=s.test)
        return [s]

    # ---- if ---------------------------------------------------------------
    def _if(self, s, local):
        sums = self.sums
        levels = self._chain(s)
        blocks = [lv.body for lv in levels] + [levels[-1].orelse]
        returning = sums.has_return(s)
        modified = sums.bound_block(s.body + s.orelse)
        modified += [n for n in self._called(s) if n not in modified]
        outer = [n for n in modified if n not in local]
        if returning and not (sums.always_returns(s.body) and sums.always_returns(s.orelse)):
            # A return the earlier passes could not shape (inside try/with).
            return self._as_python(s, local, "it returns from inside `try` or `with`")
        if outer:
            return self._as_python(s, local, f"it assigns `{outer[0]}`, declared `global` or "
                                   "`nonlocal`, which a staged branch cannot do")
        if sums.has_jump(s):
            return [s]
        af = self.ctx.af
        live_out = s.af_live_out
        # A flat chain's tests are thunks run where the chain is: only the
        # blocks' own reads make parameters.
        live_in = set().union(*(sums.live_in(b, live_out) for b in blocks))
        both = set.intersection(*(set(sums.definitely_bound(b)) for b in blocks))
        cells = self.cells
        if returning:
            outs = None
            params = self._ordered(modified, local, (live_in & s.af_maybe_before) | cells)
        else:
            outs = self._ordered(modified, local, live_out | cells)
            params = [n for n in modified if n in local and (n in outs or n in live_in)
                      and (n in cells or not (n not in s.af_maybe_before and n in both
                                              and n not in live_in))]
        ret = names_tuple(outs) if outs else None
        final = levels[-1].orelse or ([] if outs else [gast.Pass()])
        if len(levels) == 1:
            fns = [self.ctx.namer.reusable("if_true"), self.ctx.namer.reusable("if_false")]
            defs = replace(
                """
                def TRUE(PARAMS):
                    BODY
                    return RET
                def FALSE(PARAMS):
                    ORELSE
                    return RET
                """, TRUE=fns[0], FALSE=fns[1], PARAMS=params, BODY=s.body,
                ORELSE=final, RET=ret, at=s)
            call_args = dict(TEST=s.test, TRUE=fns[0], FALSE=fns[1])
            head = "AF.if_stmt(TEST, TRUE, FALSE"
        else:
            fns, defs, thunks = [], [], []
            for i, (lv, body) in enumerate(zip(levels + [levels[-1]], blocks[:-1] + [final])):
                fns.append(self.ctx.namer.reusable(
                    f"if_{i}" if i < len(levels) else "if_false"))
                defs += replace("def NAME(PARAMS):\n    BODY\n    return RET",
                                NAME=fns[-1], PARAMS=params, BODY=body, RET=ret, at=lv)
                if i < len(levels):
                    if i:  # its reads happen where the chain is (see `_guard`)
                        lv.af_def_before = s.af_def_before
                        if self.maybe_unbound:
                            self._guard(lv)
                    thunks.append(stamp(gast.Lambda(args=gast.arguments(
                        args=[], posonlyargs=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                        kwarg=None, defaults=[]), body=lv.test), lv))
            call_args = dict(TESTS=gast.Tuple(elts=thunks, ctx=gast.Load()), FNS=gast.Tuple(
                elts=[gast.Name(id=f, ctx=gast.Load(), annotation=None, type_comment=None)
                      for f in fns], ctx=gast.Load()))
            head = "AF.if_chain(TESTS, FNS"
        self._fix_empty(defs)
        self._share_cells(defs, s)
        call_args.update(AF=af, OPS=operand_tuple(params))
        if returning:
            if params:
                call = replace(f"return {head}, OPS)", at=s, **call_args)
            else:
                del call_args["OPS"]
                call = replace(f"return {head})", at=s, **call_args)
        elif outs:
            call = replace(f"OUTS = {head}, OPS, NAMES)", OUTS=names_tuple(outs, gast.Store()),
                           NAMES=str_tuple(outs), at=s, **call_args)
        else:
            call = replace(f"{head}, OPS, ())", at=s, **call_args)
        flag = getattr(s, "af_loop_guard", None)  # see early_exits._unless
        if flag is not None:
            keywords = call[-1].value.keywords
            keywords.append(gast.keyword(arg="guard", value=stamp(
                gast.Constant(value=True, kind=None), s)))
            live = getattr(s, "af_loop_live", None)  # read after the loop (`_mark_guards`)
            unread = [] if live is None or outs is None else [
                n for n in outs if n not in live and n != flag and n not in cells]
            if unread:
                keywords.append(gast.keyword(arg="unread", value=stamp(str_tuple(unread), s)))
        rebound = [n for n in self._called(s) if n in self.private_cells] if returning else []
        if rebound:  # (the function returns here: see `private_cells`, `af.if_stmt`)
            call[-1].value.keywords.append(gast.keyword(arg="rebound", value=stamp(
                str_tuple(rebound), s)))
        self._state_arg(s.body + s.orelse, s, local, call)
        return self._undefined_inits(params, s) + self._finish(defs, s) + call

    def _chain(self, s):
        """The levels of the chunk of a long ``elif`` chain that starts at ``s``
        (``chains.py`` marks them), to become one flat ``af.if_chain``; ``[s]``
        (an ``if_stmt``) for any other ``if``, or when a test binds a name
        (a walrus: a thunk would bind it in itself) or the chain has a jump."""
        levels = [s]
        size = getattr(s, "af_chain", 0)
        while len(levels) < size:
            rest = levels[-1].orelse
            if not (len(rest) == 1 and getattr(rest[0], "af_chain_link", False)):
                break
            levels.append(rest[0])
        if len(levels) == 1 or self.sums.has_jump(s) or any(
                isinstance(n, _BINDING_EXPRS) for lv in levels for n in walk(lv.test)):
            return [s]
        return levels

    def _unbind(self, s):
        """``del y`` in a branch or loop body: ``y`` is carried, so it becomes
        ``af.Undefined('y')`` (a later read raises Python's error; a traced
        branch that leaves it unbound is reported, naming it)."""
        out = []
        for t in s.targets:
            self.maybe_unbound.add(t.id)
            out += replace("NAME = AF.Undefined(TEXT)", NAME=t.id, AF=self.ctx.af,
                           TEXT=gast.Constant(value=t.id, kind=None), at=s)
        return out

    def _called(self, s):
        """Cells a nested function may rebind (``nonlocal``) when ``s`` calls it."""
        if not self.called_cells or not contains(s, gast.Call):
            return []
        return [n for n in self.called_cells if n in s.af_maybe_before]

    @staticmethod
    def _fix_empty(defs):
        for d in defs:
            if isinstance(d, gast.FunctionDef) and not d.body:
                d.body = [gast.Pass()]

    def _share_cells(self, defs, anchor):
        """A generated function's parameter that is a cell of the user function
        (a variable a closure reads) is stored into the shared cell first::

            def loop_body(i_1, total):
                nonlocal i
                i = i_1

        so a closure called in the body sees the current value, and a closure
        made in the body sees later values as Python's late binding does.
        """
        for d in defs:
            if not isinstance(d, gast.FunctionDef):
                continue
            shared = [a for a in d.args.args if a.id in self.cells]
            if not shared:
                continue
            names = [a.id for a in shared]
            prologue = stamp([gast.Nonlocal(names=names)], anchor)
            for a in shared:
                fresh = self.ctx.namer.unique(a.id)
                prologue += replace("NAME = FRESH", NAME=a.id, FRESH=fresh, at=anchor)
                a.id = fresh
            d.body = prologue + _drop_annotations(d.body, set(names))
            d.af_nonlocal = set(names)

    def _state_arg(self, stmts, s, local, call):
        """Add ``state=af.state(...)`` to the operator ``call`` when ``stmts``
        assign attributes or change containers in place (see ``runtime.state``)."""
        inv = getattr(self.ctx, "inventory", None)
        if inv is not None and not inv.state_writes:
            return
        attrs, objects = self.sums.shared_state(stmts)
        if not attrs and not objects:
            return

        def usable(node):
            base = chain_text(node).split(".")[0]
            if base == self.ctx.af or self.ctx.is_module_name(base):
                return False
            return base not in local or base in s.af_def_before

        attrs = [a for a in attrs if usable(a.value)]
        objects = [o for o in objects if usable(o)]
        if not attrs and not objects:
            return
        elts = [gast.Tuple(elts=[self._load(a.value), gast.Constant(value=a.attr, kind=None)],
                           ctx=gast.Load()) for a in attrs]
        labels = [chain_text(a) for a in attrs] + [chain_text(o) for o in objects]
        keywords = []
        if attrs:
            keywords.append(gast.keyword(arg="attrs", value=gast.List(elts=elts, ctx=gast.Load())))
        if objects:
            keywords.append(gast.keyword(arg="objects", value=gast.List(
                elts=[self._load(o) for o in objects], ctx=gast.Load())))
        keywords.append(gast.keyword(arg="labels", value=str_tuple(labels)))
        bases = [a.value for a in attrs] + objects
        escapes = [i for i, b in enumerate(bases)
                   if chain_text(b).split(".")[0] not in self.user_local]
        if escapes:
            keywords.append(gast.keyword(arg="escapes", value=gast.Tuple(
                elts=[gast.Constant(value=i, kind=None) for i in escapes], ctx=gast.Load())))
        value = replace_expr("AF.state()", AF=self.ctx.af)
        value.keywords = keywords
        node = call[-1]
        expr = node.value
        expr.keywords.append(gast.keyword(arg="state", value=stamp(value, s)))

    @staticmethod
    def _load(node):
        new = clone(node)
        for n in walk(new):
            if hasattr(n, "ctx"):
                n.ctx = gast.Load()
        return new


def _mutable_defaults(fn):
    """The parameters of ``fn`` whose default is a list, dict or set display or call
    (``acc=[]``, ``seen=set()``): one object for every call that does not pass them."""
    args = fn.args
    pairs = list(zip(args.args[len(args.args) - len(args.defaults):], args.defaults)) \
        + [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    return {a.id for a, d in pairs
            if isinstance(d, (gast.List, gast.Dict, gast.Set)) or isinstance(d, gast.Call)
            and isinstance(d.func, gast.Name) and d.func.id in ("list", "dict", "set")}
