"""``autoflow.explain``: what each control-flow statement lowered to, at trace time.

```text
>>> print(autoflow.explain(collatz_steps, "i32"))
collatz_steps(i32[])
control flow at trace time:
  examples/collatz.py:30:5: while -> lax.while_loop
  examples/collatz.py:31:9: if -> lax.cond
jaxpr:
  { lambda ; a:i32[]. let ... }
```

The converted function (``autoflow.convert``) is traced with
``jax.make_jaxpr`` on abstract arguments while ``runtime.common.events`` records
what every operator did; the statements come from ``autoflow.check``, so a
statement that tracing never reached is listed as such.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import os
import re
from collections.abc import Callable
from typing import Any

__all__ = ["Explanation", "Lowering", "Static", "explain", "parse_spec"]


def _checker():
    """``autoflow.check``, imported when ``explain`` first needs it: ``import
    autoflow`` imports this module, and the checker (with the whole-module
    rewriter it uses) would add about 13 ms to every ``import autoflow``
    when Python compiles the sources afresh."""
    from . import check

    return check


_DTYPES = {
    "bool": "bool", "b": "bool", "pred": "bool",
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "c64": "complex64", "c128": "complex128",
}
_SPEC = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*)\s*(?:\[([^\]]*)\])?\s*$")


def _parse_spec_text(text: str):
    """``'f32[2,3]'`` -> ``('float32', (2, 3))``, checked without importing JAX."""
    m = _SPEC.match(text)
    if not m:
        raise ValueError(f"bad argument spec {text!r}: expected DTYPE or DTYPE[d0,d1,...], "
                         "e.g. f32[3] or i32")
    name, dims = m.group(1), m.group(2)
    dtype = _DTYPES.get(name, name)
    if dtype not in _DTYPES.values():
        import numpy as np

        try:
            dtype = np.dtype(dtype).name
        except TypeError:
            raise ValueError(f"bad argument spec {text!r}: unknown dtype {name!r} (use bool, "
                             "f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, c64, "
                             "c128 or a NumPy dtype name)") from None
    shape: tuple[int, ...] = ()
    if dims is not None and dims.strip():
        try:
            shape = tuple(int(d) for d in dims.split(","))
        except ValueError:
            raise ValueError(f"bad argument spec {text!r}: dimensions must be integers") from None
        if any(d < 0 for d in shape):
            raise ValueError(f"bad argument spec {text!r}: dimensions must be >= 0")
    return dtype, shape


def parse_spec(text: str) -> Any:
    """``'f32[2,3]'`` -> ``jax.ShapeDtypeStruct((2, 3), float32)``; ``'i32'`` is a scalar.

    Dtypes: ``bool``, ``f16``, ``bf16``, ``f32``, ``f64``, ``i8``...``i64``,
    ``u8``...``u64``, ``c64``, ``c128`` or a full NumPy name (``float32``).
    Raises ``ValueError`` for anything else.
    """
    import jax
    import jax.numpy as jnp

    dtype, shape = _parse_spec_text(text)
    return jax.ShapeDtypeStruct(shape, jnp.dtype(dtype))


_SHORT = {v: k for k, v in _DTYPES.items() if len(k) > 1 and k != "pred"}


def _short(sds) -> str:
    name = str(getattr(sds.dtype, "name", sds.dtype))
    return f"{_SHORT.get(name, name)}[{','.join(str(d) for d in sds.shape)}]"


@dataclasses.dataclass
class Lowering:
    """What one control-flow statement became during tracing."""

    filename: str
    line: int
    col: int | None            # 0-based
    kind: str                  # 'if', 'while', 'for', 'ternary'
    lowered: tuple             # distinct results in order: ('lax.cond',), ('python', 'lax.cond')...
    expected: str = ""         # what `autoflow check` says it becomes when traced ('' if unknown)
    problem: str = ""          # a fallback or failure `autoflow check` found
    function: str = ""         # the function it is in
    helper: bool = False       # in a function the explained one called (converted on the way)
    converted: bool = True     # False: the rewriter left it as a Python statement
    lanes: tuple = ()          # how its lanes may run under jax.vmap (lanes=), if staged

    def format(self) -> str:
        where = f"{_display(self.filename)}:{self.line}" + (
            f":{self.col + 1}" if self.col is not None else "")
        what = ", ".join(self.lowered) if self.lowered else "not reached"
        if not self.converted:
            what = f"python, not converted: {self.problem}"
        elif self.problem:
            what += f" ({self.problem})"
        if self.helper:
            what += f" (in {self.function})"
        return f"{where}: {self.kind} -> {what}"


def _display(filename: str) -> str:
    try:
        cwd = os.getcwd()
    except OSError:
        return filename
    if os.path.isabs(filename) and filename.startswith(cwd + os.sep):
        return os.path.relpath(filename, cwd)
    return filename


@dataclasses.dataclass
class Explanation:
    """The result of ``autoflow.explain``: ``print`` it, or read its fields."""

    function: str              # qualified name
    signature: str             # 'collatz_steps(i32[])'
    lowerings: list            # [Lowering], in source order
    jaxpr: object              # the jax.core.ClosedJaxpr of the converted function
    hlo: str | None = None     # StableHLO text when asked for

    def __str__(self) -> str:
        lines = [self.signature, "control flow at trace time:"]
        if self.lowerings:
            lines += ["  " + low.format() for low in self.lowerings]
        else:
            lines.append("  (none)")
        lines.append("jaxpr:")
        lines += ["  " + ln for ln in str(self.jaxpr).rstrip("\n").splitlines()]
        if self.hlo is not None:
            lines.append("stablehlo:")
            lines += ["  " + ln for ln in self.hlo.rstrip("\n").splitlines()]
        staged = [low for low in self.lowerings if low.lanes]
        if staged:
            lines.append("under jax.vmap, where a loop's condition differs by lane:")
            for low in staged:
                where = low.format().split(": " + low.kind + " -> ")[0]
                lines.append(f"  {where}: {low.kind} -> {'; or '.join(low.lanes)}")
        return "\n".join(lines) + "\n"

    __repr__ = __str__


class Static:
    """``Static(value)``: pass ``value`` to ``explain``'s function as it is, even a string."""

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"Static({self.value!r})"


