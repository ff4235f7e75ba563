"""Advice for values a staged ``if`` or loop cannot carry, in the user's terms.

``value_advice``: what a variable that is no array, or changes type, should be;
``static_bound``: how to make a loop's bound static (``static_argnames``);
``growing_list``: a list that grows in a traced loop.
"""

from __future__ import annotations

import ast

from .teach import _internal, _params, _traced_names, is_generated, static_candidate


def _show(x):
    """A non-array value as the message shows it: its repr when short."""
    from .values import describe

    if isinstance(x, (str, bytes, bool, int, float)) or x is None:
        text = repr(x)
        return text if len(text) <= 30 else describe(x)
    if callable(x):
        name = getattr(x, "__name__", None)
        return f"the function `{name}`" if name and name != "<lambda>" else "a function (lambda)"
    return describe(x)


def _kind(x):
    from .values import is_array_like

    if isinstance(x, (list, tuple, dict)):
        items = list(x.values()) if isinstance(x, dict) else list(x)
        kinds = [_kind(i) for i in items]
        others = [k for k in kinds if k != "array"]
        return others[-1] if others else "array"
    if x is None:
        return "none"
    if isinstance(x, (str, bytes)) or getattr(x, "autoflow_kind", "").startswith("a string"):
        return "str"
    if callable(x) and not is_array_like(x):
        return "function"
    if is_array_like(x):
        return "array"
    return "object"


def value_advice(label, a, b, construct):
    """What to do when ``label``'s values ``a``/``b`` (on the two paths of a
    traced ``if``, or before/after an iteration of a traced loop) are not both
    arrays: advice that fits their type, or ``None`` when they are arrays."""
    kinds = {_kind(a), _kind(b)} - {"array"}
    if not kinds:
        return None
    lbl = f"`{label}`"
    if construct == "if":
        same = "the same value on both paths"
        choose = "which one is chosen depends on a traced condition, known only at run time"
    else:
        same = "the same value in every iteration"
        choose = "a traced loop can only carry arrays"
    if "function" in kinds:
        return (f"{lbl} holds a function, and {choose}" if construct == "if" else
                f"{lbl} holds functions made in this loop, and {choose}",
                "Keep the results of calling the functions (arrays) instead of the functions, "
                "calling them inside the branch or loop body; to pick one of several functions at run time use "
                "`lax.switch(index, [f, g], x)`; or make the loop run as Python with a static "
                "bound (`autoflow.unroll(range(n))`).")
    if "str" in kinds:
        names = (f"[{b!r}, {a!r}]" if construct == "if" and isinstance(a, str)
                 and isinstance(b, str) and len(a) + len(b) < 40 else "['no', 'yes']")
        shown = (f"{lbl} is {_show(a)} on one path and {_show(b)} on the other"
                 if construct == "if" else f"{lbl} is {_show(a)} before an iteration and "
                 f"{_show(b)} after it")
        return (f"{shown}; a string is not an array, and {choose}",
                f"Give {lbl} {same}, or compute an integer code instead "
                f"(`code = jnp.where(cond, 1, 0)`) and turn it into a string outside the "
                f"jitted function (`{names}[int(code)]`).")
    if "none" in kinds:
        return (f"{lbl} is None on one path and {_show(b if a is None else a)} on the other, "
                f"and {choose}",
                f"Give {lbl} an array value on every path (for example `jnp.zeros(shape)` "
                "before the statement, with a separate boolean array saying whether it is "
                "set).")
    if type(a) is type(b) and a is not b:  # (two objects of one class: not a pytree)
        name = type(a).__name__
        why = ("a new one on each path, and `{0}` is not a JAX pytree, so the traced "
               "condition cannot choose between them at run time" if construct == "if" else
               "a new one after an iteration, and `{0}` is not a JAX pytree: a traced loop "
               "carries only arrays, and pytrees of them").format(name)
        return (f"{lbl} is {_show(a)} made again: {why}",
                f"Make `{name}` a pytree (`jax.tree_util.register_dataclass` for a "
                f"dataclass, `jax.tree_util.register_pytree_node_class`), or change its "
                f"attributes in place (`{label}.attr = ...`) instead of making a new one, or "
                "carry the arrays it holds in variables of their own.")
    return (f"{lbl} is {_show(a)} on one path and {_show(b)} on the other, and {choose}",
            f"Give {lbl} {same} (it is a Python object, not an array), or carry the "
            "arrays it holds in variables of their own.")


def _loop_function(site):
    """The frame of the user's function running the loop at ``site`` (suspended in the
    runtime's loop operator), or None."""
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_filename == site.filename and not is_generated(code) \
                and not _internal(code.co_filename):
            return frame
        frame = frame.f_back
    return None


def _bound_names(site):
    """The names the loop at ``site`` reads in its header: ``n`` of ``for i in range(n):``
    and of ``while i < n:``, not the loop's own target."""
    import io
    import tokenize

    head = site.source_line().strip()
    try:  # (without a comment at its end)
        comments = [t for t in tokenize.generate_tokens(io.StringIO(head).readline)
                    if t.type == tokenize.COMMENT]
        if comments:
            head = head[:comments[0].start[1]].rstrip()
        tree = ast.parse(head + ("\n    pass" if head.endswith(":") else ""))
    except (SyntaxError, tokenize.TokenError):
        return []
    node = tree.body[0] if tree.body else None
    if isinstance(node, (ast.For, ast.AsyncFor)):
        part = node.iter
    elif isinstance(node, ast.While):
        part = node.test
    else:
        return []
    seen = []
    for n in ast.walk(part):
        if isinstance(n, ast.Name) and n.id not in seen and n.id not in (
                "range", "enumerate", "zip", "reversed", "len"):
            seen.append(n.id)
    return seen


