"""A seeded generator of random control-flow programs, and the differential oracle.

``generate(seed)`` writes the source of one function ``f(a, n, x, xs)``
(``a`` an int, ``n`` a small int used as a traced ``range`` bound, ``x`` a
float, ``xs`` a float array of shape (3,)) with nested ``if``/``elif``/``else``,
bounded ``while`` loops, ``for`` loops over static ranges, traced ranges and
arrays, ``break``/``continue``/``return`` (in branches and loops), loop
``else``, ``and``/``or``/``not``, chained comparisons and ternaries. Unless
``avoid`` has ``"state"`` (``AUTOFLOW_FUZZ_STATE=0`` in ``tests/test_fuzz.py``),
about two programs in three also share state across those statements
(``FEATURES``):
closures reading the variables the loops rebind (defined at the top or in loop
bodies), a ``nonlocal`` counter bumped by a nested function, attributes of a
local object (``types.SimpleNamespace``, a dataclass or a class with a method),
dict items, a two-item list (item sets, ``append``/``pop`` pairs), a function
mutating those, and lists filled by one ``append`` per iteration of a static
loop, then stacked or summed. Only ``random.Random(seed)`` (and
``random.Random(f"features-{seed}")`` for the choice of features) drives it, so
a seed reproduces a program exactly; a program without features is the same
as before features existed.

The programs are built so that running them eagerly never raises and gives
the same answer in float32 as in float64:

* every variable is initialised at the top, so every path binds what it reads
  (closures defined in a block are called only in that block; a closure
  defined at the top reads only variables initialised at the top);
* ``while`` loops increment their own counter first thing in the body and
  test ``counter < cap``, so they stop in Python;
* ints stay small (``% 7`` on general expressions, small increments), floats
  stay bounded (``jnp.tanh``/``jnp.sin`` around general expressions, small
  increments otherwise), and Python float arithmetic only sees dyadic
  constants, so float64 (eager Python floats) and float32 (jit) agree;
* containers keep their structure on every path, so every program can be
  staged: dicts only set existing keys, the list ``lst`` has two items
  between statements, and a ``ys`` list is appended to exactly once per
  iteration of a static loop without ``break`` (``ys`` is rebuilt before its
  loop and only read after it);
* every ``return`` returns ``(int, float, float[3], *state)``, the same
  state expressions (``st.a``, ``d["q"]``, ``lst``, ``cnt``...) in every
  ``return`` of a program.

``check(seed)`` runs one program eagerly and under ``autoflow.jit`` on a few
inputs and classifies the outcome (see ``Outcome``). From the command line::

    python -m tests.fuzzgen SEED                # check one program, print it and what failed
    python -m tests.fuzzgen SEED --shrink       # ... and a smaller program failing the same way
    python -m tests.fuzzgen SEED --source       # print the program only
    python -m tests.fuzzgen SEED --scan COUNT   # check COUNT programs, group failures by error
"""

from __future__ import annotations

import ast
import atexit
import importlib.util
import os
import random
import re
import shutil
import sys
import tempfile
import traceback
from dataclasses import dataclass, field

# Names the generated programs use. The arguments are `a` (int), `n` (int in
# 0..3, a `range` bound), `x` (float) and `xs` (float[3]); the body rebinds
# them too, keeping those ranges.
INT_VARS = ("k0", "k1", "k2")
FLOAT_VARS = ("f0", "f1", "f2")
ARRAY_VARS = ("y0", "y1")       # float[3]
BOOL_VARS = ("b0",)             # holds conditions (sometimes an int or float: `b0 or k0`)
# Block-local temporaries: not initialised at the top, only read later in the
# block that assigns them (and blocks nested in it), like `t = ...; use(t)`.
FLOAT_TEMPS = ("t0", "t1")
INT_TEMPS = ("j0", "j1")
INT_TARGETS = ("i0", "i1")      # `for` targets over ranges
FLOAT_TARGETS = ("v0", "v1")    # `for` targets over arrays
COUNTERS = ("w0", "w1")         # `while` counters

_INT_CMP = ("<", "<=", ">", ">=", "==", "!=")
_FLOAT_CMP = ("<", "<=", ">", ">=")
_FLOAT_LITS = ("0.0", "0.25", "0.5", "-0.5", "1.0", "-1.0", "1.5", "-0.25", "2.0")
_FLOAT_THRESH = ("0.0", "0.25", "0.5", "-0.5", "1.0", "-1.0")

# Shared state a program may set up at the top (chosen per seed by its own
# `random.Random`, so a program with none of them is the same as before they
# existed):
# * "closure":  `def g(): ...` / `h = lambda z: ...` reading variables the body
#   rebinds, called anywhere (also in `return`); closures defined inside loop
#   bodies (and branches) reading the loop's target, called in that block;
# * "nonlocal": `def bump(v): nonlocal cnt; cnt += v; return cnt` (the counter is
#   `cnt` or `k2`), called as a statement from branches and loops;
# * "attr":     `st` a `types.SimpleNamespace`, a module-level dataclass or a
#   plain class (the last two with a method `st.nudge(v)` that updates both
#   fields), fields `st.a` (float) and `st.k` (int);
# * "dict":     `d = {"p": float, "q": int}`: item sets, `+=`, `.update` of
#   existing keys;
# * "list":     `lst`, a list of two floats: item sets, `append` then `pop` in
#   the same block (also an `if` that appends on both paths, then `pop`),
#   `lst.append(lst.pop(0) ...)`: its length is always 2 between statements;
# * "push":     `def push(v)` mutating `st`/`d`/`lst` (the mutation is inside a
#   call), called from branches and loops;
# * "ys":       `ys0 = []; for i in range(N): ys0.append(v); ...` (one append per
#   iteration, first in the body, or in both branches of an `if`; the loop has
#   no `break`), then `jnp.stack(ys0)` / `sum(ys0)` / `ys0[-1]` after the loop.
# The mutated state is read anywhere and returned after the usual three values.
FEATURES = ("closure", "nonlocal", "attr", "dict", "list", "push", "ys")
CONTAINERS = ("attr", "dict", "list")
_FEATURE_P = {"push": 0.2}  # the chance of each feature in a program with any (else 0.35)
YS_NAMES = ("ys0", "ys1")


_STATE_CLASS = {
    "dataclass": """@dataclasses.dataclass
class State:
    a: float = 0.0
    k: int = 0

    def nudge(self, v):
        self.a = self.a * 0.5 + v
        self.k += 1""",
    "class": """class Box:
    def __init__(self, a, k):
        self.a = a
        self.k = k

    def nudge(self, v):
        self.a = self.a * 0.5 + v
        self.k += 1""",
}


