"""Do the private JAX paths autoflow uses work on this JAX? Checked once, at first use.

autoflow's own loop and ``if`` primitives (``loops.while_primitive``, ``cond.primitive``)
stand on JAX's private API (this package). JAX changes it with every release,
and a change can leave the names in place with another meaning: a keyword
added to a function, a rule that now raises. So the first time a converted
function stages a traced ``if`` or loop, ``paths.primitives()`` runs
``run``, which traces a tiny program
through the private paths (7 ms): its branches with JAX's private tracer
against ``jax.make_jaxpr``, its loop and ``if``s as autoflow's primitives,
staged low and under their own names, and a ``jax.custom_jvp`` rule that must
be recognised. The lowering rules guard themselves when first used
(``hijax``), and a loop with ordered effects is lowered once, the
first time one is staged (``effects_ok``). ``report()``, for the test suite
and ``benchmarks/jax_matrix.sh``, also compiles the program under ``jit``,
``vmap``, ``grad`` and ``jvp`` and compares its operations and values with the
public path's (``lax.while_loop``, ``lax.cond``, ``lax.select``). What fails is
turned off, one path at a time (readable names, direct lowering, then the
primitives themselves), and one warning says what is lost and which JAX
releases have all of it, in the words of ``paths.PATHS``. Programs that
never stage anything never pay for it. ``doctor()`` is ``autoflow doctor``: the
full check, and the table with each path on or off and why.
"""

from __future__ import annotations

import os
import re
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ...core.origin import PACKAGE_DIR
from . import hijax, paths, traces
from ..common.events import plain_loops

_state = None  # None: not checked; "checking": under way; "done"
# The primitives' entry points, registered by loops.while_primitive and cond.primitive when
# they are imported: `while_loop(cond, body, init)` and `staged_if(pred, t, f, kind)`.
parts = {}
_reported = set()  # the lost paths a warning named already

def ensure():
    """Run the check, the first time (``paths.primitives()`` asks: ``paths.on_first_use``)."""
    if _state is None:
        run()


def run(warn=True, full=False):
    """Check the private paths now (``full``: compile and compare values too, as the
    test suite and ``benchmarks/jax_matrix.sh`` do); turn off what fails; warn once
    about what is lost."""
    global _state
    _state = "checking"
    try:
        with plain_loops(False):  # (the first use may be inside `autoflow explain`)
            _check(full)
            if not paths.primitives(check=False):  # (only the public path needs it)
                traces.check_reverse_mode()
    finally:
        _state = "done"
    if warn:
        warn_lost()


def _check(full):
    if traces.private_trace_thunk is not None:
        problem = traces.trace_thunk_problem()
        if problem is not None:
            traces.use_public_trace_thunk(problem)
    if not paths.primitives(check=False):
        return
    traces.check_custom_rules()  # (where it fails, every `if` is taken as inside one: a lax.cond)
    first = None
    for step in (None, "named", "direct lowering"):
        if step is not None:
            _turn_off(step)
        problem = _problem(full)
        if problem is None:
            if step is not None:  # (turning these off was enough)
                paths.lost.setdefault("named", first)
                if step == "direct lowering":
                    paths.lost.setdefault(step, first)
            return
        first = first or problem
    paths._lose("primitives", first)


def effects_ok() -> bool:
    """May a loop with ordered effects (a ``print`` in its body) be autoflow's primitive?
    Checked the first time one is staged, by lowering a tiny one (JAX 0.9 cannot lower
    the tokens of such an equation); where it fails, such loops are ``lax.while_loop``s."""
    if "effects" not in _lazy:
        _lazy["effects"] = True  # (the check stages such a loop itself)
        problem = _effects_problem()
        if problem is not None:
            _lazy["effects"] = False
            paths._lose("effects in loops", problem)
            warn_lost()
    return _lazy["effects"]


_lazy = {}


@paths._check("effects in loops")
def _recheck_effects():
    _lazy.pop("effects", None)
    if paths.primitives(check=False):
        effects_ok()


def _effects_problem():
    def body(c):
        jax.debug.print("{}", c[1], ordered=True)
        return c[0] + 1, c[1] * 2.0

    def f(x):
        return parts["while_loop"](lambda c: c[0] < 3, body, (jnp.int32(0), x))[1]
    try:
        jax.jit(f).lower(np.float32(1.0))
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {_first_line(e)}"
    return None


