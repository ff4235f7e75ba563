"""``Printer``: the unparser that prints what conversion left as it was in the user's words.

A subclass of ``ast``'s own unparser: a node that conversion did not change (the same
node type at the same original position, the same tree below) is printed as its
original text, re-indented where it moved; the rest as the unparser prints it, in the
file's indentation unit and string quotes (``faithful.print_function`` uses it).
"""

from __future__ import annotations

import ast
import io
import tokenize

from .source_text import _cut, _header_end, _header_lines, _reindent, _strip_comments, same


_P = ast._Precedence  # noqa: SLF001 - the unparser's own precedence table
_Unparser = ast._Unparser  # noqa: SLF001
# Python 3.11 and 3.12's unparser takes `_avoid_backslashes` (it prints the inside of an
# f-string with one made so); 3.13's takes nothing, and prints f-strings otherwise.
_AVOID_BACKSLASHES_ARG = "_avoid_backslashes" in _Unparser.__init__.__code__.co_varnames


_ATOMS = (ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.Call, ast.List, ast.Dict,
          ast.Set, ast.ListComp, ast.SetComp, ast.DictComp, ast.JoinedStr)


def _own_precedence(node):
    """The precedence ``node``'s own text has (None: not printed as written)."""
    cls = node.__class__
    if cls is ast.Name:
        return None  # printed the same either way
    if cls in _ATOMS:
        return _P.ATOM
    if cls is ast.BinOp:
        return _Unparser.binop_precedence[_Unparser.binop[node.op.__class__.__name__]]
    if cls is ast.UnaryOp:
        return _P.NOT if isinstance(node.op, ast.Not) else _P.FACTOR
    if cls is ast.BoolOp:
        return _P.AND if isinstance(node.op, ast.And) else _P.OR
    if cls is ast.Compare:
        return _P.CMP
    if cls in (ast.IfExp, ast.Lambda):
        return _P.TEST
    return None


def _newline_outside_brackets(text):
    """Does ``text`` (one expression) break a line outside its own brackets,
    or hold a comment? (Then it is printed in parentheses / not as written.)"""
    depth = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO("(" + text + ")").readline):
            if tok.type == tokenize.COMMENT:
                return None
            if tok.type == tokenize.OP:
                if tok.string in "([{":
                    depth += 1
                elif tok.string in ")]}":
                    depth -= 1
            elif tok.type == tokenize.NL and depth == 1:
                return True
    except (tokenize.TokenError, SyntaxError):
        return None
    return False


