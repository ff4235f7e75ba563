"""Python tables indexed by traced integers, and writes into them.

``getitem(table, i)``: a Python list or tuple of numbers or of same-shape arrays, or
a NumPy array, indexed by a traced integer is indexed as one stacked ``jnp`` array
(so a loop over ``i`` stays rolled); an index out of range raises Python's
``IndexError`` when the compiled code runs. ``get`` (``dict.get``), and the checks
of writes into lists and NumPy arrays at traced indices (``setitem_list``,
``check_numpy_write``).
"""

from __future__ import annotations

import builtins as _b

import numpy as np
import jax
import jax.numpy as jnp

from ...core.origin import message, user_site
from ...errors import ConversionError
from ..jax import current_trace, encloses
from ..common.values import any_traced, describe, is_array_like, is_extended, is_traced, structure


def _index_traced(index):
    if isinstance(index, tuple):
        return _b.any(is_traced(i) for i in index)
    return is_traced(index)


_PY_SCALARS = (_b.bool, _b.int, _b.float, _b.complex)


def _python_numbers(items):
    """Is every item a Python number (``bool``/``int``/``float``/``complex``, no subclass)?"""
    kinds = _PY_SCALARS
    return _b.all(v.__class__ in kinds for v in items)


def _constant(items):
    """A table of Python numbers as one array constant, typed as ``jnp.stack`` of the
    numbers would type it (JAX's weak type for ``int``/``float``/``complex``, which a
    Python number keeps in arithmetic): one constant of the table's length instead of
    one per item (which takes time quadratic in the length to trace)."""
    from jax import lax

    kinds = {v.__class__ for v in items}
    dtype = jnp.result_type(*(k(0) for k in kinds))
    arr = jnp.asarray(np.asarray(items, dtype=dtype))
    if kinds == {_b.bool}:
        return arr
    # (`lax.full` of a Python number is weakly typed, and `.at[...].set` keeps the
    # weak type of the array it writes into)
    zero = 0j if _b.complex in kinds else 0.0 if _b.float in kinds else 0
    return lax.full(arr.shape, zero).at[...].set(arr)


_ITEM = (_b.int, _b.float, _b.bool, _b.complex, np.generic, np.ndarray, jax.Array)

# id(list) -> [(the list's items when it was stacked, the stacked array, the trace it
# was made in), ...]: a table of traced items read again (its items the same objects) is
# not stacked again.
_STACKS = {}


def _leaves_of(table):
    """The items of a (nested) list or tuple, flat, in order."""
    out = []
    for v in table:
        if isinstance(v, (list, tuple)):
            out += _leaves_of(v)
        else:
            out.append(v)
    return out


def remember_stack(table, arr):
    """``arr`` is (nested) list ``table`` stacked, its items as they are now (rows of
    ``arr``, written back by ``setitem_list`` or made by a packed loop carry): a read
    or write of it at a traced index in this trace uses ``arr``, not a new stack."""
    if _b.len(_STACKS) > 4096:
        _STACKS.clear()
    # (a few per list: a branch's write leaves the list as it was for the other branch)
    entries = _STACKS.setdefault(id(table), [])
    entries.insert(0, (_leaves_of(table), arr, current_trace()))
    del entries[4:]


def _stack(table):
    """``table`` (numbers, same-shape arrays, or lists/tuples of them, nested to one
    depth everywhere) as one array, or None where it cannot be."""
    if isinstance(table, np.ndarray):
        return jnp.asarray(table) if table.dtype.kind in "biufc" else None
    items = list(table)
    if not items:
        return None
    leaves = None
    for cached in _STACKS.get(id(table), ()) if isinstance(table, list) else ():
        if not encloses(cached[2]):
            continue
        # (the items are the rows of `cached[1]`, one by one: it is their stack, made in
        # this trace or one this trace is nested in, a branch reading the table)
        leaves = _leaves_of(table) if leaves is None else leaves
        if _b.len(cached[0]) == _b.len(leaves) and _b.all(a is b for a, b in zip(cached[0], leaves)):
            return cached[1]
    if _python_numbers(items):
        return _constant(items)
    if _b.all(isinstance(v, (list, tuple)) for v in items):
        rows = [_stack(v) for v in items]
        if _b.any(r is None for r in rows) or _b.len({r.shape for r in rows}) != 1:
            return None
        return jnp.stack(rows)
    if not _b.all(isinstance(v, _ITEM) for v in items):
        return None
    if _b.len({np.shape(v) for v in items}) != 1:
        return None
    out = jnp.stack([jnp.asarray(v) for v in items])
    if isinstance(table, list) and any_traced(items):
        remember_stack(table, out)
    return out


