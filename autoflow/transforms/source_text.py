"""The user's source text as ``faithful`` prints it: lines, cuts, indentation, headers.

``same`` tells two trees apart as conversion leaves them (a node printed as written
must be the same below); ``split_lines``, ``_cut``, ``_reindent``, ``_header_lines``,
``_header_end`` and ``_strip_comments`` cut a statement's original text out of the
file and move it to another indentation.
"""

from __future__ import annotations

import ast
import io
import tokenize


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
