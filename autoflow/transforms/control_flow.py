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
from ..analysis.activity import bound_names, declared_nonlocal, target_names, walrus_targets
from ..analysis.liveness import always_returns, annotate
from ..core.templates import names_tuple, operand_tuple, replace, replace_expr, str_tuple
from .util import _SCOPES, contains, contains_return, stamp


# Builtins that, called as a loop's iterable, go through the runtime so that
# a traced bound or a traced array can become a lax loop.
_ITERABLE_BUILTINS = ("range", "enumerate", "zip", "reversed")


def _definitely_bound(stmts) -> set:
    out = set()
    for s in stmts:
        if isinstance(s, gast.If):
            r1, r2 = always_returns(s.body), always_returns(s.orelse)
            b1, b2 = _definitely_bound(s.body), _definitely_bound(s.orelse)
            if r1 and not r2:
                out |= b2
            elif r2 and not r1:
                out |= b1
            else:
                out |= b1 & b2
        elif isinstance(s, (gast.While, gast.For, gast.AsyncFor)) or (_TRY and isinstance(s, _TRY)):
            continue
        elif isinstance(s, (gast.With, gast.AsyncWith)):
            out |= _definitely_bound(s.body)
        else:
            out |= set(bound_names([s], include_nested=False))
    return out


def _live_in(block, live_out):
    return set(block[0].af_live_in) if block else set(live_out)


def _params_of(fn):
    a = fn.args
    names = [x.id for x in a.posonlyargs + a.args + a.kwonlyargs]
    names += [x.id for x in (a.vararg, a.kwarg) if x is not None]
    return names


