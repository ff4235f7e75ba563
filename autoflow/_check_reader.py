"""Reading back what the rewriter made of one function, for ``autoflow check``.

``Finding`` is one control-flow statement (or a note about a function) and its status
(``CONVERTS``, ``PYTHON``, ``FALLBACK``, ``FAILS``, ``INFO``, ``INTERNAL``);
``_Reader`` walks the converted function's AST and makes a ``Finding`` of each
operator call (``af.if_stmt``, ``af.while_stmt``, ``af.for_stmt``, ``af.if_exp``) and
of each ``if``/``while``/``for``/``match`` the rewriter left as Python, matched to the
statements the user wrote (``_user_statements``).
"""

from __future__ import annotations

import dataclasses
import re

import gast

from .analysis.activity import TRY_TYPES as _TRY
from .analysis.activity import bound_names
from .transforms.matching import stageable
from .core.nodes import walk
from .transforms.util import marked_as_is, walk_local


_MATCH = getattr(gast, "Match", None)

# Operator called by converted code -> the statement kind it replaces.
OPERATORS = {"if_stmt": "if", "while_stmt": "while", "for_stmt": "for", "if_exp": "ternary"}
ATTR_OF_KIND = {v: k for k, v in OPERATORS.items()}

CONVERTS, PYTHON, FALLBACK, FAILS, INFO, INTERNAL = (
    "converts", "python", "fallback", "fails", "info", "internal")
_TRACED_FAILS = "it runs as Python, which fails if its condition is traced"


@dataclasses.dataclass
class Finding:
    """One control-flow statement (or one note about a function)."""

    filename: str
    function: str              # qualified name of the top-level function or method
    line: int
    col: int                   # 0-based, as in the AST
    kind: str                  # 'if', 'while', 'for', 'ternary', 'match', or 'function'
    status: str                # CONVERTS, PYTHON, FALLBACK, FAILS or INFO
    becomes: str = ""          # what it becomes when traced: 'lax.cond', 'lax.while_loop'...
    carries: tuple = ()        # variables carried through the statement
    note: str = ""             # detail: 'range loop with `break`', 'returns its value'...
    reason: str = ""           # why it falls back or fails
    end_line: int | None = None
    end_col: int | None = None

    @property
    def ok(self) -> bool:
        return self.status not in (FALLBACK, FAILS, INTERNAL)

    @property
    def where(self) -> str:
        return f"{self.filename}:{self.line}:{self.col + 1}"

    def format(self) -> str:
        head = f"{self.where}: {self.function}: {self.kind}"
        if self.status == INFO:
            return f"{head}: {self.note}"
        if self.status == INTERNAL:
            return (f"{self.where}: {self.function}: internal error while converting it "
                    f"(an autoflow bug; please report it): {self.reason}")
        if self.status == FALLBACK:
            fails = _TRACED_FAILS.replace("condition", "subject") if self.kind == "match" \
                else _TRACED_FAILS
            return f"{head}: cannot convert: {self.reason}; {fails}"
        text = f"{head} -> {self.becomes}"
        if self.note:
            text += f" ({self.note})"
        if self.kind != "ternary" and self.status != PYTHON:
            text += "; carries " + (", ".join(self.carries) if self.carries else "nothing")
        if self.status == FAILS:
            text += f"; fails when traced: {self.reason}"
        return text


# ---------------------------------------------------------------------------
# helpers on the generated AST
# ---------------------------------------------------------------------------

def _operator_call(node, alias):
    """The operator name if ``node`` is ``alias.<operator>(...)``."""
    if isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute) \
            and isinstance(node.func.value, gast.Name) and node.func.value.id == alias \
            and (node.func.attr in OPERATORS or node.func.attr == "if_chain"):
        return node.func.attr
    return None


def _str_tuple(node):
    if isinstance(node, gast.Tuple) and all(isinstance(e, gast.Constant) for e in node.elts):
        return tuple(str(e.value) for e in node.elts)
    return None


def _name_tuple(node):
    if isinstance(node, gast.Tuple):
        return tuple(e.id for e in node.elts if isinstance(e, gast.Name))
    return ()


def _names_in(node):
    return {n.id for n in gast.walk(node) if isinstance(n, gast.Name)}


def _is_call_to(node, alias, attr):
    return (isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute)
            and node.func.attr == attr and isinstance(node.func.value, gast.Name)
            and node.func.value.id == alias)


