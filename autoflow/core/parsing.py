"""Reading a function's source and parsing it with positions intact."""

from __future__ import annotations

import ast
import inspect
import linecache

import gast

from .caches import Bounded
from .naming import referenced_names
from .nodes import clone, mark_user


class SourceUnavailable(Exception):
    """The function's source cannot be read or parsed; the reason is the message."""


# filename -> (the lines linecache gave, the ast module, {(first line, name): gast node})
_modules = Bounded(512)
# filename -> (the lines linecache gave, {(first line, name): gast node or None}): functions
# parsed from the lines of their own statement (`_own_statement`), in a file not parsed whole
_statements = Bounded(512)


def _from_module(code):
    """The function's node from its whole file, parsed once per file.

    Converting several functions of one file then costs one parse; the
    node keeps the file's own lines and columns. ``None`` when the file
    cannot be read or parsed (then ``inspect`` finds the source instead).

    The file is parsed with Python's own parser (``ast``, in C), and only
    the function asked for is turned into a gast tree, when first asked
    for: a long file with one converted function costs a C parse, not a
    gast conversion of every line (on a 500-line file, 4 ms instead of 40).
    """
    filename = code.co_filename
    if filename == "<string>":
        lines = _command_line_source()  # `python -c '...'`: the text is in sys.orig_argv
    elif filename in ("<timed exec>", "<timed eval>"):
        lines = _timed_cell_source(code)  # IPython `%%time`: the cell is in its history
    elif filename.startswith("<"):
        return None
    else:
        linecache.checkcache(filename)
        lines = linecache.getlines(filename)
    if not lines:
        return None
    key = (code.co_firstlineno, code.co_name)
    whole = _modules.get(filename)
    node = False
    if whole is None or whole[0] is not lines and whole[0] != lines:
        # A file not parsed whole yet: the lines of the function's own statement
        # are enough, and cost a small part of the file's parse.
        node = _own_statement(code, lines, key)
    if node is False:
        hit = _parsed(filename, lines)
        if hit is None:
            return None
        found = hit[2]
        if key not in found:
            node = _find(hit[1].body, *key)
            if isinstance(node, list):
                node = [_to_gast(n) for n in node] or None
            elif node is not None:
                node = _to_gast(node)
            found[key] = node
        node = found[key]
    if node is None:
        return None
    if isinstance(node, list):
        node = _the_lambda(node, code)
        if node is None:
            return None
    if not hasattr(node, "af_names"):
        node.af_names = frozenset(referenced_names(node))
    node = clone(node)
    node.decorator_list = []
    return node


def _own_statement(code, lines, key):
    """``code``'s function (its gast node, or the list of the lambdas on its
    line) parsed from the lines of the statement that holds it: the ``def``
    (decorators included), or, for a lambda, the top-level statement around it.
    ``False`` where that cannot be told from the lines alone (then the whole
    file is parsed).

    The statement's end is found by indentation: the first later line, not
    blank, not a comment and not a closing bracket, indented no deeper than the
    statement's first line. A line that only looks so because it is inside a
    bracket, a string or after a backslash leaves the lines before it
    unparsable, and so does a statement cut short; the function's own
    bytecode must lie within the lines parsed, and their parse must be that one
    statement, named and placed as ``code`` says.
    """
    filename = code.co_filename
    hit = _statements.get(filename)
    if hit is None or hit[0] is not lines and hit[0] != lines:
        hit = _statements[filename] = (lines, {})
    found = hit[1]
    if key in found:
        return found[key]
    found[key] = node = False
    first, name = key
    if not 1 <= first <= len(lines):
        return node
    is_lambda = name == "<lambda>"
    start = first
    if is_lambda:  # the top-level statement around it (decorators included)
        while start > 1 and not _opens_statement(lines[start - 1], 0):
            start -= 1
        while start > 1 and _opens_statement(lines[start - 2], 0) \
                and lines[start - 2].startswith("@"):
            start -= 1
    width = _indent(lines[start - 1])
    end = _statement_end(lines, start, width)
    last = _last_line(code)
    if width is None or end is None or last is None or not start <= first <= last <= end:
        return node
    try:
        body = _parse_lines("".join(lines[start - 1:end]), start)
    except (SyntaxError, ValueError):
        return node
    if len(body) != 1:
        return node
    stmt = body[0]
    if is_lambda:
        lambdas = _find(body, first, name)
        node = [_to_gast(n) for n in lambdas] if isinstance(lambdas, list) else False
    elif (isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name
            and min([stmt.lineno] + [d.lineno for d in stmt.decorator_list]) == first):
        node = _to_gast(stmt)
    found[key] = node
    return node