class ControlFlow:
    def __init__(self, ctx):
        self.ctx = ctx

    # ---- functions and blocks ---------------------------------------------
    def convert_function(self, fn):
        params = _params_of(fn)
        annotate(fn.body, live_out=(), params=params)
        # Generated functions never declare global/nonlocal: only user ones need the walk.
        outer = declared_nonlocal(fn.body) if getattr(fn, "af_user", False) else set()
        local = (set(bound_names(fn.body)) | set(params)) - outer
        fn.body = self._block(fn.body, local) or [gast.Pass()]

    def _block(self, stmts, local):
        out = []
        for s in stmts:
            if isinstance(s, gast.If):
                out += self._if(s, local)
            elif isinstance(s, gast.While):
                out += self._while(s, local)
            elif isinstance(s, gast.For):
                out += self._for(s, local)
            elif isinstance(s, (gast.FunctionDef,)):
                self.convert_function(s)
                out.append(s)
            elif isinstance(s, _SCOPES) or isinstance(s, gast.AsyncFunctionDef):
                out.append(s)
            else:
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

    def _ordered(self, names, local, keep):
        return [n for n in names if n in local and n in keep]

    def _undefined_inits(self, names, stmt):
        out = []
        for n in names:
            if n not in stmt.af_maybe_before:
                out += stamp(replace("NAME = AF.Undefined(TEXT)", NAME=n, AF=self.ctx.af,
                                     TEXT=gast.Constant(value=n, kind=None)), stmt)
        return out

    def _finish(self, generated, stmt):
        """Convert the generated functions' bodies (fresh analysis of each)."""
        for g in generated:
            if isinstance(g, gast.FunctionDef):
                self.convert_function(g)
        return generated

    def _as_python(self, s, local, reason):
        """Keep ``s`` as a Python ``if``/``while``; its test must then be concrete."""
        for field in ("body", "orelse"):
            if getattr(s, field):
                setattr(s, field, self._block(getattr(s, field), local))
        kind = "if" if isinstance(s, gast.If) else "while"
        s.test = stamp(replace_expr("AF.python_condition(TEST, REASON)", AF=self.ctx.af,
                                    TEST=s.test, REASON=gast.Constant(
                                        value=f"this `{kind}` stays Python because {reason}",
                                        kind=None)), s.test)
        return [s]

    # ---- if ---------------------------------------------------------------
    def _if(self, s, local):
        returning = contains_return(s)
        modified = bound_names(s.body + s.orelse)
        outer = [n for n in modified if n not in local]
        if returning and not (always_returns(s.body) and always_returns(s.orelse)):
            # A return the earlier passes could not shape (inside try/with).
            return self._as_python(s, local, "it returns from inside `try` or `with`")
        if outer:
            return self._as_python(s, local, f"it assigns `{outer[0]}`, declared `global` or "
                                   "`nonlocal`, which a staged branch cannot do")
        if contains(s, (gast.Break, gast.Continue), stop_at_loops=True):
            return [s]
        af = self.ctx.af
        live_out = s.af_live_out
        live_in = _live_in(s.body, live_out) | _live_in(s.orelse, live_out)
        both = _definitely_bound(s.body) & _definitely_bound(s.orelse)
        if returning:
            outs = None
            params = self._ordered(modified, local, live_in & s.af_maybe_before)
        else:
            outs = self._ordered(modified, local, live_out)
            params = [n for n in modified if n in local and (n in outs or n in live_in)
                      and not (n not in s.af_maybe_before and n in both and n not in live_in)]
        t_name = self.ctx.namer.reusable("if_true")
        f_name = self.ctx.namer.reusable("if_false")
        ret = names_tuple(outs) if outs else None
        body_t = s.body
        body_f = s.orelse or ([] if outs else [gast.Pass()])
        defs = stamp(replace(
            """
            def TRUE(PARAMS):
                BODY
                return RET
            def FALSE(PARAMS):
                ORELSE
                return RET
            """, TRUE=t_name, FALSE=f_name, PARAMS=params, BODY=body_t,
            ORELSE=body_f, RET=ret), s)
        self._fix_empty(defs)
        call_args = dict(AF=af, TEST=s.test, TRUE=t_name, FALSE=f_name, OPS=operand_tuple(params))
        if returning:
            if params:
                call = replace("return AF.if_stmt(TEST, TRUE, FALSE, OPS)", **call_args)
            else:
                del call_args["OPS"]
                call = replace("return AF.if_stmt(TEST, TRUE, FALSE)", **call_args)
        elif outs:
            call = replace("OUTS = AF.if_stmt(TEST, TRUE, FALSE, OPS, NAMES)",
                           OUTS=names_tuple(outs, gast.Store()), NAMES=str_tuple(outs), **call_args)
        else:
            call = replace("AF.if_stmt(TEST, TRUE, FALSE, OPS, ())", **call_args)
        call = stamp(call, s)
        return self._undefined_inits(params, s) + self._finish(defs, s) + call

    @staticmethod
    def _fix_empty(defs):
        for d in defs:
            if isinstance(d, gast.FunctionDef) and not d.body:
                d.body = [gast.Pass()]

    # ---- while ------------------------------------------------------------
    def _while(self, s, local):
        if contains(s.body, (gast.Break, gast.Continue, gast.Return), stop_at_loops=True) or s.orelse:
            s.body = self._block(s.body, local)
            return [s]
        af = self.ctx.af
        modified = bound_names(s.body)
        for t in walrus_targets(s.test):
            if t not in modified:
                modified.append(t)
        outer = [n for n in modified if n not in local]
        if outer:
            return self._as_python(s, local, f"it assigns `{outer[0]}`, declared `global` or "
                                   "`nonlocal`, which a staged loop cannot do")
        carried = self._ordered(modified, local, s.af_live_head)
        defs = stamp(replace(
            """
            def TEST_FN(CARRIED):
                return TEST
            def BODY_FN(CARRIED):
                BODY
                return RET
            """, TEST_FN=self.ctx.namer.reusable("loop_test"),
            BODY_FN=self.ctx.namer.reusable("loop_body"), CARRIED=carried, TEST=s.test,
            BODY=s.body, RET=names_tuple(carried) if carried else None), s)
        self._fix_empty(defs)
        args = dict(AF=af, TEST_FN=defs[0].name, BODY_FN=defs[1].name,
                    OPS=operand_tuple(carried), NAMES=str_tuple(carried))
        if carried:
            call = replace("CARRIED = AF.while_stmt(TEST_FN, BODY_FN, OPS, NAMES)",
                           CARRIED=names_tuple(carried, gast.Store()), **args)
        else:
            call = replace("AF.while_stmt(TEST_FN, BODY_FN, OPS, NAMES)", **args)
        return self._undefined_inits(carried, s) + self._finish(defs, s) + stamp(call, s)

    # ---- for --------------------------------------------------------------
    def _iterable(self, it):
        """``range(n)`` -> ``af.range(n)`` (also inside ``autoflow.unroll(...)``)."""
        if not isinstance(it, gast.Call):
            return it
        func = it.func
        if isinstance(func, gast.Name) and func.id in _ITERABLE_BUILTINS \
                and self.ctx.builtin_available(func.id):
            new = replace("AF.attr", AF=self.ctx.af)[0].value
            new.attr = func.id
            it.func = stamp(new, func)
            if func.id != "range":  # enumerate(zip(xs, ys)), reversed(range(n)): one staged loop
                it.args = [self._iterable(a) for a in it.args]
        elif (isinstance(func, gast.Attribute) and func.attr in ("unroll", "roll")
              or isinstance(func, gast.Name) and func.id in ("unroll", "roll")) and it.args:
            it.args[0] = self._iterable(it.args[0])
        return it

    def _for(self, s, local):
        if contains(s.body, (gast.Break, gast.Continue, gast.Return), stop_at_loops=True) or s.orelse:
            s.body = self._block(s.body, local)
            return [s]
        af = self.ctx.af
        tnames = target_names(s.target)
        modified = tnames + [n for n in bound_names(s.body) if n not in tnames]
        carried = self._ordered(modified, local, s.af_live_head)
        simple = isinstance(s.target, gast.Name) and s.target.id not in carried
        item = s.target.id if simple else self.ctx.namer.reusable("itr")
        body = s.body
        if not simple:
            body = replace("TARGET = ITEM", TARGET=s.target, ITEM=item) + body
            stamp(body[0], s)
        defs = stamp(replace(
            """
            def BODY_FN(ITEM, CARRIED):
                BODY
                return RET
            """, BODY_FN=self.ctx.namer.reusable("loop_body"), ITEM=item, CARRIED=carried,
            BODY=body, RET=names_tuple(carried) if carried else None), s)
        args = dict(AF=af, ITER=self._iterable(s.iter), BODY_FN=defs[0].name,
                    OPS=operand_tuple(carried), NAMES=str_tuple(carried))
        extra = getattr(s, "af_extra_test", None)
        if extra is not None:
            defs += stamp(replace("def TEST_FN(CARRIED):\n    return EXTRA",
                                  TEST_FN=self.ctx.namer.reusable("loop_test"),
                                  CARRIED=carried, EXTRA=extra), s)
            template = "AF.for_stmt(ITER, BODY_FN, OPS, NAMES, test=TEST_FN)"
            args["TEST_FN"] = defs[-1].name
        else:
            template = "AF.for_stmt(ITER, BODY_FN, OPS, NAMES)"
        if carried:
            call = replace("CARRIED = " + template, CARRIED=names_tuple(carried, gast.Store()), **args)
        else:
            call = replace(template, **args)
        inits = self._undefined_inits([c for c in carried if c not in tnames or not simple], s)
        return inits + self._finish(defs, s) + stamp(call, s)
