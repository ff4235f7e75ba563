"""``unparse``: ``ast.unparse``, faster, for the text ``to_source`` returns.

Printing the converted tree was a fifth of a conversion's work, most of it in the
standard unparser's plumbing rather than in its output: a ``getattr`` of
``"visit_" + class name`` for every node, and a ``contextlib`` generator for every
bracket, parenthesis and block. The subclass here dispatches through a dict per node
class and opens brackets and blocks with plain objects; every ``visit_*`` method,
and so the text, is the standard unparser's own.

The standard unparser is a private class (``ast._Unparser``, as ``printer.Printer``
uses it): at import, the subclass prints a probe of every construct and is used only
if its text equals ``ast.unparse``'s; otherwise ``unparse`` is ``ast.unparse``.
"""

from __future__ import annotations

import ast

_Unparser = getattr(ast, "_Unparser", None)


class _Close:
    """What ``with`` needs of a bracket: ``end`` written on leaving."""

    __slots__ = ("unparser", "end")

    def __init__(self, unparser, end):
        self.unparser, self.end = unparser, end

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        self.unparser._source.append(self.end)
        return False


class _Nothing:
    __slots__ = ()

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_NOTHING = _Nothing()


class _Dedent:
    __slots__ = ("unparser",)

    def __init__(self, unparser):
        self.unparser = unparser

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        self.unparser._indent -= 1
        return False


if _Unparser is not None:
    class _Fast(_Unparser):
        _methods: dict = {}

        def traverse(self, node):
            if node.__class__ is list:
                for item in node:
                    self.traverse(item)
                return
            method = self._methods.get(node.__class__)
            if method is None:
                method = getattr(type(self), "visit_" + node.__class__.__name__, None)
                if method is None:  # (as NodeVisitor.visit: the generic visit)
                    return _Unparser.traverse(self, node)
                self._methods[node.__class__] = method
            method(self, node)

        # (the writes happen where the standard context managers make them: the
        # start when the `with` is entered, which is right after the call here)
        def delimit(self, start, end):
            self._source.append(start)
            return _Close(self, end)

        def delimit_if(self, start, end, condition):
            if condition:
                self._source.append(start)
                return _Close(self, end)
            return _NOTHING

        def require_parens(self, precedence, node):
            if self._precedences.get(node, _PRECEDENCE_TEST) > precedence:
                self._source.append("(")
                return _Close(self, ")")
            return _NOTHING

        def block(self, *, extra=None):
            self._source.append(":")
            if extra:
                self._source.append(extra)
            self._indent += 1
            return _Dedent(self)

    _PRECEDENCE_TEST = ast._Precedence.TEST  # noqa: SLF001 - the unparser's own default


# Every statement and expression form, parenthesization included: the subclass is used
# only where it prints this exactly as the standard unparser does.
_PROBE = '''
import a.b as c
from .d import e as f, g
@dec(1, *a, k=2, **kw)
async def h(p, /, q: int = 1, *r, s, t=2, **u) -> 'x':
    """doc"""
    global z
    x = y = -a ** -b + (c - d) * e @ f // g % h << i >> j | k ^ l & m
    x += not a and (b or c) if d else lambda v=1, *w: v
    x[1:2, ::3], *y = {1: 2, **d}, {3, 4}, [5, *q], (6,), ()
    del x.y, x[0]
    print(f"{x!r:>{w}} {y=} {{}}", b"\\x00", 1.5j, ..., None, 1e400, -(1))
    assert a < b <= c is not d not in e, 'msg'
    async with a as (b, c), d:
        async for i in j:
            await k
            yield l
            x = yield
            y = yield from m
            continue
        else:
            break
    while x := next(it):
        pass
    else:
        raise E from F
    try:
        pass
    except (A, B) as e:
        pass
    except C:
        pass
    else:
        pass
    finally:
        return [i for i in j if k for l in m] + {i for i in j} + {k: v for k, v in w}
    if a:
        pass
    elif b:
        pass
    else:
        r = (i async for i in j)
    match p:
        case [1, *rest] | {"k": v, **kw} if v:
            pass
        case C(a, b=c) as d:
            pass
        case _:
            nonlocal_ = (yield)
    with open(x) as f:
        type_ = x if y else (z if w else v)
class K(B, metaclass=M):
    x: int
    y: list[int] = []
    def m(self):
        return super().m()[::-1], (a, b), a.b.c(), (1).real, 'a' 'b'
'''


def _checked():
    """``unparse``: the fast subclass if it prints the probe as ``ast.unparse`` does."""
    if _Unparser is None:
        return ast.unparse
    try:
        tree = ast.parse(_PROBE)
        fast = _Fast().visit(tree)
    except Exception:  # noqa: BLE001 - another Python's unparser: the standard one
        return ast.unparse
    if fast != ast.unparse(tree):
        return ast.unparse
    return lambda node: _Fast().visit(node)


unparse = _checked()
