"""State a converted statement changes besides its carried variables.

A converted ``if``/``while``/``for`` passes its variables explicitly, but
Python code also changes *shared* state: attributes (``s.x = v``,
``self.n += 1``) and the contents of lists and dicts (``out.append(v)``,
``cfg["a"]["b"] = v``, ``log.append(v)`` on a module-level list). The
rewriter names that state at the call site::

    n = af.if_stmt(c, if_true, if_false, (n,), ('n',),
                   state=af.state(attrs=((s, 'x'),), objects=(out,)))

and the operator uses a ``Shared`` object to give it Python's meaning when
it stages the statement:

* before each staged branch (and each traced loop iteration) the state is
  put back to what it was before the statement, so no branch sees what the
  other one did and nothing leaks from the branch not taken;
* its values travel through ``lax`` as extra carries (attribute values, and
  container contents as lists/dicts of their items);
* afterwards the chosen values are written back *in place*: the same list
  and dict objects hold the new items (an alias or a global sees them), and
  an attribute that did not exist before and was not set stays absent.

On concrete values the operators run the branch or loop as Python, which
changes the state in place as Python does; ``Shared`` is then unused.

Writes through calls. A function called in a staged branch or loop body runs
once, at trace time, for every path and iteration. Its writes are marked
(``transforms.writes``: ``af.mutates``, ``af.mutates_global``,
``af.rebinds_global``, ``af.rebinds_nonlocal``, and ``af.setitem`` itself), and
each staged statement being traced is a ``_Scope`` that judges them:

* state the statement carries already (its ``state=``, its variables): fine;
* state that existed before the statement and that its variables or its
  functions' closures reach: carried too (``recording.missing`` retraces the
  statement with it);
* module state (a global, what a global holds, a closure cell of a
  module-level function): it outlives every call, and the compiled code cannot
  change it as Python would at each call and iteration. autoflow raises
  ``ConversionError`` naming it and the writing line, before the write;
* a closure cell (``nonlocal``) the statement does not carry: the same error;
* anything else was made inside the statement (new at every run): plain.
"""

from __future__ import annotations

import functools
import sys
import threading
import types

import jax

from ..core.caches import Bounded
from ..core.libraries import is_library_file
from ..core.origin import _is_internal, message, user_site
from ..errors import ConversionError
from .raising import Signal
from .values import Tracer, Undefined, in_staged_block, is_traced

_CONTAINERS = (list, dict)
_local = threading.local()


class _Snap:
    """A container's contents at one moment, nested containers included."""

    __slots__ = ("obj", "items")

    def __init__(self, obj, memo):
        self.obj = obj
        memo[id(obj)] = self
        if isinstance(obj, list):
            self.items = [_snap(v, memo) for v in obj]
        else:
            self.items = {k: _snap(v, memo) for k, v in obj.items()}

    def restore(self, done):
        """Put the container (and those inside it) back as it was; return it."""
        if id(self.obj) in done:
            return self.obj
        done.add(id(self.obj))
        if isinstance(self.obj, list):
            self.obj[:] = [_restore(v, done) for v in self.items]
        else:
            self.obj.clear()
            self.obj.update({k: _restore(v, done) for k, v in self.items.items()})
        return self.obj


def _snap(value, memo):
    if type(value) in _CONTAINERS:
        hit = memo.get(id(value))
        return hit if hit is not None else _Snap(value, memo)
    return value


def _restore(value, done):
    return value.restore(done) if isinstance(value, _Snap) else value


def _new_tracer(value, snap):
    """Does ``value`` hold a traced value that the snapshot ``snap`` did not?"""
    old = None
    for leaf in jax.tree_util.tree_leaves(value):
        if isinstance(leaf, Tracer) and is_traced(leaf):
            if old is None:
                old = {id(x) for x in jax.tree_util.tree_leaves(_restore_copy(snap))}
            if id(leaf) not in old:
                return True
    return False


def _restore_copy(value):
    """The recorded contents of a snapshot as plain lists and dicts."""
    if isinstance(value, _Snap):
        items = value.items
        if isinstance(items, list):
            return [_restore_copy(v) for v in items]
        return {k: _restore_copy(v) for k, v in items.items()}
    return value