def direct_problem():
    """None if autoflow's probe program (a loop, a cond and a select) lowers with
    direct lowering on this JAX, else what failed. Asked (once: the answer is the
    same for every program) when a program's direct lowering fails, to tell a
    change of JAX's private lowering API from a bug in that program."""
    if "direct" not in _lazy:
        def lowered(x):
            return jax.jit(_program(parts["while_loop"], _ours)).lower(x).as_text()
        _lazy["direct"] = None  # (a failure inside the probe raises, to here)
        try:
            lowered(np.float32(1.5))
        except Exception as e:  # noqa: BLE001 - any failure of the private path
            _lazy["direct"] = f"{type(e).__name__}: {_first_line(e)}"
    return _lazy["direct"]


hijax.probe_direct = direct_problem


def _turn_off(step):
    if step == "named":
        hijax.unname_primitives()
    elif step == "direct lowering":
        hijax.use_direct_lowering(False)


def _ops(fn, *args):
    """The StableHLO operations of ``fn`` compiled for ``args``, in order."""
    text = jax.jit(fn).lower(*args).as_text()
    return [op for op in re.findall(r"\b(?:stablehlo|mhlo)\.(\w+)", text)
            if op not in ("return", "constant")]


def _program(loop, choose):
    """A tiny converted program: a loop, then an ``if`` and a select on its result."""
    def f(x):
        i, y = loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.0 + 1.0),
                    (jnp.int32(0), x))
        a = choose(y > 5.0, lambda: y + 1.0, lambda: y - 1.0, "cond")
        return choose(a < 40.0, lambda: a * 3.0, lambda: a, "select") + i
    return f


def _ours(pred, t, f, kind):
    return parts["staged_if"](pred, traces.trace_thunk(lambda: [t()]), traces.trace_thunk(lambda: [f()]),
                      kind)[0]


def _theirs(pred, t, f, kind):
    return lax.cond(pred, t, f) if kind == "cond" else lax.select(pred, t(), f())


def _problem(full=False):
    """None if the primitives stage, lower and transform as the public path does, else
    what differs. The quick check (at first use) traces a tiny program to a jaxpr (the
    lowering rules guard themselves: ``hijax``); ``full`` also lowers
    and compiles it under ``jit``, ``vmap``, ``grad`` and ``jvp`` and compares the
    operations and values with the public path's."""
    ours, theirs = _program(parts["while_loop"], _ours), _program(lax.while_loop, _theirs)
    x, xs = np.float32(1.5), np.array([1.5, 20.0], np.float32)
    try:
        jaxpr = jax.make_jaxpr(ours)(x)
        if hijax.is_high(jaxpr.jaxpr):
            return "its equations are staged high (jax.jit would dispatch from Python)"
        names = {e.primitive.name for e in jaxpr.jaxpr.eqns}
        if hijax._named and not {"while_loop", "if"} <= names:
            return f"its equations are named {sorted(names)}"
        if not full:
            return None
        ops = _ops(ours, x)
        if not ({"while", "select"} <= set(ops) and {"case", "if"} & set(ops)):
            return f"it lowers to {sorted(set(ops))}, not a while loop, a conditional and a select"
        if sorted(ops) != sorted(_ops(theirs, x)):
            return "it compiles to other operations than lax.while_loop and lax.cond"
        one = np.float32(1.0)
        checks = [
            (jax.jit(ours)(x), theirs(x)),
            (jax.jit(jax.vmap(ours))(xs), jax.vmap(theirs)(xs)),
            (jax.jit(jax.grad(ours))(x), _grad_of_theirs(x)),
            (jax.jvp(ours, (x,), (one,))[1], jax.jvp(theirs, (x,), (one,))[1]),
        ]
    except Exception as e:  # noqa: BLE001 - any failure of a private path turns it off
        return f"{type(e).__name__}: {_first_line(e)}"
    for got, want in checks:
        if not np.allclose(np.asarray(got), np.asarray(want), rtol=1e-6):
            return f"it computes {got} where the public path computes {want}"
    return None


def _grad_of_theirs(x):
    # (lax.while_loop has no reverse mode: the same loop with its trip count known)
    def f(x):
        y = lax.fori_loop(0, 3, lambda _, y: y * 2.0 + 1.0, x)
        a = lax.cond(y > 5.0, lambda: y + 1.0, lambda: y - 1.0)
        return lax.select(a < 40.0, a * 3.0, a) + 3
    return jax.grad(f)(x)


def _first_line(e):
    text = str(e).strip().splitlines()
    return text[0][:200] if text else ""


def _said(row) -> bool:
    """Is the loss of ``row`` said (not one that only autoflow's primitives use, where
    they are lost themselves)?"""
    return not (row.primitives_only and "primitives" in paths.lost)