class Generator:
    """One random program; ``source()`` returns its text."""

    def __init__(self, seed, max_stmts=None, avoid=()):
        self.rng = random.Random(seed)
        self.avoid = frozenset(avoid)
        self.in_loop_else = 0
        r = self.rng
        self.budget = max_stmts if max_stmts is not None else r.randint(4, 11)
        self.max_depth = 3
        # Stack of enclosing loops: ("for"/"while", target or counter name).
        self.loops = []
        self.lines = []
        self.temps = []  # temporaries bound so far in the enclosing blocks
        self.setup_features(seed)

    def setup_features(self, seed):
        """Pick this program's shared-state features (see ``FEATURES``)."""
        frng = random.Random(f"features-{seed}")
        pool = [f for f in FEATURES if f not in self.avoid and "state" not in self.avoid]
        feats = set()
        if pool and frng.random() >= 0.35:
            feats = {f for f in pool if frng.random() < _FEATURE_P.get(f, 0.35)}
            if not feats:
                feats = {frng.choice(pool)}
            if "push" in feats and not feats & set(CONTAINERS):
                options = [c for c in CONTAINERS if c in pool]
                if options:
                    feats.add(frng.choice(options))
                else:
                    feats.discard("push")
        self.features = feats
        self.attr_kind = frng.choice(("ns", "ns", "dataclass", "class"))
        self.counter = frng.choice(("cnt", "cnt", "k2"))
        self.no_calls = 0      # > 0 while writing a closure's body
        self.no_list = 0       # > 0 while `lst` has one item (inside `lst.append(lst.pop(0) ...)`)
        self.fns = []          # float closures callable anywhere: "g()", "h({})"
        self.local_fns = []    # float closures callable in the enclosing blocks
        self.ys_busy = []      # `ys` lists being filled by enclosing loops
        self.extras = []       # state appended to every returned tuple

    # -- helpers -----------------------------------------------------------

    def chance(self, p):
        return self.rng.random() < p

    def pick(self, seq):
        return self.rng.choice(seq)

    def busy_targets(self):
        return {name for _, name in self.loops}

    # -- expressions -------------------------------------------------------

    def temp(self, names):
        """A temporary of ``names`` that may be read here, or None."""
        ready = [t for t in self.temps if t in names]
        return self.pick(ready) if ready else None

    def int_atom(self):
        if self.features and self.rng.random() < 0.08:
            state = self.state_int_atom()
            if state:
                return state
        r = self.rng.random()
        if r < 0.25 and self.temp(INT_TEMPS):
            return self.temp(INT_TEMPS)
        if r < 0.35:
            return self.pick(INT_VARS)
        if r < 0.5:
            return self.pick(("a", "n"))
        if r < 0.62:
            return self.pick(INT_TARGETS)
        if r < 0.68:
            return self.pick(COUNTERS)
        if r < 0.74:
            return self.pick(("jnp.argmax(xs)", "jnp.argmax(y0)", "jnp.sum(y1 > 0.0)",
                              "jnp.argmin(y1)"))
        return str(self.rng.randint(0, 5))

    def int_expr(self, depth=2):
        """An int expression; magnitudes stay far below 2**31."""
        if depth <= 0 or self.chance(0.35):
            return self.int_atom()
        r = self.rng.random()
        if r < 0.3:
            return f"({self.int_expr(depth - 1)} + {self.int_expr(depth - 1)})"
        if r < 0.5:
            return f"({self.int_expr(depth - 1)} - {self.int_expr(depth - 1)})"
        if r < 0.62:
            return f"({self.int_expr(depth - 1)} * {self.pick(('2', '3', '-1'))})"
        if r < 0.74:
            return f"({self.int_expr(depth - 1)} % {self.pick(('2', '3', '5', '7'))})"
        if r < 0.92:
            return (f"({self.int_expr(depth - 1)} if {self.cond(depth - 1)} "
                    f"else {self.int_expr(depth - 1)})")
        op = self.pick(("and", "or"))
        return f"({self.int_atom()} {op} {self.int_atom()})"

    def small_int(self):
        """A small int for increments (keeps growth linear)."""
        return self.pick(("1", "2", "3", "1", "i0", "i1", "w0", "(a % 3)", "(n % 2)"))

    def float_atom(self):
        if self.features and self.rng.random() < 0.14:
            state = self.state_float_atom()
            if state:
                return state
        r = self.rng.random()
        if r < 0.25 and self.temp(FLOAT_TEMPS):
            return self.temp(FLOAT_TEMPS)
        if r < 0.3:
            return self.pick(FLOAT_VARS)
        if r < 0.4:
            return "x"
        if r < 0.5:
            return self.pick(FLOAT_TARGETS)
        if r < 0.62:
            arr = self.pick(("xs",) + ARRAY_VARS)
            return f"{arr}[{self.int_expr(1)} % 3]"
        if r < 0.7:
            return self.pick(("xs.sum()", "y0.sum()", "jnp.max(y1)", "jnp.mean(xs)", "y0[0]"))
        if r < 0.78:
            return f"({self.pick(INT_VARS + INT_TARGETS + ('a', 'n'))} * 0.25)"
        return self.pick(_FLOAT_LITS)

    def float_expr(self, depth=2):
        """A float expression of values that stay below a few thousand."""
        if depth <= 0 or self.chance(0.3):
            return self.float_atom()
        r = self.rng.random()
        if r < 0.22:
            return f"({self.float_expr(depth - 1)} + {self.float_expr(depth - 1)})"
        if r < 0.38:
            return f"({self.float_expr(depth - 1)} - {self.float_expr(depth - 1)})"
        if r < 0.5:
            return f"({self.float_expr(depth - 1)} * {self.pick(('0.5', '2.0', '-1.0', '1.5'))})"
        if r < 0.6:
            return f"({self.float_expr(depth - 1)} * {self.float_expr(depth - 1)})"
        if r < 0.75:
            return f"{self.pick(('jnp.sin', 'jnp.tanh'))}({self.float_expr(depth - 1)})"
        if r < 0.93:
            return (f"({self.float_expr(depth - 1)} if {self.cond(depth - 1)} "
                    f"else {self.float_expr(depth - 1)})")
        op = self.pick(("and", "or"))
        return f"({self.float_atom()} {op} {self.float_atom()})"

    def bounded_float(self):
        """A float with magnitude at most ~2."""
        r = self.rng.random()
        if r < 0.4:
            return f"{self.pick(('jnp.tanh', 'jnp.sin'))}({self.float_expr(2)})"
        if r < 0.55:
            return self.pick(("x",) + FLOAT_TARGETS)
        if r < 0.7:
            return f"{self.pick(('xs',) + ARRAY_VARS)}[{self.int_expr(1)} % 3]"
        if r < 0.8:
            return f"({self.pick(INT_VARS + INT_TARGETS)} % 5 * 0.25)"
        return self.pick(_FLOAT_LITS)

    def array_expr(self, depth=2):
        if depth <= 0 or self.chance(0.3):
            return self.pick(("xs",) + ARRAY_VARS)
        r = self.rng.random()
        if r < 0.25:
            return f"({self.array_expr(depth - 1)} + {self.float_expr(1)})"
        if r < 0.45:
            return f"({self.array_expr(depth - 1)} - {self.array_expr(depth - 1)})"
        if r < 0.6:
            return f"({self.array_expr(depth - 1)} * {self.array_expr(depth - 1)})"
        if r < 0.75:
            return f"{self.pick(('jnp.sin', 'jnp.tanh'))}({self.array_expr(depth - 1)})"
        if r < 0.88:
            return (f"jnp.where({self.array_expr(0)} > {self.pick(_FLOAT_THRESH)}, "
                    f"{self.array_expr(depth - 1)}, {self.array_expr(depth - 1)})")
        return (f"({self.array_expr(depth - 1)} if {self.cond(depth - 1)} "
                f"else {self.array_expr(depth - 1)})")

    def bounded_array(self):
        r = self.rng.random()
        if r < 0.35:
            return f"{self.pick(('jnp.tanh', 'jnp.sin'))}({self.array_expr(2)})"
        if r < 0.5:
            return "xs"
        if r < 0.65:
            return f"({self.pick(ARRAY_VARS)} * 0.5)"
        if r < 0.8:
            return f"jnp.where(xs > {self.pick(_FLOAT_THRESH)}, xs, {self.bounded_float()})"
        return f"jnp.full(3, {self.bounded_float()})"

    def cond(self, depth=2):
        """A scalar condition (bool, or an int/float used for its truth)."""
        if depth > 0 and self.chance(0.3):
            r = self.rng.random()
            if r < 0.4:
                return f"({self.cond(depth - 1)} and {self.cond(depth - 1)})"
            if r < 0.8:
                return f"({self.cond(depth - 1)} or {self.cond(depth - 1)})"
            return f"(not {self.cond(depth - 1)})"
        r = self.rng.random()
        if r < 0.3:
            return f"{self.int_expr(1)} {self.pick(_INT_CMP)} {self.int_expr(1)}"
        if r < 0.55:
            return f"{self.float_expr(1)} {self.pick(_FLOAT_CMP)} {self.pick(_FLOAT_THRESH)}"
        if r < 0.65:
            return f"{self.float_atom()} {self.pick(_FLOAT_CMP)} {self.float_atom()}"
        if r < 0.72:
            lo = self.rng.randint(-1, 2)
            mid = self.pick(INT_VARS + ("a", "n")) if "chain" in self.avoid else self.int_atom()
            return f"{lo} {self.pick(('<', '<='))} {mid} {self.pick(('<', '<='))} {lo + self.rng.randint(1, 4)}"
        if r < 0.77:
            mid = self.pick(FLOAT_VARS + ("x",)) if "chain" in self.avoid else self.float_atom()
            return f"-1.0 < {mid} <= {self.pick(('0.0', '0.5', '1.0'))}"
        if r < 0.87:
            arr = self.pick(("xs",) + ARRAY_VARS)
            return self.pick((f"({arr} > {self.pick(_FLOAT_THRESH)}).any()",
                              f"jnp.all({arr} < {self.float_atom()})",
                              f"{arr}.sum() > {self.pick(_FLOAT_THRESH)}"))
        if r < 0.92:
            return self.pick(INT_VARS + ("(k0 % 2)", "(a % 3)", "n", "i0"))
        if r < 0.97:
            return self.pick(BOOL_VARS)
        return self.pick(FLOAT_VARS)

    # -- statements --------------------------------------------------------

    def emit(self, indent, text):
        self.lines.append("    " * indent + text)

    def ret(self):
        extras = "".join(f", {e}" for e in self.extras)
        return (f"return ({self.int_expr(1)}, {self.float_expr(1)}, "
                f"{self.array_expr(1) if self.chance(0.5) else self.bounded_array()}{extras})")

    def assign_temp(self, indent):
        """Bind a new temporary (or rebind one already bound here)."""
        names = INT_TEMPS if self.chance(0.4) else FLOAT_TEMPS
        free = [t for t in names if t not in self.temps]
        t = free[0] if free else self.pick(names)
        value = (f"{self.int_expr(2)} % 7" if names is INT_TEMPS
                 else self.pick((self.bounded_float(), f"jnp.tanh({self.float_expr(2)})")))
        self.emit(indent, f"{t} = {value}")
        if t not in self.temps:
            self.temps.append(t)

    def assign_other(self, indent):
        """Rebind an argument, or the target of an enclosing ``for`` loop."""
        targets = [t for kind, t in self.loops if kind in ("for", "ysfor")]
        r = self.rng.random()
        if targets and r < 0.4:
            t = self.pick(targets)
            if t in INT_TARGETS:
                self.emit(indent, f"{t} = ({t} + {self.small_int()}) % 5")
            else:
                self.emit(indent, f"{t} = {t} * 0.5 + {self.bounded_float()}")
        elif r < 0.55:
            self.emit(indent, f"n = (n + {self.small_int()}) % 4")  # n stays in 0..3
        elif r < 0.7:
            self.emit(indent, f"a = {self.int_expr(2)} % 7")
        elif r < 0.85:
            self.emit(indent, f"x = {self.bounded_float()}")
        else:
            self.emit(indent, f"xs = {self.bounded_array()}")

    def assign(self, indent):
        if self.features and self.rng.random() < 0.3 and self.state_stmt(indent):
            return
        r = self.rng.random()
        if r < 0.1:
            return self.assign_temp(indent)
        if r < 0.16:
            return self.assign_other(indent)
        r = self.rng.random()
        if r < 0.4:
            k = self.pick(INT_VARS)
            s = self.rng.random()
            if s < 0.5:
                self.emit(indent, f"{k} = {self.int_expr(2)} % {self.pick(('5', '7', '11'))}")
            elif s < 0.8:
                self.emit(indent, f"{k} {self.pick(('+=', '-='))} {self.small_int()}")
            else:
                self.emit(indent, f"{k} = {self.small_int()} if {self.cond(1)} else {self.int_atom()} % 7")
        elif r < 0.75:
            f = self.pick(FLOAT_VARS)
            s = self.rng.random()
            if s < 0.35:
                self.emit(indent, f"{f} = {self.pick(('jnp.tanh', 'jnp.sin'))}({self.float_expr(2)})")
            elif s < 0.65:
                self.emit(indent, f"{f} {self.pick(('+=', '-='))} {self.bounded_float()}")
            elif s < 0.8:
                self.emit(indent, f"{f} = {f} * 0.5 + {self.bounded_float()}")
            elif s < 0.9:
                self.emit(indent, f"{f} = {self.bounded_float()}")
            else:
                self.emit(indent, f"{f} = {self.bounded_float()} if {self.cond(1)} else {self.bounded_float()}")
        elif r < 0.87:
            b = self.pick(BOOL_VARS)
            s = self.rng.random()
            if s < 0.5:
                self.emit(indent, f"{b} = {self.cond(2)}")
            elif s < 0.65:
                self.emit(indent, f"{b} = not {b}")
            else:
                self.emit(indent, f"{b} = {b} {self.pick(('and', 'or'))} {self.cond(1)}")
        else:
            y = self.pick(ARRAY_VARS)
            s = self.rng.random()
            if s < 0.3:
                self.emit(indent, f"{y} = {self.pick(('jnp.tanh', 'jnp.sin'))}({self.array_expr(2)})")
            elif s < 0.55:
                self.emit(indent, f"{y} {self.pick(('+=', '-='))} {self.bounded_array()}")
            elif s < 0.75:
                self.emit(indent, f"{y} = {y}.at[{self.int_expr(1)} % 3].set({self.bounded_float()})")
            elif s < 0.9:
                self.emit(indent, f"{y} = {y} * 0.5 + {self.bounded_array()}")
            else:
                self.emit(indent, f"{y} = {self.bounded_array()}")

    def block(self, indent, depth, min_stmts=1):
        """Statements at ``indent``; stops after a return/break/continue."""
        count = self.rng.randint(min_stmts, 3)
        scope, fn_scope = len(self.temps), len(self.local_fns)
        if self.chance(0.2):
            self.assign_temp(indent)
        if ("closure" in self.features and indent > 1 and not self.no_calls
                and self.chance(0.3 if self.loops else 0.1)):
            self.local_closure(indent)
        try:
            for i in range(count):
                if self.stmt(indent, depth, last=(i == count - 1)):
                    return True
            return False
        finally:
            del self.temps[scope:]
            del self.local_fns[fn_scope:]

    def stmt(self, indent, depth, last=False):
        """Emit one statement; True if it ends the block (jump or return)."""
        self.budget -= 1
        in_loop = bool(self.loops)
        r = self.rng.random()
        if self.budget <= 0 or depth >= self.max_depth:
            # No more compound statements: assignments, jumps and returns.
            r = self.pick((0.0, 0.0, 0.0, 0.0, 0.8, 0.9, 0.99))
        if r < 0.3:
            self.assign(indent)
            return False
        if (r < 0.34 and "ys" in self.features and len(self.ys_busy) < len(YS_NAMES)
                and self.free(INT_TARGETS)):
            self.ys_loop(indent, depth)
            return False
        if r < 0.46:
            self.if_stmt(indent, depth)
            return False
        if r < 0.62:
            self.for_stmt(indent, depth)
            return False
        if r < 0.73:
            self.while_stmt(indent, depth)
            return False
        if r < 0.8 and in_loop:
            self.emit(indent, self.pick(self.jumps(("break", "continue"))))
            return True
        if r < 0.94 and in_loop:
            # A guarded jump (or return), the common shape.
            self.emit(indent, f"if {self.cond(2)}:")
            if self.chance(0.3):
                scope = len(self.temps)
                self.assign(indent + 1)
                del self.temps[scope:]
            if self.may_return() and self.chance(0.25):
                self.emit(indent + 1, self.ret())
            else:
                self.emit(indent + 1, self.pick(self.jumps(("break", "continue", "break"))))
            return False
        if r > 0.93 and self.may_return() and (last or self.chance(0.3)):
            self.emit(indent, self.ret())
            return True
        self.assign(indent)
        return False

    def may_return(self):
        if "loop_return" in self.avoid and self.loops:
            return False
        if any(loop[0] == "ysfor" for loop in self.loops):
            return False  # a `ys` list filled up to an early exit has a data-dependent length
        return not ("else_return" in self.avoid and self.in_loop_else)

    def if_stmt(self, indent, depth):
        self.emit(indent, f"if {self.cond(2)}:")
        self.block(indent + 1, depth + 1)
        r = self.rng.random()
        if r < 0.25:
            return
        for _ in range(self.rng.randint(0, 2) if r < 0.6 else 0):
            self.emit(indent, f"elif {self.cond(2)}:")
            self.block(indent + 1, depth + 1)
        if self.chance(0.8):
            self.emit(indent, "else:")
            self.block(indent + 1, depth + 1)

    def free(self, names):
        busy = self.busy_targets()
        return [nm for nm in names if nm not in busy]

    def loop_else(self, indent, depth):
        if self.chance(0.12):
            self.emit(indent, "else:")
            self.in_loop_else += 1
            self.block(indent + 1, depth + 1)
            self.in_loop_else -= 1

    def for_stmt(self, indent, depth):
        r = self.rng.random()
        if r < 0.6:
            targets = self.free(INT_TARGETS)
            if not targets:
                return self.assign(indent)
            t = self.pick(targets)
            s = self.rng.random()
            if s < 0.3:
                it = f"range({self.rng.randint(0, 4)})"
            elif s < 0.4:
                it = f"range({self.rng.randint(0, 2)}, {self.rng.randint(1, 4)})"
            elif s < 0.47:
                it = f"range({self.rng.randint(2, 4)}, {self.rng.randint(-1, 1)}, -1)"
            elif s < 0.7:
                it = "range(n)"
            elif s < 0.8:
                it = self.pick(("range(n, 0, -1)", "range(1, n + 1)", "range(a % 3, n)"))
            else:
                it = f"range({self.pick(INT_VARS)} % 4)"
        else:
            targets = self.free(FLOAT_TARGETS)
            if not targets:
                return self.assign(indent)
            t = self.pick(targets)
            it = self.pick(("xs", "xs", "y0", "y1"))
        self.emit(indent, f"for {t} in {it}:")
        self.loops.append(("for", t))
        self.block(indent + 1, depth + 1)
        self.loops.pop()
        self.loop_else(indent, depth)

    def while_stmt(self, indent, depth):
        counters = self.free(COUNTERS)
        if not counters:
            return self.assign(indent)
        w = counters[0]
        cap = self.rng.randint(1, 4)
        self.emit(indent, f"{w} = 0")
        guard = f"{w} < {cap}"
        r = self.rng.random()
        if r < 0.25:
            test = guard
        elif r < 0.7:
            test = f"{guard} and {self.cond(1)}"
        else:
            test = f"{self.cond(1)} and {guard}"
        self.emit(indent, f"while {test}:")
        self.emit(indent + 1, self.pick((f"{w} += 1", f"{w} = {w} + 1")))
        self.loops.append(("while", w))
        self.block(indent + 1, depth + 1)
        self.loops.pop()
        self.loop_else(indent, depth)

    # -- shared state (closures, attributes, containers) -------------------

    def jumps(self, choices):
        """``choices`` less ``break`` when the innermost loop fills a ``ys`` list."""
        if self.loops and self.loops[-1][0] == "ysfor":
            return tuple(c for c in choices if c != "break") or ("continue",)
        return choices

    def plain_float(self):
        """A float name or literal (arguments of closure calls)."""
        return self.pick(FLOAT_VARS + ("x",) + FLOAT_TARGETS + _FLOAT_LITS[:4])

    def calls(self):
        return [] if self.no_calls else self.fns + self.local_fns

    def state_float_atom(self):
        opts = []
        if "attr" in self.features:
            opts.append("st.a")
        if "dict" in self.features:
            opts.append('d["p"]')
        if "list" in self.features and not self.no_list:
            opts += ["lst[0]", "lst[1]", "lst[-1]"]
        calls = [] if self.no_list else self.calls()
        if calls and (not opts or self.chance(0.5)):
            call = self.pick(calls)
            return call.format(self.plain_float()) if "{}" in call else call
        return self.pick(opts) if opts else None

    def state_int_atom(self):
        opts = []
        if "attr" in self.features:
            opts.append("st.k")
        if "dict" in self.features:
            opts.append('d["q"]')
        if "nonlocal" in self.features:
            opts.append(self.counter)
        return self.pick(opts) if opts else None

    def closure_body(self, extra=()):
        """A bounded float expression reading carried variables (and ``extra``)."""
        self.no_calls += 1
        try:
            names = [self.pick(FLOAT_VARS + ("x",)), f"{self.pick(INT_VARS + ('a', 'n'))} * 0.25"]
            names += list(extra)
            if "attr" in self.features and self.chance(0.3):
                names.append("st.a")
            if "dict" in self.features and self.chance(0.3):
                names.append('d["p"]')
            if "list" in self.features and self.chance(0.3):
                names.append("lst[1]")
            self.rng.shuffle(names)
            r = self.rng.random()
            if r < 0.4:
                return f"{names[0]} * 0.5 + {' + '.join(names[1:])}"
            if r < 0.7:
                return f"jnp.tanh({' + '.join(names)})"
            return f"{' + '.join(names)} + {self.float_expr(1)}"
        finally:
            self.no_calls -= 1

    def top_closures(self):
        """``def g`` and/or ``h = lambda z: ...`` before the body (they read late)."""
        kinds = self.rng.sample(("def", "def_if", "lambda"), self.rng.randint(1, 2))
        for kind in kinds:
            if kind == "lambda":
                self.emit(1, f"h = lambda z: z * 0.5 + {self.closure_body()}")
                self.fns.append("h({})")
                continue
            self.emit(1, "def g():")
            if kind == "def_if":
                self.no_calls += 1
                self.emit(2, f"if {self.cond(1)}:")
                self.no_calls -= 1
                self.emit(3, f"return {self.closure_body()}")
            self.emit(2, f"return {self.closure_body()}")
            self.fns.append("g()")

    def loop_names(self):
        """Variables bound by the enclosing loops, as float terms."""
        out = []
        for _, name in self.loops:
            out.append(name if name in FLOAT_TARGETS else f"{name} * 0.25")
        return out

    def local_closure(self, indent):
        """A closure defined in this block, reading the loop's target; called in the block."""
        taken = {c.split("(")[0] for c in self.local_fns}
        free = [nm for nm in ("g1", "g2") if nm not in taken]
        if not free:
            return
        name = free[0]
        extra = self.loop_names()[-1:]
        if self.temps and self.chance(0.3):
            t = self.pick(self.temps)
            extra.append(t if t in FLOAT_TEMPS else f"{t} * 0.25")
        r = self.rng.random()
        if r < 0.35:
            self.emit(indent, f"{name} = lambda: {self.closure_body(extra)}")
            self.local_fns.append(f"{name}()")
        elif r < 0.7:
            self.emit(indent, f"def {name}(z):")
            self.emit(indent + 1, f"return z * 0.5 + {self.closure_body(extra)}")
            self.local_fns.append(f"{name}({{}})")
        else:
            # Early binding through a default value, next to a late-bound read.
            early = self.pick([n for _, n in self.loops] or ["k0"])
            self.emit(indent, f"def {name}(z, e={early}):")
            self.emit(indent + 1, f"return z * 0.5 + e * 0.25 + {self.closure_body(extra)}")
            self.local_fns.append(f"{name}({{}})")

    def setup_state(self):
        """Initialise this program's state and define its helpers (after the inits)."""
        feats = self.features
        if "attr" in feats:
            a0 = self.pick(("0.0", "x", "0.5", "x * 0.5"))
            k0 = self.pick(("0", "1", "a % 3"))
            ctor = {"ns": "types.SimpleNamespace", "dataclass": "State", "class": "Box"}[self.attr_kind]
            if self.attr_kind == "class":
                self.emit(1, f"st = Box({a0}, {k0})")
            else:
                self.emit(1, f"st = {ctor}(a={a0}, k={k0})")
            self.extras += ["st.a", "st.k"]
        if "dict" in feats:
            p0 = self.pick(("0.0", "x", "1.0"))
            q0 = self.pick(("0", "a % 5", "n"))
            if self.chance(0.7):
                self.emit(1, f'd = {{"p": {p0}, "q": {q0}}}')
            else:
                self.emit(1, f"d = dict(p={p0}, q={q0})")
            self.extras += ['d["p"]', 'd["q"]'] if self.chance(0.7) else ["d"]
        if "list" in feats:
            self.emit(1, f"lst = [{self.pick(('0.0', 'x', '1.0'))}, {self.pick(('0.0', 'x * 0.5', '-1.0'))}]")
            self.extras += ["lst[0]", "lst[1]"] if self.chance(0.6) else ["lst"]
        if "nonlocal" in feats:
            c = self.counter
            if c == "cnt":
                self.emit(1, "cnt = 0")
            self.emit(1, "def bump(v):")
            self.emit(2, f"nonlocal {c}")
            self.emit(2, self.pick((f"{c} += v", f"{c} = {c} + v", f"{c} += v if v > 1 else 1")))
            self.emit(2, f"return {c}")
            if c == "cnt":
                self.extras.append("cnt")
        if "push" in feats:
            self.emit(1, "def push(v):")
            body = []
            if "attr" in feats:
                body.append(self.pick(("st.a = st.a * 0.5 + v", "st.k += 1", "st.a = v")))
            if "dict" in feats:
                body.append(self.pick(('d["p"] = d["p"] * 0.5 + v', 'd["q"] += 1')))
            if "list" in feats:
                body.append(self.pick(("lst[0] = lst[1] * 0.5 + v", "lst[1] = v")))
            self.rng.shuffle(body)
            for line in body[:self.rng.randint(1, len(body))]:
                self.emit(2, line)
        if "closure" in feats:
            self.top_closures()

    def state_stmt(self, indent):
        """One statement (or a few) updating shared state; False if none applies."""
        opts = [f for f in ("attr", "dict", "list", "nonlocal", "push") if f in self.features]
        if not opts:
            return False
        kind = self.pick(opts)
        if kind == "attr":
            s = self.rng.random()
            if s < 0.2:
                self.emit(indent, f"st.a = {self.bounded_float()}")
            elif s < 0.4:
                self.emit(indent, f"st.a = st.a * 0.5 + {self.bounded_float()}")
            elif s < 0.55:
                self.emit(indent, f"st.a {self.pick(('+=', '-='))} {self.bounded_float()}")
            elif s < 0.75:
                self.emit(indent, f"st.k += {self.small_int()}")
            elif s < 0.85 or self.attr_kind == "ns":
                self.emit(indent, f"st.k = {self.int_expr(2)} % 7")
            else:
                self.emit(indent, f"st.nudge({self.bounded_float()})")
        elif kind == "dict":
            s = self.rng.random()
            if s < 0.2:
                self.emit(indent, f'd["p"] = {self.bounded_float()}')
            elif s < 0.4:
                self.emit(indent, f'd["p"] = d["p"] * 0.5 + {self.bounded_float()}')
            elif s < 0.55:
                self.emit(indent, f'd["p"] += {self.bounded_float()}')
            elif s < 0.7:
                self.emit(indent, f'd["q"] += {self.small_int()}')
            elif s < 0.8:
                self.emit(indent, f'd["q"] = {self.int_expr(2)} % 7')
            elif s < 0.9:
                self.emit(indent, f'd.update({{"p": {self.bounded_float()}, "q": {self.int_expr(1)} % 5}})')
            else:
                self.emit(indent, f"d.update(p={self.bounded_float()})")
        elif kind == "list":
            s = self.rng.random()
            f = self.pick(FLOAT_VARS)
            if s < 0.3:
                self.emit(indent, f"lst[{self.pick(('0', '1', '-1'))}] = {self.bounded_float()}")
            elif s < 0.45:
                i = self.pick(("0", "1"))
                self.emit(indent, f"lst[{i}] {self.pick(('+=', '-='))} {self.bounded_float()}")
            elif s < 0.55:
                self.emit(indent, f"lst[1] = lst[0] * 0.5 + {self.bounded_float()}")
            elif s < 0.7:
                self.emit(indent, f"lst.append({self.bounded_float()})")
                if self.chance(0.4):
                    scope = len(self.temps)
                    self.assign(indent)
                    del self.temps[scope:]
                self.emit(indent, f"{f} = {f} * 0.5 + lst.pop()")
            elif s < 0.8:
                # `lst.pop(0)` runs before the value: the value must not read `lst`.
                self.no_list += 1
                self.emit(indent, f"lst.append(lst.pop(0) * 0.5 + {self.bounded_float()})")
                self.no_list -= 1
            else:
                # Same length on both paths, then back to two items.
                self.emit(indent, f"if {self.cond(2)}:")
                self.emit(indent + 1, f"lst.append({self.bounded_float()})")
                self.emit(indent, "else:")
                self.emit(indent + 1, f"lst.append({self.bounded_float()})")
                self.emit(indent, f"{f} = {f} * 0.5 + lst.pop()")
        elif kind == "nonlocal":
            if self.chance(0.6):
                self.emit(indent, f"bump({self.small_int()})")
            else:
                k = self.pick([k for k in INT_VARS if k != self.counter])
                self.emit(indent, f"{k} = bump({self.small_int()}) % 7")
        else:
            self.emit(indent, f"push({self.bounded_float()})")
        return True

    def ys_loop(self, indent, depth):
        """``ys = []``; a static loop appending once per iteration; ``ys`` used after it."""
        ys = next(nm for nm in YS_NAMES if nm not in self.ys_busy)
        arrays = self.chance(0.3)
        consume = self.rng.random()
        needs_item = consume < 0.6   # jnp.stack / ys[-1] need one item at least
        s = self.rng.random()
        float_targets = self.free(FLOAT_TARGETS)
        if s < 0.15 and float_targets:
            t = self.pick(float_targets)
            it = self.pick(("xs", "y0"))
        else:
            t = self.pick(self.free(INT_TARGETS))
            lo = 1 if needs_item else 0
            if s < 0.8:
                it = f"range({self.rng.randint(lo, 4)})"
            else:
                start = self.rng.randint(0, 2)
                it = f"range({start}, {start + self.rng.randint(lo, 3)})"
        value = self.bounded_array if arrays else self.bounded_float
        self.emit(indent, f"{ys} = []")
        self.emit(indent, f"for {t} in {it}:")
        self.loops.append(("ysfor", t))
        self.ys_busy.append(ys)
        if self.chance(0.3):
            self.emit(indent + 1, f"if {self.cond(2)}:")
            self.emit(indent + 2, f"{ys}.append({value()})")
            self.emit(indent + 1, "else:")
            self.emit(indent + 2, f"{ys}.append({value()})")
        else:
            self.emit(indent + 1, f"{ys}.append({value()})")
        self.block(indent + 1, depth + 1)
        self.ys_busy.pop()
        self.loops.pop()
        self.loop_else(indent, depth)
        if arrays:
            y = self.pick(ARRAY_VARS)
            if needs_item:
                self.emit(indent, f"{y} = {y} * 0.5 + jnp.tanh(jnp.stack({ys}).sum(0))")
            else:
                self.emit(indent, f"{y} = {y} * 0.5 + sum({ys}) * 0.25")
        else:
            f = self.pick(FLOAT_VARS)
            if consume < 0.4:
                self.emit(indent, f"{f} = {f} * 0.5 + jnp.tanh(jnp.stack({ys}).sum())")
            elif consume < 0.6:
                self.emit(indent, f"{f} = {f} * 0.5 + {ys}[-1]")
            elif consume < 0.9:
                self.emit(indent, f"{f} += sum({ys}) * 0.25")
            else:
                self.emit(indent, f"{self.pick(INT_VARS)} = len({ys}) % 5")

    def source(self, name="f"):
        r = self.rng
        if "attr" in self.features and self.attr_kind != "ns":
            self.emit(0, "import dataclasses")
        self.emit(0, "import jax.numpy as jnp")
        if "attr" in self.features and self.attr_kind == "ns":
            self.emit(0, "import types")
        self.emit(0, "")
        self.emit(0, "")
        if "attr" in self.features and self.attr_kind != "ns":
            self.lines += _STATE_CLASS[self.attr_kind].splitlines() + ["", ""]
        self.emit(0, f"def {name}(a, n, x, xs):")
        inits = {
            "k0": self.pick(("0", "a", "1")), "k1": self.pick(("0", "a % 5", "n")),
            "k2": self.pick(("0", "2")),
            "f0": self.pick(("0.0", "x", "0.5")), "f1": self.pick(("0.0", "x * 0.5", "1.0")),
            "f2": self.pick(("0.0", "-0.5")),
            "y0": self.pick(("xs * 0.5", "jnp.zeros(3)", "xs")),
            "y1": self.pick(("jnp.zeros(3)", "jnp.ones(3)", "-xs")),
            "b0": self.pick(("False", "True", "x > 0.0")),
            "i0": "0", "i1": "0", "v0": "0.0", "v1": "0.0", "w0": "0", "w1": "0",
        }
        names = list(inits)
        r.shuffle(names)
        for nm in names:
            self.emit(1, f"{nm} = {inits[nm]}")
        if self.features:
            self.setup_state()
        while self.budget > 0:
            if self.stmt(1, 0):
                break
        else:
            self.emit(1, self.ret())
        return "\n".join(self.lines) + "\n"