def _parse_lines(source, first):
    """The ``ast`` statements of ``source``, lines of a file from line ``first``,
    with the file's line numbers and columns: indented lines are parsed inside
    an ``if 1:`` (no dedent, which also breaks on unindented string lines).
    Raises ``SyntaxError`` (or ``ValueError``) where they do not parse."""
    prefix = "if 1:\n" if source[:1] in (" ", "\t") else ""
    module = ast.parse(prefix + source)
    body = module.body[0].body if prefix else module.body
    for stmt in body:
        ast.increment_lineno(stmt, first - 1 - (1 if prefix else 0))
    return body


# How a line that continues a statement may start (not a statement's first line).
_CONTINUING = ("#", ")", "]", "}")


def _indent(line):
    """The width of ``line``'s indentation (None when it holds a tab)."""
    text = line.lstrip()
    ws = line[:len(line) - len(text)]
    return None if "\t" in ws else len(ws)


def _opens_statement(line, width):
    """Can ``line`` start a statement indented ``width`` (judged by its text only)?"""
    text = line.strip()
    return bool(text) and not text.startswith(_CONTINUING) and _indent(line) == width


def _statement_end(lines, start, width):
    """The last line of the statement that starts at line ``start`` (1-based),
    indented ``width``: decorators, its header, then the lines indented deeper
    (blank lines, comments and closing brackets whatever their indentation).
    None where a tab indents a line."""
    header = not lines[start - 1].lstrip().startswith("@")
    for i in range(start + 1, len(lines) + 1):
        line = lines[i - 1]
        text = line.strip()
        if not text or text.startswith(_CONTINUING):
            continue
        indent = _indent(line)
        if indent is None:
            return None
        if indent > width:
            continue
        if not header and indent == width:  # after decorators: the `def` (or another)
            header = not text.startswith("@")
            continue
        return i - 1
    return len(lines)


def _last_line(code):
    """The last line that ``code`` or a code object nested in it has bytecode for."""
    last = None
    todo = [code]
    while todo:
        c = todo.pop()
        for *_, line in c.co_lines():
            if line is not None and (last is None or line > last):
                last = line
        todo.extend(k for k in c.co_consts if hasattr(k, "co_lines"))
    return last


def _parsed(filename, lines):
    """``(lines, ast module, {(first line, name): gast node})`` for a file, parsed
    once for these lines (``None`` if they do not parse)."""
    hit = _modules.get(filename)
    if hit is None or hit[0] is not lines and hit[0] != lines:
        try:
            tree = ast.parse("".join(lines))
        except (SyntaxError, ValueError):
            return None
        hit = _modules[filename] = (lines, tree, {})
    return hit


def module_ast(filename, lines):
    """The ``ast`` module of a file's ``lines``, parsed once (shared with the
    conversion); ``None`` if they do not parse."""
    hit = _parsed(filename, lines)
    return None if hit is None else hit[1]


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _find(body, line, name):
    """The ``def`` named ``name`` whose first line (decorators included) is
    ``line``, or the list of lambdas that start on ``line``; looked for only in
    the statements whose lines hold ``line``, not by walking the whole file."""
    for stmt in body:
        if stmt.end_lineno < line:
            continue
        decorators = getattr(stmt, "decorator_list", ())
        first = min([stmt.lineno] + [d.lineno for d in decorators])
        if first > line:
            break
        if (first == line and name == getattr(stmt, "name", None)
                and isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))):
            return stmt
        for field in _BLOCKS:
            inner = getattr(stmt, field, None)
            if not inner:
                continue
            if field in ("handlers", "cases"):  # except clauses, match cases: their bodies
                for part in inner:
                    hit = _find(part.body, line, name)
                    if hit is not None:
                        return hit
                continue
            hit = _find(inner, line, name)
            if hit is not None:
                return hit
        if name == "<lambda>":  # in an expression of this statement (not of a nested one)
            lambdas = [n for n in ast.walk(stmt) if isinstance(n, ast.Lambda) and n.lineno == line]
            if lambdas:
                return lambdas
    return None


def _to_gast(node):
    """One ``ast`` function or lambda of a parsed file as gast, marked as user code."""
    out = gast.ast_to_gast(node)
    mark_user(out)  # copies keep the marks
    return out


def _command_line_source():
    """The program text of ``python -c TEXT``, as lines (empty when not run so)."""
    import sys

    argv = getattr(sys, "orig_argv", [])
    if "-c" in argv[:-1] and sys.argv[:1] == ["-c"]:
        text = argv[argv.index("-c") + 1]
        return [line + "\n" for line in text.split("\n")]
    return []