def undoer(values):
    """A function that puts the lists and dicts ``values`` hold (nested ones too) back
    as they are now: for a traced path that is abandoned after it changed them in
    place (a branch every path of which raises)."""
    memo = {}
    snaps = [_snap(v, memo) for v in values]

    def undo():
        done = set()
        for snap in snaps:
            _restore(snap, done)
    return undo


def contents(value):
    """``value`` with every list and dict copied (the leaves are shared)."""
    if type(value) is list:
        return [contents(v) for v in value]
    if type(value) is dict:
        return {k: contents(v) for k, v in value.items()}
    return value


def write(obj, value):
    """Make container ``obj`` hold ``value`` (same layout), in place; return ``obj``.

    Nested containers of ``obj`` are updated in place too where the layout
    matches, so references to them stay valid.
    """
    if value is obj:  # (already it: clearing it first would empty both)
        return obj
    if type(obj) is list and type(value) is list:
        old = list(obj)
        obj[:] = [write(old[i], v) if i < len(old) else v for i, v in enumerate(value)]
        return obj
    if type(obj) is dict and type(value) is dict:
        old = dict(obj)
        obj.clear()
        obj.update({k: write(old[k], v) if k in old else v for k, v in value.items()})
        return obj
    return value


class Shared:
    """Attributes and container contents that a staged statement may change.

    ``attrs``: ``(object, attribute name)`` pairs the statement assigns;
    ``objects``: lists and dicts whose contents it changes in place.
    """

    def __init__(self, attrs=(), objects=(), labels=(), escapes=()):
        # Made at every run of the statement, used only when it is staged:
        # the work is done in `_setup`, on first use.
        self._args = (attrs, objects, labels, escapes)
        self._ready = False

    def _setup(self):
        attrs, objects, labels, escapes = self._args
        self._ready = True
        # ``escapes``: indices (attributes first, then objects) of state that
        # outlives the function (module-level objects, closure variables).
        self.escapes = tuple(escapes)
        self.attrs = tuple(attrs)
        labels = tuple(labels) + (None,) * (len(self.attrs) + len(objects) - len(labels))
        if any(_is_variable(o) for o in objects):
            # An NNX Variable written by index (`v[...] += 1`) holds its value as
            # an attribute: carry that (attributes come first, then objects).
            k = len(self.attrs)
            moved = [i for i, o in enumerate(objects) if _is_variable(o)]
            rest = [i for i in range(len(objects)) if i not in moved]
            order = list(range(k)) + [k + i for i in moved] + [k + i for i in rest]
            self.attrs += tuple((objects[i], "value") for i in moved)
            self.escapes = tuple(j for j, old in enumerate(order) if old in self.escapes)
            labels = tuple(labels[old] if old < k or old - k in rest
                           else f"{labels[old] or 'a Variable'}[...]" for old in order)
            objects = [objects[i] for i in rest]
        k = len(self.attrs)
        kept = [(o, lb, k + i in self.escapes)
                for i, (o, lb) in enumerate(zip(objects, labels[k:])) if type(o) in _CONTAINERS]
        self.escapes = tuple(i for i in self.escapes if i < k) + tuple(
            k + j for j, (_, _, e) in enumerate(kept) if e)
        self.objects = tuple(o for o, _, _ in kept)
        self.labels = labels[:len(self.attrs)] + tuple(lb for _, lb, _ in kept)
        self._snap = None

    def __bool__(self):
        if not self._ready:
            self._setup()
        return bool(self.attrs or self.objects)

    def extend(self, attrs, objects, known=None):
        """Also carry ``attrs``/``objects`` (found changed by a call in the body);
        ``known`` maps ids of the statement's variables' values to their names."""
        known = known or {}
        if not self._ready:
            self._setup()
        known_attrs = {(id(o), n) for o, n in self.attrs}
        attrs = list(attrs) + [(o, "value") for o in objects if _is_variable(o)]
        new_attrs = [(o, n) for o, n in attrs if (id(o), n) not in known_attrs]
        have = {id(o) for o in self.objects}
        new_objects = [o for o in objects if id(o) not in have and type(o) in _CONTAINERS]
        k = len(self.attrs)
        self.escapes = tuple(i for i in self.escapes if i < k) + tuple(
            i + len(new_attrs) for i in self.escapes if i >= k)
        self.labels = (self.labels[:k] + tuple(
            f"{known.get(id(o), type(o).__name__)}.{n}" for o, n in new_attrs)
            + self.labels[k:] + tuple(known.get(id(o), "a list or dict") for o in new_objects))
        self.attrs = self.attrs + tuple(new_attrs)
        self.objects = self.objects + tuple(new_objects)

    def record_writes(self):
        """Tell the staged statement being traced around this one what it changed
        (and where this statement is, for an error if that one cannot carry it)."""
        if self.attrs or self.objects:
            if _recorders():
                self.site, self.function = _writer()
            _note_write(*(o for o, _ in self.attrs), *self.objects)
            recorders = _recorders()
            if recorders:
                recorders[-1].append(self)

    def names(self):
        """Labels for error messages (``s.x``, ``out``)."""
        out = [lb or n for lb, (_, n) in zip(self.labels, self.attrs)]
        return out + [lb or "a list or dict" for lb in self.labels[len(self.attrs):]]

    def snapshot(self):
        """Record the state as it is now (``reset`` puts it back)."""
        memo = {}
        attrs = [_get(o, n) for o, n in self.attrs]
        self._snap = ([_snap(v, memo) for v in attrs], [_snap(o, memo) for o in self.objects])
        return self

    def check_escapes(self, values, site, fns=(), frame=None):
        """State that outlives the function must not be left holding a traced value:
        what the rewriter saw outlives it (``escapes``), and module state that the
        statement's functions ``fns`` or the code running from ``frame`` outwards
        reach (an object a caller passed in)."""
        if in_staged_block() or not (self.escapes or fns):
            return
        before = self._snap[0] + self._snap[1]
        k = len(self.attrs)
        module = None
        for i in range(len(before)):
            if not (i in self.escapes or fns) or not _new_tracer(values[i], before[i]):
                continue
            label = self.names()[i]
            if i not in self.escapes:  # module state the rewriter could not see?
                if module is None:
                    module = module_state(fns, frame)
                obj = self.attrs[i][0] if i < k else self.objects[i - k]
                where = module.get(id(obj))
                if where is None:
                    continue
                label = where if i >= k else f"{where}.{self.attrs[i][1]}"
            raise ConversionError(message(
                site(), f"`{label}` outlives this function (module-level or "
                "closure state), and this traced statement would leave a traced "
                "value in it, which is not valid once the compiled function returns",
                f"Return the value instead of storing it in `{label}`, or make the "
                "condition or loop bound static."))

    def reset(self):
        """Put every attribute and container back as it was at ``snapshot``."""
        done = set()
        attrs, objects = self._snap
        for (o, n), v in zip(self.attrs, attrs):
            _set(o, n, _restore(v, done))
        for s in objects:
            _restore(s, done)

    def values(self):
        """The current values: attribute values, then container contents."""
        return tuple([contents(_get(o, n)) for o, n in self.attrs]
                     + [contents(o) for o in self.objects])

    def assign(self, values):
        """Set every attribute and container to ``values`` (as from ``values()``)."""
        k = len(self.attrs)
        for obj, v in zip(self.objects, values[k:]):
            write(obj, v)
        for (o, n), v in zip(self.attrs, values[:k]):
            current = _get(o, n, None)
            _set(o, n, write(current, v) if type(current) in _CONTAINERS else v)