def _static_range(node, alias) -> bool:
    """Is ``node`` ``range(...)`` (or the runtime's ``af.range``) of integer constants
    only (``range(2)``, ``range(1, 5)``)?"""
    f = getattr(node, "func", None)
    named = isinstance(f, gast.Name) and f.id == "range" or isinstance(f, gast.Attribute) \
        and f.attr == "range" and isinstance(f.value, gast.Name) and f.value.id == alias
    return isinstance(node, gast.Call) and named and not node.keywords \
        and 1 <= len(node.args) <= 3 \
        and all(isinstance(a, gast.Constant) and type(a.value) is int for a in node.args)


def _children_stmt_lists(stmt):
    for field in ("body", "orelse", "finalbody"):
        val = getattr(stmt, field, None)
        if isinstance(val, list):
            yield val
    if _TRY and isinstance(stmt, _TRY):
        for h in stmt.handlers:
            yield h.body
    if _MATCH is not None and isinstance(stmt, _MATCH):
        for case in stmt.cases:
            yield case.body


def _literal(node) -> bool:
    return isinstance(node, gast.Constant) or (
        isinstance(node, gast.UnaryOp) and isinstance(node.operand, gast.Constant))


def _assigns_a_non_array(body, name) -> bool:
    """Does ``body`` bind ``name`` to a string, bytes or ``None`` literal?"""
    for node in gast.walk(gast.Module(body=list(body), type_ignores=[])):
        if isinstance(node, gast.Assign) and any(
                isinstance(t, gast.Name) and t.id == name for t in node.targets):
            v = node.value
            if isinstance(v, gast.JoinedStr) or (
                    isinstance(v, gast.Constant) and (v.value is None or isinstance(v.value, (str, bytes)))):
                return True
    return False


def _uncall(node, alias):
    """``af.call(f, *args)`` (a user call routed through the runtime) -> ``f(*args)``."""
    if _is_call_to(node, alias, "call") and node.args:
        return gast.Call(func=node.args[0], args=node.args[1:], keywords=node.keywords)
    return node


def _describe_for(call, alias, has_break):
    """(status, becomes, note) of a ``for_stmt`` call from its iterable."""
    it = _uncall(call.args[0] if call.args else None, alias)
    staged = "lax.while_loop" if has_break else "lax.fori_loop"
    brk = " with `break`" if has_break else ""
    forced = ""
    func = it.func if isinstance(it, gast.Call) else None
    name = func.attr if isinstance(func, gast.Attribute) else getattr(func, "id", None)
    if name in ("unroll", "roll") and it.args:
        if name == "unroll":
            return PYTHON, "python", "`autoflow.unroll`: iterated as Python, unrolled under jit"
        forced = "; `autoflow.roll`: always staged"
        it = _uncall(it.args[0], alias)
    if _is_call_to(it, alias, "range"):
        if has_break:
            return CONVERTS, staged, f"range loop{brk}{forced}"
        if all(_literal(a) for a in it.args):
            return CONVERTS, staged, f"range loop with a static trip count{forced}"
        return CONVERTS, staged, f"range loop; lax.while_loop if a bound is traced{forced}"
    if _is_call_to(it, alias, "enumerate") or _is_call_to(it, alias, "zip"):
        what = it.func.attr
        return CONVERTS, staged, (f"`{what}` loop{brk} over the leading axis of arrays; "
                                  f"Python iteration otherwise{forced}")
    python_literals = (gast.List, gast.Tuple, gast.Set, gast.Dict, gast.ListComp, gast.SetComp,
                       gast.DictComp, gast.GeneratorExp, gast.JoinedStr, gast.Constant)
    if isinstance(it, python_literals) and not forced:
        return PYTHON, "python", "iterates a Python container: unrolled under jit"
    if isinstance(it, gast.Call) and isinstance(it.func, gast.Attribute) \
            and it.func.attr in ("items", "keys", "values") and not it.args and not forced:
        return PYTHON, "python", "iterates a dict: unrolled under jit"
    return CONVERTS, staged, (f"loop{brk} over the leading axis if it is an array; "
                              f"Python iteration otherwise{forced}")


# ---------------------------------------------------------------------------
# one function
# ---------------------------------------------------------------------------