def _is_traced_leaf(x):
    import jax

    if isinstance(x, (str, jax.ShapeDtypeStruct)):
        return True
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, type)


def _as_spec(x):
    import jax

    if isinstance(x, str):
        return parse_spec(x)
    if isinstance(x, jax.ShapeDtypeStruct):
        return x
    return jax.ShapeDtypeStruct(tuple(x.shape), x.dtype)


def _statements(original):
    """Static findings (``autoflow.check``) of ``original``, or None when they cannot be had."""
    from .core.naming import referenced_names
    from .core.parsing import SourceUnavailable, parse_function

    try:
        node, filename, _ = parse_function(original)
        code = original.__code__
        reserved = referenced_names(node) | set(code.co_freevars) | set(code.co_names)
        return _checker().check_function(node, filename, original.__qualname__, reserved=reserved)
    except (SourceUnavailable, Exception):  # noqa: BLE001 - only a guide; tracing decides
        return None


def _candidates(f):
    """Positions the runtime may report for finding ``f``.

    The statement's own start; and, for a statement spanning several lines,
    its end minus the operator's name: CPython >= 3.11 places a method call
    spanning lines at the end of its attribute, and the generated
    ``af.if_stmt`` takes the whole statement's extent.
    """
    out = {(f.line, f.col)}
    attr = _checker().ATTR_OF_KIND.get(f.kind)
    if attr and f.end_line is not None and f.end_line != f.line and f.end_col is not None:
        out.add((f.end_line, f.end_col - len(attr)))
    return out