class _Write:
    """One plain write made while a staged body was traced (see ``mutates``)."""

    def __init__(self, obj, name):
        self.objects, self.attrs = (), ()
        if name is None:
            self.objects = (obj,)
            self._snap = _snap(obj, {})
        else:
            self.attrs = ((obj, name),)
            self._old = _get(obj, name)

    def reset(self):
        if self.attrs:
            (obj, name), = self.attrs
            _set(obj, name, self._old)
        else:
            self._snap.restore(set())


def mutates(obj, name=None, *, _label=None, _module=False):
    """Marker before a write to ``obj.name`` (or, without ``name``, to container
    ``obj`` in place) that may outlive the call.

    Plain Python: nothing (but a ``journal`` notes it). While a staged branch
    or loop body is traced, the enclosing staged statement is told, so that it
    carries that state too; module state it cannot carry is an error (see the
    module docstring).
    """
    _note_write(obj)
    if not in_staged_block():
        return
    recorders = _recorders()
    if name is None and _is_variable(obj):  # `v[...] = x` on an NNX Variable
        name = "value"
    if name is not None or type(obj) in _CONTAINERS:
        _judge(obj, name, _label, _module)
        if recorders:
            recorders[-1].append(_Write(obj, name))
            unlock(obj)


def mutates_global(label, obj, name=None):
    """``mutates(obj, name)`` for ``obj`` a module global (``label``: how the
    source names it, ``cfg.items``): in a staged branch or loop body that does
    not carry it, an error (see the module docstring)."""
    mutates(obj, name, _label=label, _module=True)


