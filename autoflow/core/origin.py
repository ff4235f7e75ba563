"""Where in the user's code something happened, and messages that show it.

Converted functions are compiled with the user's file name and line numbers,
so the innermost frame outside autoflow's own package is the user's line.
"""

from __future__ import annotations

import linecache
import os
import sys

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# JAX's own frames sit between a runtime operator and the converted code that
# called it when a branch or loop body is being traced.
_SKIP_PARTS = (os.sep + "jax" + os.sep, os.sep + "jaxlib" + os.sep, os.sep + "contextlib.py",
               os.sep + "functools.py")


class Site:
    """A position in user code: file, line, column (column may be None)."""

    __slots__ = ("filename", "lineno", "col")

    def __init__(self, filename, lineno, col=None):
        self.filename, self.lineno, self.col = filename, lineno, col

    def __str__(self):
        if self.col is not None:
            return f"{self.filename}:{self.lineno}:{self.col + 1}"
        return f"{self.filename}:{self.lineno}"

    def source_line(self) -> str:
        return linecache.getline(self.filename, self.lineno).rstrip("\n")

    def excerpt(self) -> str:
        """The source line with a caret under the construct."""
        line = self.source_line()
        if not line.strip():
            return ""
        col = self.col if self.col is not None else len(line) - len(line.lstrip())
        return f"    {line}\n    {' ' * col}^"


def _is_internal(filename: str) -> bool:
    return filename.startswith(PACKAGE_DIR) or any(p in filename for p in _SKIP_PARTS)


def user_frames(depth: int = 1):
    """The calling frames that are not autoflow's or JAX's own, innermost first."""
    frame = sys._getframe(depth)
    while frame is not None:
        if not _is_internal(frame.f_code.co_filename):
            yield frame
        frame = frame.f_back


def user_site(depth: int = 1, frame=None) -> Site | None:
    """The innermost calling frame that is not autoflow's or JAX's own (from
    ``frame`` outwards, when given)."""
    frame = sys._getframe(depth) if frame is None else frame
    while frame is not None:
        code = frame.f_code
        if not _is_internal(code.co_filename):
            col = None
            try:
                positions = list(code.co_positions())
                pos = positions[frame.f_lasti // 2]
                if pos[0] == frame.f_lineno and pos[2] is not None:
                    col = pos[2]
            except (AttributeError, IndexError, ValueError):
                pass
            return Site(code.co_filename, frame.f_lineno, col)
        frame = frame.f_back
    return None


def message(site: Site | None, what: str, todo: str | None = None) -> str:
    """``file:line:col: what`` + the source line with a caret + what to do."""
    parts = [f"{site}: {what}" if site else what]
    if site is not None:
        ex = site.excerpt()
        if ex:
            parts.append(ex)
    if todo:
        parts.append(todo)
    return "\n".join(parts)