def stacked(table, what, site=None):
    """``table`` (a list/tuple of numbers or same-shape arrays, a list of such lists,
    or a NumPy array) as one ``jnp`` array; a clear error when its items cannot stack."""
    out = _stack(table)
    if out is not None:
        return out
    site = site or user_site(3)
    kind = type(table).__name__
    raise ConversionError(message(
        site, f"{what} a Python {kind} with a traced index, but its items "
        f"({structure(table) if not isinstance(table, np.ndarray) else table.dtype}) "
        "cannot be stacked into one array",
        f"Only a {kind} of numbers or of arrays of one shape (or of lists of them, all of one "
        "length) can be indexed by a traced value. Make the index concrete (a Python loop: "
        "`autoflow.unroll(...)`), or keep the items in one JAX array."))


# id(a row read from a table at a traced index) -> (a weak reference to it, the kinds of
# the table's levels below the one read: "list", "tuple" or "ndarray" each). A row of a
# table of lists is no list of the table's, so a write into it is autoflow's error
# (``is_table_row``); an index into any row is checked as Python checks it.
_ROWS = {}


def _levels(table):
    """The kinds of ``table``'s levels, outermost first (``("list", "tuple")`` for a list
    of tuples of numbers; ``"ndarray"`` for a NumPy array, whose rows are arrays too)."""
    kinds = []
    v = table
    while isinstance(v, (list, tuple, np.ndarray)):
        if isinstance(v, np.ndarray):
            kinds.append("ndarray")
            break
        kinds.append("list" if isinstance(v, list) else "tuple")
        if not v:
            break
        v = v[0]
    return tuple(kinds)


def _row_levels(x):
    ref = _ROWS.get(id(x))
    return ref[1] if ref is not None and ref[0]() is x else None


def _remember_row(out, levels):
    if not levels or np.ndim(out) == 0:
        return
    if _b.len(_ROWS) > 512:
        for k in [k for k, v in _ROWS.items() if v[0]() is None]:
            del _ROWS[k]
    import weakref
    _ROWS[id(out)] = (weakref.ref(out), levels)


def _int_index(i):
    """Is ``i`` one integer index (a Python or NumPy integer, or a traced integer scalar)?"""
    if isinstance(i, (_b.bool, np.bool_)):
        return False
    if isinstance(i, (_b.int, np.integer)):
        return True
    return is_traced(i) and np.ndim(i) == 0 and jnp.issubdtype(jnp.result_type(i), jnp.integer)


_CLAMP_NOTE = ("A {kind} indexed by a traced index is checked when the compiled code "
               "runs, as Python checks it; for JAX's clamped indexing instead, index "
               "`jnp.asarray(table)[i]`, or use `jnp.take(table, i, mode=\"clip\")`.")


def _numpy_index_error(shape, index, site):
    """NumPy's ``IndexError`` for ``index`` (run-time values) into an array of ``shape``."""
    from ..effects.checks import fail

    try:
        np.broadcast_to(np.False_, shape)[tuple(_b.int(i) for i in index)]
    except IndexError as e:
        raise fail(e, site, _CLAMP_NOTE.format(kind="NumPy array")) from None


def check_index(kind, shape, index, site, write=False):
    """Python's ``IndexError`` where ``index`` (a traced or concrete integer, or a tuple
    of them into a NumPy array) is out of range of a table of ``kind`` (``"list"``,
    ``"tuple"``, ``"ndarray"``) whose stacked shape is ``shape``: at once where it is
    known, else when the compiled code runs. A negative index in range counts from
    the end, as in Python. ``write``: ``x[i] = v`` (Python's message says so)."""
    from ..effects import later

    where = index if isinstance(index, tuple) else (index,)
    if _b.len(where) > _b.len(shape) or not _b.all(_int_index(i) for i in where):
        return  # (not Python's integer index: JAX's own indexing decides)
    bad = False
    for i, n in zip(where, shape):
        out = (i >= n) | (i < -n)
        bad = out if bad is False else bad | out
    if kind == "ndarray":
        if not is_traced(bad):
            if bad:
                _numpy_index_error(shape, where, site)
            return
        later.later(_numpy_index_error, (tuple(shape), where, site), site=site, when=bad)
        return
    text = f"{kind} assignment index out of range" if write else f"{kind} index out of range"
    later.check(bad, IndexError, text, site, _CLAMP_NOTE.format(kind=f"Python {kind}"))


