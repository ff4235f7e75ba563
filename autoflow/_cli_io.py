"""The command line's inputs and outputs: files read as Python reads them, colors, diffs.

``read_source`` decodes a file as Python does (its encoding declaration, a BOM);
``_functions``/``_reading`` find the functions asked for in it (``InputError``: an
input that cannot be read or parsed, the one line to print); ``_write``,
``_colorize`` and ``_diff`` print what the commands make.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import io
import os
import sys
import tokenize
import warnings


class InputError(Exception):
    """An input that cannot be read or parsed; the message is the one line to print."""


# ---------------------------------------------------------------------------
# reading inputs
# ---------------------------------------------------------------------------

def _display_name(path: str) -> str:
    return "<stdin>" if path == "-" else path


def read_source(path: str) -> str:
    """The text of ``path`` (``-``: standard input), or ``InputError``."""
    return read_source_encoding(path)[0]


def read_source_encoding(path: str, bom=False):
    """``(text, encoding)`` of ``path``; the encoding is its coding declaration's, or UTF-8
    (``utf-8-sig`` for a file that starts with a byte order mark, if ``bom``)."""
    name = _display_name(path)
    try:
        if path == "-":
            stream = getattr(sys.stdin, "buffer", None)
            data = stream.read() if stream is not None else sys.stdin.read().encode("utf-8")
        else:
            with open(path, "rb") as f:
                data = f.read()
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{name}: is a directory") from None
    except PermissionError:
        raise InputError(f"{name}: permission denied") from None
    except OSError as e:
        raise InputError(f"{name}: cannot read: {e.strerror or e}") from None
    if b"\0" in data:
        raise InputError(f"{name}: binary file (it contains NUL bytes), not Python source")
    if path.endswith(".ipynb") or data.lstrip()[:1] == b"{" and b'"cells"' in data[:4096] \
            and b'"nbformat"' in data:
        # (a notebook's JSON parses as a Python dict: it would read as no code at all)
        raise InputError(f"{name}: a Jupyter notebook, not Python source: export its code "
                         f"first (`jupyter nbconvert --to script {name}`), or use "
                         "`autoflow.jit` in the notebook itself")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as e:
        if "unknown encoding" in str(e):
            enc = str(e).rsplit(":", 1)[-1].strip()
            raise InputError(f"{name}: unknown source encoding {enc!r} in its coding "
                             "declaration") from None
        encoding = "utf-8"  # no declaration and not UTF-8: the decode below says where
    try:
        return data.decode(encoding), ("utf-8" if encoding == "utf-8-sig" and not bom
                                       else encoding)
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        label = "UTF-8" if encoding.lower().replace("_", "-") in ("utf-8", "utf-8-sig") else encoding
        raise InputError(f"{name}: not valid {label} (byte 0x{data[e.start]:02x} at line {line}, "
                         f"column {col})") from None


def _syntax_error(name, e: SyntaxError) -> InputError:
    where = name
    if e.lineno:
        where += f":{e.lineno}"
        if e.offset:
            where += f":{e.offset}"
    return InputError(f"{where}: {type(e).__name__}: {e.msg}")


def _functions(source):
    """Qualified names of the top-level functions and methods (as ``--function`` takes them)."""
    out = []

    def visit(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((prefix + node.name, node))
            elif isinstance(node, ast.ClassDef):
                visit(node.body, prefix + node.name + ".")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        visit(ast.parse(source).body, "")
    return out


@contextlib.contextmanager
def _reading(name, source, wanted):
    """Context: what converting or checking file ``name`` raises for its input (it
    does not parse, has no function ``wanted``, nests too deeply) as ``InputError``."""
    try:
        yield
    except SyntaxError as e:
        raise _syntax_error(name, e) from None
    except LookupError:
        raise _no_function(name, source, wanted) from None
    except RecursionError:
        raise InputError(f"{name}: too deeply nested for autoflow to convert") from None


def _no_function(name, source, wanted) -> InputError:
    names = [q for q, _ in _functions(source)]
    hint = ""
    if names:
        close = difflib.get_close_matches(wanted, names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else \
            f" (it has: {', '.join(names[:8])}{', ...' if len(names) > 8 else ''})"
    else:
        hint = " (it defines no functions)"
    return InputError(f"{name}: no function named {wanted!r}{hint}")


def _original_segment(source, qualname):
    """The source lines of ``qualname`` (with decorators), dedented to column 0."""
    for q, node in _functions(source):
        if q == qualname:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            lines = source.splitlines(True)[first - 1:node.end_lineno]
            indent = node.col_offset
            out = []
            for ln in lines:
                head = ln[:indent]
                out.append(ln[indent:] if head.strip() == "" else ln)
            text = "".join(out)
            return text if text.endswith("\n") else text + "\n"
    return None


# ---------------------------------------------------------------------------
# output
# ---------------------------------------------------------------------------

def _use_color(mode: str, stream) -> bool:
    if mode == "always":
        return True
    if mode == "never":
        return False
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _colorize(text: str, lexer: str) -> str:
    try:
        from pygments import highlight
        from pygments.formatters import TerminalFormatter
        from pygments.lexers import DiffLexer, PythonLexer
    except ImportError:
        if lexer != "diff":
            return text
        out = []
        for line in text.splitlines(True):
            code = ("1" if line.startswith(("+++", "---")) else "32" if line.startswith("+")
                    else "31" if line.startswith("-") else "36" if line.startswith("@@") else None)
            out.append(f"\x1b[{code}m{line.rstrip(chr(10))}\x1b[0m\n" if code else line)
        return "".join(out)
    return highlight(text, DiffLexer() if lexer == "diff" else PythonLexer(), TerminalFormatter())


def _write(text, encoding="utf-8") -> None:
    """Write all of ``text`` (a str, or bytes already encoded) to standard output at once."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is not None:
        sys.stdout.flush()
        buffer.write(text if isinstance(text, bytes) else text.encode(encoding))
        buffer.flush()
    else:
        sys.stdout.write(text if isinstance(text, str) else text.decode(encoding))
        sys.stdout.flush()


def _error(message: str) -> None:
    print(message, file=sys.stderr)


def _diff(before: str, after: str, name: str) -> str:
    lines = difflib.unified_diff(before.splitlines(True), after.splitlines(True), name, name,
                                 "original", "converted")
    out = []
    for line in lines:
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        out.append(line)
    return "".join(out)
