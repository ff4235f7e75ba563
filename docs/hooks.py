"""mkdocs hooks (mkdocs.yml `hooks:`): pages made from files of the repository when
the site is built, so that they cannot drift from them.

* `<!-- gallery -->` (docs/gallery.md): every golden fixture, `tests/fixtures/NAME.py`
  and its expected conversion `NAME.after.py`, function by function, side by side.
  `tests/test_fixtures.py` checks that autoflow converts each fixture to exactly that
  text and that both run to the same results.
* `<!-- include: PATH -->`: the Markdown file PATH (from the repository root), its
  headings one level down, so that it sits under the including page's heading.
* After each python block marked `<!-- raises: ... -->` (a failing example), the message
  it raises, run when the site is built (`raised_messages`): the pages show what the
  program really raises, never a copy that could drift.
"""

from __future__ import annotations

import ast
import html
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"

# Gallery sections: fixture-name prefix -> (section title, what it shows).
GROUPS = [
    ("if", "`if`, `elif`, `else`", "A traced condition becomes `af.if_stmt` (a `lax.cond` or "
     "a select); a concrete one runs as Python."),
    ("elif", None, None),
    ("nested_if", None, None),
    ("ternary", "`a if c else b`, `and`, `or`, `not`, comparisons", ""),
    ("and_or", None, None),
    ("chained", None, None),
    ("walrus", None, None),
    ("while", "`while`", "A loop whose test is traced becomes `af.while_stmt` "
     "(a `lax.while_loop`) with explicit carries."),
    ("for", "`for`", "`range`, arrays, `enumerate`, `zip`, `reversed`: a static trip count "
     "is a scan, a traced one a while loop."),
    ("loop", None, None),
    ("list", None, None),
    ("break", "`break` and `continue`", "Lowered to flags before the control-flow pass; an "
     "`if c: break` that opens the body joins the loop's test."),
    ("continue", None, None),
    ("return", "`return` inside branches and loops", "Lowered to a `returned` flag and a "
     "return value carried to the end of the function."),
    ("match", "`match`", "Value patterns become an `if`/`elif` chain."),
    ("dtype", "Types and containers", "Dtypes promoted across branches and iterations; "
     "pytrees (tuples, lists, dicts) carried."),
    ("pytree", None, None),
    ("builtins", "Builtins and effects", "`max`/`min`/`sum`/`int`/`float`..., and `print` "
     "with formatting made when the compiled code runs."),
    ("print", None, None),
    ("format", "Output people keep", "`autoflow convert` keeps comments, formatting and "
     "indentation of what it does not convert."),
    ("comments", None, None),
    ("indent", None, None),
]


def _group(stem: str) -> int:
    best = None
    for i, (prefix, _, _) in enumerate(GROUPS):
        if stem.startswith(prefix) and (best is None or len(prefix) > len(GROUPS[best][0])):
            best = i
    if best is None:  # a fixture of a new kind: listed under "Other" until GROUPS names it
        return len(GROUPS)
    while GROUPS[best][1] is None:  # a prefix that joins the section above it
        best -= 1
    return best


def _functions(source: str) -> dict[str, str]:
    """Top-level functions (and classes) of a module, by name, as written."""
    tree = ast.parse(source)
    lines = source.splitlines()
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            out[node.name] = "\n".join(lines[start - 1:node.end_lineno])
    return out


def _code(source: str) -> str:
    # a fenced block inside HTML: the Markdown-in-HTML extension renders it
    return f"\n```python\n{source}\n```\n"


def gallery() -> str:
    sections: dict[int, list[str]] = {}
    for before in sorted(FIXTURES.glob("*.py")):
        if before.name.endswith(".after.py"):
            continue
        after = before.with_name(before.stem + ".after.py")
        if not after.exists():
            continue
        ins, outs = _functions(before.read_text()), _functions(after.read_text())
        parts = [f"### `{before.stem}`\n"]
        doc = ast.get_docstring(ast.parse(before.read_text()))
        if doc:
            parts.append(html.escape(doc.strip().splitlines()[0]) + "\n")
        for name, src in ins.items():
            converted = outs.get(name)
            if converted is None or converted == src:
                continue  # nothing to convert in it
            parts.append('<div class="side-by-side" markdown>\n<div markdown>\n'
                         + _code(src) + '\n</div>\n<div markdown>\n' + _code(converted)
                         + '\n</div>\n</div>\n')
        if len(parts) > 1 + bool(doc):
            sections.setdefault(_group(before.stem), []).append("\n".join(parts))
    out = []
    for i in sorted(sections):
        _, title, blurb = GROUPS[i] if i < len(GROUPS) else ("", "Other", "")
        out.append(f"## {title}\n\n{blurb}\n\n" + "\n".join(sections[i]))
    return "\n".join(out)


