"""Differential fuzzing across compositions: each lane under ``vmap``, ``jit`` and ``grad``.

``tests/fuzzgen.py`` compares one input at a time. Programs that are right one
input at a time can still fail when the call is not alone: under ``jax.vmap``
a batched ``if`` runs both branches and a batched loop runs while any lane
runs, so what one lane does must never depend on another. This fuzzer runs
each random program on a batch of lanes under a composition of JAX
transformations and compares every lane with the eager run of that lane
(Python itself is the oracle).

The programs are ``fuzzgen``'s (nested ``if``/``elif``/``else``, loops with
``break``/``continue``/``return``, loop ``else``, ``and``/``or``/``not``,
ternaries, shared state), plus what compositions break (``ComposeGenerator``):

* raise guards (``if a > 7: raise ValueError(f"... {a}")``), some in front of
  a loop that only the guard lets end (``while m != 0: m = m // 2`` after
  ``if m < 0: raise``: a lane that raised must not spin in it);
* unbounded loops that end in Python (halving, digit counts);
* ``print`` of ints and floats (compared as the multiset of printed lines:
  under ``vmap`` the lanes' lines interleave);
* variables bound on one path and read later under the same test.

Compositions (``COMPOSITIONS``): ``vmap``, ``jit(vmap)``, ``vmap(jit)``,
nested ``vmap``, ``vmap`` with ``in_axes`` mixing batched and unbatched
arguments (unbatched ones sometimes Python scalars), and for the float results
``jit(grad)``, ``vmap(grad)``, ``grad(vmap)`` and ``jit(vmap(jvp))``, against
``jax.grad``/``jax.jvp`` of the unconverted function run eagerly.

Outcomes (``Outcome.kind``): ``ok``; ``refused`` (an ``AutoflowError``:
allowed, but rare); ``difference`` (a lane's value, the printed lines, or a
raise that differs from eager Python); ``internal`` (any other exception);
``hang`` (no result within ``TIMEOUT`` seconds: the program runs in a worker
process that is killed then); ``generator`` (the eager run failed in a way the
generator should not allow).

From the command line::

    python -m tests.fuzz_compose SEED                 # one program, every composition
    python -m tests.fuzz_compose SEED --source        # print it
    python -m tests.fuzz_compose SEED --scan COUNT    # COUNT programs, grouped failures
        [--per-program K] [--workers W] [--report FILE]
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass

from . import fuzzgen

COMPOSITIONS = ("vmap", "jit_vmap", "vmap_jit", "vmap_vmap", "in_axes",
                "grad", "vmap_grad", "grad_vmap", "jvp")
GRADS = frozenset({"grad", "vmap_grad", "grad_vmap", "jvp"})
LANES = 4
TIMEOUT = float(os.environ.get("AUTOFLOW_COMPOSE_TIMEOUT", "120"))


# ---------------------------------------------------------------------------
# Programs
# ---------------------------------------------------------------------------

_RARE = ("a > 7", "a < -3", "k0 > 6", "k1 < -6", "x > 1.75", "f0 < -1.5", "xs[0] > 1.75",
         "n == 3 and a < 0", "i0 > 3", "k2 > 5")


class ComposeGenerator(fuzzgen.Generator):
    """``fuzzgen.Generator``'s programs with raise guards, unbounded loops that end
    in Python, prints, and one-path bindings (see the module's docstring)."""

    def __init__(self, seed, max_stmts=None, avoid=()):
        self.crng = random.Random(f"compose-{seed}")
        self.serial = 0
        super().__init__(seed, max_stmts, avoid)

    def fresh(self, prefix):
        self.serial += 1
        return f"{prefix}{self.serial}"

    def stmt(self, indent, depth, last=False):
        if (self.budget > 0 and depth < self.max_depth and not self.no_calls
                and not self.no_list and self.crng.random() < 0.22):
            self.budget -= 1
            kind = self.crng.choice(("raise", "raise_loop", "raise_loop", "print", "one_path",
                                     "halving", "digits"))
            getattr(self, "emit_" + kind)(indent)
            return False
        return super().stmt(indent, depth, last)

    def emit_raise(self, indent):
        self.emit(indent, f"if {self.crng.choice(_RARE)}:")
        values = self.crng.choice(("{a}", "{k0}", "{a} and {x}", "{n}"))
        self.emit(indent + 1, f'raise ValueError(f"bad value: {values}")')

    def emit_raise_loop(self, indent):
        # The guard is all that lets the loop end in Python (`-1 // 2 == -1`).
        m, k = self.fresh("m"), self.pick(fuzzgen.INT_VARS)
        self.emit(indent, f"{m} = {self.int_expr(2)}")
        self.emit(indent, f"if {m} < 0:")
        self.emit(indent + 1, f'raise ValueError(f"{m} must be non-negative, got {{{m}}}")')
        self.emit(indent, self.crng.choice((f"while {m} != 0:", f"while {m}:")))
        self.emit(indent + 1, f"{k} = ({k} + {m} % 2) % 50")
        self.emit(indent + 1, self.crng.choice((f"{m} = {m} // 2", f"{m} >>= 1")))

    def emit_halving(self, indent):
        m, k = self.fresh("m"), self.pick(fuzzgen.INT_VARS)
        self.emit(indent, f"{m} = abs({self.int_expr(2)}) + 1")
        self.emit(indent, f"while {m} > 1:")
        self.emit(indent + 1, f"{m} = {m} // 2 if {m} % 2 == 0 else {m} - 1")
        self.emit(indent + 1, f"{k} = ({k} + 1) % 50")

    def emit_digits(self, indent):
        m, k = self.fresh("m"), self.pick(fuzzgen.INT_VARS)
        self.emit(indent, f"{m} = abs({self.int_expr(1)}) * 37 + 5")
        self.emit(indent, f"{k} = 0")
        self.emit(indent, f"while {m} > 0:")
        self.emit(indent + 1, f"{k} = {k} + {m} % 10")
        self.emit(indent + 1, f"{m} = {m} // 10")
        self.emit(indent + 1, f"if {k} > 20:")
        self.emit(indent + 2, "break")

    def emit_print(self, indent):
        items = [self.crng.choice(("a", "n", "k0", "k1", "i0", "w0", "x", "f0", "xs[1]"))
                 for _ in range(self.crng.randint(1, 3))]
        self.emit(indent, f'print("at", {", ".join(items)})')

    def emit_one_path(self, indent):
        q, u = self.fresh("q"), self.fresh("u")
        self.emit(indent, f"{q} = {self.cond(1)}")
        self.emit(indent, f"if {q}:")
        self.emit(indent + 1, f"{u} = {self.bounded_float()}")
        if self.crng.random() < 0.5:
            self.emit(indent, f"{self.pick(fuzzgen.INT_VARS)} = {self.int_expr(1)} % 7")
        self.emit(indent, f"if {q}:")
        f = self.pick(fuzzgen.FLOAT_VARS)
        self.emit(indent + 1, f"{f} = {f} * 0.5 + {u}")


def generate(seed, max_stmts=None, avoid=()) -> str:
    return ComposeGenerator(seed, max_stmts, avoid).source()


def lanes(seed, count=LANES):
    """``count`` argument tuples ``(a, n, x, xs)`` of JAX scalars and arrays."""
    import jax.numpy as jnp

    rng = random.Random(f"compose-inputs-{seed}")
    out = []
    for _ in range(count):
        out.append((jnp.int32(rng.randint(-4, 9)), jnp.int32(rng.randint(0, 3)),
                    jnp.float32(rng.randint(-8, 8) / 4),
                    jnp.asarray([rng.randint(-8, 8) / 4 for _ in range(3)], jnp.float32)))
    return out


# ---------------------------------------------------------------------------
# Running one composition
# ---------------------------------------------------------------------------

@dataclass
class Outcome:
    seed: int
    composition: str
    kind: str
    detail: str = ""
    source: str = ""

    def report(self):
        return (f"--- seed {self.seed}, {self.composition}: {self.kind} "
                f"(python -m tests.fuzz_compose {self.seed} --composition {self.composition}) "
                f"---\n{self.source.rstrip()}\n{self.detail.rstrip()}")

    def signature(self):
        lines = [ln for ln in self.detail.strip().splitlines() if ln.strip()]
        errors = [ln for ln in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception)\b", ln)]
        line = errors[-1] if errors else (lines[0] if lines else "")
        line = re.sub(r"/\S+?\.py:\d+:\d+: ", "", line)
        line = re.sub(r"`[^`]*`", "`_`", line)
        line = re.sub(r"\d+", "N", line)
        return f"{self.kind}: {line[:150]}"


class _Raised:
    """An exception the eager run raised for some lane."""

    def __init__(self, exc):
        self.exc = exc
        self.type = type(exc).__name__
        self.text = str(exc)


def _run(fn, *args):
    """``(result or _Raised, printed lines)`` of ``fn(*args)``."""
    import jax

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            value = fn(*args)
            jax.block_until_ready(value)
            jax.effects_barrier()
        except Exception as e:  # noqa: BLE001 - the program's own exception
            jax.effects_barrier()
            value = _Raised(e)
    return value, out.getvalue().splitlines()


def _float_objective(f):
    import jax.numpy as jnp

    def g(a, n, x, xs):
        out = f(a, n, x, xs)
        return jnp.asarray(out[1], jnp.float32) + jnp.sum(jnp.asarray(out[2], jnp.float32))
    return g


def _stack(values):
    import jax
    import jax.numpy as jnp

    return jax.tree_util.tree_map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *values)


