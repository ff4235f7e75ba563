"""autoflow: Python control flow for ``jax.jit``.

``autoflow.jit`` converts ``if``/``while``/``for`` (with ``break``,
``continue``, ``return``, ``and``/``or``/``not`` and ``a if c else b``) into
``lax`` control flow with explicit carries when values are traced, and runs
them as Python when values are concrete.
"""

from collections.abc import Iterable
from typing import Any, TypeVar

from .api import convert, do_not_convert, jit, to_source
from .errors import (AutoflowError, ConversionError, ConversionWarning, InternalError,
                     LoopLimitError, PerformanceWarning, TracingError)
from .explain import explain
from .hooks import install_import_hook


_T = TypeVar("_T")


def unroll(iterable: Iterable[_T]) -> Iterable[_T]:
    """Run this ``for`` loop as Python (unrolled under ``jit``): ``for i in autoflow.unroll(range(4)):``."""
    from .runtime import unroll as _unroll

    return _unroll(iterable)


def trace_print(*args: Any, **kwargs: Any) -> None:
    """``print`` while JAX traces the function, not when the compiled code runs.

    In converted code ``print`` happens when the compiled code runs, on the
    path taken, at every call, as in Python. ``autoflow.trace_print`` is
    Python's ``print`` run once per trace, on every path traced (both
    branches of a traced ``if``), showing traced values as tracers: for
    looking at shapes and dtypes while debugging a trace:

    ```python
    autoflow.trace_print("x:", x.shape, x.dtype)
    ```
    """
    print(*args, **kwargs)


def roll(iterable: Iterable[_T], unroll: int = 1) -> Iterable[_T]:  # noqa: A002
    """Always stage this ``for`` loop as a ``lax`` loop; ``unroll`` goes to ``lax.fori_loop``/``lax.scan``."""
    from .runtime import roll as _roll

    return _roll(iterable, unroll)


__all__ = ["AutoflowError", "ConversionError", "ConversionWarning", "InternalError", "LoopLimitError",
           "PerformanceWarning", "TracingError", "convert", "do_not_convert", "explain",
           "install_import_hook", "jit", "roll", "to_source", "trace_print", "unroll"]
__version__ = "0.1.0"

# The runtime (`autoflow.runtime`, the operators converted code calls) imports JAX,
# so `import autoflow` leaves it to the first `convert`: the rewriter, the command
# line and `to_source` never need JAX. Where JAX is loaded already, the program is
# a JAX program that will convert: the runtime is loaded now, with the other
# imports, as a JAX library loads its code when imported, rather than in its first
# call (about 10 ms with `.pyc` files, 60 ms where each process compiles the
# sources: benchmarks/first_call.py).
def _load_runtime_with_jax() -> None:
    import sys

    if "jax" in sys.modules:
        from . import runtime  # noqa: F401


_load_runtime_with_jax()