def include(path: str) -> str:
    target = (ROOT / path).resolve()
    if not target.is_file() or ROOT not in target.parents:
        raise FileNotFoundError(f"docs: include of {path}: no such file in the repository")
    text = target.read_text()
    out, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and re.match(r"#{1,5} ", line):
            line = "#" + line
        out.append(line)
    return "\n".join(out) + "\n"


# -- the messages of a page's failing examples, as they are raised ---------------------

_MARK = re.compile(r"^\s*<!--\s*(skip|raises|source-of|fix)\s*:\s*(.*?)\s*-->\s*$")


def _python_blocks(lines):
    """``(first line, last line, code, marks)`` of each fenced python block (0-based)."""
    out, marks, i = [], {}, 0
    while i < len(lines):
        line = lines[i]
        mark = _MARK.match(line)
        if mark:
            marks[mark.group(1)] = mark.group(2)
        elif line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            if line.strip() == "```python":
                out.append((i, j, "\n".join(lines[i + 1:j]) + "\n", marks))
            marks, i = {}, j
        elif line.strip():
            marks = {}
        i += 1
    return out


def raised_messages(markdown: str) -> dict[int, str]:
    """Run a page's python blocks in order (as tests/test_docs.py does), each from a file
    ``model.py`` of its own; for each block marked ``<!-- raises: ... -->``, what Python
    prints last for the exception it raises (paths shortened to ``model.py``), by the
    line of the block's closing fence. A block that does not raise what its mark says
    fails the build: the page shows only what the program really raises."""
    import tempfile
    import traceback
    import types

    blocks = _python_blocks(markdown.splitlines())
    if not any("raises" in marks for *_, marks in blocks):
        return {}
    module = types.ModuleType("docs_page")
    out = {}
    with tempfile.TemporaryDirectory(prefix="autoflow-docs-") as tmp:
        import sys

        sys.modules[module.__name__] = module
        try:
            for k, (start, end, code, marks) in enumerate(blocks):
                if "skip" in marks or "source-of" in marks:
                    continue
                folder = Path(tmp) / str(k)
                folder.mkdir()
                path = folder / "model.py"
                path.write_text(code)
                module.__file__ = str(path)
                try:
                    exec(compile(code, str(path), "exec"), module.__dict__)  # noqa: S102
                except Exception as e:  # noqa: BLE001 - the example's own exception
                    if "raises" not in marks:
                        raise RuntimeError(f"docs: the block at line {start + 1} raised "
                                           f"{type(e).__name__}: {e}") from e
                    text = "".join(traceback.format_exception_only(type(e), e)).rstrip()
                    out[end] = text.replace(str(folder) + "/", "")
                else:
                    if "raises" in marks:
                        raise RuntimeError(f"docs: the block at line {start + 1} should raise "
                                           f"{marks['raises']} and raised nothing")
        finally:
            sys.modules.pop(module.__name__, None)
    return out


def with_messages(markdown: str) -> str:
    """``markdown`` with each failing example followed by the message it raises."""
    messages = raised_messages(markdown)
    if not messages:
        return markdown
    lines = markdown.splitlines()
    for end in sorted(messages, reverse=True):
        shown = ["", "It raises:", "", "```text", *messages[end].splitlines(), "```"]
        lines[end + 1:end + 1] = shown
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown, page, config, files):
    if "<!-- gallery -->" in markdown:
        markdown = markdown.replace("<!-- gallery -->", gallery())
    markdown = with_messages(markdown)
    return re.sub(r"<!-- include: (\S+)(?: skip=\"[^\"]*\")? -->", lambda m: include(m.group(1)), markdown)
