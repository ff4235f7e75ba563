"""Converting every function of a module's source text (the command line's job).

Nothing is imported or run: the text is parsed, each top-level function and
method is converted as ``autoflow.convert`` would convert it, and the module
is printed back. Functions whose control flow does not change are printed as
they were; if any function changed, ``import autoflow.runtime as af`` is
added after the module's docstring and ``__future__`` imports.
"""

from __future__ import annotations

import ast
import builtins
import io
import os
import re
import sys
import tokenize

import gast

from ..core.deep import paused_gc
from ..core.naming import Namer, referenced_names
from ..core import nodes
from ..core.nodes import clone, mark_user
from . import faithful, pipeline
from .source_text import split_lines
from .context import Context
from .util import marked_as_is


def convert_copy(node, namer, alias, shadowed, filename, imports=(frozenset(), frozenset())):
    """Convert a copy of the user's ``node`` (its decorators kept on the copy)."""
    ctx = Context(namer=namer, af=alias, shadowed=shadowed, filename=filename,
                  library_names=imports[0], user_names=imports[1])
    new = clone(node)
    new.decorator_list = []
    mark_user(new)
    pipeline.run(new, ctx)
    new.decorator_list = node.decorator_list
    return new


def module_shadowed(tree, reserved):
    """The builtins that the module's code rebinds somewhere (they are not converted)."""
    bound = set()
    for n in gast.walk(tree):
        if isinstance(n, gast.Name) and isinstance(n.ctx, (gast.Store, gast.Param)):
            bound.add(n.id)
        elif isinstance(n, (gast.FunctionDef, gast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, gast.alias):
            bound.add((n.asname or n.name).split(".")[0])
    return frozenset(n for n in reserved & bound if hasattr(builtins, n))


def import_kinds(tree, filename):
    """``(library names, user names)`` bound by the module's own imports.

    The file is read, never run, so a module counts as the user's when it is
    imported relatively or sits next to the file (``helpers.py`` or a
    ``helpers/`` package); any other import is taken for a library.
    """
    here = os.path.dirname(os.path.abspath(filename)) if not filename.startswith("<") else None

    def local(module):
        top = module.split(".")[0]
        return here is not None and (os.path.isfile(os.path.join(here, top + ".py"))
                                     or os.path.isdir(os.path.join(here, top)))

    library, user = set(), set()
    todo = list(tree.body)
    while todo:
        stmt = todo.pop()
        if isinstance(stmt, gast.Import):
            for a in stmt.names:
                (user if local(a.name) else library).add((a.asname or a.name).split(".")[0])
        elif isinstance(stmt, gast.ImportFrom):
            mine = stmt.level > 0 or local(stmt.module or "")
            for a in stmt.names:
                if a.name != "*":
                    (user if mine else library).add(a.asname or a.name)
        elif not isinstance(stmt, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                todo += [s for s in getattr(stmt, field, None) or [] if isinstance(s, gast.AST)]
    return frozenset(library), frozenset(user)


def _is_generator(node):
    from .util import walk_local
    return any(isinstance(n, (gast.Yield, gast.YieldFrom, gast.Await)) for n in walk_local(node))


def convert_module(source: str, filename: str = "<string>", only: str | None = None,
                   faithful: bool = True):
    """Return ``(converted source, names of converted functions)``.

    Raises ``SyntaxError`` if ``source`` does not parse. With ``only``, the
    result is just that function (``Class.method`` names a method); a
    ``LookupError`` says when there is no such function. ``faithful``: print
    unchanged code inside converted functions as written (the command line's
    printer); False: the unparser's text with the comments put back.
    """
    # The tree walks recurse once per nesting level, a few frames a level:
    # Python compiles a 250-term `a + a + ...` that the default limit would
    # refuse here. (Frames of Python functions do not use the C stack.)
    limit = sys.getrecursionlimit()
    if limit < 20000:
        sys.setrecursionlimit(20000)
    try:
        with paused_gc():  # as autoflow.convert does
            return _convert_module(source, filename, only, faithful)
    finally:
        sys.setrecursionlimit(limit)


def runtime_import(tree):
    """The name a module-level ``import autoflow.runtime as NAME`` binds (the
    module is autoflow's own output), or None."""
    for stmt in tree.body:
        if isinstance(stmt, gast.Import):
            for a in stmt.names:
                if a.name == "autoflow.runtime" and a.asname:
                    return a.asname
    return None


def _uses(node, name):
    return any(isinstance(n, gast.Name) and n.id == name for n in gast.walk(node))


def indent_code(text, indent):
    """``text`` (Python source at column 0) indented by ``indent``, except the
    lines that continue a string literal (a docstring's later lines are part
    of its value)."""
    inside = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.end[0] > tok.start[0] and tok.type not in (tokenize.NEWLINE, tokenize.NL):
                inside.update(range(tok.start[0] + 1, tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):  # pragma: no cover - unparser output parses
        pass
    return "".join(indent + line if line.strip() and k not in inside else line
                   for k, line in enumerate(split_lines(text), 1))


_MARK = "__autoflow_comment_{}__"
_MARKED = re.compile(r"^([ \t]*)(?:[rbuRBU]*)(?:\"\"\"|\'\'\'|\"|\')__autoflow_comment_(\d+)__"
                     r"(?:\"\"\"|\'\'\'|\"|\')[ \t]*$")


def module_comments(source):
    """``[(key, text)]`` for every comment of ``source``: a comment on a line of
    its own has key ``line + 0.5`` (it annotates what follows), one after code
    key ``line`` (it annotates that line)."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                alone = not tok.line[:tok.start[1]].strip()
                out.append((tok.start[0] + (0.5 if alone else 0), tok.string))
    except (tokenize.TokenError, SyntaxError):
        return []
    return out


def with_comments(node, new, comments):
    """The source of ``new`` (the conversion of the user's function ``node``),
    with the user's comments inside ``node`` kept: each is printed before the
    first converted statement that comes from the line it annotates or a later
    one (comments after code go on a line of their own before it)."""
    mine = [(k, t) for k, t in comments if node.lineno < k <= node.end_lineno + 0.5]
    if not mine:
        return pipeline.to_source(new)
    pending = list(mine)
    texts = []

    def marker(group):
        texts.append(group)
        return gast.Expr(value=gast.Constant(value=_MARK.format(len(texts) - 1), kind=None))

    def mark(body, in_def):
        out = []
        for k, stmt in enumerate(body):
            line = getattr(stmt, "lineno", None)
            docstring = (k == 0 and in_def and isinstance(stmt, gast.Expr)
                         and isinstance(stmt.value, gast.Constant)
                         and isinstance(stmt.value.value, str))
            if line is not None and not docstring:
                due = [c for c in pending if c[0] <= line]
                if due:
                    for c in due:
                        pending.remove(c)
                    out.append(marker([t for _, t in due]))
            out.append(stmt)
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, field, None)
                if inner:
                    setattr(stmt, field, mark(inner, field == "body" and isinstance(
                        stmt, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef))))
            for handler in getattr(stmt, "handlers", None) or []:
                handler.body = mark(handler.body, False)
            for case in getattr(stmt, "cases", None) or []:
                case.body = mark(case.body, False)
        return out

    new.body = mark(new.body, True)
    if pending:  # after the last statement
        new.body.append(marker([t for _, t in pending]))
    lines, printed = [], pipeline.to_source(new).splitlines(True)
    k = 0
    while k < len(printed):
        m = _MARKED.match(printed[k])
        if m is None:
            lines.append(printed[k])
        else:
            if k + 1 < len(printed) and not printed[k + 1].strip():
                lines.append(printed[k + 1])  # a blank line goes before the comments
                k += 1
            lines += [m.group(1) + t + "\n" for t in texts[int(m.group(2))]]
        k += 1
    return "".join(lines)


def _convert_module(source, filename, only, as_written):
    tree = gast.parse(source)
    reserved = referenced_names(tree)
    namer = Namer(reserved)
    # Converting autoflow's own output again changes nothing: its runtime
    # import is reused, and the functions that call the runtime are done.
    existing = runtime_import(tree)
    alias = existing or namer.reusable("af")
    shadowed = module_shadowed(tree, reserved)
    imports = import_kinds(tree, filename)
    changed = []
    found = None

    def visit_body(body, prefix):
        nonlocal found
        for node in body:
            if isinstance(node, gast.FunctionDef) and (marked_as_is(node)
                                                       or _is_generator(node)):
                if only == prefix + node.name:
                    found = node
            elif isinstance(node, gast.FunctionDef) and existing and _uses(node, existing):
                if only == prefix + node.name:
                    found = node
            elif isinstance(node, gast.FunctionDef):
                qual = prefix + node.name
                # A namer per function: editing one function never renames
                # the generated names of another.
                new = convert_copy(node, Namer(reserved), alias, shadowed, filename, imports)
                new_ast = nodes.to_ast(new)  # a copy: `new` is used again below
                unparsed = ast.unparse(new_ast)
                if unparsed != pipeline.to_source(node):
                    changed.append(qual)
                    edits.append((node, new, (unparsed, new_ast)))
                    if only == qual:
                        found = new
                elif only == qual:
                    found = node
            elif isinstance(node, gast.ClassDef):
                visit_body(node.body, prefix + node.name + ".")
            elif isinstance(node, (gast.If, gast.Try, gast.With)):
                # `if TYPE_CHECKING:`, `try: import x ... except ImportError:`
                # and the like define functions and classes too.
                for field in ("body", "orelse", "finalbody"):
                    visit_body(getattr(node, field, None) or [], prefix)
                for handler in getattr(node, "handlers", None) or []:
                    visit_body(handler.body, prefix)

    edits = []
    visit_body(tree.body, "")
    header = f"import autoflow.runtime as {alias}\n"
    src = None

    def render(node, new, unparsed):
        # The converted function, its unchanged code printed as written.
        nonlocal src
        if not as_written:
            return with_comments(node, new, comments)
        if src is None:
            src = faithful.Source(source)
        return faithful.print_function(src, node, new, comments, unparsed,
                                       lambda: with_comments(node, new, comments))

    comments = module_comments(source) if (only is None and changed) or only in changed else []
    if only is not None:
        if found is None:
            raise LookupError(only)
        if only not in changed:
            return pipeline.to_source(found) + "\n", changed
        edit = next(e for e in edits if e[1] is found)
        text = render(*edit)
        if text.endswith("\n"):
            text = text[:-1]
        return header + "\n\n" + text + "\n", changed
    if not changed:
        return source, changed
    # Splice the converted functions into the original text, so comments and
    # layout elsewhere stay exactly as they were.
    lines = split_lines(source)  # numbered as Python numbers them
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    for node, new, unparsed in sorted(edits, key=lambda e: -e[0].lineno):
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        line = lines[first - 1]
        indent = line[:len(line) - len(line.lstrip(" \t"))]
        text = render(node, new, unparsed)
        text = indent_code(text if text.endswith("\n") else text + "\n", indent)
        lines[first - 1:node.end_lineno] = [text]
    insert_at = 0
    # Keep a shebang and an encoding declaration on the first two lines.
    while insert_at < min(2, len(lines)) and lines[insert_at].startswith("#"):
        insert_at += 1
    for stmt in tree.body:
        is_doc = (stmt is tree.body[0] and isinstance(stmt, gast.Expr)
                  and isinstance(stmt.value, gast.Constant) and isinstance(stmt.value.value, str))
        is_future = isinstance(stmt, gast.ImportFrom) and stmt.module == "__future__"
        if not (is_doc or is_future):
            break
        insert_at = max(insert_at, stmt.end_lineno)
    if existing:
        return "".join(lines), changed
    # Line numbers below insert_at are untouched by the splices (functions come later).
    lines.insert(insert_at, ("\n" if insert_at else "") + header)
    return "".join(lines), changed
