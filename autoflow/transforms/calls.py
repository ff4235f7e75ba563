"""Calls, ``print`` and ``assert``.

* A call of a user-level callable, ``helper(x)``, ``self.step(x)``,
  ``model.step(x)`` or ``mymodule.helper(x)``, becomes ``af.call(helper, x)``:
  at run time the callee is converted too (lazily, once) unless it is
  library code; see ``runtime.python.calls``. So does a call of what an object or
  container holds: ``self.model.step(x)``, ``self.layers[i](x)``,
  ``ops["f"](x)``. Left as written: builtins that the function does not
  rebind, methods of names bound to library code (``jnp.sin(x)``,
  ``np.random.rand()``), and array and container methods (``x.sum()``,
  ``d.items()``, ``x.at[i].set(v)``, ``x.T.sum()``).
* A function handed to a JAX transformation or ``lax`` loop,
  ``jax.vmap(step)``, ``lax.scan(body, ...)``, is wrapped as
  ``af.converted(step)``, so its own control flow is converted too.
* ``max``/``min``/``sum``/``any``/``all``/``int``/``float``/``bool``/``len``/
  ``range`` become ``af.max(...)``...: the builtin on concrete arguments,
  ``jnp`` on traced ones (see ``runtime.python.builtins``; a ``range`` with a
  traced bound is ``runtime.loops.ranges.TracedRange``).
* ``print(...)`` becomes ``af.print(...)``, and ``warnings.warn(...)``,
  ``logger.info(...)``, ``logging.warning(...)``, ``sys.stderr.write(...)``
  go through ``af.call``: Python's own on concrete code, and under a trace
  run when the compiled code runs (``runtime.effects``). Their string
  arguments made from values (``f"..."``, ``"%d" % k``, ``.format``,
  ``str(x)``) become ``af.fstring``/``af.percent``/``af.str``, made then.
* ``assert test, msg`` becomes ``af.assert_(test, msg)``: an ordinary assert
  when ``test`` is concrete, a check at run time when it is traced.
"""

from __future__ import annotations

import builtins
import re

import gast

from ..analysis.activity import chain_text
from ..core.methods import VALUE_METHODS
from ..core.nodes import Transformer, walk
from ..core.templates import replace, replace_expr
from .util import stamp

_SELF_NAMES = ("self", "cls")
# Library functions that change their arguments or Python's own random state
# (`heapq.heappush(h, v)`, `operator.setitem(l, i, v)`, `random.random()`,
# `np.random.rand()`): through `af.call`, so that in a staged branch or loop body the
# runtime sees what they change (`runtime.python.library_state`).
# (not a generator's constructor: `np.random.default_rng(seed)`, `random.Random(seed)`)
_CHANGERS = re.compile(r"(heapq|operator|random|bisect|(np|numpy|onp)\.random)\."
                       r"(?!default_rng$|[A-Z])\w+$")
# Library calls of array arithmetic, whose arguments are values, not functions to convert
_ARITHMETIC = re.compile(r"(jnp|np|numpy|onp|math|lax|jax\.(numpy|lax|random|nn|scipy))\.")
# JAX functions that take user functions as arguments (matched by the called
# attribute's name: `jax.vmap`, `lax.scan`, `jax.lax.fori_loop`...).
_HIGHER_ORDER = frozenset({
    "vmap", "pmap", "grad", "value_and_grad", "jacfwd", "jacrev", "hessian", "jvp", "vjp",
    "linearize", "checkpoint", "remat", "scan", "fori_loop", "while_loop", "cond", "switch",
    "map", "associative_scan", "custom_jvp", "custom_vjp", "shard_map", "jit"})


# Output effects (``runtime.effects``): `warnings.warn(...)`, `logger.info(...)`,
# `logging.warning(...)`, `sys.stderr.write(...)`. Their calls go through
# `af.call`, which stages them for run time under a trace; their string
# arguments are formatted then (`_formatted`).
_LOG_METHODS = frozenset({"debug", "info", "warning", "error", "critical", "exception", "fatal",
                          "log"})
