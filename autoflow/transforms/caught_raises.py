"""The ``raise`` statements of a ``try`` body that its own ``except`` clauses catch
(``early_exits`` lowers them to a flag and the handler's body after the ``try``).
"""

from __future__ import annotations

import gast

from ..analysis.activity import TRY_TYPES as _TRY
from ..core.nodes import append_children
from .util import _LOOPS, _SCOPES


def caught_raises(s, namer, af=None):
    """``raise E(...)`` statements of the ``try`` body that its first matching
    ``except E:`` catches: ``{id(raise): (handler index, flag name)}``. (``af``: the
    runtime's name; the calls pass made ``E(...)`` of a user's class ``af.call(E, ...)``.)"""
    if s.finalbody or type(s).__name__ != "Try":
        return {}
    names = []
    for h in s.handlers:
        # (a handler that re-raises, a bare `raise`, re-raises what it caught: run after
        # the `try`, where no exception is active, it cannot; it is left to Python, and a
        # traced `raise` it would catch is autoflow's error at the `raise`)
        if h.name is not None or _reraises(h.body):
            names.append(None)
        elif isinstance(h.type, gast.Name):
            names.append({h.type.id})
        elif isinstance(h.type, gast.Tuple) and all(isinstance(e, gast.Name) for e in h.type.elts):
            names.append({e.id for e in h.type.elts})
        else:
            names.append(None)  # `except:` or a computed type: not matched by name
    out, flags = {}, {}
    todo = list(s.body)
    while todo:
        x = todo.pop()
        if isinstance(x, _SCOPES + _LOOPS) or (_TRY and isinstance(x, _TRY)):
            continue
        if isinstance(x, gast.Raise) and x.exc is not None and x.cause is None:
            exc = x.exc.func if isinstance(x.exc, gast.Call) else x.exc
            if isinstance(exc, gast.Attribute) and exc.attr == "call" and isinstance(
                    exc.value, gast.Name) and exc.value.id == af and x.exc.args:
                exc = x.exc.args[0]
            if isinstance(exc, gast.Name):
                for index, ns in enumerate(names):
                    if ns is None:
                        break  # an earlier clause might catch it: leave it
                    if exc.id in ns:
                        if index not in flags:
                            flags[index] = namer.unique("caught")
                        out[id(x)] = (index, flags[index])
                        break
            continue
        append_children(x, todo)
    return out


def _reraises(stmts) -> bool:
    """Is there a bare ``raise`` in ``stmts`` (nested scopes and ``try`` statements,
    which have exceptions of their own, not entered)?"""
    todo = list(stmts)
    while todo:
        x = todo.pop()
        if isinstance(x, _SCOPES) or (_TRY and isinstance(x, _TRY)):
            continue
        if isinstance(x, gast.Raise) and x.exc is None:
            return True
        append_children(x, todo)
    return False
