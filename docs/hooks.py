"""mkdocs hooks (mkdocs.yml `hooks:`): pages made from files of the repository when
the site is built, so that they cannot drift from them.

* `<!-- gallery -->` (docs/gallery.md): every golden fixture, `tests/fixtures/NAME.py`
  and its expected conversion `NAME.after.py`, function by function, side by side.
  `tests/test_fixtures.py` checks that autoflow converts each fixture to exactly that
  text and that both run to the same results.
* `<!-- include: PATH -->`: the Markdown file PATH (from the repository root), its
  headings one level down, so that it sits under the including page's heading.
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


def on_page_markdown(markdown, page, config, files):
    if "<!-- gallery -->" in markdown:
        markdown = markdown.replace("<!-- gallery -->", gallery())
    return re.sub(r"<!-- include: (\S+)(?: skip=\"[^\"]*\")? -->", lambda m: include(m.group(1)), markdown)