def rebinds_global(name):
    """Marker before a statement that rebinds module global ``name`` (declared
    ``global``). Plain Python: nothing. In a staged branch or loop body: an
    error (a staged statement cannot rebind a global at each call, path and
    iteration as Python does)."""
    _note_write(sys._getframe(1).f_globals)
    if in_staged_block():
        _refuse(name, None, "module global", rebinding=True)


def rebinds_nonlocal(name, reader):
    """Marker before a statement that rebinds ``name``, declared ``nonlocal``;
    ``reader`` is ``lambda: name`` (its closure holds the cell). Plain Python:
    nothing. In a staged branch or loop body: fine where the statements being
    traced carry that variable (a function nested in the converted one, called
    in the body) or the cell was made inside them; otherwise an error."""
    if not in_staged_block():
        return
    cells = getattr(reader, "__closure__", None) or ()
    if len(cells) != 1:
        return
    cell = cells[0]
    _note_write(cell)
    for scope in reversed(_scopes()):
        if name in scope.names and id(cell) in scope.cells():
            continue  # the statement carries it (the rewriter saw the call)
        if id(cell) in scope.cells() or id(cell) in scope.module():
            _refuse(name, None, "closure variable", rebinding=True, scope=scope)
        return  # a cell made inside the statement


def _judge(obj, name, label, module):
    """A write about to happen in a staged block to ``obj`` (``.name``): an
    error when it is module state that an enclosing staged statement does not
    carry (and cannot: see the module docstring)."""
    scopes = _scopes()
    if not scopes:
        if module:  # (a staged block that records nothing: `a if c else f()`)
            _refuse(label, name, "module global")
        return
    for scope in reversed(scopes):
        if scope.carries(obj, name) or id(obj) in scope.reach():
            continue  # carried, or carried once the statement traces again
        where = scope.module().get(id(obj))
        if module or where is not None:
            _refuse(label or where, name, "module global" if module else "module state",
                    scope=scope)
        return  # made inside the statement


def _function_name(code):
    """The user's function that ``code`` is (or is a branch or loop body of: those
    carry its name, see ``core.loading``)."""
    return getattr(code, "co_qualname", code.co_name).split(".<locals>.")[-1]


def _writer():
    """``(site, function name)`` of the innermost user code running."""
    frame = sys._getframe(1)
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None, None
    return user_site(frame=frame), _function_name(frame.f_code)


class ModuleStateError(ConversionError):
    """A write through a call, in a staged branch or loop body, to state that
    outlives the function (see the module docstring). Not a reason to run a
    loop as Python: unrolled, the write would still happen only while tracing."""


