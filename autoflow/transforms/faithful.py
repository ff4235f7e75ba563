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

from .source_text import _key, same, split_lines
from .printer import Printer


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