def warn_lost():
    """Say once which private paths this JAX lacks, what is lost, and which JAX has them
    (again only for a path lost later, as a lowering rule that fails when first used)."""
    losses = [row for row in paths.PATHS if row.key in paths.lost and _said(row)
              and row.key not in _reported]
    if not losses:
        return
    _reported.update(row.key for row in losses)
    what = "; ".join(f"{row.lost} ({row.key}: {paths.lost[row.key]})" for row in losses)
    warnings.warn(
        f"autoflow: this JAX ({jax.__version__}) lacks private APIs autoflow builds on, so "
        f"converted functions take JAX's public path there. Results are the same, but: {what}. "
        f"JAX {paths.FULL_RANGE} has all of it (pip install 'jax{paths.FULL_RANGE}').",
        RuntimeWarning, stacklevel=_user_level())


paths.on_loss = warn_lost  # (a path lost while a program is lowered is said then)
paths.on_first_use = ensure  # (the first `primitives()` runs the check)


def _user_level():
    """The ``stacklevel`` for ``warn_lost``'s warning: the first frame outside autoflow
    and JAX (the user's line that staged the loop or ``if``)."""
    package = PACKAGE_DIR
    frame, level = sys._getframe(2), 2  # (level 1: warn_lost itself)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith(package) or f"{os.sep}jax{os.sep}" in name
                or name.startswith("<frozen")):
            return level
        frame, level = frame.f_back, level + 1
    return 2


# The paths the probe program checks (`_problem`), turning them off one at a time:
# found when the runtime is imported, they are not looked for again.
_PROBED = ("primitives", "named", "direct lowering")


def report() -> dict:
    """The full check, for ``benchmarks/jax_matrix.sh`` and ``autoflow doctor``: which
    private paths work here (every row of ``paths.PATHS`` checked now, those
    checked only here too).

        python -c "from autoflow.runtime.jax import selfcheck; print(selfcheck.report())"
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (what is lost is the answer here)
        run(warn=False, full=True)
        for row in paths.PATHS:
            if row.key not in _PROBED:
                paths.recheck(row.key)
    _reported.update(paths.lost)  # (checked here, not said)
    return {"jax": jax.__version__, "primitives": paths.primitives(check=False),
            "lost": dict(paths.lost)}


def doctor() -> str:
    """What ``autoflow doctor`` prints: the versions, then each row of
    ``paths.PATHS`` on or off (for one that is off: why, the public path taken
    instead and what is lost). Runs the full check (``report``) first."""
    import platform

    found = report()
    try:
        import jaxlib

        jaxlib_version = jaxlib.__version__
    except (ImportError, AttributeError):  # pragma: no cover - jax without jaxlib
        jaxlib_version = "not found"
    try:
        backend = jax.default_backend()
    except Exception as e:  # noqa: BLE001 - no device: say so
        backend = f"none ({_first_line(e)})"
    newest, oldest = ".".join(map(str, paths.NEWEST_TESTED)), ".".join(map(str, paths.MIN_JAX))
    def off_why(row):  # (why the row is off, or None)
        if row.key in found["lost"]:
            return found["lost"][row.key] + ("" if _said(row) else
                                             " (used only by autoflow's primitives, off too)")
        if row.primitives_only and not found["primitives"]:
            return "used only by autoflow's primitives, which are off"
        return None

    off = [row for row in paths.PATHS if off_why(row) is not None]
    lines = [
        f"Python {platform.python_version()}, JAX {jax.__version__}, jaxlib {jaxlib_version} "
        f"({backend})",
        f"autoflow is tested on JAX {oldest} to {newest}; every private path below works on "
        f"JAX {paths.FULL_RANGE}.",
        "",
        f"JAX's private API as autoflow uses it ({len(paths.PATHS)} paths, "
        f"{len(paths.PATHS) - len(off)} on; autoflow/runtime/jax/paths.py, PATHS):",
    ]
    width = max(len(row.key) for row in paths.PATHS)
    for row in paths.PATHS:
        why = off_why(row)
        lines.append(f"  {'on' if why is None else 'off':<4}{row.key:<{width}}  JAX {row.jax}")
        if why is not None:
            lines.append(f"        why: {why}")
            lines.append(f"        instead: {row.fallback}")
            lines.append(f"        lost: {row.lost}")
    lines.append("")
    if not off:
        lines.append("Every path is on: converted functions take autoflow's own primitives.")
    else:
        lines.append(f"Results are the same where a path is off (the public path runs "
                     f"there); pip install 'jax{paths.FULL_RANGE}' has all of them.")
    return "\n".join(lines)