def getitem(table, index):
    """``table[index]``; a Python table indexed by a traced integer is stacked.

    Plain Python::

        def getitem(table, index):
            return table[index]

    Of a dict: Python's ``KeyError`` where a staged loop that sets the key ran no
    iteration (``effects.unset.read_key``). An index out of range raises Python's
    ``IndexError`` (``list index out of range``;
    of a NumPy array, NumPy's message) when the compiled code runs (``check_index``),
    where JAX's indexing would clamp; a tuple index into a list is Python's ``TypeError``.
    A table of lists read at a traced index gives its row as an array (``t[i][j]``
    then reads on, checked as the row's list would be); that row is no list of the
    table's, so a write into it is autoflow's error (``setitem``), as Python would
    change the table.
    """
    if type(table) is dict:  # `d["k"]` where a staged loop may have left "k" unset
        from ..effects.unset import read_key

        return read_key(table, index, user_site())
    levels = _row_levels(table) if _ROWS and isinstance(table, jax.Array) else None
    if levels is not None:  # `t[i][j]`: `j` into the row `t[i]` read at a traced `i`
        if levels[0] != "ndarray" and isinstance(index, tuple):
            raise TypeError(f"{levels[0]} indices must be integers or slices, not tuple")
        check_index(levels[0], np.shape(table), index, user_site())
        out = table[index]
        _remember_row(out, levels if levels[0] == "ndarray" else levels[1:])
        return out
    if isinstance(table, (list, tuple, np.ndarray)) and _index_traced(index):
        levels = _levels(table)
        if levels[0] != "ndarray" and isinstance(index, tuple):
            kind = "list" if isinstance(table, list) else "tuple"
            raise TypeError(f"{kind} indices must be integers or slices, not tuple")
        site = user_site()
        table_array = stacked(table, "this line indexes", site)
        check_index(levels[0], table_array.shape, index, site)
        out = table_array[index]
        _remember_row(out, levels if levels[0] == "ndarray" else levels[1:])
        return out
    return table[index]


def get(d, *args):
    """``d.get(key, default=None)``.

    Plain Python::

        def get(d, *args):
            return d.get(*args)

    Where a staged loop that sets ``d[key]`` in its body may have run no iteration
    (``effects.unset.key_flag``), the value where it ran and ``default`` where it did not
    (``jnp.where``), as Python; a ``default`` that cannot stand in for the value
    (``None``, another shape) is autoflow's error at the line.
    """
    if type(d) is dict and args and _b.len(args) <= 2:
        from ..effects.unset import key_flag

        try:
            value = d.get(args[0], _MISSING)
        except TypeError:  # (an unhashable key: Python's error below)
            value = _MISSING
        flag = None if value is _MISSING else key_flag(value)
        if flag is not None:
            default = args[1] if _b.len(args) == 2 else None
            if not (is_array_like(value) and is_array_like(default)
                    and np.shape(default) in ((), np.shape(value))
                    and not is_extended(jnp.result_type(value))):
                raise ConversionError(message(
                    user_site(), f"this line reads the key {args[0]!r} with `get`, which a "
                    "traced loop sets in its body: where the loop runs no iteration Python "
                    f"gives the default, {describe(default)}, which cannot stand in for "
                    f"{describe(value)} in compiled code",
                    f"Give a default of the value's shape and dtype (`.get({args[0]!r}, "
                    f"0.0)`), or set the key before the loop."))
            return jnp.where(flag, value, default)
    return d.get(*args)


_MISSING = object()


def is_table_row(x):
    """Was ``x`` read from a table of lists at a traced index (``getitem``)?"""
    levels = _row_levels(x) if _ROWS else None
    return levels is not None and levels[0] == "list"


def unstacked(arr, depth):
    """The items of ``arr`` below its first ``depth`` axes, in order, from one ``unstack``
    (not a slice per item)."""
    return iter(jnp.unstack(jnp.reshape(arr, (-1,) + arr.shape[depth:])))


