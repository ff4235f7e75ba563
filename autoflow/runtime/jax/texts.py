"""JAX's texts autoflow reads: its error messages, a tracer's text (``error texts``).

``JAX_TEXTS`` holds every pattern; ``matches_jax_error``, ``jax_error_argument``,
``jax_error_wants_shape`` and ``shows_tracer`` are the questions the rest of
autoflow asks of them (``common.teach`` re-issues JAX's errors with them).
"""

from __future__ import annotations

import re

import jax
import numpy as np

from .paths import _check, _lose


# -- JAX's texts: its error messages, a tracer's text ----------------------------------

# What autoflow reads in JAX's messages (``error texts``, ``run-time errors``).
JAX_TEXTS = {
    # `jnp.zeros(n)` with a traced `n` (a TypeError)
    "traced shape": re.compile(r"Shapes must be 1D sequences of concrete values"),
    # `x[:n]` with a traced `n` (an IndexError; JAX 0.12: "Array slice indices must have
    # static start/stop/step")
    "traced slice": re.compile(r"Slice entries must be static integers"
                               r"|slice indices must have static start/stop/step"),
    # a value computed from constants only, with `jnp`
    "from constants": re.compile(r"became a tracer due to JAX operations"),
    # that a value depends on an argument of the traced function (group 1: its name)
    "argument": re.compile(r"depends on the value of the argument(?: (\w+))?"),
    # where JAX's own explanation of the problem ends
    "details": re.compile(r"See https|The error occurred while tracing"),
    # how JAX describes every traced value ("traced array with shape float32[3]")
    "value shape": re.compile(r"with shape \w+\[[^\]]*\]"),
    "must be static": re.compile(r"must be static"),
    # a tracer's text (`JitTracer(~int32[])`, `VmapTracer(...)`, older JAX's `Traced<...>`)
    "tracer": re.compile(r"\b\w*Tracer\(|Traced<"),
    # a tracer's class or text anywhere ("unhashable type: 'DynamicJaxprTracer'", "tracer")
    "tracer named": re.compile(r"Tracer\b|Traced<|\btracer"),
    # a traced value put in a set or used as a dict key (a TypeError)
    "unhashable": re.compile(r"unhashable type: '\w*Tracer'"),
    # a failed callback, as JAX's C++ dispatch reports it (a ValueError)
    "internal": re.compile(r"INTERNAL"),
    # Ctrl-C delivered inside a callback (the callback's traceback is in JAX's message)
    "interrupted": re.compile(r"\nKeyboardInterrupt"),
}


def jax_text(kind, text):
    """The match of JAX's text of ``kind`` (a key of ``JAX_TEXTS``) in ``text``, or None."""
    return JAX_TEXTS[kind].search(text)


def matches_jax_error(kind, text) -> bool:
    """Does ``text`` (an error's) hold JAX's text of ``kind``?"""
    return jax_text(kind, text) is not None


def jax_error_argument(text):
    """The argument of the traced function JAX's error ``text`` says a value depends on."""
    m = jax_text("argument", text)
    return m.group(1) if m else None


def jax_error_wants_shape(text) -> bool:
    """Does JAX's error ``text`` say that a shape or size was needed (``jnp.arange(n)``:
    "It arose in the jnp.arange argument 'stop'"), not a truth value or a Python number
    (``float(x)``: "The problem arose with the `float` function")?"""
    head = JAX_TEXTS["details"].split(text, maxsplit=1)[0]
    head = JAX_TEXTS["value shape"].sub("", head)
    if "shape" in head.lower() or matches_jax_error("must be static", head):
        return True
    return "argument" in head and re.search(r"\b(jnp|jax\.numpy|numpy|np)\.\w", head) is not None


def shows_tracer(text) -> bool:
    """Does ``text`` (a string made while tracing) show a JAX tracer's text?"""
    return matches_jax_error("tracer", text)


@_check("error texts")
def _check_error_texts():
    """Does JAX still word its errors as ``JAX_TEXTS`` reads them?"""
    import jax.numpy as jnp

    def raised(fn, *args):
        try:
            jax.make_jaxpr(fn)(*args)
        except Exception as e:  # noqa: BLE001 - the error looked for
            return e
        return None

    shown = []
    jax.make_jaxpr(lambda x: shown.append(str(x)) or x)(np.float32(1.0))
    shape = raised(lambda n: jnp.zeros((n,)), 1)
    sliced = raised(lambda x, n: x[:n], np.ones(3, np.float32), 1)
    constant = raised(lambda: int(jnp.ceil(jnp.float32(2.5))))
    argument = raised(lambda x: int(x), np.float32(1.0))
    arange = raised(lambda n: jnp.arange(n), 3)
    problems = [what for what, ok in (
        ("a tracer's text", bool(shown) and shows_tracer(shown[0])),
        ("traced shape", isinstance(shape, TypeError)
         and matches_jax_error("traced shape", str(shape))),
        ("traced slice", isinstance(sliced, IndexError)
         and matches_jax_error("traced slice", str(sliced))),
        ("from constants", constant is not None
         and matches_jax_error("from constants", str(constant))),
        ("argument", argument is not None and jax_error_argument(str(argument)) == "x"
         and matches_jax_error("details", str(argument))
         and not jax_error_wants_shape(str(argument))),
        ("a shape needed", arange is not None and jax_error_wants_shape(str(arange))),
    ) if not ok]
    if problems:
        return _lose("error texts", "JAX words these otherwise: " + ", ".join(problems))
    return None
