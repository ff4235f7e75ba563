"""``autoflow check``: what each control-flow statement becomes, without running anything.

The source is parsed and every top-level function and method is converted
exactly as ``autoflow convert`` converts it (``transforms.pipeline``); the
generated AST is then read back:

* ``af.if_stmt(test, t, f, operands, names)``, ``af.while_stmt(test, body,
  init, names)``, ``af.for_stmt(iter, body, init, names[, test=...])`` and
  ``af.if_exp(...)`` are stamped with the line and column of the statement
  they replace and carry the names of the variables they carry;
* an ``if``/``while``/``for`` still present in a converted function is one
  the rewriter had to leave as Python (a ``return`` inside ``try``/``with``,
  for example): it works while its condition is concrete and fails once it
  is traced.

Statements the rewriter generates itself (the ``if not broke:`` guards that
lower ``break``/``continue``/``return``) test only flags it named, which the
user's code never references; they are left out of the report.

Nothing here imports JAX.
"""

from __future__ import annotations

import warnings

import gast

from .core.deep import run_deep
from .core.naming import Namer, referenced_names
from .transforms.module import convert_copy, import_kinds, module_shadowed
from .transforms.util import marked_as_is, walk_local
from ._check_reader import (ATTR_OF_KIND, CONVERTS, FAILS, FALLBACK, INFO, INTERNAL, OPERATORS, PYTHON, _MATCH,
                            Finding, _Reader)

# The public names (``Finding`` and its statuses, read by ``explain`` and the command
# line, are ``_check_reader``'s).
__all__ = ["ATTR_OF_KIND", "CONVERTS", "FAILING_CODES", "FAILS", "FALLBACK", "Finding", "INFO", "INTERNAL",
           "OPERATORS", "PYTHON", "check_function", "check_source", "convert_for_check", "parse", "report",
           "summary"]


def _kind_of_function(node):
    """Why a top-level function is not converted, or None."""
    if isinstance(node, gast.AsyncFunctionDef):
        return "`async def` functions are not converted; they run as written"
    for n in walk_local(node):
        if isinstance(n, (gast.Yield, gast.YieldFrom)):
            return "generator functions are not converted; they run as written"
    if marked_as_is(node):
        return "marked `do_not_convert`; it runs as written"
    return None


def _has_control_flow(node):
    kinds = (gast.If, gast.While, gast.For, gast.AsyncFor, gast.IfExp) + (
        (_MATCH,) if _MATCH is not None else ())
    return any(isinstance(n, kinds) for n in gast.walk(node))


def convert_for_check(fn_node, namer, alias, shadowed, filename,
                      imports=(frozenset(), frozenset())):
    """Convert a copy of ``fn_node`` as ``convert_module``/``autoflow.convert`` do."""
    new = convert_copy(fn_node, namer, alias, shadowed, filename, imports)
    new.decorator_list = []
    return new


def check_function(fn_node, filename, qualname, *, reserved=None, namer=None, alias=None,
                   shadowed=frozenset(), imports=(frozenset(), frozenset())):
    """Findings for one gast ``FunctionDef`` (positions are those of ``fn_node``)."""
    why_not = _kind_of_function(fn_node)
    if why_not is not None:
        if not _has_control_flow(fn_node):
            return []
        return [Finding(filename, qualname, fn_node.lineno, fn_node.col_offset, "function",
                        INFO, note=why_not)]
    if reserved is None:
        reserved = referenced_names(fn_node)
    if namer is None:
        namer = Namer(reserved)
    if alias is None:
        alias = namer.reusable("af")
    converted = convert_for_check(fn_node, namer, alias, shadowed, filename, imports)
    reader = _Reader(fn_node, converted, alias, reserved, filename, qualname)
    reader.read_block(converted.body)
    return reader.findings()


# `autoflow check` warnings (autoflow.pitfalls) whose code says the program fails under
# jit with traced arguments; the others are about speed or surprises.
def _failing_codes():
    from .pitfalls import FAILING

    return FAILING


FAILING_CODES = _failing_codes()