def generate(seed, max_stmts=None, avoid=()) -> str:
    """The source of the random program for ``seed`` (a module defining ``f``).

    ``avoid`` (for exploring past a known bug) names features to leave out:
    ``"loop_return"`` (``return`` inside loops), ``"else_return"``
    (``return`` in a loop's ``else``), ``"chain"`` (chained comparisons whose
    middle operand is not a plain name), any of ``FEATURES`` (``"closure"``,
    ``"nonlocal"``, ``"attr"``, ``"dict"``, ``"list"``, ``"push"``, ``"ys"``),
    or ``"state"`` for all of those.
    """
    return Generator(seed, max_stmts, avoid).source()


def inputs(seed, count=2):
    """``count`` argument tuples ``(a, n, x, xs)`` for the program of ``seed``.

    All tuples have the same types (so one jit compilation serves them):
    per seed, ``a``, ``n`` and ``x`` are Python scalars or JAX scalars. Floats
    are multiples of 0.25 so float comparisons can hit their thresholds
    exactly, and float32 and float64 arithmetic on them agree.
    """
    import jax.numpy as jnp

    rng = random.Random(f"inputs-{seed}")
    py_a, py_x, py_n = rng.random() < 0.3, rng.random() < 0.3, rng.random() < 0.2
    out = []
    for _ in range(count):
        a = rng.randint(-4, 9)
        n = rng.randint(0, 3)
        x = rng.randint(-8, 8) / 4
        xs = [rng.randint(-8, 8) / 4 for _ in range(3)]
        out.append((a if py_a else jnp.int32(a), n if py_n else jnp.int32(n),
                    x if py_x else jnp.float32(x), jnp.asarray(xs, dtype=jnp.float32)))
    return out