def _write_back(x, arr):
    """Put the items of ``arr`` into the (nested) list ``x``, in place (one ``unstack``
    of ``arr``, flat, not a slice per item)."""
    depth, v = 0, x
    while isinstance(v, list) and v:
        depth, v = depth + 1, v[0]
    items = unstacked(arr, depth)

    def put(level):
        for k in _b.range(_b.len(level)):
            if isinstance(level[k], list):
                put(level[k])
            else:
                level[k] = next(items)
    put(x)


def _rows_distinct(x, seen=None):
    seen = set() if seen is None else seen
    for v in x:
        if isinstance(v, list):
            if id(v) in seen:
                return False
            seen.add(id(v))
            if not _rows_distinct(v, seen):
                return False
    return True


def setitem_list(x, index, value, op, binops, path=()):
    """``x[index] = value`` on a list with a traced index: the list's items
    become the rows of ``stacked(x).at[index].set(value)``. ``path``: the indices
    before ``index`` (``x[i][j] = v``: ``path=(i,)``, ``index=j``); a list of lists is
    updated in place, each row keeping its identity. An index out of range is Python's
    ``IndexError`` when the compiled code runs (where JAX's update would be dropped)."""
    site = user_site()
    where = tuple(path) + (index,)
    if _b.len(where) > 1:
        bad = [v for v in x if not isinstance(v, list)]
        if bad:
            raise ConversionError(message(
                site, "this line writes into a row of a Python list chosen by a traced "
                f"index, but a row is {describe(bad[0])}, which Python cannot write into "
                "(or not the same way at every index)",
                "Make every row a list, or keep the table in one JAX array."))
    if not _rows_distinct(x):
        raise ConversionError(message(
            site, "this line writes into a Python list of lists at a traced index, but "
            "some of its rows are the same list (`[[0] * k] * m` makes one row `m` times), "
            "so Python's write changes all of them",
            "Make each row a list of its own: `[[0] * k for _ in range(m)]`."))
    arr = stacked(x, "this line writes into", site)
    for k, i in enumerate(where):  # Python reads `x[i]`, then writes `x[i][j] = value`
        check_index("list", arr.shape[k:k + 1], i, site, write=k == _b.len(where) - 1)
    at = where if _b.len(where) > 1 else index
    if op is None:
        arr = arr.at[at].set(value)
    else:
        arr = arr.at[at].set(binops[op](arr[at], value))
    _write_back(x, arr)
    remember_stack(x, arr)  # (its items are the rows of `arr`: read again, not stacked)
    return x


def check_numpy_write(buf, index, value, op=None):
    """``buf[index] = value`` on a NumPy array: a traced ``value`` (or ``index``)
    cannot go into it (NumPy would say "setting an array element with a
    sequence"); autoflow's error names the buffer and the ``jnp`` way."""
    if buf.dtype == object or not any_traced((index, value)):
        return
    site = user_site(2)
    name, index_src, value_src = _write_parts(site)
    what = "value" if any_traced(value) else "index"
    target = f"`{name}`" if name else "this NumPy array"
    at = {None: "set", "+": "add", "*": "multiply", "/": "divide", "**": "power"}.get(op)
    new = (f"`{name} = {name}.at[{index_src}].{at}({value_src})`" if name and index_src
           and value_src and at else "`buf = buf.at[i].set(v)`")
    raise ConversionError(message(
        site, f"this line writes a traced {what} into {target}, a NumPy array "
        f"({buf.dtype}{list(buf.shape)}); a NumPy array holds only concrete numbers, and "
        "this value is known only when the compiled code runs",
        f"Make {target} a JAX array (`jnp.zeros(...)` instead of `np.zeros(...)`) and write "
        f"with {new}: a JAX array is updated functionally, and autoflow carries it through "
        "loops and branches."))


def _write_parts(site):
    """``(buffer name, index source, value source)`` of the item assignment on
    ``site``'s line (Nones where the line says otherwise)."""
    import ast

    try:
        stmt = ast.parse(site.source_line().strip()).body[0]
    except (AttributeError, SyntaxError, IndexError, ValueError):
        return None, None, None
    target = stmt.targets[0] if isinstance(stmt, ast.Assign) and _b.len(stmt.targets) == 1 \
        else stmt.target if isinstance(stmt, ast.AugAssign) else None
    if not isinstance(target, ast.Subscript) or not isinstance(target.value, ast.Name):
        return None, None, None
    return target.value.id, ast.unparse(target.slice), ast.unparse(stmt.value)