class Printer(_Unparser):
    """``ast.unparse`` that prints the user's unchanged code as written."""

    def __init__(self, *, _avoid_backslashes=False, src=None, comments=(), unit="    ",
                 exprs=True):
        if _AVOID_BACKSLASHES_ARG:
            super().__init__(_avoid_backslashes=_avoid_backslashes)
        else:
            super().__init__()
            self._avoid_backslashes = _avoid_backslashes  # (read by the methods below)
        self.src = src
        self.unit = unit
        self.exprs = exprs and src is not None
        self.pending = sorted(comments)
        self.comment_lines = {int(k) for k, _ in comments}
        self.emitted = set()
        self.quote = src.quote if src is not None else "'"
        self.memo = {}

    # -- layout in the file's style ---------------------------------------
    def fill(self, text="", **_):
        self.maybe_newline()
        self.write(self.unit * self._indent + text)

    def _write_constant(self, value):
        if (self.quote == '"' and value.__class__ is str and not self._avoid_backslashes
                and '"' not in value and "'" not in value):
            self.write('"' + repr(value)[1:-1] + '"')
        else:
            super()._write_constant(value)

    _skip_blank = False

    def maybe_newline(self):
        if self._skip_blank:
            self._skip_blank = False
        elif self._source:
            self.write("\n")

    # -- comments ----------------------------------------------------------
    def _consume(self, first, last):
        """Comments on lines ``first..last`` are printed by the caller's text;
        True when one of them was printed already (then strip them)."""
        lines = {k for k in self.comment_lines if first <= k <= last}
        if not lines:
            return False
        again = bool(lines & self.emitted)
        self.emitted |= lines
        self.pending = [c for c in self.pending if int(c[0]) not in lines]
        return again

    def _emit_due(self, line):
        due = [c for c in self.pending if c[0] <= line]
        if due:
            self.pending = [c for c in self.pending if c[0] > line]
            for k, text in due:
                self.emitted.add(int(k))
                self.fill(text)

    def emit_rest(self):
        for k, text in self.pending:
            self.emitted.add(int(k))
            self.fill(text)
        self.pending = []

    # -- statements --------------------------------------------------------
    def traverse(self, node):
        if node.__class__ is list:
            prev = None
            for item in node:
                prev = self._statement(item, prev) if isinstance(item, ast.stmt) else \
                    self.traverse(item)
            return None
        if self.exprs and isinstance(node, ast.expr) and not self._avoid_backslashes:
            if self._expression(node):
                return None
        super().traverse(node)
        return None

    def _statement(self, node, prev):
        src = self.src
        if src is None:
            super().traverse(node)
            return None
        orig = src.original(node, self.memo)
        twin = orig or src.counterpart(node)
        start = src.start(twin) if twin is not None else None
        again = False
        plan = None
        if orig is not None:
            rest = _cut(src.line(orig.end_lineno), orig.end_col_offset)[1].strip()
            # with code after it on its last line (`a; b  # c`), the comment there is b's
            again = self._consume(start[0], orig.end_lineno - bool(rest and rest[0] != "#"))
        elif twin is not None:
            plan = self._plan(node)
            if plan is not None:
                plan = (plan, self._consume(plan[1], plan[2]))
        gap, already = None, set()
        if twin is not None and prev is not None and src.next_sibling.get(id(prev)) is twin:
            gap = range(prev.end_lineno + 1, start[0])
            already = self.emitted.intersection(gap)
            self._consume(gap.start, gap.stop - 1)
        line = getattr(node, "lineno", None)
        if line is not None:
            if orig is None and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                  ast.ClassDef)) \
                    and self._source and any(c[0] <= line for c in self.pending):
                # the blank line the unparser puts before a def goes before its comments
                self.write("\n")
                self._skip_blank = True
            self._emit_due(line)
        if gap is not None:
            old = src.indentation(start[0])
            for k in gap:
                text = src.line(k).rstrip("\n")
                if not text.strip():
                    self.write("\n")
                elif text.lstrip().startswith("#") and k not in already:
                    self.fill(text[len(old):] if text.startswith(old) else text.lstrip())
        self._gap = gap is not None
        if orig is not None:
            self._splice_statement(orig, again)
        elif plan is not None and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                    ast.ClassDef)):
            self._planned = (node, plan)
            super().traverse(node)
        elif plan is not None:
            self._compound(node, plan)
        else:
            value = getattr(node, "value", None)
            if value.__class__ is ast.Tuple and value.elts \
                    and node.__class__ in (ast.Return, ast.Assign, ast.AugAssign):
                vtwin = src.counterpart(value)
                if vtwin is not None and not _cut(src.line(vtwin.lineno),
                                                  vtwin.col_offset)[1].startswith("("):
                    # `return a, f(b)` stays without parentheses, as written
                    self.set_precedence(_P.TUPLE, value)
            super().traverse(node)
        return twin

    def _splice_statement(self, orig, strip):
        src = self.src
        k0, col = src.start(orig)
        before, first = _cut(src.line(k0), col)
        lines = [first] + src.lines[k0:orig.end_lineno]
        # the last line ends at the node's end, plus a comment after it
        last_full = lines[-1]
        cut_at = orig.end_col_offset if orig.end_lineno != k0 else orig.end_col_offset - col
        head, tail = _cut(last_full, cut_at)
        rest = tail.rstrip("\n")
        lines[-1] = head + (rest if rest.strip().startswith("#") else "")
        lines = [t.rstrip("\n") for t in lines]
        old = before if not before.strip() else None
        lines = _reindent(src, k0, lines, old, self.unit * self._indent)
        text = "\n".join(lines)
        if strip:
            text = _strip_comments(text)
        self.fill(text)

    # -- a def whose header is unchanged: its header as written -------------
    def _plan(self, node):
        """``(twin, first line, last line, lines)``: the header of the user's
        compound statement at ``node``'s position, when ``node`` keeps it
        (same fields but the bodies) and it can be found; else None."""
        keyword = self._KEYWORDS.get(node.__class__)
        if keyword is None:
            return None
        twin = self._header_twin(node)
        if twin is None:
            return None
        src = self.src
        end = _header_end(src, twin.lineno, twin.col_offset)
        if end is None:
            return None
        decos = getattr(twin, "decorator_list", None)
        k0, col = src.start(twin) if decos else (twin.lineno, twin.col_offset)
        lines, k1 = _header_lines(src, k0, col, end)
        if not lines[-1].split("#")[0].rstrip().endswith(":") \
                or not lines[0].lstrip().startswith("@" if decos else keyword):
            return None
        return twin, k0, k1, lines

    def _header(self, node, plan=None):
        """Print ``node``'s header as written; False when it cannot."""
        if plan is None:
            plan = self._plan(node)
            if plan is None:
                return False
            again = self._consume(plan[1], plan[2])
        else:
            plan, again = plan
        twin, k0, k1, lines = plan
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and not self._gap:
            self.maybe_newline()
        old = self.src.indentation(k0)
        text = "\n".join(_reindent(self.src, k0, lines, old, self.unit * self._indent))
        if again:
            text = _strip_comments(text)
        self.fill(text)
        return True

    def _header_twin(self, node, skip=("body", "orelse", "finalbody", "handlers",
                                       "type_comment")):
        src = self.src
        twin = src.counterpart(node) if src is not None else None
        if twin is None or not all(same(getattr(node, f, None), getattr(twin, f, None))
                                   for f in node._fields if f not in skip):
            return None
        return twin

    def _body(self, body):
        self._indent += 1
        try:
            self.traverse(body)
        finally:
            self._indent -= 1

    # -- a def or class whose header is unchanged: its header as written ----
    def _take_plan(self, node):
        plan = self._planned
        self._planned = None
        return plan if plan is not None and plan[0] is node else None

    def _function_helper(self, node, fill_suffix):
        unparsed = super()._function_helper
        return self._def_as_written(node, lambda: unparsed(node, fill_suffix))

    def visit_ClassDef(self, node):
        unparsed = super().visit_ClassDef
        return self._def_as_written(node, lambda: unparsed(node))

    def _def_as_written(self, node, unparsed):
        """Print the def or class ``node`` with its header as written, or as
        ``unparsed()`` prints it (the unparser's) when the header cannot be."""
        plan = self._take_plan(node)
        if not self._header(node, plan and plan[1]):
            return unparsed()
        self._indent += 1
        try:
            self._write_docstring_and_traverse_body(node)
        finally:
            self._indent -= 1
        return None

    # -- loops, with and try that stay Python: their headers as written -----
    _KEYWORDS = {ast.For: "for", ast.AsyncFor: "async", ast.While: "while", ast.With: "with",
                 ast.AsyncWith: "async", ast.Try: "try", ast.FunctionDef: "def",
                 ast.AsyncFunctionDef: "async", ast.ClassDef: "class"}
    _planned = None

    def _compound(self, node, plan):
        """Print ``node`` with its header(s) as written."""
        # as the unparser's visit_Try: a plain `try` inside a `try*` prints `except`
        outer, self._in_try_star = getattr(self, "_in_try_star", False), False
        try:
            self._compound_inner(node, plan)
        finally:
            self._in_try_star = outer

    def _compound_inner(self, node, plan):
        self._header(node, plan)
        self._body(node.body)
        for handler in getattr(node, "handlers", ()):
            htwin = self.src.handlers.get((handler.lineno, handler.col_offset))
            if htwin is not None and same(handler.type, htwin.type) \
                    and handler.name == htwin.name:
                end = _header_end(self.src, htwin.lineno, htwin.col_offset)
            else:
                end = None
            if end is not None:
                k0 = htwin.lineno
                lines, k1 = _header_lines(self.src, k0, htwin.col_offset, end)
                again = self._consume(k0, k1)
                self._header(handler, ((htwin, k0, k1, lines), again))
                self._body(handler.body)
            else:
                self.traverse(handler)
        if getattr(node, "orelse", None):
            self.fill("else:")
            self._body(node.orelse)
        if getattr(node, "finalbody", None):
            self.fill("finally:")
            self._body(node.finalbody)

    def _write_docstring_and_traverse_body(self, node):
        if self.src is not None and node.body and self.src.original(node.body[0], self.memo) is not None:
            self.traverse(node.body)
        else:
            super()._write_docstring_and_traverse_body(node)

    # -- expressions --------------------------------------------------------
    def visit_Call(self, node):
        """``af.if_chain((tests...), ...)`` (a chunk of a long ``elif`` chain)
        with one test per line, each as written, instead of one long line."""
        tests = node.args[0] if node.args else None
        if not (isinstance(node.func, ast.Attribute) and node.func.attr == "if_chain"
                and isinstance(tests, ast.Tuple) and len(tests.elts) > 1):
            super().visit_Call(node)
            return
        self.traverse(node.func)
        self.write("((")
        for test in tests.elts:
            self.write("\n" + self.unit * (self._indent + 1))
            self.traverse(test)
            self.write(",")
        self.write("\n" + self.unit * self._indent + ")")
        for arg in node.args[1:]:
            self.write(", ")
            if isinstance(arg, ast.Tuple) and len(arg.elts) > 4 and all(
                    isinstance(e, ast.Name) for e in arg.elts):  # the branch functions
                lines = [[]]
                for name in (e.id for e in arg.elts):
                    if sum(len(n) + 2 for n in lines[-1]) + len(name) > 64:
                        lines.append([])
                    lines[-1].append(name)
                pad = "\n" + self.unit * (self._indent + 1)
                self.write("(" + "".join(pad + ", ".join(ln) + "," for ln in lines)
                           + "\n" + self.unit * self._indent + ")")
            else:
                self.traverse(arg)
        for kw in node.keywords:
            self.write(", ")
            self.traverse(kw)
        self.write(")")

    def _expression(self, node):
        own = _own_precedence(node)
        if own is None:
            return False
        orig = self.src.original(node, self.memo)
        if orig is None:
            return False
        k0, k1 = orig.lineno, orig.end_lineno
        if k0 == k1:
            line = self.src.line(k0)
            raw = line.encode("utf-8") if not line.isascii() else None
            text = (raw[orig.col_offset:orig.end_col_offset].decode("utf-8") if raw is not None
                    else line[orig.col_offset:orig.end_col_offset])
            wrap = False
        else:
            before, first = _cut(self.src.line(k0), orig.col_offset)
            lines = [first] + self.src.lines[k0:k1]
            lines[-1] = _cut(lines[-1], orig.end_col_offset)[0]
            text = "".join(lines)
            wrap = _newline_outside_brackets(text)
            if wrap is None:
                return False
            lines = [t.rstrip("\n") for t in lines]
            old = self.src.indentation(k0)
            text = "\n".join(_reindent(self.src, k0, lines, old,
                                       self.unit * (self._indent + 1)))
        wrap = wrap or self.get_precedence(node) > own
        self.write("(" + text + ")" if wrap else text)
        return True