_TMP = None


def set_tmpdir(path):
    """Write the programs' files under ``path`` (default: a new temporary folder)."""
    global _TMP
    _TMP = str(path)


def load(source, name):
    """Write ``source`` to a real file and import it (so ``inspect`` finds it)."""
    global _TMP
    if _TMP is None:
        _TMP = tempfile.mkdtemp(prefix="autoflow_fuzz_")
        atexit.register(shutil.rmtree, _TMP, ignore_errors=True)
    path = os.path.join(_TMP, f"{name}.py")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Outcome:
    """What happened to one program.

    ``kind`` is one of:

    * ``"ok"``: autoflow matched eager Python on every input;
    * ``"refused"``: autoflow raised an ``AutoflowError`` (allowed, but rare);
    * ``"difference"``: results differ (an autoflow bug);
    * ``"internal"``: another exception under autoflow (an autoflow bug);
    * ``"roundtrip"``: ``to_source`` output does not unparse stably;
    * ``"generator"``: the eager run raised (a bug in this generator).

    ``lowered`` lists ``(statement, lowering)`` pairs seen while tracing.
    """

    seed: int
    kind: str
    source: str
    args: tuple = ()
    detail: str = ""
    expected: object = None
    actual: object = None
    lowered: list = field(default_factory=list)

    def report(self):
        lines = [f"--- seed {self.seed}: {self.kind} (python -m tests.fuzzgen {self.seed}) ---",
                 self.source.rstrip()]
        if self.args:
            lines.append(f"inputs:   {_fmt(self.args)}")
        if self.expected is not None:
            lines.append(f"eager:    {_fmt(self.expected)}")
        if self.actual is not None:
            lines.append(f"autoflow: {_fmt(self.actual)}")
        if self.detail:
            lines.append(self.detail.rstrip())
        return "\n".join(lines)

    def signature(self):
        """A short key grouping outcomes that are likely the same bug."""
        text = [ln for ln in self.detail.strip().splitlines()
                if ln.strip() and ln.strip() != "AssertionError:"]
        if self.kind == "difference":
            where = re.search(r"^differing outputs: (.*)$", self.detail, re.M)
            if where:
                return f"difference: {where.group(1)}"
            return f"difference: {text[1].strip() if len(text) > 1 else ''}"
        errors = [ln for ln in text if re.match(r"^[A-Za-z_][\w.]*(Error|Exception)\b", ln)]
        line = errors[-1] if errors else (text[0] if text else "")
        line = re.sub(r"/\S+?\.py:\d+:\d+: ", "", line)
        line = re.sub(r"`[^`]*`", "`_`", line)
        line = re.sub(r"seed \d+", "seed _", line)
        return f"{self.kind}: {line[:160]}"