_STREAMS = frozenset({"stdout", "stderr"})


# Builtins that take traced values through autoflow's versions (runtime.python.builtins):
# Python's own for concrete arguments, `jnp` for traced ones.
STAGED_BUILTINS = frozenset({"max", "min", "sum", "sorted", "any", "all", "int", "float", "bool", "len",
                             "range", "str", "repr", "ascii", "format", "bin", "hex", "oct", "chr",
                             "ord"})
# (`str`, `repr`, `format`... of traced values: strings whose text is made when the
# compiled code runs, or computed with `jnp` where code computes with it:
# `runtime.python.strings`; so are f-strings, `"...".format(...)`, `"..." % v` and
# `"...".join(...)` anywhere.)


# Methods of values that autoflow's vocabulary answers for traced values
# (`runtime.python.builtins`): `xs.index(v)` -> `af.index(xs, v)`.
_VALUE_VOCABULARY = frozenset({"index", "count", "bit_length", "bit_count"})

_CONVERSIONS = {-1: "", 115: "!s", 114: "!r", 97: "!a"}


def _dotted(func) -> str:
    """``a.b.c`` for a chain of attributes on a name; "" for another expression."""
    parts = []
    while isinstance(func, gast.Attribute):
        parts.append(func.attr)
        func = func.value
    return ".".join([func.id, *reversed(parts)]) if isinstance(func, gast.Name) else ""


def _template(joined, values):
    """``f"a{x:.3f}"`` -> ``"a{0:.3f}"`` (its expressions appended to ``values``,
    numbered explicitly so nested format specs keep f-string order)."""
    out = []
    for v in joined.values:
        if isinstance(v, gast.Constant) and isinstance(v.value, str):
            out.append(v.value.replace("{", "{{").replace("}", "}}"))
        elif isinstance(v, gast.FormattedValue):
            conv = _CONVERSIONS.get(v.conversion)
            if conv is None:
                return None
            index = len(values)
            values.append(v.value)
            spec = ""
            if v.format_spec is not None:
                inner = _template(v.format_spec, values)
                if inner is None:
                    return None
                spec = ":" + inner
            out.append("{%d%s%s}" % (index, conv, spec))
        else:
            return None
    return "".join(out)


_STR_METHODS = frozenset(m for m in dir(str) if not m.startswith("_"))


_MADE_STRINGS = frozenset({"fstring", "percent", "str", "repr", "format", "join"})


def _stringy(node, af=None):
    """Is ``node`` a string literal, an f-string, or a ``+``/``%``/str method
    starting with one (or, given ``af``, a string the runtime makes: ``af.fstring(...)``)?"""
    while isinstance(node, gast.BinOp) and isinstance(node.op, (gast.Add, gast.Mod)) or (
            isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute)
            and node.func.attr in _STR_METHODS):
        node = node.left if isinstance(node, gast.BinOp) else node.func.value
    if af is not None and isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute) \
            and node.func.attr in _MADE_STRINGS and isinstance(node.func.value, gast.Name) \
            and node.func.value.id == af:
        return True
    return isinstance(node, gast.JoinedStr) or (
        isinstance(node, gast.Constant) and isinstance(node.value, str))


