"""What ``pitfalls`` reads of a module and its functions, without running anything.

Which functions a module jits and with which static arguments (``_Module``,
``implicit_entries``: decorators and calls of something named ``jit``), a function's
parameters, locals and the parameters values derive from (``_params``, ``_derived``,
``_origin``), how it spells its jit (``_jit_spelling``), and its loops with their trip
counts (``_loops_containing``, ``_range_count``).
"""

from __future__ import annotations

import ast

from .traced import ast_target_names


_SIZED = {"zeros": 0, "ones": 0, "empty": 0, "full": 0, "arange": None, "eye": 0,
          "identity": 0, "linspace": 2, "tri": 0}


def _dotted(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _is_jit_name(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return last in ("jit", "pjit", "filter_jit") or name in ("autoflow.convert", "convert")


def _jit_call(node):
    """``node`` is ``jit(...)``/``jax.jit(...)``/``partial(jax.jit, ...)``: the jit's name."""
    if not isinstance(node, ast.Call):
        return None
    name = _dotted(node.func)
    if _is_jit_name(name):
        return name
    if name.rsplit(".", 1)[-1] == "partial" and node.args and _is_jit_name(_dotted(node.args[0])):
        return _dotted(node.args[0])
    return None


def _static_names(call, fn):
    """Parameters a jit call marks static (``static_argnames``/``static_argnums``)."""
    out = set()
    if not isinstance(call, ast.Call):
        return out
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    for kw in call.keywords:
        try:
            value = ast.literal_eval(kw.value)
        except ValueError:
            continue
        if isinstance(value, (str, int)):
            value = (value,)
        if kw.arg == "static_argnames":
            out |= {v for v in value if isinstance(v, str)}
        elif kw.arg == "static_argnums":
            out |= {params[v] for v in value if isinstance(v, int) and -len(params) <= v < len(params)}
    return out


class _Module:
    """What the checks need to know about the module as a whole."""

    def __init__(self, tree):
        self.tree = tree
        self.functions = {}  # top-level name -> FunctionDef
        self.jitted = {}     # FunctionDef -> (jit name, static params, converted?)
        self.bindings = {}   # module global -> lines where it is (re)bound
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[node.name] = node
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for dec in node.decorator_list:
                    name = _dotted(dec) if not isinstance(dec, ast.Call) else _jit_call(dec)
                    if name and _is_jit_name(name):
                        self._mark(node, name, dec)
            elif isinstance(node, ast.Call) and _jit_call(node) and node.args:
                target = node.args[1] if _dotted(node.func).endswith("partial") \
                    and len(node.args) > 1 else node.args[0]
                if isinstance(target, ast.Name) and target.id in self.functions:
                    self._mark(self.functions[target.id], _jit_call(node), node)
        self._module_bindings(tree)

    def _mark(self, fn, name, call):
        static = _static_names(call, fn)
        converted = name.startswith("autoflow.") or name in ("convert",)
        old = self.jitted.get(fn)
        if old is not None:
            static |= old[1]
            converted = converted or old[2]
        self.jitted[fn] = (name, static, converted)

    def _module_bindings(self, tree):
        def bind(name, node):
            self.bindings.setdefault(name, []).append(node)

        for stmt in ast.walk(tree):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
        # module level statements (not inside functions or classes)
        for node in _module_level(tree):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    for n in ast_target_names(t):
                        bind(n, node)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                for n in ast_target_names(node.target):
                    bind(n, node)
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                for n in ast_target_names(node.target):
                    bind(n, node)
        # `global g` then `g = ...` inside functions
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                declared = {n for s in ast.walk(fn) if isinstance(s, ast.Global) for n in s.names}
                for s in ast.walk(fn):
                    if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                        targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                        for t in targets:
                            for n in ast_target_names(t):
                                if n in declared:
                                    bind(n, s)


def _module_level(tree):
    """Statements run at module level (into if/for/while/with/try, not into defs/classes)."""
    stack = list(tree.body)
    while stack:
        node = stack.pop(0)
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            stack.extend(getattr(node, field, []) or [])


def _locals(fn):
    names = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    if fn.args.vararg:
        names.add(fn.args.vararg.arg)
    if fn.args.kwarg:
        names.add(fn.args.kwarg.arg)
    declared = {n for s in ast.walk(fn) if isinstance(s, ast.Global) for n in s.names}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and node is not fn:
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names - declared


def _params(fn):
    return [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]


def _derived(fn, params):
    """Local names computed from (traced) parameters, followed through assignments."""
    out = set(params)
    changed = True
    while changed:
        changed = False
        for node in ast.walk(fn):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                if _mentions(node.value, out):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        for n in ast_target_names(t):
                            if n not in out:
                                out.add(n)
                                changed = True
    return out


def _static_expr(node):
    """Parts of an expression that are static under jit: ``x.shape``, ``x.ndim``,
    ``len(x)``, ``x.dtype``, ``x.size``."""
    if isinstance(node, ast.Attribute) and node.attr in ("shape", "ndim", "dtype", "size"):
        return True
    if isinstance(node, ast.Call) and _dotted(node.func) in ("len", "isinstance", "type"):
        return True
    return False


def _mentions(node, names):
    """Does ``node`` read one of ``names`` other than through a static property?"""
    if _static_expr(node):
        return False
    if isinstance(node, ast.Name):
        return node.id in names
    return any(_mentions(c, names) for c in ast.iter_child_nodes(node))


def _first_mentioned(node, names):
    if _static_expr(node):
        return None
    if isinstance(node, ast.Name) and node.id in names:
        return node.id
    for c in ast.iter_child_nodes(node):
        hit = _first_mentioned(c, names)
        if hit:
            return hit
    return None


def _origin(fn, name, params):
    """The parameter ``name`` is computed from (itself when it is one)."""
    if name in params:
        return name
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and any(name in ast_target_names(t) for t in node.targets):
            hit = _first_mentioned(node.value, set(params))
            if hit:
                return hit
    return None


def _jit_spelling(jitname, fn, names):
    inner = ", ".join(f'"{n}"' for n in names) + ("," if len(names) == 1 else "")
    if jitname.startswith("autoflow"):
        return f"`@autoflow.jit(static_argnames=({inner}))` on `{fn.name}`"
    if jitname.endswith("jit"):
        return f"`@functools.partial({jitname}, static_argnames=({inner}))` on `{fn.name}`"
    return f"`static_argnames=({inner})` where `{fn.name}` is jitted"


def _range_count(it):
    """The trip count of ``range(<constants>)``, or None."""
    if not (isinstance(it, ast.Call) and _dotted(it.func) == "range" and not it.keywords):
        return None
    try:
        args = [ast.literal_eval(a) for a in it.args]
    except ValueError:
        return None
    if not all(isinstance(a, int) for a in args) or not 1 <= len(args) <= 3:
        return None
    try:
        return len(range(*args))
    except ValueError:
        return None


def _unrolled_iterable(it):
    """``autoflow.unroll(range(N))`` -> ``range(N)``."""
    if isinstance(it, ast.Call) and _dotted(it.func).rsplit(".", 1)[-1] == "unroll" and it.args:
        return it.args[0]
    return None


def _loops_containing(fn):
    """Map each node inside ``fn`` to whether it sits inside a for/while body."""
    inside = set()

    def visit(node, in_loop):
        if in_loop:
            inside.add(id(node))
        for field, value in ast.iter_fields(node):
            children = value if isinstance(value, list) else [value]
            for c in children:
                if isinstance(c, ast.AST):
                    loop_part = isinstance(node, (ast.For, ast.AsyncFor, ast.While)) \
                        and field in ("body", "orelse")
                    visit(c, in_loop or loop_part)

    visit(fn, False)
    return inside


def implicit_entries(mod, static=None):
    """Functions read as if ``autoflow.jit`` traced them with traced arguments (for the
    warnings that say a program fails, ``FAILING``), besides the jitted ones: the
    functions the jitted ones call (by name), or every function and method of a module
    that jits none. ``static``: function name -> parameters taken as static."""
    static = static or {}
    tops = {n.name: n for n in mod.tree.body if isinstance(n, (ast.FunctionDef,
                                                                ast.AsyncFunctionDef))}
    methods = [m for c in mod.tree.body if isinstance(c, ast.ClassDef) for m in c.body
               if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if mod.jitted:
        reached, todo = set(), [fn.name for fn in mod.jitted]
        while todo:
            name = todo.pop()
            if name in reached:
                continue
            reached.add(name)
            fn = tops.get(name) or next((f for f in mod.jitted if f.name == name), None)
            if fn is not None:
                todo.extend(n.func.id for n in ast.walk(fn)
                            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name))
        chosen = [tops[n] for n in reached if n in tops]
    else:
        chosen = list(tops.values()) + methods
    return {fn: set(static.get(fn.name, ())) for fn in chosen if fn not in mod.jitted}


# The codes that say the program fails under jit with traced arguments (the others
# are about speed or surprises): `autoflow check` reads every function for these.


def _sized_args(node):
    """``(the name called, the positional arguments that give the size)`` of a call
    ``node`` of NumPy or ``jnp`` that makes an array of a given size (``_SIZED``), or
    None. (The arguments are a new list.)"""
    name = _dotted(node.func)
    base, _, last = name.rpartition(".")
    if base in ("jnp", "jax.numpy", "np", "numpy") and last in _RESHAPED:
        if last == "repeat" and any(k.arg == "total_repeat_length" for k in node.keywords):
            return None
        return name, list(node.args[1:2])  # (the shape, reps, sections or repeats)
    if isinstance(node.func, ast.Attribute) and node.func.attr == "reshape" and base not in (
            "jnp", "jax.numpy", "np", "numpy"):
        return ast.unparse(node.func), list(node.args)  # `x.reshape(n, -1)`
    if base not in ("jnp", "jax.numpy", "np", "numpy") or last not in _SIZED:
        return None
    pos = _SIZED[last]
    return name, list(node.args if pos is None else node.args[pos:pos + 1])


# Functions whose second argument sets the result's shape: `jnp.reshape(x, (n, -1))`,
# `jnp.tile(x, n)`, `jnp.split(x, n)`, `jnp.repeat(x, n)`, `jnp.broadcast_to(x, (n,))`.
_RESHAPED = frozenset({"reshape", "tile", "split", "array_split", "repeat", "broadcast_to",
                       "resize"})