def _differing(source, actual, expected):
    """Which returned values differ, named by the ``return`` expression (``st.a``, ``d['q']``).

    The first three are named by position (``0``, ``1``, ``2``): they differ from
    program to program, the state appended after them does not. ``""`` when the
    structures differ.
    """
    import jax
    import numpy as np

    a_leaves, a_tree = jax.tree_util.tree_flatten_with_path(actual)
    e_leaves, e_tree = jax.tree_util.tree_flatten_with_path(expected)
    if a_tree != e_tree:
        return ""
    names = []
    try:
        rets = [node for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple)]
        names = [ast.unparse(e) for e in rets[0].value.elts] if rets else []
    except SyntaxError:  # pragma: no cover
        pass
    out = []
    for (path, a), (_, e) in zip(a_leaves, e_leaves):
        a, e = np.asarray(a), np.asarray(e)
        if a.shape == e.shape and np.allclose(a, e, rtol=1e-5, atol=1e-6):
            continue
        top = path[0].idx if path and hasattr(path[0], "idx") else None
        rest = jax.tree_util.keystr(tuple(path[1:]))
        if top is not None and 3 <= top < len(names):
            out.append(names[top] + rest)
        else:
            out.append(str(top) + rest if top is not None else jax.tree_util.keystr(path))
    return ", ".join(out)