class _TracedFacts:
    """What fails when a function is traced (``autoflow.traced``), read from the
    standard library's AST of the same source, for the findings of each function."""

    def __init__(self, source, static=None):
        import ast

        from ._pitfall_reading import _Module, implicit_entries
        from ._check_more import module_containers, plain_classes

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(source)
            module = _Module(tree)
        except (SyntaxError, ValueError, RecursionError):
            self.nodes, self.static, self.traced, self.plain = {}, {}, set(), set()
            self.module = set()
            return
        self.nodes = {(n.lineno, n.name): n for n in ast.walk(tree)
                      if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.static = {id(fn): info[1] for fn, info in module.jitted.items()}
        self.extra = static or {}
        # the functions read as traced: the jitted ones and those they call, or every
        # function of a module that jits none (as pitfalls reads them)
        self.traced = {id(fn) for fn in module.jitted} | {
            id(fn) for fn in implicit_entries(module, static)}
        self.plain = plain_classes(tree)
        self.module = module_containers(tree)

    def apply(self, node, found, filename, qual):
        """``found`` (the findings of gast function ``node``) with the statements that
        fail when traced marked ``FAILS``, and their reasons."""
        from . import traced
        from ._check_more import problems as more_problems

        fn = self.nodes.get((node.lineno, node.name))
        if fn is None or isinstance(fn, __import__("ast").AsyncFunctionDef) \
                or id(fn) not in self.traced:
            return found
        static = set(self.static.get(id(fn), ())) | set(self.extra.get(fn.name, ()))
        if found and found[0].kind == "function":
            if "do_not_convert" not in found[0].note:
                return found
            problems = _do_not_convert_problems(fn, static)
            becomes = "python"
        else:
            problems = traced.problems(fn, static) + more_problems(fn, static, self.plain,
                                                                   self.module)
            becomes = None
        if not problems:
            return found
        by_key = {(f.line, f.col, f.kind): f for f in found}
        for p in problems:
            f = by_key.get((p.line, p.col, p.kind))
            if f is None:
                f = Finding(filename, qual, p.line, p.col, p.kind, FAILS, reason=p.reason,
                            becomes=becomes or {"if": "lax.cond", "ternary": "lax.cond",
                                                "while": "lax.while_loop"}.get(p.kind, "lax.fori_loop"))
                found.append(f)
            elif f.ok and f.status != INFO:
                f.status, f.reason = FAILS, p.reason
        return sorted(found, key=lambda f: (f.line, f.col, f.kind))


def parse(source: str):
    """``gast.parse`` without the parser's warnings (invalid escapes...) on stderr."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gast.parse(source)


def check_source(source: str, filename: str = "<string>", only: str | None = None, *,
                 keep_going: bool = True, static=None):
    """Findings for every top-level function and method of ``source`` (see
    ``_check_source``), with a deep stack where it nests deeply (an ``elif`` chain of
    hundreds of branches, which Python compiles and ``convert`` converts)."""
    return run_deep(_check_source, source, filename, only, keep_going=keep_going,
                    static=static)


def _check_source(source: str, filename: str = "<string>", only: str | None = None, *,
                  keep_going: bool = True, static=None):
    """Findings for every top-level function and method of ``source``.

    Raises ``SyntaxError`` when it does not parse, and ``LookupError`` when
    ``only`` (a ``Class.method``-style name) names no function. With
    ``keep_going``, an unexpected error converting one function (an autoflow
    bug) becomes an ``INTERNAL`` finding for that function instead.

    A statement "fails when traced" as ``autoflow.jit`` with traced arguments would
    first trace it (``autoflow.traced``): every parameter traced unless a ``jit`` in
    the module marks it static, or ``static`` (function name -> parameter names) does.
    """
    tree = parse(source)
    reserved = referenced_names(tree)
    alias = Namer(reserved).reusable("af")
    shadowed = module_shadowed(tree, reserved)
    imports = import_kinds(tree, filename)
    out = []
    seen = False
    traced_facts = _TracedFacts(source, static)

    def visit(body, prefix):
        nonlocal seen
        for node in body:
            if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef)):
                qual = prefix + node.name
                if only is not None and qual != only:
                    continue
                seen = True
                try:
                    # A namer per function, as `convert_module` does, so the
                    # flags reported (`broke`...) are the names convert prints.
                    found = check_function(node, filename, qual, reserved=reserved,
                                           alias=alias, shadowed=shadowed, imports=imports)
                    out.extend(traced_facts.apply(node, found, filename, qual))
                except Exception as e:  # noqa: BLE001 - reported per function
                    if not keep_going:
                        raise
                    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                    out.append(Finding(filename, qual, node.lineno, node.col_offset, "function",
                                       INTERNAL, reason=f"{type(e).__name__}: {first}".rstrip(": ")))
            elif isinstance(node, gast.ClassDef):
                visit(node.body, prefix + node.name + ".")

    visit(tree.body, "")
    if only is not None and not seen:
        raise LookupError(only)
    return out


def summary(findings, filename) -> str:
    stmts = [f for f in findings if f.kind != "function"]
    if not stmts and not findings:
        return f"{filename}: no control flow to convert"
    counts = [(sum(f.status == CONVERTS for f in stmts), "convert", "converts"),
              (sum(f.status == PYTHON for f in stmts), "run as Python", "runs as Python"),
              (sum(f.status == FALLBACK for f in stmts), "cannot convert", "cannot convert"),
              (sum(f.status == FAILS for f in stmts), "fail when traced", "fails when traced")]
    parts = [f"{n} {one if n == 1 else many}" for n, many, one in counts
             if n or many in ("convert", "cannot convert")]
    noun = "statement" if len(stmts) == 1 else "statements"
    text = f"{filename}: {len(stmts)} control-flow {noun}: " + ", ".join(parts)
    internal = sum(f.status == INTERNAL for f in findings)
    if internal:
        text += f"; {internal} function{'s' if internal > 1 else ''} not checked (autoflow bug)"
    return text


def report(findings, filename, warnings=()) -> str:
    """The text ``autoflow check`` prints for one file: each statement and each warning
    (``autoflow.pitfalls``) in line order, a warning after the statement on its line,
    then the summary."""
    items = [((f.line, 0, f.col), f.format()) for f in findings]
    items += [((w.line, 1, w.col), w.format()) for w in warnings]
    lines = [text for _, text in sorted(items, key=lambda item: item[0])]
    lines.append(summary(findings, filename))
    return "\n".join(lines) + "\n"


def _do_not_convert_problems(fn, static=()) -> list:
    """``if``/``while`` statements on traced values in a function that runs as written."""
    import ast

    from . import traced
    from ._pitfall_reading import _first_mentioned

    names = traced.traced_names(fn, frozenset(static))
    out = []
    for n in traced._local_walk(fn.body):
        if isinstance(n, (ast.If, ast.While)) and traced.mentions(n.test, names):
            out.append(traced.Problem(
                n.lineno, n.col_offset, traced._stmt_kind(n),
                f"`{_first_mentioned(n.test, names) or 'its condition'}` is traced when the "
                "function is called with traced values, and this function runs as written "
                "(not converted): Python needs the condition's truth value"))
    return out
