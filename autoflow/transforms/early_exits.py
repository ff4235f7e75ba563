"""Lower ``return`` inside loops, ``break`` and ``continue`` to boolean flags.

Runs first, so that later passes only see ``if`` and loops without jumps.

``return`` inside a loop::

    for x in xs:                      returned = False
        if x > 0:                     retval = af.Undefined('retval')
            return x          ->      for x in xs:
    return -1                             if x > 0:
                                              retval = x
                                              returned = True
                                              break
                                      if returned:
                                          return retval
                                      return -1

``break`` / ``continue`` (after the above)::

    while c:                          broke = False
        A                             while not broke and c:
        if p:                 ->          A
            break                         if p:
        B                                     broke = True
    else:                                 if not broke:
        E                                     B
                                      if not broke:
                                          E

The statements after one that may jump are guarded by ``if not flag:``. A
``for`` loop with a ``break`` also gets ``af_extra_test`` (``not broke``): the
loop stops before taking its next item, exactly as Python's ``break`` does.
"""

from __future__ import annotations

import gast

from ..core.nodes import walk
from ..core.nodes import clone as nodes_clone
from ..core.templates import replace, replace_expr
from ..analysis.activity import TRY_TYPES as _TRY
from ..analysis.activity import bound_falling, bound_names, target_names
from ..core.methods import IN_PLACE_METHODS, STATEFUL_BUILTINS
from ..analysis.liveness import always_returns
from .caught_raises import caught_raises
from .util import (_LOOPS, _SCOPES, append_blocks, contains_return, holds_blocks, pure_test, stamp,
                   walk_local)



class _Exit(gast.Break):
    """Where a lowered ``return``/``raise`` leaves a ``with``/``try`` block."""


_SCOPES_LOOPS = _SCOPES + _LOOPS


def _own(node_or_list, types):
    """The ``types`` nodes (statement classes) in the code outside nested loops
    and scopes (a nested loop or scope itself is one, if of ``types``), lazily.
    Only statement lists are searched: no expression holds a statement."""
    todo = list(node_or_list) if isinstance(node_or_list, list) else [node_or_list]
    while todo:
        n = todo.pop()
        if isinstance(n, types):
            yield n
        if not isinstance(n, _SCOPES_LOOPS):
            append_blocks(n, todo)



def _has(node_or_list, types):
    """Does the code contain ``types`` outside nested loops and scopes?"""
    return next(_own(node_or_list, types), None) is not None


def _breaks(stmts) -> bool:
    """Does ``stmts``, a loop's body, hold a ``break`` of that loop? Those of nested loops
    are theirs, but not those in a nested loop's ``else``, which runs at this level."""
    return any(isinstance(n, gast.Break) or _breaks(n.orelse)
               for n in _own(stmts, (gast.Break,) + _LOOPS))


def _flagged(node, flag):
    """Is ``node`` a ``break`` of a lowered ``return`` whose flag is ``flag``?"""
    return isinstance(node, gast.Break) and getattr(node, "af_exit_flag", None) == flag


def _is_boolean(test):
    """Is ``test`` a comparison (or a boolean combination of them), so ``bool`` is a no-op?"""
    if isinstance(test, gast.Compare):
        return True
    if isinstance(test, gast.BoolOp):
        return all(_is_boolean(v) for v in test.values)
    if isinstance(test, gast.UnaryOp) and isinstance(test.op, gast.Not):
        return True
    return False


def _endless(loop):
    """Is ``loop`` a ``while`` on a true constant (``while True:``, ``while 1:``) with no
    ``break`` of its own, so only a ``return`` or a raise leaves it?"""
    return (isinstance(loop, gast.While) and isinstance(loop.test, gast.Constant)
            and isinstance(loop.test.value, (bool, int)) and bool(loop.test.value)
            and not _breaks(loop.body))


def _blocks(stmt):
    """The statement lists directly inside a compound statement."""
    if not holds_blocks(stmt):  # a simple statement
        return ()
    out = []
    for field in ("body", "orelse", "finalbody"):
        val = getattr(stmt, field, None)
        if isinstance(val, list) and val and isinstance(val[0], gast.stmt):
            out.append((stmt, field))
    if _TRY and isinstance(stmt, _TRY):
        for h in stmt.handlers:
            out.append((h, "body"))
    if type(stmt).__name__ == "Match":
        for case in stmt.cases:
            out.append((case, "body"))
    return out