def _refuse(label, name, kind, rebinding=False, scope=None, site=None, fn=None):
    """Raise the error for a write that the staged statements cannot carry."""
    if site is None:
        site, fn = _writer()
    what = f"{label}.{name}" if name is not None and label else (label or "this object")
    if scope is None and _scopes():
        scope = _scopes()[-1]
    stmt = scope.site() if scope is not None else None
    where = f" (the traced statement at {stmt})" if stmt is not None else ""
    who = f"`{fn}`" if fn and not fn.startswith("<") else "this code"
    if kind == "closure variable":
        owner = ("a variable of an enclosing function (a closure cell) that the traced "
                 "statement does not carry")
        todo = (f"Return the new value of `{what}` from the function and assign it at the "
                "call instead of assigning it `nonlocal`, or make the condition or loop "
                "bound static.")
    else:
        owner = ("a module global" if kind == "module global"
                 else "module state (a module global holds it)")
        todo = (f"Pass `{what}` in and return the new value instead (a traced statement "
                "carries its variables), or make the condition or loop bound static. A "
                "write that is the same on every path and iteration (a cache, a lazy "
                "initialisation) can be made before the traced statement; bookkeeping meant "
                f"for tracing (counting traces) can stay in {who} marked "
                "`@autoflow.do_not_convert`.")
    verb = "rebinds" if rebinding else "changes"
    raise ModuleStateError(message(
        site, f"`{what}` is {owner}, and {who} {verb} it here inside a staged branch or loop "
        f"body{where}. That code runs once, at trace time, for every path and iteration: "
        f"Python would {'rebind' if rebinding else 'change'} `{what}` on the path taken, at "
        "each iteration and at every call, and the compiled code cannot.", todo))


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


def _scopes():
    return _local.__dict__.setdefault("scopes", [])


_ATOMS = (int, float, complex, str, bytes, bool, type(None), types.ModuleType)
_ABSENT = object()
_code_names = Bounded(4096)  # code object -> the global names it reads


def _names_of(code):
    """The global names ``code`` (and the code nested in it) reads."""
    hit = _code_names.get(code)
    if hit is None:
        hit = set(code.co_names)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                hit |= _names_of(const)
        hit = _code_names[code] = frozenset(hit)
    return hit


def _user_class(cls):
    module = sys.modules.get(getattr(cls, "__module__", None) or "")
    filename = getattr(module, "__file__", None)
    return filename is not None and not is_library_file(filename)


def module_state(fns, frame=None, limit=20_000):
    """``{id: label}`` of the module state that functions ``fns`` and the user
    code running from ``frame`` outwards can reach: the globals their code
    reads (and the code of the user functions and classes found there,
    transitively), what those hold (three levels of items and attributes down),
    and the closure cells (and contents) of the functions found there. The
    closures of ``fns`` themselves are not module state."""
    out = {}
    funcs = [(f, False) for f in fns]  # (function, found in module state?)
    seen_fns = set()
    values = []
    while frame is not None:
        code = frame.f_code
        if not _is_internal(code.co_filename) and not is_library_file(code.co_filename):
            namespace = frame.f_globals
            for name in _names_of(code):
                value = namespace.get(name, _ABSENT)
                if value is not _ABSENT:
                    values.append((value, name, 0))
        frame = frame.f_back
    while funcs or values:
        while funcs:
            fn, owned = funcs.pop()
            fn = getattr(fn, "__func__", fn)
            code = getattr(fn, "__code__", None)
            if not isinstance(code, types.CodeType) or id(fn) in seen_fns \
                    or len(seen_fns) > 2000:
                continue
            seen_fns.add(id(fn))
            for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
                if owned:
                    out[id(cell)] = name
                try:
                    value = cell.cell_contents
                except ValueError:
                    continue
                if owned:
                    values.append((value, name, 0))
                elif callable(value):
                    funcs.append((value, False))
            if is_library_file(code.co_filename):
                continue
            namespace = getattr(fn, "__globals__", None) or {}
            for name in _names_of(code):
                value = namespace.get(name, _ABSENT)
                if value is not _ABSENT:
                    values.append((value, name, 0))
            wrapped = getattr(fn, "__wrapped__", None)
            if wrapped is not None:
                funcs.append((wrapped, owned))
        while values and len(out) < limit:
            value, label, depth = values.pop()
            if isinstance(value, _ATOMS) or id(value) in out:
                continue
            if isinstance(value, type):
                if _user_class(value):
                    funcs.extend((getattr(v, "__func__", v), True) for v in vars(value).values()
                                 if isinstance(v, (types.FunctionType, staticmethod,
                                                   classmethod)))
                continue
            out[id(value)] = label
            if isinstance(value, (types.FunctionType, types.MethodType)):
                funcs.append((value, True))
                continue
            if depth >= 3:
                continue
            if type(value) in (list, tuple):
                values.extend((v, f"{label}[{i}]", depth + 1) for i, v in enumerate(value))
            elif type(value) is dict:
                values.extend((v, f"{label}[{k!r}]", depth + 1) for k, v in value.items())
            elif type(value) is types.SimpleNamespace or _user_class(type(value)):
                d = getattr(value, "__dict__", None)
                if isinstance(d, dict):
                    values.extend((v, f"{label}.{k}", depth + 1) for k, v in d.items())
                values.append((type(value), label, depth + 1))
    return out