class Calls(Transformer):
    def __init__(self, ctx):
        self.ctx = ctx
        self.recursive = ctx.options.get("recursive", True)
        self.asserts = ctx.options.get("asserts", True)
        self.imported = frozenset()
        self.local_modules = frozenset()
        self.user_objects = frozenset()
        self.local_defs = frozenset()

    def run(self, tree, nodes=None):
        # One loop over the function's nodes (``nodes``: ``walk(tree)``, when
        # the caller has it) picks out what the three questions below read:
        # imports, assignments, classes and defs.
        imports, assigns, classes, defs = [], [], set(), set()
        Assign, Import, ImportFrom = gast.Assign, gast.Import, gast.ImportFrom
        ClassDef, FunctionDef = gast.ClassDef, gast.FunctionDef
        for n in walk(tree) if nodes is None else nodes:
            cls = n.__class__
            if cls is Assign:
                assigns.append(n)
            elif cls is Import or cls is ImportFrom and not n.level:
                imports.append(n)
            elif cls is ClassDef:
                classes.add(n.name)
            elif cls is FunctionDef and n is not tree:
                defs.add(n.name)
        self.imported = self._library_locals(imports, assigns)
        self.local_modules = frozenset((a.asname or a.name).split(".")[0]
                                       for n in imports for a in n.names)
        self.user_objects = self._user_objects(classes, assigns)
        self.local_defs = frozenset(defs)
        return self.visit(tree)

    def _user_objects(self, classes, assigns):
        """Local names only ever assigned an instance of a user class
        (``a = Acc()`` with ``class Acc`` defined here or in the user's code):
        their methods are the user's, whatever they are called (``a.add(x)``).
        ``classes``: the names of the classes the function defines;
        ``assigns``: its assignments."""
        classes = classes | set(self.ctx.user_names)
        made = {}
        for n in assigns:
            v = n.value
            is_user = (isinstance(v, gast.Call) and isinstance(v.func, gast.Name)
                       and v.func.id in classes)
            for t in n.targets:
                if isinstance(t, gast.Name):
                    made[t.id] = made.get(t.id, True) and is_user
        return frozenset(name for name, ok in made.items() if ok)

    def _is_library_name(self, name, known):
        return (name in known or name in self.ctx.library_names
                or hasattr(builtins, name) and self.ctx.builtin_available(name))

    def _library_locals(self, imports, assigns):
        """Local names that hold library code or values made by it.

        Modules imported inside the function (`import numpy as np`, not
        relative imports), and names only ever assigned from an expression
        rooted at one (`rng = np.random.default_rng(0)`), so that
        `rng.normal(...)` is left as written. ``imports``: the function's
        absolute imports; ``assigns``: its assignments.
        """
        known = set()
        for n in imports:
            known.update((a.asname or a.name).split(".")[0] for a in n.names)
        roots = {}
        for n in assigns:
            root = n.value
            while isinstance(root, (gast.Attribute, gast.Call, gast.Subscript)):
                root = root.func if isinstance(root, gast.Call) else root.value
            for t in n.targets:
                if isinstance(t, gast.Name):
                    roots.setdefault(t.id, set()).add(
                        root.id if isinstance(root, gast.Name) else None)
        # (The names found do not depend on the order the loop takes them in:
        # a name, once known, stays known.)
        changed = True
        while changed:
            changed = False
            for name, rs in roots.items():
                if name not in known and all(r is not None and self._is_library_name(r, known)
                                             for r in rs):
                    known.add(name)
                    changed = True
        return frozenset(known)

    def _runtime_attr(self, attr, anchor):
        node = replace_expr("AF.attr", AF=self.ctx.af, at=anchor)
        node.attr = attr
        return node

    def _function_arg(self, arg):
        if isinstance(arg, (gast.List, gast.Tuple)):
            arg.elts = [self._function_arg(e) for e in arg.elts]
            return arg
        is_user_name = isinstance(arg, gast.Name) and not (
            hasattr(builtins, arg.id) and self.ctx.builtin_available(arg.id))
        is_method = (isinstance(arg, gast.Attribute) and isinstance(arg.value, gast.Name)
                     and (arg.value.id in _SELF_NAMES or arg.value.id in self.ctx.user_names))
        if is_user_name or is_method:
            return replace_expr("AF.converted(F)", AF=self.ctx.af, F=arg, at=arg)
        return arg

    def _library_callee(self, func):
        """Is ``func`` library code (a builtin, or rooted at a library name)?"""
        root = func
        while isinstance(root, gast.Attribute):
            root = root.value
        if not isinstance(root, gast.Name) or root.id == self.ctx.af:
            return False
        if root is func:
            return hasattr(builtins, root.id) and self.ctx.builtin_available(root.id) \
                and root.id not in ("print", "super", "isinstance", "getattr", "setattr",
                                    "hasattr", "len", "type", "id", "repr", "str")
        return root.id in self.ctx.library_names or root.id in self.imported

    def _user_function_arg(self, arg, params=frozenset()):
        """``f`` -> ``af.converted(f)`` where ``f`` names a function of the user's
        (a ``def`` in this function, or a global function or class of theirs); ``str``,
        ``repr`` -> ``af.str``, ``af.repr`` (``map(str, digits)``: strings of traced
        values); a parameter in ``params`` -> ``af.function_arg(p)``."""
        if isinstance(arg, gast.Name) and arg.id in params and arg.id not in self.local_defs:
            return replace_expr("AF.function_arg(F)", AF=self.ctx.af, F=arg, at=arg)
        if isinstance(arg, gast.Name) and arg.id in ("str", "repr") \
                and self.ctx.builtin_available(arg.id):
            return self._runtime_attr(arg.id, arg)
        if isinstance(arg, gast.Name) and (arg.id in self.local_defs or (
                arg.id in self.ctx.user_names and self.ctx.is_module_name(arg.id))) or (
                isinstance(arg, gast.Attribute) and isinstance(arg.value, gast.Name)
                and arg.value.id in self.ctx.user_names and self.ctx.is_module_name(arg.value.id)):
            # (`mymodule.step`: a function of the user's own module.)
            return replace_expr("AF.converted(F)", AF=self.ctx.af, F=arg, at=arg)
        return arg

    def _user_method(self, base, method):
        """Does ``base.method(...)`` call code that should be converted?"""
        if base in _SELF_NAMES:
            return True
        if base == self.ctx.af or base in self.ctx.library_names or base in self.imported:
            return False
        if hasattr(builtins, base) and self.ctx.builtin_available(base):
            return False
        if base in self.ctx.user_names or base in self.user_objects:
            return True
        # A local value, or a global not known here: `x.sum()`, `d.items()`
        # stay as written; `model.step(x)` goes through `af.call`, which
        # converts it only if it is the user's code.
        return method not in VALUE_METHODS

    def _root(self, node):
        """The name an attribute/subscript chain starts from (None: another expression)."""
        while isinstance(node, (gast.Attribute, gast.Subscript)):
            node = node.value
        return node.id if isinstance(node, gast.Name) else None

    def _user_chain(self, func):
        """``a.b.f(x)``, ``a.b[i].f(x)``: may it call the user's code? Not where a
        link is an array or container method (``x.T.sum()``, ``x.at[i].set(v)``),
        or the chain starts at library code (``jnp.linalg.norm``) or a builtin."""
        link = func
        while isinstance(link, (gast.Attribute, gast.Subscript)):
            if isinstance(link, gast.Attribute) and link.attr in VALUE_METHODS:
                return False
            link = link.value
        return isinstance(link, gast.Name) and self._user_method(link.id, func.attr)

    def _user_item(self, func):
        """``fs[i](x)``, ``self.layers[i](x)``: a callable held in a container
        (which may be a library type: ``af.call`` converts only the user's
        callables), unless the chain starts at a library module, class or function,
        at a builtin, or goes through an array method."""
        root = self._root(func)
        if root is None or root == self.ctx.af or root in self.imported:
            return False
        if root in self.ctx.library_names and self.ctx.is_module_name(root):
            return False
        if hasattr(builtins, root) and self.ctx.builtin_available(root):
            return False
        return not any(isinstance(n, gast.Attribute) and n.attr in VALUE_METHODS
                       for n in walk(func.value))

    def _effect(self, func):
        """Is ``func`` an output effect's function (see ``_LOG_METHODS``)?"""
        if not isinstance(func, gast.Attribute):
            return False
        value, attr = func.value, func.attr
        if isinstance(value, gast.Name):
            if value.id == "warnings":
                return attr in ("warn", "warn_explicit")
            if value.id == "logging":
                return attr in _LOG_METHODS
        if attr in ("write", "writelines", "flush"):  # `sys.stdout.write(s)`
            # (and `fh.write(s)` on a variable: the runtime's effect call writes a file
            # or stream then, and calls anything else as it is)
            return (isinstance(value, gast.Attribute) and value.attr in _STREAMS
                    and isinstance(value.value, gast.Name) and value.value.id == "sys") or (
                isinstance(value, gast.Name) and value.id != self.ctx.af
                and not self.ctx.is_module_name(value.id) and value.id not in self.local_modules)
        if attr not in _LOG_METHODS:
            return False
        # `logger.info(...)`, `self.log.warning(...)`, `logging.getLogger().info(...)`,
        # but not a module's function (`jnp.log`, `math.log`).
        root = self._root(value) if not isinstance(value, gast.Call) else None
        return not (root is not None and (self.ctx.is_module_name(root)
                                          or root in self.local_modules or root == self.ctx.af))

    def visit_JoinedStr(self, node):
        """``f"n={n}"`` -> ``af.fstring("n={0}", n)``: Python's string for concrete
        values; for traced ones a string made when the compiled code runs, or
        computed where code computes with it (``runtime.python.strings``)."""
        self._visit_fields(node)
        return self._fstring_call(node)

    def _fstring_call(self, joined):
        """``af.fstring(TEMPLATE, *values)`` for the f-string ``joined`` (itself where it
        formats no value)."""
        values = []
        template = _template(joined, values)
        if template is None or not values:
            return joined
        call = replace_expr("AF.fstring(TEMPLATE)", AF=self.ctx.af,
                            TEMPLATE=gast.Constant(value=template, kind=None))
        call.args += values
        return stamp(call, joined)

    def _visit_fields(self, joined):
        """Visit the expressions of an f-string's fields (those of nested format specs,
        ``f"{x:>{w}}"``, too), leaving its parts f-strings for ``_template``."""
        for v in joined.values:
            if isinstance(v, gast.FormattedValue):
                v.value = self.visit(v.value)
                if isinstance(v.format_spec, gast.JoinedStr):
                    self._visit_fields(v.format_spec)

    def visit_BinOp(self, node):
        """``"step %d" % k`` -> ``af.percent("step %d", k)``."""
        self.generic_visit(node)
        if isinstance(node.op, gast.Mod) and _stringy(node.left, self.ctx.af):
            call = replace_expr("AF.percent(TEMPLATE, VALUES)", AF=self.ctx.af,
                                TEMPLATE=node.left, VALUES=node.right)
            return stamp(call, node)
        return node

    def _string_call(self, node):
        """``"...".format(...)`` -> ``af.fstring("...", ...)``; ``"".join(xs)`` ->
        ``af.join("", xs)``; None for any other call."""
        func = node.func
        if not (isinstance(func, gast.Attribute) and isinstance(func.value, gast.Constant)
                and isinstance(func.value.value, str) and func.attr in ("format", "join")):
            return None
        if any(isinstance(a, gast.Starred) for a in node.args):
            return None
        if func.attr == "format" and all(k.arg is not None for k in node.keywords):
            call = replace_expr("AF.fstring(TEMPLATE)", AF=self.ctx.af, TEMPLATE=func.value)
            call.args += node.args
            call.keywords = node.keywords
            return stamp(call, node)
        if func.attr == "join" and len(node.args) == 1 and not node.keywords:
            return stamp(replace_expr("AF.join(SEP, ITEMS)", AF=self.ctx.af, SEP=func.value,
                                      ITEMS=node.args[0]), node)
        return None

    def visit_Call(self, node):
        self.generic_visit(node)
        made = self._string_call(node)
        if made is not None:
            return made
        func = node.func
        if self.recursive and isinstance(func, gast.Attribute) and isinstance(
                func.value, gast.Name) and func.value.id == "math" and "math" not in self.local_defs:
            # `math.exp(x)`: `jnp.exp` where `x` is traced (`runtime.python.maths.math_call`)
            node.args = [func] + node.args
            node.func = self._runtime_attr("call", func)
            return node
        if self.recursive and self._effect(func):
            node.args = [func] + [self._formatted(a) for a in node.args]
            for k in node.keywords:
                if k.arg in ("message", "msg"):
                    k.value = self._formatted(k.value)
            node.func = self._runtime_attr("call", func)
            return node
        if (isinstance(func, gast.Attribute) and func.attr in _VALUE_VOCABULARY
                and isinstance(func.value, (gast.Name, gast.Subscript, gast.Attribute, gast.List,
                                            gast.Tuple))
                and not self._library_callee(func)
                and not any(isinstance(a, gast.Starred) for a in node.args) and not node.keywords
                and not (isinstance(func.value, gast.Name) and (
                    func.value.id == self.ctx.af or self._user_method(func.value.id, func.attr)))):
            # `xs.index(v)`, `xs.count(v)`: of traced numbers in a list, traced answers;
            # `n.bit_length()`, `n.bit_count()` of a traced integer
            node.args = [func.value] + node.args
            node.func = self._runtime_attr(func.attr, func)
            return node
        if isinstance(func, gast.Name) and func.id == "super" and not node.args \
                and not node.keywords:
            self._explicit_super(node)
            return node
        if (self.recursive and isinstance(func, gast.Attribute) and func.attr in _HIGHER_ORDER
                and isinstance(func.value, (gast.Name, gast.Attribute))):
            node.args = [self._function_arg(a) for a in node.args]
            return node
        if self.recursive and isinstance(func, gast.Attribute) \
                and self._root(func) in self.ctx.library_names \
                and self.ctx.is_module_name(self._root(func)) \
                and _CHANGERS.match(_dotted(func)):
            node.args = [func] + node.args
            node.func = self._runtime_attr("call", func)
            return node
        if self.recursive and self._library_callee(func):
            # A user function handed to library code (`diffrax.ODETerm(field)`,
            # `map(f, xs)`, `sorted(xs, key=f)`) is handed over converted; so is one a
            # parameter holds (`optx.minimise(objective, ...)`), where the callee is not
            # array arithmetic (`af.function_arg`: a plain function only).
            params = getattr(self, "params", frozenset()) if isinstance(func, gast.Attribute) \
                and not _ARITHMETIC.match(chain_text(func)) else frozenset()
            node.args = [self._user_function_arg(a, params) for a in node.args]
            for k in node.keywords:  # (by keyword, parameters are most often values)
                k.value = self._user_function_arg(k.value)
        if isinstance(func, gast.Name):
            if func.id == "warn" and self.recursive:  # `from warnings import warn`
                node.args = [self._formatted(a) for a in node.args]
            if func.id == "print" and self.ctx.builtin_available("print"):
                node.func = self._runtime_attr("print", func)
                node.args = [self._formatted(a) for a in node.args]
                return node
            if hasattr(builtins, func.id) and self.ctx.builtin_available(func.id):
                if func.id in STAGED_BUILTINS:
                    node.func = self._runtime_attr(func.id, func)
                return node
            if func.id == self.ctx.af:
                return node
        elif not (isinstance(func, gast.Attribute) and (
                isinstance(func.value, gast.Name) and self._user_method(func.value.id, func.attr)
                or isinstance(func.value, gast.Call) and func.attr not in VALUE_METHODS
                or isinstance(func.value, (gast.Attribute, gast.Subscript))
                and self._user_chain(func))
                  or isinstance(func, gast.Subscript) and self._user_item(func)
                  or isinstance(func, gast.Call) and not (
                      isinstance(func.func, gast.Attribute) and func.func.attr in _HIGHER_ORDER)):
            # (`super().step(x)`, `Model().step(x)`: a method of a made object;
            # `self.model.step(x)`, `self.layers[i](x)`, `ops["f"](x)`: what an
            # object or container holds; `make()(x)`, `nnx.Sequential(...)(x)`:
            # what a call made, a user object or a library one holding them; not
            # `jax.grad(f)(x)`, whose function is handed over converted.)
            return node
        if not self.recursive:
            return node
        node.args = [func] + node.args
        node.func = self._runtime_attr("call", func)
        return node

    def _formatted(self, arg):
        """An effect's string argument made of traced values -> the same string for
        concrete values, made when the compiled code runs for traced ones
        (``runtime.effects.later``): ``f"..."`` and ``"...".format(...)`` ->
        ``af.fstring(TEMPLATE, *values)`` (format specs honoured), ``"..." % v``
        -> ``af.percent("...", v)``, ``str(x)``/``repr(x)`` -> ``af.str(x)``/``af.repr(x)``,
        and the parts of a ``+`` of strings."""
        if isinstance(arg, gast.JoinedStr):
            return self._fstring_call(arg)
        if isinstance(arg, gast.BinOp):
            if isinstance(arg.op, gast.Mod) and _stringy(arg.left):
                call = replace_expr("AF.percent(TEMPLATE, VALUES)", AF=self.ctx.af,
                                    TEMPLATE=self._formatted(arg.left), VALUES=arg.right)
                return stamp(call, arg)
            if isinstance(arg.op, gast.Add):
                arg.left, arg.right = self._formatted(arg.left), self._formatted(arg.right)
            return arg
        if not isinstance(arg, gast.Call) or any(isinstance(a, gast.Starred) for a in arg.args):
            return arg
        func = arg.func
        if (isinstance(func, gast.Attribute) and func.attr == "format"
                and isinstance(func.value, gast.Constant) and isinstance(func.value.value, str)
                and all(k.arg is not None for k in arg.keywords)):
            call = replace_expr("AF.fstring(TEMPLATE)", AF=self.ctx.af, TEMPLATE=func.value)
            call.args += arg.args
            call.keywords = arg.keywords
            return stamp(call, arg)
        if (isinstance(func, gast.Name) and func.id in ("str", "repr") and len(arg.args) == 1
                and not arg.keywords and self.ctx.builtin_available(func.id)):
            arg.func = self._runtime_attr(func.id, func)
        elif isinstance(func, gast.Attribute) and func.attr in _STR_METHODS and _stringy(func.value):
            func.value = self._formatted(func.value)  # `f"{x:.2f}".rjust(10)`
        return arg

    def visit_Assert(self, node):
        self.generic_visit(node)
        if not self.asserts:
            return None
        if node.msg is None:
            msg = gast.Constant(value=None, kind=None)
        elif isinstance(node.msg, gast.Constant):
            msg = node.msg
        else:  # made only when the assertion fails, as in Python
            msg = gast.Lambda(args=gast.arguments(args=[], posonlyargs=[], vararg=None,
                                                  kwonlyargs=[], kw_defaults=[], kwarg=None,
                                                  defaults=[]), body=self._formatted(node.msg))
        return replace("AF.assert_(TEST, MSG)", AF=self.ctx.af, TEST=node.test, MSG=msg, at=node)

    # Nested function and class definitions are converted with their parent.
    def visit_FunctionDef(self, node):
        a = node.args
        first = (a.posonlyargs + a.args)[:1]
        saved = getattr(self, "first_param", None), getattr(self, "params", frozenset())
        self.first_param = first[0].id if first else None
        self.params = saved[1] | {p.id for p in a.posonlyargs + a.args + a.kwonlyargs}
        self.generic_visit(node)
        self.first_param, self.params = saved
        return node

    def _explicit_super(self, node):
        """``super()`` -> ``super(__class__, self)``: converted code runs the
        method's branches and loop bodies in functions of their own, where the
        zero-argument form cannot find the method's class and instance."""
        first = getattr(self, "first_param", None)
        if first is None or not self.ctx.builtin_available("super"):
            return
        node.args = [replace_expr("__class__", at=node),
                     replace_expr("SELF", SELF=first, at=node)]