def _lane(tree, i):
    import jax

    return jax.tree_util.tree_map(lambda x: x[i], tree)


def _same(actual, expected, rtol=1e-5, atol=1e-6):
    """None if equal (structure, shapes, values), else what differs."""
    import jax
    import numpy as np

    a_leaves, a_tree = jax.tree_util.tree_flatten(actual)
    e_leaves, e_tree = jax.tree_util.tree_flatten(expected)
    if a_tree != e_tree:
        return f"structure {a_tree} != eager {e_tree}"
    for k, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        a, e = np.asarray(a), np.asarray(e)
        if a.shape != e.shape:
            return f"leaf {k}: shape {a.shape} != eager {e.shape}"
        if e.dtype.kind in "fc" or a.dtype.kind in "fc":
            if not np.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True):
                return f"leaf {k}: {a.tolist()} != eager {e.tolist()}"
        elif not np.array_equal(a, e):
            return f"leaf {k}: {a.tolist()} != eager {e.tolist()}"
    return None


def _matches_raise(exc, raised):
    """Does ``exc`` (from a composed call) stand for one of the eager exceptions?"""
    name = type(exc).__name__
    types = {r.type for r in raised}
    if name in types:
        return True
    if name in ("JaxRuntimeError", "XlaRuntimeError"):  # a user's jax.jit around the check
        return any(t in str(exc) for t in types)
    return False