def _file_findings(filename, cache):
    """Static findings of every function in ``filename`` (for helpers the function called)."""
    if filename not in cache:
        cache[filename] = []
        try:
            with open(filename, encoding="utf-8") as f:
                source = f.read()
            cache[filename] = _checker().check_source(source, filename)
        except Exception:  # noqa: BLE001 - unreadable or generated code: no static guide
            pass
    return cache[filename]


class _Index:
    """Finds the statement a runtime event belongs to."""

    def __init__(self):
        self.by_pos = {}

    def add(self, finding, low):
        kind = "if" if finding.kind == "case" else finding.kind  # a `case` stages as an `if`
        for pos in _candidates(finding):
            self.by_pos.setdefault((finding.filename, pos, kind), []).append(low)

    def find(self, site, statement):
        matches = self.by_pos.get((site.filename, (site.lineno, site.col), statement))
        if matches is None and site.col is None:
            matches = [low for (fn, (line, _), kind), lows in self.by_pos.items()
                       if fn == site.filename and line == site.lineno and kind == statement
                       for low in lows]
        return matches or []


def _row(f):
    return Lowering(f.filename, f.line, f.col, f.kind, (), f.becomes,
                    f.reason if not f.ok else "", f.function,
                    converted=f.status != _checker().FALLBACK)


def _lowerings(findings, log, filename, first, last):
    """Rows for ``findings`` (all of them, reached or not) and for statements of
    other functions that tracing went through (helpers converted on the way).

    ``findings`` None (no static analysis): one row per position the events name.
    """
    raw = findings is None
    rows, index = [], _Index()
    for f in findings or ():
        if f.kind != "function":
            low = _row(f)
            rows.append(low)
            index.add(f, low)
    cache, indexed, extra = {}, set(), {}
    lanes = []
    for e in log:
        site = e.site
        if site is None:
            continue
        if e.statement == "lanes":  # (the loop statement's event came first)
            lanes.append(e)
            continue
        matches = index.find(site, e.statement)
        if not matches and site.filename not in indexed:
            indexed.add(site.filename)
            for f in _file_findings(site.filename, cache):
                if f.kind == "function" or (f.filename == filename and first <= f.line <= last):
                    continue
                key = (f.filename, f.line, f.col, f.kind)
                low = extra.get(key) or extra.setdefault(key, _row(f))
                index.add(f, low)
            matches = index.find(site, e.statement)
        if not matches and raw:
            key = (site.filename, site.lineno, site.col, e.statement)
            low = extra.get(key) or extra.setdefault(
                key, Lowering(site.filename, site.lineno, site.col, e.statement, ()))
            matches = [low]
        if not matches:
            # A statement the rewriter generated (`if not broke:`...) shares its
            # anchor's position but not its kind, or code without source.
            continue
        for low in matches:
            if e.lowered not in low.lowered:
                low.lowered += (e.lowered,)
    for e in lanes:
        for low in index.find(e.site, "while") + index.find(e.site, "for"):
            if e.lowered not in low.lanes:
                low.lanes += (e.lowered,)
    others = sorted((low for low in extra.values() if low.lowered),
                    key=lambda r: (r.filename != filename, r.filename, r.line, r.col or 0))
    for low in others:
        low.helper = bool(low.function)
    return rows + others


