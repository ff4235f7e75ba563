"""A staged branch or loop body being traced (``_Scope``), and ``recording``.

``recording`` opens a scope: it collects the state that staged statements inside
change, and ``missing`` says what the statement must carry besides (``MoreState``),
or refuses module state it cannot.
"""

from __future__ import annotations

from ...core.origin import user_site
from .journal import _local, _recorders, _scopes
from .shared import MoreState, Shared
from .writes import _refuse
from .reach import closure_cells, module_state, reachable


class _Scope:
    """A staged branch or loop body being traced: what its statement carries
    (``shared``, the variables ``names``) and what existed before it (what its
    ``entry`` values and the closures of its functions ``fns`` reach).
    ``frame``: a frame of the statement's operator (for its site)."""

    __slots__ = ("shared", "names", "fns", "entry", "frame", "_reach", "_cells", "_module")

    def __init__(self, shared, names, fns, entry, frame):
        self.shared, self.names, self.fns, self.entry = shared, tuple(names or ()), fns, entry
        self.frame = frame
        self._reach = self._cells = self._module = None

    def carries(self, obj, name):
        shared = self.shared
        if not shared:
            return False
        if name is None:
            return any(o is obj for o in shared.objects)
        return any(o is obj and n == name for o, n in shared.attrs)

    def reach(self):
        if self._reach is None:
            self._reach = reachable(list(self.entry)) if self.entry is not None else set()
        return self._reach

    def cells(self):
        """Ids of the closure cells of the functions, three closures down."""
        if self._cells is None:
            self._cells = {id(cell) for _, cell, _ in closure_cells(self.fns, 3)}
        return self._cells

    def module(self):
        if self._module is None:
            self._module = module_state(self.fns, self.frame)
        return self._module

    def site(self):
        return user_site(frame=self.frame) if self.frame is not None else None


class recording:
    """Context: collect the state that staged statements inside change.

    A call in a staged branch or loop body may run a converted function whose
    own staged ``if`` sets an attribute (``self.n += 1`` in a method): the
    enclosing statement must carry that attribute too, or the object would
    keep a value of the inner trace. ``found`` lists ``(attrs, objects)``.
    """

    def __init__(self, shared=None, names=(), fns=(), entry=None, frame=None):
        self.scope = _Scope(shared, names, fns, entry, frame)

    def __enter__(self):
        self.found = []
        _recorders().append(self.found)
        _scopes().append(self.scope)
        _local.__dict__.setdefault("unlocked", []).append([])
        return self

    def __exit__(self, *exc):
        _recorders().pop()
        _scopes().pop()
        for obj, old in reversed(_local.unlocked.pop()):
            object.__setattr__(obj, "_trace_state", old)

    def missing(self, shared, outside=None):
        """What was changed inside that ``shared`` does not carry, as ``MoreState``
        (or None): its ``undo`` puts that state back as it was before.

        ``outside``: ids of the objects that exist outside the statement (only
        their state needs carrying; objects made inside are new every time)."""
        have_attrs = {(id(o), n) for o, n in shared.attrs} if shared else set()
        have_objects = {id(o) for o in shared.objects} if shared else set()
        attrs, objects = [], []
        for inner in self.found:
            attrs += [(o, n) for o, n in inner.attrs if (id(o), n) not in have_attrs
                      and (outside is None or id(o) in outside)]
            objects += [o for o in inner.objects if id(o) not in have_objects
                        and (outside is None or id(o) in outside)]
            if outside is not None and isinstance(inner, Shared):
                self._check_module(inner, have_attrs, have_objects, outside)
        if not attrs and not objects:
            return None
        return MoreState(attrs, objects, self.found)

    def _check_module(self, inner, have_attrs, have_objects, outside):
        """State that a staged statement inside this one (in a called function)
        carried and this one cannot: module state is an error."""
        labels = inner.names()
        items = [((o, n), lb) for (o, n), lb in zip(inner.attrs, labels)
                 if (id(o), n) not in have_attrs and id(o) not in outside]
        items += [((o, None), lb) for o, lb in zip(inner.objects, labels[len(inner.attrs):])
                  if id(o) not in have_objects and id(o) not in outside]
        if not items:
            return
        module = self.scope.module()
        for (o, n), _ in items:
            where = module.get(id(o))
            if where is not None:
                for w in reversed(self.found):  # put back what the trace wrote
                    w.reset()
                _refuse(where, n, "module state", scope=self.scope,
                        site=getattr(inner, "site", None), fn=getattr(inner, "function", None))