def _fmt(value):
    import numpy as np

    if isinstance(value, tuple):
        return "(" + ", ".join(_fmt(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        arr = np.asarray(value)
        kind = "np" if isinstance(value, (np.ndarray, np.generic)) else "jax"
        return f"{kind}.{arr.dtype}{list(arr.shape)}({arr.tolist()})"
    return repr(value)


def roundtrip_ok(text):
    """``unparse(parse(s))`` is a fixed point after one round."""
    once = ast.unparse(ast.parse(text))
    return once == ast.unparse(ast.parse(once))


def _recording():
    """``autoflow.runtime.common.events.recording()`` (what each statement lowered to)."""
    try:
        from autoflow.runtime.common import events
        return events.recording()
    except (ImportError, AttributeError):  # pragma: no cover
        import contextlib
        return contextlib.nullcontext([])


def check(seed, n_inputs=2, max_stmts=None, avoid=()) -> Outcome:
    """Run the program of ``seed`` eagerly and under ``autoflow.jit``; classify it."""
    return check_source(generate(seed, max_stmts, avoid), inputs(seed, n_inputs), seed)


_loads = 0


def check_source(source, arg_tuples, seed=None) -> Outcome:
    """Run ``f`` of ``source`` on each of ``arg_tuples`` eagerly and under ``autoflow.jit``.

    The eager runs must succeed (else the generator is at fault). Then
    ``autoflow.to_source`` must give source whose ``ast.unparse`` is stable,
    and on each input the jitted result must equal the eager one
    (``tests.equivalence.assert_same``: same structure and shapes, ints
    exactly, floats to rtol 1e-5), or autoflow must raise an ``AutoflowError``.
    """
    global _loads
    import autoflow

    from .equivalence import assert_same

    _loads += 1
    try:
        fn = load(source, f"fuzz_{seed}_{_loads}").f
    except Exception:
        return Outcome(seed, "generator", source, detail=traceback.format_exc(limit=-3))
    expected = []
    for args in arg_tuples:
        try:
            expected.append(fn(*args))
        except Exception:
            return Outcome(seed, "generator", source, args, traceback.format_exc(limit=-3))
    try:
        converted = autoflow.to_source(fn)
    except autoflow.AutoflowError as e:
        return Outcome(seed, "refused", source, detail=f"to_source: {type(e).__name__}: {e}")
    except Exception:
        return Outcome(seed, "internal", source,
                       detail="to_source: " + traceback.format_exc(limit=-4))
    try:
        ok = roundtrip_ok(converted)
    except SyntaxError as e:
        ok, converted = False, f"{converted}\n(SyntaxError: {e})"
    if not ok:
        return Outcome(seed, "roundtrip", source, detail="converted source:\n" + converted)
    jitted = autoflow.jit(fn)
    lowered = []
    for args, want in zip(arg_tuples, expected):
        try:
            with _recording() as log:
                actual = jitted(*args)
            lowered += [(e.statement, e.lowered) for e in log]
        except autoflow.AutoflowError as e:
            return Outcome(seed, "refused", source, args, f"{type(e).__name__}: {e}",
                           expected=want)
        except Exception:
            return Outcome(seed, "internal", source, args, traceback.format_exc(limit=-6),
                           expected=want)
        try:
            assert_same(actual, want, f"seed {seed}")
        except AssertionError as e:
            where = _differing(source, actual, want)
            return Outcome(seed, "difference", source, args,
                           (f"differing outputs: {where}\n" if where else "")
                           + f"AssertionError: {e}", want, actual)
    return Outcome(seed, "ok", source, lowered=lowered)


def _candidates(tree):
    """Smaller variants of ``tree``: a statement deleted, or replaced by a sub-block."""
    import copy

    paths = []  # (owner node, field name, index) of every statement in a block

    def walk(node):
        for name in ("body", "orelse"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                for i, child in enumerate(block):
                    paths.append((node, name, i))
                    walk(child)

    walk(tree)
    for owner, name, i in reversed(paths):  # innermost and last first
        stmt = getattr(owner, name)[i]
        if isinstance(stmt, ast.Pass) or _is_counter_step(stmt):
            continue  # nothing to gain; or the `while` loop would no longer stop
        replacements = [[]]
        for sub in ("body", "orelse"):
            if isinstance(getattr(stmt, sub, None), list) and getattr(stmt, sub):
                replacements.append(getattr(stmt, sub))
        for rep in replacements:
            block = getattr(owner, name)
            new_block = block[:i] + rep + block[i + 1:]
            if not new_block:
                new_block = [ast.Pass()]
            saved = block
            setattr(owner, name, new_block)
            yield ast.unparse(ast.fix_missing_locations(copy.deepcopy(tree)))
            setattr(owner, name, saved)
    yield from _expr_candidates(tree)


def _expr_candidates(tree):
    """Smaller variants of ``tree``: an expression replaced by one of its operands.

    Leaves alone what keeps the programs valid: assignment targets, function
    signatures, and each ``while`` loop's counter guard (``w0 < 3``), so the
    loops still stop.
    """
    protected = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.While):
            protected.add(id(node.test))
            parts = node.test.values if isinstance(node.test, ast.BoolOp) else [node.test]
            protected.update(id(p) for p in parts if _is_counter_guard(p))
    skip_fields = {"targets", "target", "args", "decorator_list", "returns", "annotation",
                   "ctx", "func", "names"}
    slots = []  # (owner, field, index or None) of every expression that has expression operands

    def walk(node):
        for fname, value in ast.iter_fields(node):
            if fname in skip_fields:
                continue
            items = value if isinstance(value, list) else [value]
            for i, child in enumerate(items):
                if not isinstance(child, ast.AST):
                    continue
                if isinstance(child, ast.expr) and id(child) not in protected:
                    slots.append((node, fname, i if isinstance(value, list) else None))
                walk(child)

    walk(tree)
    for owner, fname, i in slots:
        value = getattr(owner, fname)
        node = value[i] if i is not None else value
        operands = [c for c in ast.iter_child_nodes(node)
                    if isinstance(c, ast.expr) and not isinstance(c, (ast.Load, ast.Store))]
        if isinstance(node, ast.Call):
            operands = list(node.args)
        # Not a container for an item of it (`lst.append(lst)` makes a list holding itself).
        operands = [c for c in operands
                    if not (isinstance(c, ast.Name) and c.id in _CONTAINER_NAMES)]
        for sub in operands:
            if i is None:
                setattr(owner, fname, sub)
            else:
                value[i] = sub
            yield ast.unparse(tree)
            if i is None:
                setattr(owner, fname, node)
            else:
                value[i] = node


_CONTAINER_NAMES = ("st", "d", "lst") + YS_NAMES


def _is_counter_guard(node):
    return (isinstance(node, ast.Compare) and isinstance(node.left, ast.Name)
            and node.left.id in COUNTERS)


def _is_counter_step(stmt):
    if isinstance(stmt, ast.AugAssign):
        target = stmt.target
    elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.BinOp):
        target = stmt.targets[0]
    else:
        return False
    return isinstance(target, ast.Name) and target.id in COUNTERS


def _binds_what_it_reads(source):
    """Every name the program reads is bound somewhere in it (or is a builtin).

    Deleting an initialisation can leave a read on a path the failing input
    does not take; autoflow traces both paths, so such a program may fail the
    same way while not being a valid program on every input.
    """
    import builtins

    tree = ast.parse(source)
    bound = set(dir(builtins))
    read = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return read <= bound


def _is_method_call(node, obj, method):
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == method and isinstance(node.func.value, ast.Name)
            and (node.func.value.id == obj if isinstance(obj, str) else node.func.value.id in obj))