def _recorders():
    return _local.__dict__.setdefault("recorders", [])


class journal:
    """Context: which objects did converted code write in place while this ran?

    Plain Python writes are not recorded (``mutates`` is a no-op outside a
    staged body); a loop that ran an iteration as Python and would rather stage
    the whole loop from the state before it (``loops.for_stmt``, one copy
    of the body) may only do so if that iteration wrote nothing the staged loop
    would write again: ``written`` lists the objects whose attributes or items
    were set. Nested journals all see a write.
    """

    def __enter__(self):
        self.written = []
        _local.__dict__.setdefault("journals", []).append(self)
        return self

    def __exit__(self, *exc):
        _local.journals.pop()


def _note_write(*objects):
    for j in _local.__dict__.get("journals", ()):
        j.written.extend(objects)


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


class MoreState(Signal):
    """Internal: retrace a staged statement carrying more state."""

    def __init__(self, attrs, objects, inner=()):
        super().__init__("internal: more state to carry")
        self.attrs, self.objects, self.inner = attrs, objects, list(inner)

    def undo(self):
        """Put back what the inner statements wrote (they wrote values of the
        trace that is being abandoned)."""
        for inner in reversed(self.inner):
            inner.reset()


def settle(shared, attempt, known, what, site, retry=None):
    """Stage a statement that changes ``shared`` state until that state settles;
    what ``attempt`` returns (the driver of ``cond.traced_if`` and
    ``loops._loop_with_state``).

    ``attempt(active)`` stages the statement once (``active``: ``shared`` names
    state to carry, as it was when this attempt began). A call in it that
    changes state the statement does not carry raises ``MoreState``: what the
    calls wrote is undone, the state put back, ``shared`` extended (``known()``:
    ``{id: name}`` of the statement's variables, for labels) and the statement
    staged again, at most 8 times; then the ``ConversionError`` "the state this
    ``what`` changes never settles", at ``site()``. Any other exception puts the
    state back and propagates, unless ``retry(exc)`` is given and returns true
    (it may change what the next attempt stages): then the statement is staged
    again.
    """
    for _ in range(8):
        active = bool(shared)
        try:
            return attempt(active)
        except MoreState as m:
            m.undo()
            if active:
                shared.reset()
            shared.extend(m.attrs, m.objects, known())
        except BaseException as e:
            if active:
                shared.reset()
            if retry is None or not retry(e):
                raise
    raise ConversionError(message(site(), f"the state this {what} changes never settles"))


def names_of(names, values):
    """``{id(value): name}`` for the statement's variables (``names``) and the
    closure variables of its functions."""
    out = {}
    if names and len(names) == len(values):
        for n, v in zip(names, values):
            out.setdefault(id(v), n)
    return out


def entry_values(fns, values):
    """What a staged statement sees from outside as it starts: ``values`` and
    the closure variables of ``fns`` (taken now: tracing rebinds cells)."""
    # (the functions these close over, too: taken now as well)
    return list(values) + [v for _, _, v in closure_cells(fns, 2) if v is not EMPTY]


