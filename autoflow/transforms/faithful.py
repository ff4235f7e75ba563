"""Printing a converted function in the user's own words (``autoflow convert``).

The runtime path compiles ``ast.unparse`` output, which respells everything:
``1e-4`` becomes ``0.0001``, ``X, y = a, b`` gains parentheses, quotes and line
breaks change. For the command line, a converted function is printed here
instead: every statement and expression that conversion left as it was (the
same node type at the same original position, with the same tree below it) is
printed as its original source text, re-indented where it moved; only what
conversion made is printed by the unparser, in the file's indentation unit
and string quotes. Comments inside the function are kept: those inside a
statement printed as written come with it, the others go on a line of their
own before the first printed statement that comes from their line or a later
one.

The result is checked: it must parse to the same tree as the unparser's
text (``ast.dump`` equal), or a plainer printing is used (statements only,
then the unparser's). ``fallbacks()`` lists those, for the tests.
"""

from __future__ import annotations

import ast
import contextlib
import io
import tokenize

_P = ast._Precedence  # noqa: SLF001 - the unparser's own precedence table
_Unparser = ast._Unparser  # noqa: SLF001

_watching: list = []  # the lists of the `fallbacks()` contexts open


@contextlib.contextmanager
def fallbacks():
    """Context: a list that gets ``(function name, level)`` for each printing made
    while it is open that failed the check (level 1: the expression-level printing
    was dropped; 2: the statement-level too). For tests and benchmarks; nothing is
    kept when none is open."""
    found: list = []
    _watching.append(found)
    try:
        yield found
    finally:
        _watching.remove(found)


def _key(n):
    return (n.__class__, n.lineno, n.col_offset, n.end_lineno, n.end_col_offset)


def same(a, b, memo=None):
    """Are ``a`` and ``b`` the same tree (positions aside)?

    ``memo`` (a dict) remembers the answer for each pair of nodes, so that
    asking again about nodes inside ones already compared costs nothing (the
    printer asks at every level of a long ``a + b + ...``)."""
    if a.__class__ is not b.__class__:
        return False
    if isinstance(a, ast.AST):
        if isinstance(a, ast.expr_context):
            return True
        if memo is not None:
            key = (id(a), id(b))
            hit = memo.get(key)
            if hit is not None:
                return hit
        result = True
        for f in a._fields:
            if not same(getattr(a, f, None), getattr(b, f, None), memo):
                result = False
                break
        if memo is not None:
            memo[key] = result
        return result
    if a.__class__ is list:
        return len(a) == len(b) and all(same(x, y, memo) for x, y in zip(a, b))
    if a.__class__ in (float, complex):
        return repr(a) == repr(b)
    return a == b