def _timed_cell_source(code):
    """The body of the IPython ``%%time`` cell that defined ``code``, as lines."""
    import sys

    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return []
    manager = getattr(shell, "history_manager", None)
    history = getattr(manager, "input_hist_raw", None) or shell.user_ns.get("_ih") or []
    for text in reversed(history[-20:]):
        first, _, body = text.partition("\n")
        if first.strip().startswith("%%time"):
            lines = [line + "\n" for line in body.split("\n")]
            if len(lines) >= code.co_firstlineno and (
                    code.co_name in lines[code.co_firstlineno - 1] or "lambda" in
                    lines[code.co_firstlineno - 1]):
                return lines
    return []


def _the_lambda(candidates, code):
    """Which of the lambdas on one line compiled to ``code``, as a ``def``.

    Told apart by their parameter names, then by the source positions of
    ``code``'s instructions (the innermost lambda whose body holds them).
    """
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    matches = [c for c in candidates if tuple(a.id for a in c.args.posonlyargs + c.args.args
                                              + c.args.kwonlyargs) == names]
    spots = [(p[0], p[2]) for p in code.co_positions()
             if p[0] is not None and p[2] is not None and p[3] is not None and p[3] > p[2]]
    if len(matches) > 1 and spots:
        def holds(c):
            b = c.body
            return all((b.lineno, b.col_offset) <= spot <= (b.end_lineno, b.end_col_offset)
                       for spot in spots[:1])
        matches = sorted((c for c in matches if holds(c)),
                         key=lambda c: (c.body.end_lineno - c.body.lineno,
                                        c.body.end_col_offset - c.body.col_offset))[:1]
    if len(matches) != 1:
        return None
    lam = matches[0]
    node = gast.FunctionDef(name="<lambda>", args=clone(lam.args), body=[gast.Return(
        value=clone(lam.body))], decorator_list=[], returns=None, type_comment=None,
        type_params=[])
    gast.copy_location(node, lam)
    gast.copy_location(node.body[0], lam.body)
    node.af_user = True
    node.body[0].af_user = True
    node.af_lambda = True
    return node


def _why_no_source(code) -> str:
    """The true reason ``code``'s source cannot be read, and what to do."""
    name = code.co_filename
    if name == "<stdin>":
        return ("it was typed at the interactive prompt or read from standard input, whose "
                "source Python does not keep; put it in a file and import it")
    if name == "<string>":
        return ("it was made by `exec`/`eval` or `python -c`, whose source Python does not "
                "keep; put it in a file, or exec it from one (compile(text, path, 'exec') "
                "with its lines registered in `linecache`)")
    if name in ("<timed exec>", "<timed eval>"):
        return ("it was defined in an IPython `%%time`/`%time` cell, whose source IPython "
                "does not keep; define it in a cell of its own")
    if name.startswith("<ipython-input-") or "ipykernel" in name:
        return ("it was defined in a notebook cell whose source is no longer in IPython's "
                "cache; run that cell again")
    if name.startswith("<"):
        return f"it was compiled from `{name}`, which is not a file; define it in a file"
    import os
    if not os.path.exists(name):
        return f"its file `{name}` is not there any more"
    return f"its source could not be read from `{name}`"


def parse_function(fn):
    """Return ``(FunctionDef node, filename, first line)`` for ``fn``.

    Line numbers in the node are those of the file; column offsets too. The
    node has its decorators removed: the converted function is built from
    the bare ``def`` (decorators were applied to the original already).
    Every node is marked as user code (``af_user``), and ``node.af_names``
    holds every identifier the function references (decorators included).
    """
    code = getattr(fn, "__code__", None)
    if code is None:
        raise SourceUnavailable("it is not a Python function")
    node = _from_module(code)
    if node is not None:
        return node, code.co_filename, code.co_firstlineno
    if code.co_name == "<lambda>":
        raise SourceUnavailable("it is a lambda whose source autoflow cannot single out "
                                "(not in a file, or several alike on one line)")
    try:
        # The code object, not the function: `functools.wraps` sets `__wrapped__`,
        # which inspect would follow to the wrapped function's source.
        lines, first = inspect.getsourcelines(code)
    except (OSError, TypeError):
        raise SourceUnavailable(_why_no_source(code)) from None
    try:
        body = _parse_lines("".join(lines), first)
    except SyntaxError as e:
        raise SourceUnavailable(f"its source could not be parsed ({e.msg})") from None
    node = body[0] if body else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name != code.co_name:
        raise SourceUnavailable("its source does not start with its `def` "
                                "(defined by exec, or the file changed since it was imported)")
    node = gast.ast_to_gast(node)
    node.decorator_list = []
    mark_user(node)
    node.af_names = frozenset(referenced_names(node))
    return node, code.co_filename, first