EMPTY = object()  # the value ``closure_cells`` gives for a cell not assigned yet


def closure_cells(fns, depth, partials=False):
    """``(name, cell, value)`` for each closure cell of the functions ``fns``
    and of the functions those cells hold, ``depth`` closures down, level by
    level, each function once. ``name``: the free variable's name (None where
    the function has no code); ``value``: the cell's contents, ``EMPTY`` where
    it is not assigned yet. With ``partials``, a ``functools.partial`` stands
    for the function it wraps."""
    seen = set()
    fns = list(fns)
    for _ in range(depth + 1):
        more = []
        for fn in fns:
            fn = _unwalked(fn, seen, partials)
            if fn is None:
                continue
            code = getattr(fn, "__code__", None)
            names = code.co_freevars if code is not None else ()
            for i, cell in enumerate(getattr(fn, "__closure__", None) or ()):
                try:
                    value = cell.cell_contents
                except ValueError:
                    value = EMPTY
                yield (names[i] if i < len(names) else None), cell, value
                if value is not EMPTY and callable(value) and (
                        getattr(value, "__closure__", None)
                        or partials and isinstance(value, functools.partial)):
                    more.append(value)
        fns = more


def _unwalked(fn, seen, partials):
    """``fn`` (with ``partials``, the function a ``functools.partial`` wraps), noted
    in ``seen``; None when it was walked already."""
    while id(fn) not in seen:
        seen.add(id(fn))
        if not (partials and isinstance(fn, functools.partial)):
            return fn
        fn = fn.func
    return None


def reachable(todo):
    """Ids of the objects reachable from ``todo`` (``entry_values``): what they
    hold, three levels of attributes, items and closures down."""
    seen = set()
    for _ in range(4):
        nxt = []
        for v in todo:
            if id(v) in seen or isinstance(v, (int, float, str, bytes, bool, type(None),
                                                 types.ModuleType, type)):
                continue
            seen.add(id(v))
            if type(v) in (list, tuple):
                nxt.extend(v)
            elif type(v) is dict:
                nxt.extend(v.values())
            elif callable(v):
                continue  # closures were taken at entry (tracing rebinds cells)
            else:
                d = getattr(v, "__dict__", None)
                if isinstance(d, dict):
                    nxt.extend(d.values())
        todo = nxt
    return seen


class kept:
    """Context: which containers the carried variables hold, and whether a traced
    path keeps them (changes them in place, as ``lst.append(v)`` or
    ``lst[0] = v`` do) or rebinds the variable to another object.

    A staged branch or loop body gets copies of its carried lists and dicts
    (``lax`` passes values), and ``af.append`` extends a list functionally
    there (``derived`` records the new list as the same list, grown). When
    every traced path keeps a variable's container, the statement writes the
    result back into the original object (``write_back``): an alias of the
    list, or ``alias is lst``, then sees what Python would.
    """

    def __init__(self, values):
        self.entry = tuple(values)
        self.same = {i: True for i, v in enumerate(self.entry) if type(v) in _CONTAINERS}
        self.substitute = {}  # index -> the original container the path works on
        self.also = set()  # ids of other containers the paths change in place (shared state)

    def aliased(self, fns):
        """The containers that ``fns`` can also reach another way (an alias in a
        closure): the paths must then work on the original objects (carried as
        shared state), so that the alias sees each change as it happens."""
        if not self.same:
            return []
        seen = reachable(entry_values(fns, ()))
        found = [i for i in self.same if id(self.entry[i]) in seen]
        self.substitute = {i: self.entry[i] for i in found}
        return [self.entry[i] for i in found]

    def wrap(self, fn, unpack_in, unpack_out, with_inputs=None):
        """``fn`` (a branch or loop body), noting for each traced call whether its
        outputs are its inputs' containers. ``with_inputs(args, {index: obj})``
        puts the original containers of ``aliased`` in place of the copies."""
        def run(*args):
            if self.substitute:
                args = with_inputs(args, {i: o for i, o in self.substitute.items()})
            inputs = unpack_in(args) if self.same else ()
            stack = _local.__dict__.setdefault("lineage", [])
            stack.append({})
            shared_now = _local.__dict__.setdefault("originals", [])
            shared_now.append({id(o) for o in self.substitute.values()} | self.also)
            try:
                out = fn(*args)
            finally:
                origins = stack.pop()
                shared_now.pop()
            outs = unpack_out(out) if self.same else ()
            for i in self.same:
                if i < len(outs) and i < len(inputs):
                    self.same[i] = self.same[i] and _derives(outs[i], inputs[i], origins)
            return out
        return run

    def write_back(self, values):
        """``values`` (the statement's results), with each kept container written
        into the original object in place and the variable bound to it."""
        if not self.same:
            return values
        values = list(values)
        for i, same in self.same.items():
            old = self.entry[i]
            if same and i < len(values) and type(values[i]) is type(old):
                mutates(old)  # an enclosing staged statement must carry it (and undo it)
                values[i] = write(old, values[i])
        return values