def explain(fn: Callable[..., Any], *args: Any, hlo: bool = False, **kwargs: Any) -> Explanation:
    """Trace ``autoflow.convert(fn)`` on abstract arguments and say what its control flow became.

    Each positional or keyword argument is either traced or concrete:

    * traced: a spec string (``"f32[3]"``, ``"i32"``, ``"f32[2,2]"``,
      ``"bool"``), a ``jax.ShapeDtypeStruct``, or an array (only its shape
      and dtype are used);
    * concrete: anything else (Python numbers, ``True``, ``None``...), passed
      as it is, like a static argument; ``Static(value)`` passes any value
      (a string, say) as it is.

    Pytrees mix both (``{"w": "f32[3]", "n": 4}``). Returns an
    ``Explanation``: printing it shows, for every ``if``/``while``/``for``
    (and conditional expression) of ``fn``, what tracing lowered it to
    (``python``, ``lax.cond``, ``lax.while_loop``, ``lax.fori_loop``...), then
    the jaxpr, and with ``hlo=True`` the StableHLO text of
    ``jax.jit(...).lower(...)``.
    """
    import jax

    from .api import convert
    from .runtime.common import events

    original: Any
    converted: Any
    if inspect.ismethod(fn):
        original, converted = fn.__func__, convert(fn, strict=True)
    else:
        original = fn
        if getattr(fn, "__autoflow_converted__", False) or not inspect.isfunction(fn):
            original = inspect.unwrap(fn)  # autoflow.jit(f), autoflow.convert(f)
        if not inspect.isfunction(original):
            raise TypeError(f"autoflow.explain needs a Python function, got {fn!r}")
        converted = convert(original, strict=True)

    leaves, treedef = jax.tree_util.tree_flatten(
        (args, kwargs), is_leaf=lambda x: isinstance(x, (str, Static)))
    traced_at = [i for i, leaf in enumerate(leaves) if _is_traced_leaf(leaf)]
    specs = [_as_spec(leaves[i]) for i in traced_at]
    leaves = [leaf.value if isinstance(leaf, Static) else leaf for leaf in leaves]

    from .runtime.common.teach import teaching

    converted = teaching(converted)  # (JAX's tracing errors in the user's terms, as `jit`'s)

    def flat(*traced):
        filled = list(leaves)
        for i, t in zip(traced_at, traced):
            filled[i] = t
        a, kw = jax.tree_util.tree_unflatten(treedef, filled)
        return converted(*a, **kw)

    flat.__name__ = getattr(original, "__name__", "f")
    flat.__qualname__ = getattr(original, "__qualname__", flat.__name__)
    flat.__wrapped__ = original  # type: ignore[attr-defined]  # (JAX names the user's function)

    from .runtime.common.events import plain_loops

    from .runtime.jax import dce_for_display

    with events.recording() as log, plain_loops():  # show the while loops they compile to
        jaxpr = dce_for_display(jax.make_jaxpr(flat)(*specs))
    text_hlo = jax.jit(flat).lower(*specs).as_text() if hlo else None

    findings = _statements(original)
    code = original.__code__
    try:
        src_lines, first = inspect.getsourcelines(original)
        last = first + len(src_lines) - 1
    except (OSError, TypeError):
        first, last = code.co_firstlineno, code.co_firstlineno
    lowerings = _lowerings(findings, log, code.co_filename, first, last)

    spec_of = dict(zip(traced_at, specs))
    described = [_Shown(_short(spec_of[i])) if i in spec_of else _literal_repr(leaf)
                 for i, leaf in enumerate(leaves)]
    a, kw = jax.tree_util.tree_unflatten(treedef, described)
    shown = [_plain(x) for x in a] + [f"{k}={_plain(v)}" for k, v in kw.items()]
    signature = f"{original.__qualname__}({', '.join(shown)})"
    return Explanation(original.__qualname__, signature, lowerings, jaxpr, text_hlo)


class _Shown(str):
    """A string that reprs as itself (so specs print without quotes)."""

    def __repr__(self):
        return str(self)


def _literal_repr(x):
    return _Shown(repr(x))


def _plain(x):
    return x if isinstance(x, str) else repr(x)


def parse_cli_arg(text: str):
    """A command-line ``--args`` item: a spec (``f32[3]``) or a Python literal (``50``, ``True``)."""
    m = _SPEC.match(text)
    if m and m.group(1) not in ("True", "False", "None"):
        _parse_spec_text(text)
        return text  # a spec: `explain` traces string arguments
    try:
        return Static(ast.literal_eval(text))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise ValueError(f"bad argument {text!r}: expected a spec such as f32[3], i32, bool, "
                         "or a Python literal such as 50 or 1e-6") from None

