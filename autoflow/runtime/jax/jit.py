"""What ``jax.jit(f)`` returns, told apart, and the arguments it was given (``jit wrapper``).

A ``jax.jit(f)`` made before autoflow saw ``f`` (at module level) is made again of
``f`` converted, with the same arguments (``api.convert``).
"""

from __future__ import annotations

import jax

from .paths import _check, _lose


# -- jax.jit around a user function ------------------------------------------------

def _probe_fn(x, n=0):
    return x


_JIT_TYPE = None  # the type of what `jax.jit(f)` returns (PjitFunction)
_JIT_INFO = "_jit_info"  # its private attribute holding the arguments jax.jit was given


@_check("jit wrapper")
def _find_jit_wrapper():
    global _JIT_TYPE
    _JIT_TYPE = type(jax.jit(_probe_fn))
    # (`inline` as this JAX keeps it when not given: False, or from 0.12 `Inline.AUTO`)
    default = (jit_options(jax.jit(_probe_fn)) or {}).get("inline", False)
    want = dict(static_argnums=(1,), static_argnames=("n",), donate_argnums=(),
                donate_argnames=(), keep_unused=False, inline=default)
    got = jit_options(jax.jit(_probe_fn, static_argnums=1))
    if got != want:
        return _lose("jit wrapper", f"jax.jit's {_JIT_INFO} gives {got}")
    return None


def is_jit_wrapper(f) -> bool:
    """Is ``f`` what ``jax.jit(fn)`` returns, around a Python callable (``__wrapped__``)?
    (Told by its type: that of ``jax.jit`` of a function of autoflow's.)"""
    return type(f) is _JIT_TYPE and callable(getattr(f, "__wrapped__", None))


def jit_options(f):
    """The keyword arguments ``jax.jit`` was given for ``f`` that matter inside another
    trace (static and donated arguments, ``keep_unused``, ``inline``), read from its
    private ``_jit_info`` (0.4.3x-0.12); None where that is missing or where ``f`` was given
    shardings, layouts, a device or compiler options, which could not be given again
    faithfully (``jax.jit(f)`` of a converted ``f`` is then not made)."""
    info = getattr(f, _JIT_INFO, None)
    try:
        unset = type(info.in_shardings_leaves[0]).__name__ if info.in_shardings_leaves else None
        if info.user_specified_in_shardings or any(
                type(x).__name__ != unset for x in info.out_shardings_leaves) \
                or any(x is not None for x in info.in_layouts_leaves + info.out_layouts_leaves) \
                or info.device is not None or info.backend is not None \
                or getattr(info, "compiler_options_kvs", ()) or info.use_resource_env:
            return None
        return dict(static_argnums=tuple(info.static_argnums),
                    static_argnames=tuple(info.static_argnames),
                    donate_argnums=tuple(info.donate_argnums),
                    donate_argnames=tuple(info.donate_argnames),
                    keep_unused=bool(info.keep_unused), inline=_inline(info.inline))
    except (AttributeError, IndexError, TypeError):
        return None


def _inline(value):
    """``jax.jit``'s ``inline`` as it was given again: a bool, or (from JAX 0.12) the
    ``Inline`` member JAX made of it (which ``jax.jit`` takes as it is)."""
    return bool(value) if isinstance(value, (bool, int)) else value