def _names_only(target):
    """Is the assignment target plain names (``i``, ``k, (a, b)``)?"""
    if isinstance(target, gast.Name):
        return True
    if isinstance(target, (gast.Tuple, gast.List)):
        return all(_names_only(e) for e in target.elts)
    return False


class EarlyExits:
    def __init__(self, ctx, scope=None):
        self.ctx = ctx
        self.scope = scope  # the function being lowered (see `_read_elsewhere`)
        self._returned = self._retval = None  # the flags of lowered returns, once made
        self._rebinders = None  # (see _rebinding)

    # ---- return inside loops -------------------------------------------
    def lower_loop_returns(self, body):
        """Rewrite ``return`` in loops of this function body (not nested defs)."""
        self._returned = None
        self._retval = None
        return self._loop_returns_block(body)

    def _flags(self):
        if self._returned is None:
            self._returned = self.ctx.namer.unique("returned")
            self._retval = self.ctx.namer.unique("retval")
        return self._returned, self._retval

    def _loop_returns_block(self, stmts):
        out = []
        for s in stmts:
            if isinstance(s, _SCOPES):  # nested functions are lowered on their own
                out.append(s)
                continue
            if isinstance(s, _LOOPS) and any(
                    not isinstance(b, _SCOPES) and contains_return(b) for b in s.body):
                returned, retval = self._flags()
                init = replace(
                    "RETURNED = False\nRETVAL = AF.Undefined(RETVAL_NAME, guarded=True, exit=True)",
                    RETURNED=returned, RETVAL=retval, AF=self.ctx.af,
                    RETVAL_NAME=gast.Constant(value=retval, kind=None), at=s)
                # `while True:` with no `break` of its own is left only by a `return`
                # (or a raise): after it, the function has returned, and no path
                # falls off the loop into the code below (or its `else`).
                endless = _endless(s)
                # A loop with no `break` of its own whose `else` always returns: after
                # the loop and its `else`, only the paths that returned inside are left.
                else_returns = bool(s.orelse) and always_returns(s.orelse) \
                    and not _breaks(s.body)
                self._replace_returns_in_loop(s)
                if endless:
                    s.orelse = []
                    out += init + [s] + replace("return RETVAL", RETVAL=retval, at=s)
                    break  # what follows the loop is unreachable
                if s.orelse:  # runs after the loop, at this level
                    s.orelse = self._loop_returns_block(s.orelse)
                if else_returns:
                    out += init + [s] + replace("return RETVAL", RETVAL=retval, at=s)
                    break  # what follows the loop is unreachable
                after = replace("if RETURNED:\n    return RETVAL",
                                RETURNED=returned, RETVAL=retval, at=s)
                out += init + [s] + after
            else:
                for owner, field in _blocks(s):
                    setattr(owner, field, self._loop_returns_block(getattr(owner, field)))
                out.append(s)
        return out

    def _replace_returns_in_loop(self, loop, nested=False):
        """Returns in ``loop`` become ``retval = ...; returned = True; break``.

        A loop's ``else`` runs after the loop, so a return there leaves the
        enclosing loop when there is one (``nested``) and is left as it is
        otherwise.
        """
        returned, retval = self._flags()

        loop.body = self._returns_to_flags(loop.body, returned, retval)
        if loop.orelse and nested:
            loop.orelse = self._returns_to_flags(loop.orelse, returned, retval)

    def _returns_to_flags(self, stmts, returned, retval):
        """``stmts`` of a loop body with each ``return v`` -> ``retval = v;
        returned = True; break`` (a method, not a closure: a recursive closure
        is a reference cycle the GC has to find)."""
        new = []
        for s in stmts:
            if isinstance(s, gast.Return):
                value = s.value if s.value is not None else gast.Constant(value=None, kind=None)
                new += replace("RETVAL = VALUE\nRETURNED = True\nbreak",
                               RETVAL=retval, VALUE=value, RETURNED=returned, at=s)
                new[-1].af_exit_flag = returned  # `returned` already says it broke
                break  # the rest is unreachable
            if isinstance(s, _LOOPS) and contains_return(s):
                self._replace_returns_in_loop(s, nested=True)
                new.append(s)
                new += replace("if RETURNED:\n    break", RETURNED=returned, at=s)
                new[-1].body[0].af_exit_flag = returned
                continue
            if not isinstance(s, _SCOPES):
                for owner, field in _blocks(s):
                    setattr(owner, field, self._returns_to_flags(getattr(owner, field),
                                                                 returned, retval))
            new.append(s)
        return new

    # ---- return / caught raise inside try and with ---------------------
    def lower_block_exits(self, body):
        """``return`` inside ``with``/``try``, and a ``raise`` that the ``try``'s own
        ``except`` catches, become flags; the jump happens after the statement.

        ::

            with cm:                          returned = False; left = False
                if c:                         with cm:
                    return a          ->          if c:
                b = f()                               retval = a
            return b                                  returned = True
                                                      left = True
                                                  if not left:
                                                      b = f()
                                              if returned:
                                                  return retval
                                              return b

        The context manager's exit and a ``finally`` still run on every path,
        as in Python (they run before the jump, as Python's do). A ``raise
        E(...)`` in a ``try`` body whose first matching clause is ``except
        E:`` (matched by name, no ``as``, no ``finally``) sets ``caught`` and
        the clause's body runs after the ``try``. A traced ``if`` around either
        then converts like any other.
        """
        out = []
        for s in body:
            if isinstance(s, _SCOPES):
                out.append(s)
                continue
            for owner, field in _blocks(s):
                setattr(owner, field, self.lower_block_exits(getattr(owner, field)))
            if isinstance(s, (gast.With, gast.AsyncWith)) or (_TRY and isinstance(s, _TRY)):
                out += self._block_exits(s)
            else:
                out.append(s)
        return out

    def _block_exits(self, s):
        is_try = _TRY and isinstance(s, _TRY)
        if is_try and any(contains_return(x) for x in s.finalbody):
            return [s]  # a return in `finally` overrides: leave it to Python
        caught = caught_raises(s, self.ctx.namer, self.ctx.af) if is_try else {}
        if not caught and not any(contains_return(x) for x in s.body) and not (
                is_try and any(contains_return(x) for h in s.handlers for x in h.body)
                or is_try and any(contains_return(x) for x in s.orelse)):
            return [s]
        # Does every path through the statement end in `return` (or a raise its
        # own `except` turns into a handler that returns)? Then the jump after
        # it is unconditional, and no path seems to fall off the function.
        always = always_returns(s.body) and (not is_try or all(
            always_returns(h.body) for h in s.handlers))
        left = self.ctx.namer.unique("left")
        before = replace("LEFT = False", LEFT=left, at=s)
        after = []
        handler_copies = {}
        for index, flag in caught.values():
            handler_copies[index] = nodes_clone(s.handlers[index].body)
        uses_return = False

        def mark(stmts):
            nonlocal uses_return
            new = []
            for x in stmts:
                if isinstance(x, gast.Return):
                    uses_return = True
                    returned, retval = self._flags()
                    value = x.value if x.value is not None else gast.Constant(value=None, kind=None)
                    new += replace("RETVAL = VALUE\nRETURNED = True",
                                   RETVAL=retval, VALUE=value, RETURNED=returned, at=x)
                    new.append(stamp(_Exit(), x))
                    break
                if isinstance(x, gast.Raise) and id(x) in caught:
                    index, flag = caught[id(x)]
                    new += replace("FLAG = True", FLAG=flag, at=x)
                    new.append(stamp(_Exit(), x))
                    break
                if not isinstance(x, _SCOPES + _LOOPS) and not (_TRY and isinstance(x, _TRY)):
                    for owner, field in _blocks(x):
                        setattr(owner, field, mark(getattr(owner, field)))
                new.append(x)
            return new

        marked = mark(s.body)
        # An `if` one of whose paths leaves the block (a lowered `return`, a caught
        # raise): what it binds on the paths that do not leave is read only there
        # (its other paths jump first), like what `if not left:` guards below.
        exits_ifs = [(n, bound_falling([n], (_Exit, gast.Return, gast.Raise)))
                     for n in walk(gast.Module(body=marked, type_ignores=[]))
                     if isinstance(n, gast.If) and _has(n, _Exit)]
        s.body = self._guard(marked, _Exit, left)
        # Code under `if not left:` runs only on the paths that reach the end of
        # the block. What it binds is read only there: after the statement a
        # `return` jumps first, and a caught raise runs its handler first. So a
        # traced `if` may fill such a variable with zeros on the path that left
        # (see Undefined.guarded), if every handler that may run instead binds
        # it or returns.
        safe = True
        for index in {i for i, _ in caught.values()}:
            h = handler_copies[index]
            if not always_returns(h):
                bound = set(bound_names(h))
                safe = bound if safe is True else safe & bound
        if is_try:
            for h in s.handlers:
                h.body = self._guard(mark(h.body), _Exit, left) or [gast.Pass()]
            if s.orelse:
                s.orelse = replace("if not LEFT:\n    ORELSE", LEFT=left,
                                   ORELSE=self._guard(mark(s.orelse), _Exit, left), at=s)
        # (the body's, the handlers' and the `else`'s guards alike: `else` runs only
        # when the body did not leave)
        guarded = s.body + [x for h in s.handlers for x in h.body] + s.orelse if is_try \
            else s.body
        for n in walk(gast.Module(body=guarded, type_ignores=[])):
            if isinstance(n, gast.If) and isinstance(n.test, gast.UnaryOp) \
                    and isinstance(n.test.operand, gast.Name) and n.test.operand.id == left:
                n.af_exit_guard = safe
        for n, bound in exits_ifs:
            if bound:
                n.af_exit_guard = bound if safe is True else bound & safe
        if not s.body:
            s.body = [gast.Pass()]
        for index, flag in sorted(set(caught.values())):
            before += replace("FLAG = False", FLAG=flag, at=s)
            after += replace("if FLAG:\n    HANDLER", FLAG=flag,
                             HANDLER=self.lower_block_exits(handler_copies[index]), at=s)
        if uses_return:
            returned, retval = self._flags()
            before = replace(
                "RETURNED = False\nRETVAL = AF.Undefined(RETVAL_NAME, guarded=True)",
                RETURNED=returned, RETVAL=retval, AF=self.ctx.af,
                RETVAL_NAME=gast.Constant(value=retval, kind=None), at=s) + before
            if always:
                after += replace("return RETVAL", RETVAL=retval, at=s)
            else:
                after += replace("if RETURNED:\n    return RETVAL",
                                 RETURNED=returned, RETVAL=retval, at=s)
        return before + [s] + after

    # ---- break / continue -----------------------------------------------
    def lower_jumps(self, stmts):
        """Lower break/continue in every loop of ``stmts`` (innermost first)."""
        out = []
        for s in stmts:
            if isinstance(s, _SCOPES):
                out.append(s)
                continue
            if isinstance(s, gast.While) and _test_binds(s.test, self._rebinding()):
                out += self.lower_jumps(_test_in_body(s, self.ctx.namer))
                continue
            for owner, field in _blocks(s):
                setattr(owner, field, self.lower_jumps(getattr(owner, field)))
            if isinstance(s, _LOOPS):
                out += self._lower_loop(s)
            else:
                out.append(s)
        return out

    def _rebinding(self):
        """The functions nested in the one being lowered that declare ``nonlocal``
        (found once per function)."""
        if self._rebinders is None:
            self._rebinders = {n.name for n in (walk(self.scope) if self.scope is not None
                                                 else ())
                               if isinstance(n, (gast.FunctionDef, gast.AsyncFunctionDef))
                               and n is not self.scope
                               and any(isinstance(m, gast.Nonlocal) for m in walk(n))}
        return self._rebinders

    def _lower_loop(self, loop):
        before, after = [], []
        exit_test = self._top_exit(loop)
        if _has(loop.body, gast.Continue):
            flag = self.ctx.namer.unique("continued")
            body = self._guard(loop.body, gast.Continue, flag)
            loop.body = replace("FLAG = False", FLAG=flag, at=loop) + body
        breaks = list(_own(loop.body, gast.Break))
        if breaks:
            flags = {getattr(b, "af_exit_flag", None) for b in breaks}
            if len(flags) == 1 and None not in flags:
                # Every break is a lowered `return`: its flag (`returned`, False
                # whenever the loop starts) is the loop's, with no second one.
                flag = flags.pop()
            else:
                flag = self.ctx.namer.unique("broke")
                before = replace("FLAG = False", FLAG=flag, at=loop)
            loop.body = self._guard(loop.body, gast.Break, flag)
            if isinstance(loop, gast.While):
                if isinstance(loop.test, gast.Constant) and loop.test.value is True:
                    loop.test = replace_expr("not FLAG", FLAG=flag, at=loop)
                else:
                    loop.test = replace_expr("not FLAG and TEST", FLAG=flag, TEST=loop.test, at=loop)
            else:
                loop.af_extra_test = replace_expr("not FLAG", FLAG=flag, at=loop)
            if loop.orelse:
                after = replace("if not FLAG:\n    ORELSE", FLAG=flag, ORELSE=loop.orelse, at=loop)
        elif loop.orelse:
            after = loop.orelse
        loop.orelse = []
        if exit_test is not None:
            self._test_also(loop, exit_test)
        return before + [loop] + after

    def _top_exit(self, loop):
        """``if c: break`` as the first statement of ``loop``: ``c``, taken out of
        the body, to become part of the loop's own test (see ``_test_also``).

        ``while t: if c: break; B`` is ``while t and not c: B``, and ``for x in
        xs: if c: break; B`` is ``for x in xs`` with the test ``not c`` before
        each item: ``c`` is evaluated at the same points, as often, in the same
        order. The loop's carries need no ``broke`` flag for it, and a staged
        loop ends at its test instead of running one more iteration whose body
        is skipped by a guard (under ``vmap``, a guard is a select, and that
        iteration runs the whole body).

        Only when nothing tells the two apart: no ``else`` (it would need the
        flag), ``c`` binds no name, suspends nothing and calls no user code
        (a staged test is also evaluated when a ``for`` runs out of items),
        and for a ``for``, ``c`` does not read the loop's variable, which
        nothing reads after the loop either (on the item where ``c`` holds,
        Python binds the variable before breaking, and the hoisted test
        stops before it).
        """
        if loop.orelse or not loop.body or not isinstance(loop, (gast.For, gast.While)):
            return None
        first = loop.body[0]
        if not (isinstance(first, gast.If) and not first.orelse and len(first.body) == 1
                and type(first.body[0]) is gast.Break
                and getattr(first.body[0], "af_exit_flag", None) is None):
            return None
        if not pure_test(first.test, self.ctx):
            return None
        if isinstance(loop, gast.For):
            targets = target_names(loop.target)
            if not _names_only(loop.target) or any(
                    isinstance(n, gast.Name) and n.id in targets for n in walk(first.test)):
                return None
            if self.scope is None or self._read_elsewhere(targets, loop):
                return None
        loop.body = loop.body[1:] or [stamp(gast.Pass(), first)]
        return first.test

    def _read_elsewhere(self, names, loop):
        """Is one of ``names`` (a ``for``'s variables) used anywhere in the function
        but in the loop body's own code (a nested scope's read counts), or
        declared ``global``/``nonlocal``?"""
        own = {id(n) for s in loop.body for n in [s, *walk_local(s)]
               if not isinstance(n, _SCOPES)}
        for n in walk(self.scope):
            if isinstance(n, (gast.Global, gast.Nonlocal)) and set(n.names) & set(names):
                return True
            if isinstance(n, gast.Name) and n.id in names \
                    and not isinstance(n.ctx, gast.Store) and id(n) not in own:
                return True
        return False

    def _test_also(self, loop, exit_test):
        """The loop stops where ``exit_test`` (hoisted by ``_top_exit``) holds too."""
        if isinstance(loop, gast.While):
            if isinstance(loop.test, gast.Constant) and loop.test.value is True:
                loop.test = replace_expr("not (C)", C=exit_test, at=loop)
            else:
                loop.test = replace_expr("TEST and not (C)", TEST=loop.test,
                                         C=exit_test, at=loop)
            return
        extra = getattr(loop, "af_extra_test", None)
        loop.af_extra_test = stamp(
            replace_expr("not (C)", C=exit_test) if extra is None
            else replace_expr("EXTRA and not (C)", EXTRA=extra, C=exit_test), loop)

    def _guard(self, stmts, kind, flag):
        out = []
        for i, s in enumerate(stmts):
            if (isinstance(s, gast.If) and len(s.body) == 1 and _flagged(s.body[0], flag)
                    and not s.orelse and isinstance(s.test, gast.Name) and s.test.id == flag):
                # `if returned: break` where `returned` is the loop's flag: nothing to set
                return out + self._unless(flag, stmts[i + 1:], kind, s)
            if (isinstance(s, gast.If) and len(s.body) == 1 and isinstance(s.body[0], kind)
                    and not s.orelse and _is_boolean(s.test)):
                # `if c: break` -> `broke = bool(c)`: a flag needs no branch of its own
                # (`bool`: a size-1 array's comparison is an array of shape [1]).
                out += replace("FLAG = AF.bool(TEST)", FLAG=flag, AF=self.ctx.af, TEST=s.test,
                               at=s)
                return out + self._unless(flag, stmts[i + 1:], kind, s)
            if isinstance(s, kind):
                if not _flagged(s, flag):  # a lowered `return` set the flag already
                    out += replace("FLAG = True", FLAG=flag, at=s)
                return out
            if _has(s, kind):
                for owner, field in _blocks(s):
                    setattr(owner, field, self._guard(getattr(owner, field), kind, flag))
                out.append(s)
                return out + self._unless(flag, stmts[i + 1:], kind, s)
            out.append(s)
        return out

    def _unless(self, flag, rest, kind, anchor):
        """``if not FLAG: rest`` (guarded in turn); nothing when nothing is left.

        After a ``break`` the ``if`` is marked ``af_loop_guard`` (the flag's
        name): its false path is the iteration that leaves the loop (see
        ``cond.statements.if_stmt``'s ``guard``)."""
        rest = self._guard(rest, kind, flag) if rest else []
        if not rest:
            return []
        out = replace("if not FLAG:\n    REST", FLAG=flag, REST=rest, at=anchor)
        if kind is gast.Break:
            out[0].af_loop_guard = flag
        return out