def _composed(kind, cf, args, rng):
    """``(call, lane arguments, how to read lane i of the result)`` for ``kind``."""
    import jax
    import jax.numpy as jnp

    A, N, X, XS = (_stack([a[i] for a in args]) for i in range(4))
    if kind == "vmap":
        return lambda: jax.vmap(cf)(A, N, X, XS), args, _lane
    if kind == "jit_vmap":
        return lambda: jax.jit(jax.vmap(cf))(A, N, X, XS), args, _lane
    if kind == "vmap_jit":
        return lambda: jax.vmap(jax.jit(cf))(A, N, X, XS), args, _lane
    if kind == "vmap_vmap":
        half = len(args) // 2
        r = [jnp.reshape(v, (2, half) + v.shape[1:]) for v in (A, N, X, XS)]
        return (lambda: jax.vmap(jax.vmap(cf))(*r), args,
                lambda t, i: jax.tree_util.tree_map(lambda x: x[i // half, i % half], t))
    if kind == "in_axes":
        batched = [rng.random() < 0.5 for _ in range(4)]
        if not any(batched):
            batched[rng.randrange(4)] = True
        python = rng.random() < 0.5  # unbatched scalars as Python numbers
        stacked = (A, N, X, XS)
        call_args, lane_args = [], [list(a) for a in args]
        for i, b in enumerate(batched):
            if b:
                call_args.append(stacked[i])
                continue
            v = args[0][i]
            if python and i < 3:
                v = int(v) if i < 2 else float(v)
            call_args.append(v)
            for la in lane_args:
                la[i] = v
        axes = tuple(0 if b else None for b in batched)
        wrap = jax.jit if rng.random() < 0.5 else (lambda g: g)
        return (lambda: wrap(jax.vmap(cf, in_axes=axes))(*call_args),
                [tuple(la) for la in lane_args], _lane)
    gc = _float_objective(cf)
    if kind == "grad":
        grad = jax.jit(jax.grad(gc, argnums=(2, 3)))
        return lambda: _stack([grad(*a) for a in args]), args, _lane
    if kind == "vmap_grad":
        return lambda: jax.vmap(jax.grad(gc, argnums=(2, 3)))(A, N, X, XS), args, _lane
    if kind == "grad_vmap":
        def total(x, xs):
            return jnp.sum(jax.vmap(gc)(A, N, x, xs))
        return lambda: jax.grad(total, argnums=(0, 1))(X, XS), args, _lane
    if kind == "jvp":
        def tangent(a, n, x, xs):
            return jax.jvp(lambda x, xs: gc(a, n, x, xs), (x, xs),
                           (jnp.float32(1.0), jnp.ones_like(xs)))[1]
        return lambda: jax.jit(jax.vmap(tangent))(A, N, X, XS), args, _lane
    raise ValueError(kind)


def _eager(kind, f, lane_args):
    """The eager oracle of each lane for ``kind``: ``[(value or _Raised, lines)]``."""
    import jax
    import jax.numpy as jnp

    if kind not in GRADS:
        return [_run(f, *a) for a in lane_args]
    g = _float_objective(f)
    if kind == "jvp":
        def one(a, n, x, xs):
            return jax.jvp(lambda x, xs: g(a, n, x, xs), (x, xs),
                           (jnp.float32(1.0), jnp.ones_like(xs)))[1]
    else:
        one = jax.grad(g, argnums=(2, 3))
    out = []
    for a in lane_args:
        value, _ = _run(one, *a)
        _, lines = _run(f, *a)  # (what the forward pass prints, without the tracers)
        out.append((value, lines))
    return out


def check(seed, compositions=COMPOSITIONS, source=None):
    """Run the program of ``seed`` under each of ``compositions``: a list of ``Outcome``."""
    import jax.numpy as jnp  # noqa: F401 - (imports JAX before autoflow)

    import autoflow

    source = source if source is not None else generate(seed)
    try:
        fn = fuzzgen.load(source, f"compose_{seed}_{time.monotonic_ns()}").f
    except Exception:  # noqa: BLE001
        return [Outcome(seed, c, "generator", traceback.format_exc(limit=-3), source)
                for c in compositions]
    args = lanes(seed)
    out = []
    for kind in compositions:
        rng = random.Random(f"compose-{seed}-{kind}")
        cf = autoflow.convert(fn)
        call, lane_args, lane_of = _composed(kind, cf, args, rng)
        expected = _eager(kind, fn, lane_args)
        bad = [v for v, _ in expected if isinstance(v, _Raised) and v.type != "ValueError"]
        if bad:
            out.append(Outcome(seed, kind, "generator", f"eager run raised {bad[0].type}: "
                               f"{bad[0].text}", source))
            continue
        raised = [v for v, _ in expected if isinstance(v, _Raised)]
        try:
            value, lines = _run(call)
        except Exception as e:  # noqa: BLE001
            value, lines = _Raised(e), []
        if isinstance(value, _Raised):
            exc_type, text = value.type, value.text
            if isinstance(value.exc, autoflow.AutoflowError) and not isinstance(
                    value.exc, autoflow.InternalError):
                out.append(Outcome(seed, kind, "refused", f"{exc_type}: {text}", source))
            elif raised and _matches_raise(value.exc, raised):
                out.append(Outcome(seed, kind, "ok", source=source))
            elif raised:
                out.append(Outcome(seed, kind, "difference", f"eager raised "
                                   f"{raised[0].type}: {raised[0].text}; composed raised "
                                   f"{exc_type}: {text[:2000]}", source))
            else:
                out.append(Outcome(seed, kind, "internal", f"{exc_type}: {text[:3000]}",
                                   source))
            continue
        if raised:
            out.append(Outcome(seed, kind, "difference", f"eager raised {raised[0].type}: "
                               f"{raised[0].text}; composed returned", source))
            continue
        tol = dict(rtol=1e-4, atol=1e-4) if kind in GRADS else {}
        problem = None
        for i, (want, _) in enumerate(expected):
            why = _same(lane_of(value, i), want, **tol)
            if why is not None:
                problem = f"lane {i} (inputs {_fmt_args(lane_args[i])}): {why}"
                break
        if problem is None:
            want_lines = sorted(ln for _, lines_ in expected for ln in lines_)
            if sorted(lines) != want_lines:
                problem = (f"printed lines differ:\n  eager:    {want_lines[:12]}\n"
                           f"  composed: {sorted(lines)[:12]}")
        out.append(Outcome(seed, kind, "difference" if problem else "ok", problem or "",
                           source))
    return out


def _fmt_args(args):
    import numpy as np

    return "(" + ", ".join(str(np.asarray(a).tolist()) if hasattr(a, "shape") else repr(a)
                           for a in args) + ")"


# ---------------------------------------------------------------------------
# Worker processes (a program that hangs is killed, not waited for)
# ---------------------------------------------------------------------------

def _worker(items, tmp):
    os.environ.setdefault("AUTOFLOW_STRICT", "1")
    fuzzgen.set_tmpdir(tmp)
    import faulthandler
    import signal
    import warnings

    # (where a program stopped for taking too long was: its Python stack, on SIGUSR1)
    faulthandler.register(signal.SIGUSR1, file=open(_stack_file(tmp, os.getpid()), "w"),
                          all_threads=False)

    warnings.simplefilter("ignore")
    # JAX, its backend and autoflow are loaded before the first item's clock starts: on a
    # slow machine their import alone can take longer than a short time limit.
    import jax.numpy as jnp

    import autoflow  # noqa: F401

    jnp.zeros(1).block_until_ready()
    for item in items:
        seed, kind = item.split(":")
        print(f"START {seed} {kind}", flush=True)
        try:
            (outcome,) = check(int(seed), (kind,))
        except Exception:  # noqa: BLE001 - a bug of the fuzzer itself
            outcome = Outcome(int(seed), kind, "internal",
                              "fuzzer: " + traceback.format_exc(limit=-4))
        outcome.source = ""  # (the parent regenerates it)
        print("RESULT " + json.dumps(asdict(outcome)), flush=True)


def run(items, workers=1, timeout=TIMEOUT, log=None):
    """Check ``items`` (``(seed, composition)`` pairs) in ``workers`` processes;
    return their ``Outcome``s (``hang`` for those that did not finish in ``timeout``
    seconds, having used at least half of that in CPU time: the worker is killed and
    a new one goes on with the rest)."""
    import queue
    import threading

    todo = [[f"{s}:{c}" for s, c in items][i::workers] for i in range(workers)]
    tmp = tempfile.mkdtemp(prefix="autoflow_compose_")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    lines = queue.Queue()
    results = []
    procs = {}  # worker -> [process, item running, since, its CPU seconds then]

    def start(k):
        if not todo[k]:
            procs.pop(k, None)
            return
        p = subprocess.Popen([sys.executable, "-m", "tests.fuzz_compose", "--worker", tmp,
                              *todo[k]], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True, cwd=root, env=env)

        def read():
            for line in p.stdout:
                lines.put((k, p, line.rstrip("\n")))
            lines.put((k, p, None))
        threading.Thread(target=read, daemon=True).start()
        procs[k] = [p, None, time.monotonic(), 0.0]

    def record(k, o):
        results.append(o)
        todo[k].remove(f"{o.seed}:{o.composition}")
        if log is not None:
            log(o)

    try:
        _run_workers(workers, todo, procs, lines, start, record, timeout, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for o in results:
        o.source = generate(o.seed)
    return results


def _run_workers(workers, todo, procs, lines, start, record, timeout, tmp):
    import queue

    for k in range(workers):
        start(k)
    while procs:
        try:
            k, p, line = lines.get(timeout=1.0)
        except queue.Empty:
            k = p = line = None
        if p is not None and k in procs and procs[k][0] is p:
            st = procs[k]
            if line is None:  # the worker ended
                p.wait()
                if todo[k]:  # it died while running an item: that item crashed it
                    seed, kind = (st[1] or todo[k][0].replace(":", " ")).split()
                    record(k, Outcome(int(seed), kind, "internal", "the worker process died "
                                      f"(exit status {p.returncode})"))
                start(k)
            elif line.startswith("START "):
                st[1], st[2], st[3] = line[6:], time.monotonic(), _cpu_seconds(p.pid)
            elif line.startswith("RESULT "):
                record(k, Outcome(**json.loads(line[7:])))
                st[1] = None
        for k, st in list(procs.items()):
            if st[1] is not None and time.monotonic() - st[2] > timeout and \
                    not _cpu_seconds(st[0].pid) - st[3] <= timeout / 2:  # (nan: no /proc)
                where = _stopped_in(st[0], tmp)
                st[0].kill()
                st[0].wait()
                seed, kind = st[1].split()
                record(k, Outcome(int(seed), kind, "hang",
                                  f"no result within {timeout:.0f} s{where}"))
                start(k)


def _stack_file(tmp, pid):
    return os.path.join(tmp, f"stack_{pid}.txt")


# Frames that say a program was still being traced, lowered or compiled when it was
# stopped (a slow compile), not running its compiled code (a hang).
_BUILDING = ("backend_compile", "compile_or_get_cached", "lower_jaxpr", "_cached_lowering",
             "trace_to_jaxpr", "_pjit_lower", "make_jaxpr", "eval_shape",
             # (older JAX's names: 0.4.x)
             "make_jaxpr_f", "trace_to_jaxpr_dynamic", "trace_to_subjaxpr_dynamic")


def _stopped_in(proc, tmp):
    """What the worker ``proc`` was doing when it took too long, from its Python stack
    (``faulthandler``): ``" (stopped while tracing or compiling: ...)"``, ``" (stopped
    while running the compiled program: ...)"``, or ``""`` where no stack came."""
    import signal

    path = _stack_file(tmp, proc.pid)
    try:
        proc.send_signal(signal.SIGUSR1)
        for _ in range(20):
            time.sleep(0.1)
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            if "File " in text:
                break
    except OSError:
        return ""
    frames = re.findall(r'File "([^"]+)", line \d+ in (\S+)', text)
    if not frames:
        return ""
    inner = " < ".join(f"{name} ({os.path.basename(f)})" for f, name in frames[:3])
    building = any(name in _BUILDING or "interpreters/mlir" in f for f, name in frames)
    return (f" (stopped while {'tracing or compiling' if building else 'running the compiled program'}: "
            f"{inner})")


def _cpu_seconds(pid):
    """CPU seconds process ``pid`` has used (a loaded machine slows a worker's wall
    clock, not its CPU time: a spinning loop uses CPU; where /proc cannot tell, the
    wall clock alone decides)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("inf")


def plan(first, count, per_program=1):
    """``(seed, composition)`` items: ``per_program`` compositions per program, in turn."""
    n = len(COMPOSITIONS)
    return [(s, COMPOSITIONS[(s * per_program + j) % n])
            for s in range(first, first + count) for j in range(min(per_program, n))]


def summary(outcomes):
    kinds = collections.Counter(o.kind for o in outcomes)
    groups = collections.defaultdict(list)
    for o in outcomes:
        if o.kind not in ("ok", "refused"):
            groups[o.signature()].append(f"{o.seed}:{o.composition}")
    lines = [f"{len(outcomes)} runs: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))]
    for sig, which in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"  {len(which):5}  {sig}\n         {which[:10]}")
    return "\n".join(lines)


def main(argv=None):
    import argparse

    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[3:], sys.argv[2])
        return 0
    os.environ.setdefault("AUTOFLOW_STRICT", "1")
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz_compose", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("seed", type=int)
    parser.add_argument("--source", action="store_true", help="print the program only")
    parser.add_argument("--composition", choices=COMPOSITIONS, action="append",
                        help="only these compositions (default: all)")
    parser.add_argument("--scan", type=int, metavar="COUNT")
    parser.add_argument("--per-program", type=int, default=len(COMPOSITIONS))
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--report", help="with --scan: write every failure's report here")
    args = parser.parse_args(argv)
    if args.source:
        print(generate(args.seed), end="")
        return 0
    if args.scan:
        items = plan(args.seed, args.scan, args.per_program)
        if args.composition:
            items = [(s, c) for s, c in items if c in args.composition]
        started = time.monotonic()
        done = []

        def log(o):
            done.append(o)
            if o.kind not in ("ok", "refused"):
                print(f"{o.seed}:{o.composition} {o.kind}: {o.signature()}", flush=True)
            if len(done) % 500 == 0:
                print(f"... {len(done)}/{len(items)} in {time.monotonic() - started:.0f} s",
                      flush=True)
        outcomes = run(items, args.workers, log=log)
        print(summary(outcomes))
        print(f"({time.monotonic() - started:.0f} s)")
        if args.report:
            with open(args.report, "w", encoding="utf-8") as fh:
                for o in outcomes:
                    if o.kind not in ("ok",):
                        fh.write(o.report() + "\n\n")
        return 0 if all(o.kind in ("ok", "refused") for o in outcomes) else 1
    import warnings

    warnings.simplefilter("ignore")
    outcomes = check(args.seed, tuple(args.composition or COMPOSITIONS))
    print(generate(args.seed))
    for o in outcomes:
        print(f"{o.composition:10} {o.kind}" + (f": {o.detail}" if o.detail else ""))
    return 0 if all(o.kind in ("ok", "refused") for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