def _user_statements(fn_node):
    """(line, col, kind) of the control flow the user wrote in ``fn_node``.

    Mirrors what the rewriter converts: nested ``def``s and lambdas yes,
    class bodies, ``async def`` and ``def``s marked ``do_not_convert`` no.
    """
    out = {}
    todo = list(gast.iter_child_nodes(fn_node))
    while todo:
        n = todo.pop()
        kind = None
        if isinstance(n, gast.If):
            kind = "if"
        elif isinstance(n, gast.While):
            kind = "while"
        elif isinstance(n, gast.For):
            kind = "for"
        elif isinstance(n, gast.IfExp):
            kind = "ternary"
        elif _MATCH is not None and isinstance(n, _MATCH):
            kind = "match"
            if stageable(n):  # lowered to `if`/`elif`: one staged `if` per case
                for case in n.cases:
                    p = case.pattern
                    out[(p.lineno, p.col_offset, "if")] = p
                kind = None
        if kind is not None:
            out[(n.lineno, n.col_offset, kind)] = n
        if isinstance(n, (gast.ClassDef, gast.AsyncFunctionDef)) \
                or isinstance(n, gast.FunctionDef) and marked_as_is(n):
            continue
        todo.extend(gast.iter_child_nodes(n))
    return out


class _Reader:
    """Reads one converted function back into findings."""

    def __init__(self, original, converted, alias, reserved, filename, qualname):
        self.original = original
        self.alias = alias
        self.filename = filename
        self.qualname = qualname
        self.user = _user_statements(original)
        self.generated_names = (_names_in(converted) - set(reserved)) - {alias}
        self.found = {}  # (line, col, kind) -> Finding

    # -- bookkeeping ---------------------------------------------------------
    def _add(self, key, **fields):
        node = self.user[key]
        prev = self.found.get(key)
        if prev is not None:  # a copy of the same statement (the returns pass copies code)
            merged = tuple(prev.carries) + tuple(c for c in fields.get("carries", ())
                                                 if c not in prev.carries)
            if prev.ok and fields.get("status") in (FALLBACK, FAILS):
                for k, v in fields.items():
                    setattr(prev, k, v)
            prev.carries = merged
            return
        self.found[key] = Finding(self.filename, self.qualname, key[0], key[1], key[2],
                                  end_line=getattr(node, "end_lineno", None),
                                  end_col=getattr(node, "end_col_offset", None), **fields)

    def _is_generated_if(self, test):
        return bool(_names_in(test) & self.generated_names)

    # -- walking -------------------------------------------------------------
    def read_block(self, stmts, in_try=False):
        for k, s in enumerate(stmts):
            self._read_stmt(s, stmts, k, in_try)

    def _read_stmt(self, s, block, k, in_try):
        if isinstance(s, (gast.ClassDef, gast.AsyncFunctionDef)):
            return
        if isinstance(s, gast.FunctionDef):
            self.read_block(s.body)
            return
        # operator calls in this statement (outside nested scopes; lambdas are read too)
        for n in [s] + list(self._walk_exprs(s)):
            op = _operator_call(n, self.alias)
            if op is not None:
                self._read_call(op, n, s, block, k)
        kind = ("if" if isinstance(s, gast.If) else "while" if isinstance(s, gast.While)
                else "for" if isinstance(s, gast.For)
                else "match" if _MATCH is not None and isinstance(s, _MATCH) else None)
        if kind is not None:
            key = (s.lineno, s.col_offset, kind)
            generated = kind == "if" and self._is_generated_if(s.test)
            if key in self.user and not generated and kind == "for" \
                    and _static_range(s.iter, self.alias):
                # (a `range` of constants: it runs as Python, as written, and cannot fail
                # for a traced condition: there is none)
                self._add(key, status=PYTHON, becomes="python",
                          note="a static range: iterated as Python, unrolled under jit")
            elif key in self.user and not generated:
                self._add(key, status=FALLBACK, reason=self._fallback_reason(s, kind, in_try))
        nested_try = in_try or bool(_TRY and isinstance(s, _TRY)) \
            or isinstance(s, (gast.With, gast.AsyncWith))
        for body in _children_stmt_lists(s):
            self.read_block(body, nested_try)

    def _walk_exprs(self, stmt):
        """Expression nodes of ``stmt`` itself (not of its nested statements)."""
        todo = [c for c in gast.iter_child_nodes(stmt) if not isinstance(c, gast.stmt)]
        while todo:
            n = todo.pop()
            yield n
            todo.extend(c for c in gast.iter_child_nodes(n) if not isinstance(c, gast.stmt))

    def _read_call(self, op, call, stmt, block, k):
        if op == "if_chain":
            self._read_if_chain(call, stmt, block, k)
            return
        kind = OPERATORS[op]
        key = (call.lineno, call.col_offset, kind)
        if key not in self.user:
            return
        if kind == "if" and call.args and self._is_generated_if(call.args[0]) \
                and isinstance(self.user[key], gast.If):
            return
        if kind == "ternary":
            self._add(key, status=CONVERTS, becomes="lax.cond",
                      note="or a select when cheap: decided when traced")
        elif kind == "if":
            self._read_if(key, call, stmt, block, k)
        elif kind == "while":
            names = _str_tuple(call.args[3]) if len(call.args) > 3 else ()
            test_fn = self._def_before(block, k, call.args[0])
            # (the flags the rewriter made of a `break`, a `return` or a test moved into the
            # body; not its other names, as those of variables declared `nonlocal`)
            has_break = test_fn is not None and any(
                re.sub(r"_\d+$", "", n) in ("broke", "returned", "ended")
                for n in _names_in(test_fn) & self.generated_names)
            self._add(key, status=CONVERTS, becomes="lax.while_loop", carries=names or (),
                      note="with `break`" if has_break else "")
        else:
            names = _str_tuple(call.args[3]) if len(call.args) > 3 else ()
            has_break = any(kw.arg == "test" for kw in call.keywords)
            status, becomes, note = _describe_for(call, self.alias, has_break)
            self._add(key, status=status, becomes=becomes, carries=names or (), note=note)

    @staticmethod
    def _def_before(block, k, name_node):
        if not isinstance(name_node, gast.Name):
            return None
        for s in reversed(block[:k]):
            if isinstance(s, gast.FunctionDef) and s.name == name_node.id:
                return s
        return None

    def _caught_raise(self, block, k, call):
        """A branch's ``raise`` that an ``except`` around it could catch (the
        rewriter passed the clauses' types: ``af.exception(make, types)``)."""
        for fn_name in call.args[1:3]:
            fn = self._def_before(block, k, fn_name)
            for n in walk(fn) if fn is not None else ():
                if isinstance(n, gast.Raise) and _is_call_to(n.exc, self.alias, "exception") \
                        and len(n.exc.args) > 1:
                    return n
        return None

    def _read_if(self, key, call, stmt, block, k):
        returning = isinstance(stmt, gast.Return) and stmt.value is call
        names = _str_tuple(call.args[4]) if len(call.args) > 4 else None
        operands = _name_tuple(call.args[3]) if len(call.args) > 3 else ()
        if self._caught_raise(block, k, call) is not None:
            self._add(key, status=FAILS, becomes="lax.cond", carries=operands if names is None
                      else names, reason="a `raise` in it may be caught by an `except` around "
                      "it, which a traced `raise` (checked when the compiled code runs) cannot "
                      "be; it works when the condition is concrete")
            return
        if returning or names is None:
            self._add(key, status=CONVERTS, becomes="lax.cond", carries=operands,
                      note="returns the function's result; " + self._if_choice(block, k, call))
            return
        # Outputs unbound before the `if` (`x = af.Undefined('x')` right before
        # the branch functions) must be assigned by both branches; not those
        # read only where bound (`guarded=True`: a staged path fills them).
        undefined = set()
        j = k - 1
        while j >= 0 and isinstance(block[j], (gast.FunctionDef, gast.Assign)):
            s = block[j]
            if isinstance(s, gast.Assign):
                if not _is_call_to(s.value, self.alias, "Undefined"):
                    break
                if not any(kw.arg == "guarded" for kw in s.value.keywords):
                    undefined |= {t.id for t in s.targets if isinstance(t, gast.Name)}
            j -= 1
        # A number or array bound on one path runs: a read where it is unbound raises
        # UnboundLocalError when the compiled code runs. A value that is not an array
        # (a string, None: a literal here) cannot be carried out of a traced `if`.
        problems, notes = [], []
        fns = {which: self._def_before(block, k, fn_name)
               for which, fn_name in (("true", call.args[1]), ("false", call.args[2]))}
        for which, fn in fns.items():
            if fn is None:
                continue
            bound = set(bound_names(fn.body))
            other = "false" if which == "true" else "true"
            for n in names:
                if n in undefined and n not in bound:
                    theirs = fns[other]
                    if theirs is not None and _assigns_a_non_array(theirs.body, n):
                        problems.append(f"`{n}` is assigned only when the condition is {other} "
                                        "but is used after the `if`; assign it before the "
                                        "`if` or in both branches")
                    else:
                        notes.append(f"`{n}` is bound only when the condition is {other} (a "
                                     "read where it is not raises UnboundLocalError when the "
                                     "compiled code runs)")
        if problems:
            self._add(key, status=FAILS, becomes="lax.cond", carries=names, reason="; ".join(problems))
        else:
            self._add(key, status=CONVERTS, becomes="lax.cond", carries=names,
                      note="; ".join([self._if_choice(block, k, call)] + notes))

    def _read_if_chain(self, call, stmt, block, k):
        """``af.if_chain(tests, fns, operands[, names])`` (a chunk of a long
        ``elif`` chain): each test is read as the ``if`` it was, its branch
        against the next one (the final ``else`` for the last test)."""
        tests, fns = call.args[0].elts, call.args[1].elts
        rest = call.args[2:]
        if isinstance(stmt, gast.Return) and stmt.value is call:
            rest = rest[:1]  # a returning chain: no names
        for i, test in enumerate(tests):
            key = (test.lineno, test.col_offset, "if")
            if key in self.user:
                level = gast.Call(func=call.func, args=[test.body, fns[i], fns[i + 1], *rest],
                                  keywords=[])
                self._read_if(key, level, stmt, block, k)

    def _if_choice(self, block, k, call):
        """How the cost rule (runtime/cond/select_or_cond.py) will likely lower this traced ``if``."""
        for fn_name in call.args[1:3]:
            fn = self._def_before(block, k, fn_name)
            for n in walk(fn) if fn is not None else ():
                if isinstance(n, (gast.For, gast.While)) or isinstance(n, gast.Call) and any(
                        _is_call_to(n, self.alias, op) for op in ("while_stmt", "for_stmt")):
                    return "its branches contain a loop: stays a cond"
        return "or a select when cheap: decided when traced"

    def _fallback_reason(self, s, kind, in_try):
        if kind == "match":
            return ("`match` with class, mapping or sequence patterns runs as Python "
                    "(its subject must be concrete)")
        loops = (gast.For, gast.While, gast.AsyncFor)
        has = {t: False for t in (gast.Return, gast.Break, gast.Continue)}
        todo = list(s.body) + (list(s.orelse) if kind == "if" else [])
        while todo:
            n = todo.pop()
            for t in has:
                if isinstance(n, t):
                    has[t] = True
            if isinstance(n, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ClassDef)):
                continue
            if kind != "if" or not isinstance(n, loops):
                todo.extend(gast.iter_child_nodes(n))
        inner_try = any(isinstance(n, _TRY + (gast.With, gast.AsyncWith)) for n in walk_local(s))
        if has[gast.Return]:
            if in_try or inner_try:
                return "it returns from inside a `try` or `with` block"
            if kind == "if":
                return "the code after its `return` is too long to copy into both branches"
            return "it contains a `return` that could not be lowered"
        if has[gast.Break] or has[gast.Continue]:
            return "it contains a `break`/`continue` that could not be lowered"
        if kind != "if" and s.orelse:
            return "its `else` clause could not be lowered"
        declared = {name for n in walk_local(self.original) if isinstance(n, (gast.Global, gast.Nonlocal))
                    for name in n.names}
        assigned = sorted({n.id for n in walk_local(s) if isinstance(n, gast.Name)
                           and isinstance(n.ctx, gast.Store) and n.id in declared})
        if assigned:
            return (f"it assigns `{assigned[0]}`, declared `global` or `nonlocal` (return "
                    "the new value and assign it after the call, or keep the state in an "
                    "argument)")
        return "the rewriter left it as Python"

    def findings(self):
        for key, f in self.found.items():
            name = type(self.user.get(key)).__name__
            if name.startswith("Match") and name != "Match":  # a `case` pattern
                f.kind = "case"
        return sorted(self.found.values(), key=lambda f: (f.line, f.col, f.kind))