def _shallow_nodes(stmt):
    """The nodes of ``stmt`` outside its nested statement blocks and functions."""
    todo = [stmt]
    while todo:
        node = todo.pop()
        yield node
        for name, value in ast.iter_fields(node):
            if name in ("body", "orelse", "finalbody", "handlers"):
                continue
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST) and not isinstance(
                        child, (ast.FunctionDef, ast.Lambda, ast.ClassDef)):
                    todo.append(child)


def _keeps_container_shapes(source):
    """The program keeps the generator's container invariants (see the module docstring).

    Deleting statements can break them, and a program that appends to ``lst``
    on one path only, or leaves a ``ys`` loop by ``break``, cannot be staged:
    a refusal of it says nothing about autoflow. Checked: every ``if`` leaves
    ``lst`` as long on both paths, every loop body and function body leaves it
    as long as it found it; a loop appending to a ``ys`` list (first thing in
    its body, or in both branches of an ``if`` there) has no ``break`` of its
    own and follows ``ys = []``.
    """
    ok = True

    def net(block):
        nonlocal ok
        total = 0
        for stmt in block:
            if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
                continue
            if isinstance(stmt, ast.If):
                a, b = net(stmt.body), net(stmt.orelse)
                same = a == b or _ends_block(stmt.body) or _ends_block(stmt.orelse)
                ok = ok and same
                total += a if not _ends_block(stmt.body) else b
            elif isinstance(stmt, (ast.For, ast.While)):
                a, b = net(stmt.body), net(stmt.orelse)
                ok = ok and a == 0 and b == 0
            else:
                for node in _shallow_nodes(stmt):
                    if _is_method_call(node, "lst", "append"):
                        total += 1
                    elif _is_method_call(node, "lst", "pop"):
                        total -= 1
        return total

    tree = ast.parse(source)
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and fn.name == "f":
            balanced = net(fn.body) == 0
            ok = ok and balanced
    for node in ast.walk(tree):
        for name in ("body", "orelse"):
            block = getattr(node, name, None)
            if not isinstance(block, list):
                continue
            for i, stmt in enumerate(block):
                if isinstance(stmt, ast.For) and _appends_ys(stmt):
                    ys = _appends_ys(stmt)
                    before = block[i - 1] if i else None
                    ok = ok and (isinstance(before, ast.Assign)
                                 and isinstance(before.value, ast.List)
                                 and any(isinstance(t, ast.Name) and t.id == ys
                                         for t in before.targets))
                    ok = ok and not _breaks(stmt.body)
                if isinstance(stmt, ast.If):
                    a = any(_is_method_call(n, YS_NAMES, "append") for s_ in stmt.body
                            for n in _shallow_nodes(s_))
                    b = any(_is_method_call(n, YS_NAMES, "append") for s_ in stmt.orelse
                            for n in _shallow_nodes(s_))
                    ok = ok and a == b
    return bool(ok)