def _test_binds(test, rebinding):
    """Does a ``while`` test bind or change what the loop carries, so that it must run
    where the body can see what it did (``_test_in_body``)? A walrus; a call of a nested
    function in ``rebinding`` (it rebinds the variables of the one lowered: ``nonlocal``);
    a call that changes a list or dict in place (``stack.pop()``) or advances an iterator
    (``next(it)``): a staged loop's test changes nothing it carries."""
    for n in walk(test):
        if isinstance(n, gast.NamedExpr):
            return True
        if isinstance(n, gast.Call) and isinstance(n.func, gast.Attribute) \
                and n.func.attr in IN_PLACE_METHODS:
            return True
        # (called, or handed to the runtime's call: `af.call(dec)`)
        if isinstance(n, gast.Name) and (n.id in STATEFUL_BUILTINS or n.id in rebinding):
            return True
    return False


def _test_in_body(loop, namer):
    """``while (v := f()) > 0:`` binds ``v`` for the body: the test moves to the top of
    the body (``while True: if not test: break``), so that the binding happens where the
    body can see it. An ``else:`` runs where that test ended the loop (a flag), not after
    a ``break`` of the body. The statements to lower in its place."""
    if not loop.orelse:
        loop.body = replace("if not TEST:\n    break", TEST=loop.test, at=loop) + loop.body
        loop.test = stamp(gast.Constant(value=True, kind=None), loop)
        return [loop]
    ended = namer.unique("ended")

    def flag(ctx):
        return gast.Name(id=ended, ctx=ctx, annotation=None, type_comment=None)
    loop.body = replace("if not TEST:\n    ENDED = True\n    break", TEST=loop.test,
                        ENDED=flag(gast.Store()), at=loop) + loop.body
    loop.test = stamp(gast.Constant(value=True, kind=None), loop)
    orelse, loop.orelse = loop.orelse, []
    tail = replace("if ENDED:\n    pass", ENDED=flag(gast.Load()), at=loop)
    tail[0].body = orelse
    return replace("ENDED = False", ENDED=flag(gast.Store()), at=loop) + [loop] + tail
