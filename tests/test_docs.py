"""Every code block of the documentation site (``docs/*.md``) runs, or says why not.

Rules for a page's fenced blocks (``docs/contributing.md`` states them for authors):

* ``python``: run, in order, in one fresh module per page (a block sees what the
  blocks before it defined), each block from a real file so that autoflow can read
  its source. HTML comments on the lines just before the fence change that:
  ``<!-- raises: NAME -->``: the block must raise an exception whose class, or one of
  its bases, is called NAME (an error's example); ``<!-- raises: NAME: TEXT -->``: and
  its message must contain TEXT; ``<!-- fix: TEXT -->``: the block applies a fix the
  message of the last error raised on the page suggests, so TEXT (quoted from that
  fix, as the user would copy it) must be in that message; ``<!-- skip: REASON -->``: not run,
  for the REASON given (it must not be empty); ``<!-- source-of: NAME -->``: the block
  is converted code, and must be exactly ``autoflow.to_source(NAME)`` for the function
  NAME that an earlier block of the page defined.
* ``sh``: each command line ``autoflow ...`` runs as ``python -m autoflow ...`` from the
  repository root and must succeed; a block with any other command must be marked
  ``<!-- skip: REASON -->``.
* ``text``: output or messages shown, not code: never run.
* Any other fence (none, ``console``, ...), or an indented code block, fails.

``<!-- include: PATH -->`` pulls a Markdown file of the repository into a page when the
site is built (``docs/hooks.py``); its blocks are checked by the same rules, unless the
include says ``<!-- include: PATH skip="REASON" -->``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)(.*)$")
MARK = re.compile(r"^\s*<!--\s*(skip|raises|source-of|fix)\s*:\s*(.*?)\s*-->\s*$")
INCLUDE = re.compile(r'^<!--\s*include:\s*(\S+)(?:\s+skip="([^"]*)")?\s*-->\s*$')


@dataclasses.dataclass
class Block:
    page: str
    line: int                 # 1-based line of the opening fence
    lang: str
    code: str
    skip: str | None = None
    raises: str | None = None
    source_of: str | None = None
    fix: str | None = None

    @property
    def where(self):
        return f"{self.page}:{self.line}"


def blocks_of(path: Path, text: str | None = None, skip: str | None = None) -> list[Block]:
    """The fenced blocks of a Markdown file, with their markers; includes expanded."""
    text = path.read_text() if text is None else text
    lines = text.splitlines()
    name = str(path.relative_to(ROOT))
    out, i, marks = [], 0, {}
    prev_blank = True
    while i < len(lines):
        line = lines[i]
        inc = INCLUDE.match(line)
        if inc:
            out += blocks_of(ROOT / inc.group(1), skip=inc.group(2) or skip)
            i += 1
            continue
        mark = MARK.match(line)
        if mark:
            marks[mark.group(1)] = mark.group(2)
            i += 1
            continue
        fence = FENCE.match(line)
        if fence:
            indent, ticks, lang = fence.group(1), fence.group(2), fence.group(3)
            body, j = [], i + 1
            while j < len(lines) and not lines[j].strip().startswith(ticks):
                body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
                j += 1
            out.append(Block(name, i + 1, lang, "\n".join(body) + "\n",
                             skip=marks.get("skip", skip), raises=marks.get("raises"),
                             source_of=marks.get("source-of"), fix=marks.get("fix")))
            marks, i, prev_blank = {}, j + 1, False
            continue
        if line.startswith("    ") and line.strip() and prev_blank and not _in_list(lines, i):
            out.append(Block(name, i + 1, "<indented>", line))
        if line.strip():
            marks = {} if not line.lstrip().startswith("<!--") else marks
        prev_blank = not line.strip()
        i += 1
    return out


def _in_list(lines, i):
    """Is line i a continuation of a list item or table (not an indented code block)?"""
    for k in range(i - 1, -1, -1):
        s = lines[k]
        if not s.strip():
            continue
        if re.match(r"\s*([-*+]|\d+\.)\s", s) or s.startswith("    ") or s.startswith("|"):
            return True
        return False
    return False


ALL = [b for p in PAGES for b in blocks_of(p)]


def test_the_docs_have_blocks():
    assert len(PAGES) >= 10 and sum(b.lang == "python" for b in ALL) >= 20


@pytest.mark.parametrize("block", ALL, ids=lambda b: b.where)
def test_every_block_is_runnable_or_says_why_not(block):
    assert block.lang in ("python", "sh", "text"), (
        f"{block.where}: a code block must be ```python, ```sh or ```text "
        f"(got {block.lang or 'no language'!r}; an indented block is a ```text one)")
    if block.skip is not None:
        assert block.skip.strip(), f"{block.where}: <!-- skip: --> needs a reason"
    if block.lang == "sh" and block.skip is None:
        for cmd in _commands(block.code):
            assert cmd.startswith("autoflow "), (
                f"{block.where}: `{cmd}` is not an autoflow command: mark the block "
                "<!-- skip: REASON -->")


def _commands(code):
    return [c.strip() for c in code.splitlines() if c.strip() and not c.strip().startswith("#")]


def _run_page(page, tmp_path):
    """Run the page's python blocks in order; ``[(raises block, its message, [the fix
    blocks after it])]``."""
    mod = types.ModuleType(f"docs_{page.stem.replace('-', '_')}")
    sys.modules[mod.__name__] = mod
    errors = []
    try:
        for k, block in enumerate(b for b in ALL if b.page == str(page.relative_to(ROOT))
                                  and b.lang == "python" and b.skip is None):
            if block.fix is not None:
                # the fix the last error's message suggests, as written
                assert errors, f"{block.where}: <!-- fix: --> without an error before it"
                assert block.fix in errors[-1][1], (
                    f"{block.where}: the message does not suggest {block.fix!r}:\n"
                    f"{errors[-1][1]}")
                errors[-1][2].append(block)
            if block.source_of is not None:
                import autoflow

                shown = autoflow.to_source(mod.__dict__[block.source_of])
                assert shown.strip() == block.code.strip(), (
                    f"{block.where}: not what autoflow.to_source({block.source_of}) gives:\n{shown}")
                continue
            path = tmp_path / f"{page.stem}_{block.line}.py"
            path.write_text(block.code)
            mod.__file__ = str(path)
            code = compile(block.code, str(path), "exec")
            if block.raises is None:
                exec(code, mod.__dict__)
                continue
            try:
                exec(code, mod.__dict__)
            except Exception as e:  # noqa: BLE001 - the block's own exception
                name, _, text = block.raises.partition(":")
                names = {c.__name__ for c in type(e).__mro__}
                assert name.strip() in names and text.strip() in str(e), (
                    f"{block.where}: expected {block.raises}, got {type(e).__name__}: {e}")
                # the message and its notes (advice a Python exception carries as a note)
                errors.append((block, "\n".join([str(e), *getattr(e, "__notes__", ())]), []))
            else:
                pytest.fail(f"{block.where}: expected {block.raises}, nothing was raised")
    finally:
        sys.modules.pop(mod.__name__, None)
    return errors


# (the error reference runs in tests/test_advice.py: its errors and their fixes)
@pytest.mark.parametrize("page", [p for p in PAGES if p.name != "error-reference.md" and any(
    b.page == str(p.relative_to(ROOT)) and b.lang == "python" and b.skip is None for b in ALL)],
    ids=lambda p: p.name)
def test_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _run_page(page, tmp_path)


SH = [b for b in ALL if b.lang == "sh" and b.skip is None
      and all(c.startswith("autoflow ") for c in _commands(b.code))]


@pytest.mark.parametrize("block", SH, ids=lambda b: b.where)
def test_sh_blocks_run(block):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for cmd in _commands(block.code):
        args = cmd.split("#")[0].split()[1:]
        done = subprocess.run([sys.executable, "-m", "autoflow", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{block.where}: `{cmd}` failed:\n{done.stdout}{done.stderr}"