def is_original(obj):
    """``obj`` is a container that the innermost traced path works on in place
    (``kept.aliased``, or state the staged ``if`` carries): appending to it must
    change it, as Python does."""
    stack = _local.__dict__.get("originals")
    return bool(stack) and id(obj) in stack[-1]


def derived(new, old):
    """Note that list ``new`` is ``old`` changed (``af.append`` in a staged block)."""
    stack = _local.__dict__.get("lineage")
    if stack:
        stack[-1][id(new)] = (new, old)


def _derives(out, inp, origins):
    for _ in range(100_000):
        if out is inp:
            return True
        hit = origins.get(id(out))
        if hit is None or hit[0] is not out:
            return False
        out = hit[1]
    return False


_NO_DEFAULT = object()


def _get(obj, name, default=_NO_DEFAULT):
    if name == "value" and _is_variable(obj):
        return obj.get_value()
    return getattr(obj, name, Undefined(name) if default is _NO_DEFAULT else default)


def _set(obj, name, value):
    with _writable(obj):
        if isinstance(value, Undefined):
            if hasattr(obj, name):
                delattr(obj, name)
            return
        if name == "value" and _is_variable(obj):
            obj.set_value(value)
            return
        setattr(obj, name, value)


# Flax NNX Variables refuse writes made in a trace other than the one they were
# made in (``TraceContextError``), and a staged branch or loop body is such a
# trace. autoflow carries their values itself (as it does any attribute), so
# while a path is traced it gives each Variable the path writes a trace state of
# that trace, and puts the old one back when the path's trace ends.

def _is_variable(obj):
    return (hasattr(type(obj), "_check_can_update") and hasattr(obj, "get_value")
            and type(obj).__module__.startswith("flax."))


def _fresh_trace_state(obj):
    """Give NNX Variable ``obj`` a trace state of the current trace; return the
    old one (None when ``obj`` is not such a Variable or may already be written)."""
    if not _is_variable(obj):
        return None
    try:
        old = object.__getattribute__(obj, "_trace_state")
        if old.is_valid():
            return None
        object.__setattr__(obj, "_trace_state", type(old)())
    except Exception:  # another Flax layout: leave the Variable alone
        return None
    return old


class _writable:
    def __init__(self, obj):
        self.obj = obj

    def __enter__(self):
        self.old = _fresh_trace_state(self.obj)

    def __exit__(self, *exc):
        if self.old is not None:
            object.__setattr__(self.obj, "_trace_state", self.old)


def unlock(obj):
    """Before a write to NNX Variable ``obj`` on a staged path: let it be written
    until the innermost recording path ends."""
    old = _fresh_trace_state(obj)
    if old is not None:
        stack = _local.__dict__.setdefault("unlocked", [])
        if stack:
            stack[-1].append((obj, old))
        else:
            object.__setattr__(obj, "_trace_state", old)


def state(attrs=(), objects=(), labels=(), escapes=()):
    """The shared state of one converted statement (see ``Shared``)."""
    return Shared(attrs, objects, labels, escapes)