def static_bound(site, then="so that the loop runs as Python"):
    """The sentence that makes the bound of the loop at ``site`` static, naming the
    user's function and its arguments (``autoflow.jit(f, static_argnames=("n",))``)
    where they are integers it can be given as; a general one otherwise."""
    frame = _loop_function(site)
    traced = _traced_names(frame, _bound_names(site)) if frame is not None else []
    params = _params(frame) if frame is not None else []
    fn = frame.f_code.co_name if frame is not None else "f"
    args = [n for n in traced if n in params]
    static = [n for n in args if static_candidate(frame.f_locals.get(n))]
    if static and static == args:
        names = ", ".join(f'"{n}"' for n in static) + ("," if len(static) == 1 else "")
        shown = ", ".join(f"`{n}`" for n in static)
        return (f"Make the loop's bound static, {then}: {shown} "
                f"{'is an argument' if len(static) == 1 else 'are arguments'} of `{fn}`, so "
                f"call `autoflow.jit({fn}, static_argnames=({names}))` (or decorate `{fn}` "
                f"with `@autoflow.jit(static_argnames=({names}))`); each new value compiles "
                "once.")
    return (f"Make the loop's trip count static (from Python numbers, or integer arguments "
            f"marked with `static_argnames`), {then}.")


def growing_list(label, before, after, site):
    """``(what, what to do)`` for a list that a traced loop appends to (its length
    would be traced): both fixes that work, the static bound spelled with the user's
    function and argument, and a buffer of fixed size with a count."""
    from .values import structure

    what = (f"`{label}` grows in each iteration of this traced loop ({structure(before)} "
            f"before an iteration, {structure(after)} after it): a staged loop carries values "
            "of one fixed structure, and this list's length would be known only when the "
            "compiled code runs")
    first = static_bound(site, "so that the loop runs as Python and the list is built as "
                               "written")
    item = after[-1] if isinstance(after, list) and after else None
    frame = _loop_function(site)
    if frame is not None and label.isidentifier() and label not in frame.f_locals \
            and label in frame.f_globals:
        # (a module global: a buffer rebound in the function would be a local, read
        # before it is bound; it is built in the function and returned instead)
        # (and a loop run as Python would append to it while tracing only: no static bound)
        local = label.lower() if label.lower() != label else f"{label}_items"
        return what, (f"`{label}` is a module global: build the items in the function and "
                      "return them, in a buffer of fixed size and a count local to it: "
                      + _buffer(local, item).replace("where the list is made",
                                                     "before the loop")
                      + f" instead of `{label}.append`; return `{local}` and `count`, and "
                      f"extend `{label}` with the first `count` rows outside the jitted call.")
    else:
        second = ("Or keep a buffer of fixed size and a count: " + _buffer(label, item)
                  + f" instead of `append`; the first `count` rows of `{label}` are the items.")
    return what, first + " " + second


def _buffer(label, item):
    """How to hold the items of list ``label`` in an array of fixed size and a count
    (``item``: one of them, for its shape and dtype)."""
    from .values import aval_of

    try:
        shape, dtype, _ = aval_of(item)
        dims = "(capacity,)" if not shape else "(capacity, " + ", ".join(map(str, shape)) + ")"
        buffer = f"jnp.zeros({dims}, jnp.{dtype.name})"
    except Exception:  # noqa: BLE001 - not an array: the general form
        buffer = "jnp.zeros((capacity, *item_shape), item_dtype)"
    return (f"`{label} = {buffer}` (`capacity` a Python int, at least the most items) and "
            f"`count = 0` where the list is made, `{label} = {label}.at[count].set(item)` and "
            "`count = count + 1` where it appends")


def appended_in_branch(label, item, guard=False):
    """What to do about list ``label`` appended to on one path of a traced ``if`` only
    (``item``: what was appended; ``guard``: the path is the rest of a loop that a traced
    ``break`` or ``return`` leaves, where the append cannot be made unconditional)."""
    why = ("the iterations a traced `break` or `return` skips do not append, so its length "
           "would depend on the data" if guard else "a list appended to under a traced "
           "condition would have a data-dependent length")
    return (f"Use a buffer of fixed size and a count instead of the list ({why}): "
            + _buffer(label, item) + f"; the first `count` rows of `{label}` are "
            "the items (take them outside the jitted function)."
            + ("" if guard else " Or keep the append unconditional."))


def shrinking_list(label, before, after):
    """``(what, what to do)`` for a list that a traced loop takes items from (``pop``)."""
    from .values import structure

    what = (f"`{label}` shrinks in each iteration of this traced loop ({structure(before)} "
            f"before an iteration, {structure(after)} after it): a staged loop carries values "
            "of one fixed structure, and this list's length would be known only when the "
            "compiled code runs")
    todo = (f"Use an array and a count instead of the list: `{label} = jnp.asarray(items)` and "
            f"`count = len(items)` before the loop, then `count = count - 1` and "
            f"`{label}[count]` instead of `{label}.pop()`; or make the loop bound static so "
            "that the loop runs as Python.")
    return what, todo


def sorted_hint(ta, tb):
    """What to say when one of two key orders is sorted: JAX's own functions
    (``jax.tree_util.tree_map``, ``optax.apply_updates``) return dicts so."""
    if (list(ta) == sorted(ta, key=str)) == (list(tb) == sorted(tb, key=str)):
        return ""
    return (" JAX's functions that rebuild a dict (`jax.tree_util.tree_map`, "
            "`optax.apply_updates`) give it its keys sorted: build it with its keys in "
            "sorted order from the start.")