def split_lines(text):
    """``text``'s lines, ends kept, split at ``\\n`` only (as Python numbers
    them: ``str.splitlines`` also splits at form feeds and other separators)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _cut(line, col):
    """``line`` split at the UTF-8 byte offset ``col`` (ast's columns)."""
    if line.isascii():
        return line[:col], line[col:]
    raw = line.encode("utf-8")
    return raw[:col].decode("utf-8", "replace"), raw[col:].decode("utf-8", "replace")


class Source:
    """The user's module text, indexed for printing statements as written."""

    def __init__(self, source):
        self.text = source
        self.lines = split_lines(source)
        self.tree = ast.parse(source)
        self.index = {}
        self.next_sibling = {}
        self.handlers = {}
        for n in ast.walk(self.tree):
            if isinstance(n, (ast.stmt, ast.expr)):
                self.index[_key(n)] = n
            elif isinstance(n, ast.ExceptHandler):
                self.handlers[(n.lineno, n.col_offset)] = n
            for field in ("body", "orelse", "finalbody"):
                body = getattr(n, field, None)
                if body.__class__ is list:
                    for s, t in zip(body, body[1:]):
                        self.next_sibling[id(s)] = t
        # lines that continue a string literal; comments; quote style
        self.in_string = set()
        self.comments = []
        single = double = 0
        try:
            for tok in tokenize.generate_tokens(io.StringIO(source).readline):
                if tok.type == tokenize.COMMENT:
                    alone = not tok.line[:tok.start[1]].strip()
                    self.comments.append((tok.start[0] + (0.5 if alone else 0), tok.string))
                elif tok.end[0] > tok.start[0] and tok.type not in (tokenize.NEWLINE, tokenize.NL):
                    self.in_string.update(range(tok.start[0] + 1, tok.end[0] + 1))
                if tok.type == tokenize.STRING:
                    body = tok.string.lstrip("rRbBuUfF")
                    if not body.startswith(('"""', "'''")):
                        if body.startswith('"'):
                            double += 1
                        else:
                            single += 1
        except (tokenize.TokenError, SyntaxError):  # pragma: no cover - the source parsed
            pass
        self.quote = '"' if double > single else "'"

    def line(self, k):
        return self.lines[k - 1] if 0 < k <= len(self.lines) else ""

    def original(self, node, memo=None):
        """The user's node at ``node``'s position, if it is the same tree."""
        if getattr(node, "end_col_offset", None) is None:
            return None
        orig = self.index.get(_key(node))
        return orig if orig is not None and same(orig, node, memo) else None

    def counterpart(self, node):
        """The user's node of ``node``'s type at ``node``'s position (changed or not)."""
        if getattr(node, "end_col_offset", None) is None:
            return None
        return self.index.get(_key(node))

    def start(self, node):
        """``(line, column)`` where ``node``'s text starts (decorators included)."""
        decos = getattr(node, "decorator_list", None)
        if decos:
            return decos[0].lineno, node.col_offset
        return node.lineno, node.col_offset

    def indentation(self, k):
        text = self.line(k)
        return text[:len(text) - len(text.lstrip(" \t"))]


def _reindent(src, first, lines, old, new):
    """Lines ``first+1, ...`` (``lines[1:]``) moved from indentation ``old``
    to ``new``; lines inside a string, and lines that do not start with
    ``old`` (inside brackets), stay as they are."""
    out = [lines[0]]
    for k, text in enumerate(lines[1:], first + 1):
        if k in src.in_string or not text.strip():
            out.append(text if k in src.in_string else "")
        elif old is not None and text.startswith(old):
            out.append(new + text[len(old):])
        else:
            out.append(text)
    return out


def _header_lines(src, k0, col, end):
    """``(lines, last)``: the header of a compound statement as written, from
    column ``col`` of line ``k0`` to its colon at ``end`` (``(line, column)``),
    what follows the colon dropped unless it is a comment; ``last``: the last
    line the header owns (code after the colon owns its line, and a comment
    after that code belongs to it)."""
    k1, col1 = end
    lines = [_cut(src.line(k0), col)[1]] + src.lines[k0:k1]
    lines = [t.rstrip("\n") for t in lines]
    last = src.line(k1).rstrip("\n")
    rest = last[col1:]
    keep = last[:col1] + (rest if rest.strip().startswith("#") else "")
    if k1 == k0:
        lines[0] = keep[len(last) - len(lines[0]):]
    else:
        lines[-1] = keep
    if rest.strip() and not rest.strip().startswith("#"):
        k1 -= 1
    return lines, k1


def _header_end(src, k0, col0):
    """``(line, column after it)`` of the colon that ends the header of the
    compound statement whose keyword starts at line ``k0``, byte column ``col0``."""
    first = _cut(src.line(k0), col0)[1]
    rows = iter([first] + src.lines[k0:])
    depth = 0
    try:
        for tok in tokenize.generate_tokens(lambda: next(rows, "")):
            if tok.type == tokenize.OP:
                if tok.string in "([{":
                    depth += 1
                elif tok.string in ")]}":
                    depth -= 1
                elif tok.string == ":" and depth == 0:
                    row, col = tok.end
                    k = k0 + row - 1
                    if row == 1:  # columns of the cut first line
                        col += len(src.line(k)) - len(first)
                    return k, col
            elif tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                return None
    except (tokenize.TokenError, SyntaxError, StopIteration):
        return None
    return None


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
        super().__init__(_avoid_backslashes=_avoid_backslashes)
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


def _strip_comments(text):
    """``text`` without its comments (they were printed already)."""
    out = split_lines(text)
    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
                if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):
        return text
    for t in reversed(toks):
        row, col = t.start
        line = out[row - 1]
        kept = line[:col].rstrip()
        out[row - 1] = (kept + "\n" if line.endswith("\n") else kept) if kept else \
            ("\n" if line.endswith("\n") else "")
    return "".join(out)


def indent_unit(src, node, default="    "):
    """The indentation step of the user's function ``node`` (one level deeper
    than its ``def``), or the file's first one, or four spaces."""
    outer = src.indentation(node.lineno)
    body = node.body[0]
    if body.lineno > node.lineno:
        inner = src.indentation(body.lineno)
        if inner.startswith(outer) and len(inner) > len(outer):
            return inner[len(outer):]
    for stmt in ast.walk(src.tree):
        body = getattr(stmt, "body", None)
        if isinstance(stmt, ast.stmt) and body.__class__ is list and body \
                and isinstance(body[0], ast.stmt) and body[0].lineno > stmt.lineno:
            outer, inner = src.indentation(stmt.lineno), src.indentation(body[0].lineno)
            if inner.startswith(outer) and len(inner) > len(outer):
                return inner[len(outer):]
            break
    return default


def print_function(src, node, new, comments, unparsed, fallback):
    """The text (at column 0) of ``new``, the conversion of the user's
    function ``node`` (gast), printed as written where unchanged.

    ``unparsed`` is ``(the unparser's text of new, new as an ast tree)``; the
    result parses to the same tree as that text, or ``fallback()`` is returned.
    """
    unparsed, tree = unparsed
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    mine = [(k, t) for k, t in comments if first <= k <= node.end_lineno + 0.5]
    unit = indent_unit(src, src.counterpart(tree) or tree)
    try:
        expected = ast.parse(unparsed)
    except SyntaxError:  # pragma: no cover - the unparser's output parses
        return fallback()
    for level, exprs in enumerate((True, False)):
        printer = Printer(src=src, comments=mine, unit=unit, exprs=exprs)
        printer._gap = False
        try:
            text = printer.visit(tree)
            printer._indent = 1
            printer.emit_rest()
            text = "".join(printer._source)
            if same(ast.parse(text), expected):  # ``ast.dump``s equal, faster
                return text
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001 - a printing bug: print the plainer way
            pass
        for found in _watching:
            found.append((node.name, level + 1))
    return fallback()
