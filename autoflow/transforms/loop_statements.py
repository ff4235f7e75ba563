"""``while`` and ``for`` -> ``af.while_stmt``/``af.for_stmt`` with explicit carries.

The loop half of ``control_flow.ControlFlow`` (a base class of it, with the same
state: ``ctx``, ``sums``, ``cells``): a loop's carries are the variables its body
binds that are live at its test; its test and body become generated functions of
them, and a ``break`` left in its body gets guards told what is read once the loop is
left (``_mark_guards``). A loop with a ``return`` or an ``else`` stays Python.
"""

from __future__ import annotations

import gast

from ..analysis.activity import target_names, walrus_targets
from ..core.nodes import walk
from ..core.templates import names_tuple, operand_tuple, replace, replace_expr, str_tuple
from .util import _LOOPS, _SCOPES, append_blocks, pure_test, stamp

# Builtins that, called as a loop's iterable, go through the runtime so that
# a traced bound or a traced array can become a lax loop.
_ITERABLE_BUILTINS = ("range", "enumerate", "zip", "reversed")

_SCOPES_LOOPS = _SCOPES + _LOOPS


class LoopStatements:
    """``_while`` and ``_for`` of ``ControlFlow``, and the guards of a loop's ``break``."""

    def _mark_guards(self, loop):
        """Tell the guards a ``break`` left in ``loop``'s own body (not in loops
        inside it) what is read once the loop is left: ``af_loop_live``. That is
        what is read after the loop and, when the loop's test may do more than
        compute (it calls user code: a staged test is evaluated once more after
        the iteration that leaves, its value unused), what the test reads."""
        live = set(loop.af_live_out)
        test = loop.test if isinstance(loop, gast.While) else getattr(loop, "af_extra_test", None)
        if test is not None and not pure_test(test, self.ctx, lambdas=True):
            live |= {n.id for n in walk(test) if isinstance(n, gast.Name)}
        # The guards are statements: only statement lists are searched (as
        # walk_local(stmt, stop_at_loops=True) would find them: each body
        # statement is entered, a scope or loop below it is not).
        todo = []
        for stmt in loop.body:
            if isinstance(stmt, gast.If) and getattr(stmt, "af_loop_guard", None) is not None:
                stmt.af_loop_live = live
            append_blocks(stmt, todo)
            while todo:
                n = todo.pop()
                if isinstance(n, gast.If) and getattr(n, "af_loop_guard", None) is not None:
                    n.af_loop_live = live
                if not isinstance(n, _SCOPES_LOOPS):
                    append_blocks(n, todo)

    # ---- while ------------------------------------------------------------
    def _while(self, s, local):
        if self.sums.has_exit(s.body) or s.orelse:
            self.sums.expand(s)
            s.body = self._block(s.body, local)
            return [s]
        af = self.ctx.af
        modified = self.sums.bound_block(s.body)
        modified += [n for n in self._called(s) if n not in modified]
        for t in walrus_targets(s.test) if self.sums.walrus else ():
            if t not in modified:
                modified.append(t)
        outer = [n for n in modified if n not in local]
        if outer:
            return self._as_python(s, local, f"it assigns `{outer[0]}`, declared `global` or "
                                   "`nonlocal`, which a staged loop cannot do")
        carried = self._ordered(modified, local, s.af_live_head | self.cells)
        self._mark_guards(s)
        defs = replace(
            """
            def TEST_FN(CARRIED):
                return TEST
            def BODY_FN(CARRIED):
                BODY
                return RET
            """, TEST_FN=self.ctx.namer.reusable("loop_test"),
            BODY_FN=self.ctx.namer.reusable("loop_body"), CARRIED=carried, TEST=s.test,
            BODY=s.body, RET=names_tuple(carried) if carried else None, at=s)
        self._fix_empty(defs)
        self._share_cells(defs, s)
        args = dict(AF=af, TEST_FN=defs[0].name, BODY_FN=defs[1].name,
                    OPS=operand_tuple(carried), NAMES=str_tuple(carried))
        if carried:
            call = replace("CARRIED = AF.while_stmt(TEST_FN, BODY_FN, OPS, NAMES)",
                           CARRIED=names_tuple(carried, gast.Store()), at=s, **args)
        else:
            call = replace("AF.while_stmt(TEST_FN, BODY_FN, OPS, NAMES)", at=s, **args)
        self._state_arg(s.body, s, local, call)
        return self._undefined_inits(carried, s) + self._finish(defs, s) + call

    # ---- for --------------------------------------------------------------
    def _iterable(self, it):
        """``range(n)`` -> ``af.range(n)`` (also inside ``autoflow.unroll(...)``)."""
        if not isinstance(it, gast.Call):
            return it
        func = it.func
        if isinstance(func, gast.Attribute) and func.attr in _ITERABLE_BUILTINS \
                and isinstance(func.value, gast.Name) and func.value.id == "builtins":
            func = gast.Name(id=func.attr, ctx=gast.Load(), annotation=None, type_comment=None)
            it.func = stamp(func, it.func)
        if isinstance(func, gast.Name) and func.id in _ITERABLE_BUILTINS \
                and self.ctx.builtin_available(func.id):
            new = replace_expr("AF.attr", AF=self.ctx.af, at=func)
            new.attr = func.id
            it.func = new
            if func.id != "range":  # enumerate(zip(xs, ys)), reversed(range(n)): one staged loop
                it.args = [self._iterable(a) for a in it.args]
        elif (isinstance(func, gast.Attribute) and func.attr in ("unroll", "roll")
              or isinstance(func, gast.Name) and func.id in ("unroll", "roll")) and it.args:
            it.args[0] = self._iterable(it.args[0])
        return it

    def _for(self, s, local):
        if self.sums.has_exit(s.body) or s.orelse:
            self.sums.expand(s)
            s.body = self._block(s.body, local)
            return [s]
        af = self.ctx.af
        tnames = target_names(s.target)
        modified = tnames + [n for n in self.sums.bound_block(s.body) if n not in tnames]
        modified += [n for n in self._called(s) if n not in modified]
        outer = [n for n in modified if n not in local]
        if outer:  # a `global`/`nonlocal` name: the loop runs as Python
            self.sums.expand(s)
            s.body = self._block(s.body, local)
            return [s]
        carried = self._ordered(modified, local, s.af_live_head | self.cells)
        self._mark_guards(s)
        simple = isinstance(s.target, gast.Name) and s.target.id not in carried \
            and s.target.id not in self.cells
        item = s.target.id if simple else self.ctx.namer.reusable("itr")
        body = s.body
        if not simple:
            body = replace("TARGET = ITEM", TARGET=s.target, ITEM=item, at=s) + body
        defs = replace(
            """
            def BODY_FN(ITEM, CARRIED):
                BODY
                return RET
            """, BODY_FN=self.ctx.namer.reusable("loop_body"), ITEM=item, CARRIED=carried,
            BODY=body, RET=names_tuple(carried) if carried else None, at=s)
        args = dict(AF=af, ITER=self._iterable(s.iter), BODY_FN=defs[0].name,
                    OPS=operand_tuple(carried), NAMES=str_tuple(carried))
        extra = getattr(s, "af_extra_test", None)
        if extra is not None:
            defs += replace("def TEST_FN(CARRIED):\n    return EXTRA",
                            TEST_FN=self.ctx.namer.reusable("loop_test"),
                            CARRIED=carried, EXTRA=extra, at=s)
            template = "AF.for_stmt(ITER, BODY_FN, OPS, NAMES, test=TEST_FN)"
            args["TEST_FN"] = defs[-1].name
        else:
            template = "AF.for_stmt(ITER, BODY_FN, OPS, NAMES)"
        self._share_cells(defs, s)
        if carried:
            call = replace("CARRIED = " + template, CARRIED=names_tuple(carried, gast.Store()), at=s,
                           **args)
        else:
            call = replace(template, at=s, **args)
        self._state_arg(s.body, s, local, call)
        inits = self._undefined_inits([c for c in carried if c not in tnames or not simple], s)
        return inits + self._finish(defs, s) + call