def _ends_block(block):
    return bool(block) and isinstance(block[-1], (ast.Return, ast.Break, ast.Continue))


def _appends_ys(loop):
    """The ``ys`` name ``loop`` appends to first thing in its body, or None."""
    first = loop.body[0] if loop.body else None
    candidates = [first] if isinstance(first, ast.Expr) else (
        first.body[:1] if isinstance(first, ast.If) else [])
    for stmt in candidates:
        if isinstance(stmt, ast.Expr) and _is_method_call(stmt.value, YS_NAMES, "append"):
            return stmt.value.func.value.id
    return None


def _breaks(block):
    """A ``break`` in ``block`` that leaves the loop owning ``block``."""
    for stmt in block:
        if isinstance(stmt, ast.Break):
            return True
        if isinstance(stmt, (ast.If, ast.With, ast.Try)):
            inner = getattr(stmt, "body", []) + getattr(stmt, "orelse", [])
            if _breaks(inner):
                return True
        if isinstance(stmt, (ast.For, ast.While)) and _breaks(stmt.orelse):
            return True
    return False


def shrink(outcome, budget=800, log=None) -> Outcome:
    """A smaller program failing with the same ``signature`` as ``outcome``.

    Greedily deletes statements (or replaces a compound statement by one of
    its blocks), then replaces expressions by one of their operands, while the
    failure stays the same, on the failing input only, keeping every name the
    program reads bound somewhere.
    """
    args = [outcome.args] if outcome.args else inputs(outcome.seed)[:1]
    want = outcome.signature()
    best, tries, changed = outcome, 0, True
    while changed and tries < budget:
        changed, pos = False, 0
        candidates = list(_candidates(ast.parse(best.source)))
        current = ast.unparse(ast.parse(best.source))
        while pos < len(candidates) and tries < budget:
            if candidates[pos] == current:
                pos += 1
                continue
            if not (_binds_what_it_reads(candidates[pos])
                    and _keeps_container_shapes(candidates[pos])):
                # A name left unbound on some path (maybe one the input skips),
                # or a program that cannot be staged at all.
                pos += 1
                continue
            tries += 1
            try:
                got = check_source(candidates[pos], args, outcome.seed)
            except RecursionError:  # pragma: no cover - a candidate that recurses without end
                pos += 1
                continue
            if got.kind == outcome.kind and got.signature() == want:
                best, changed = got, True
                candidates = list(_candidates(ast.parse(best.source)))
                current = ast.unparse(ast.parse(best.source))
                if log:
                    log(f"shrink: {len(best.source.splitlines())} lines")
            else:
                pos += 1
    return best


def scan(seeds, avoid=(), out=sys.stdout, reports=None, n_inputs=2):
    """Check every seed; print counts, and the seeds grouped by ``signature``."""
    import collections
    import time

    start = time.time()
    kinds, groups, lowered = collections.Counter(), collections.defaultdict(list), collections.Counter()
    for seed in seeds:
        o = check(seed, n_inputs=n_inputs, avoid=avoid)
        kinds[o.kind] += 1
        lowered.update(set(o.lowered))
        if o.kind != "ok":
            groups[o.signature()].append(seed)
            if reports is not None:
                reports.write(o.report() + "\n\n")
                reports.flush()
    print(f"{sum(kinds.values())} programs in {time.time() - start:.0f}s: {dict(kinds)}", file=out)
    for (stmt, how), count in sorted(lowered.items()):
        print(f"  {stmt:8} -> {how}: {count} programs", file=out)
    for sig, group in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(group):5}  {sig}\n       seeds {group[:10]}", file=out)
    return kinds, groups


def main(argv=None):
    import argparse

    os.environ.setdefault("AUTOFLOW_STRICT", "1")
    parser = argparse.ArgumentParser(prog="python -m tests.fuzzgen", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("seed", type=int, help="the program's seed (first seed with --scan)")
    parser.add_argument("--source", action="store_true", help="print the program only")
    parser.add_argument("--scan", type=int, metavar="COUNT",
                        help="check COUNT programs from SEED on and group the failures")
    parser.add_argument("--avoid", default="", help="comma-separated features to leave out "
                        "(loop_return, else_return, chain, state, " + ", ".join(FEATURES) + ")")
    parser.add_argument("--reports", help="with --scan: write every failure's report here")
    parser.add_argument("--shrink", action="store_true",
                        help="also print a smaller program failing the same way")
    parser.add_argument("--inputs", type=int, default=2, help="inputs per program (default 2)")
    args = parser.parse_args(argv)
    avoid = tuple(a for a in args.avoid.split(",") if a)
    if args.scan:
        reports = open(args.reports, "w", encoding="utf-8") if args.reports else None
        kinds, _ = scan(range(args.seed, args.seed + args.scan), avoid, reports=reports,
                        n_inputs=args.inputs)
        return 0 if set(kinds) <= {"ok"} else 1
    if args.source:
        print(generate(args.seed, avoid=avoid), end="")
        return 0
    out = check(args.seed, n_inputs=args.inputs, avoid=avoid)
    print(out.report() if out.kind != "ok" else out.source + "ok")
    if args.shrink and out.kind != "ok":
        small = shrink(out, log=lambda m: print(m, file=sys.stderr))
        print("\n# smaller program failing the same way:")
        print(small.report())
    return 0 if out.kind == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
