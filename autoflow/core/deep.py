"""Convert deeply nested code: retry in a thread with a large stack.

The parser, ``gast``, the passes and ``ast.unparse`` recurse once per level of
nesting (blocks, ``elif`` chains, ``a + b + ...`` sums). Python itself compiles
such files, so autoflow must convert them too. The common case runs as it is;
only a ``RecursionError`` retries the work in a thread whose stack is large
enough for a raised recursion limit. Input deeper than that still raises
``RecursionError``, which the callers turn into a clear message.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import threading

STACK_BYTES = 512 * 1024 * 1024  # virtual: only the pages touched are used
RECURSION_LIMIT = 200_000

_lock = threading.Lock()


def run_deep(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, retried with a deep stack on ``RecursionError``."""
    try:
        return fn(*args, **kwargs)
    except RecursionError:
        pass
    return deep_call(fn, *args, **kwargs)


def deep_call(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a thread with a large stack and recursion limit."""
    result = {}

    def target():
        try:
            result["value"] = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            result["error"] = e

    with _lock:
        old_stack = threading.stack_size()
        old_limit = sys.getrecursionlimit()
        try:
            threading.stack_size(STACK_BYTES)
            thread = threading.Thread(target=target, name="autoflow-deep-conversion")
            sys.setrecursionlimit(max(old_limit, RECURSION_LIMIT))
            thread.start()
            thread.join()
        finally:
            threading.stack_size(old_stack)
            sys.setrecursionlimit(old_limit)
    if "error" in result:
        raise result["error"]
    return result["value"]


@contextlib.contextmanager
def paused_gc():
    """The cyclic GC paused for a conversion (``autoflow.convert``/``jit`` and
    ``autoflow convert``): it makes many AST nodes that live until it ends and no
    cycles worth collecting, and full collections walking all of them again made
    time per line grow with the size of a function (a 1,000-branch chain: 1.6x
    the time per line with the GC on, against 1.15x for a 10-branch one)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
