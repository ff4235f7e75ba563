"""Converting whole modules: an import hook, and ``python -m autoflow run``.

``install_import_hook("mypkg")`` makes every function and method of the
modules under ``mypkg`` converted, whoever calls it (library code included:
an Equinox or Flax module's ``__call__``, a diffrax vector field, an optax
update). It works at import time, on the syntax tree: each ``def`` gets
``autoflow.convert`` as its innermost decorator, so the user's other
decorators (``jax.custom_jvp``, ``jax.checkpoint``, ``jaxtyped``,
``beartype``...) wrap the converted function and keep their behaviour. Line
numbers are the file's own, and autoflow reads each function's source from
the file as usual. Bytecode of hooked modules is neither read from nor
written to ``__pycache__``.

Converted code on concrete values is plain Python, so converting more than
needed is safe; it costs the conversion at import (about 1.5 ms a function)
and a little per call where statements became operators.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from collections.abc import Iterable
from typing import Any

DECORATOR = "__autoflow_convert__"


def _inject(tree: ast.Module) -> ast.Module:
    """Add ``@__autoflow_convert__`` as the innermost decorator of every function."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and not _is_generator(node):
            deco = ast.Name(id=DECORATOR, ctx=ast.Load())
            ast.copy_location(deco, node)
            deco.end_lineno, deco.end_col_offset = node.lineno, node.col_offset
            node.decorator_list.append(deco)
    return tree


def _is_generator(fn) -> bool:
    todo = list(fn.body)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)):
            return True
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        todo.extend(ast.iter_child_nodes(n))
    return False


def converted_code(source, path):
    """The module ``source`` (text) compiled with every function converted."""
    tree = _inject(ast.parse(source, filename=path))
    return compile(tree, path, "exec", dont_inherit=True)


def _convert_decorator(options):
    from .api import convert

    def decorate(fn):
        return convert(fn, **options)
    return decorate


class _Loader(importlib.machinery.SourceFileLoader):
    options: dict = {}

    def get_code(self, fullname):
        path = self.get_filename(fullname)
        return converted_code(self.get_data(path), path)

    def exec_module(self, module):
        module.__dict__[DECORATOR] = _convert_decorator(self.options)
        super().exec_module(module)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, names, directories, options):
        self.names = tuple(names)
        self.directories = tuple(os.path.abspath(d) for d in directories)
        self.options = dict(options)

    def _wanted(self, fullname, origin):
        if any(fullname == n or fullname.startswith(n + ".") for n in self.names):
            return True
        return bool(origin) and any(os.path.abspath(origin).startswith(d + os.sep)
                                    for d in self.directories)

    def find_spec(self, fullname, path, target=None):
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return None
        if not self._wanted(fullname, spec.origin):
            return None
        loader = type("AutoflowLoader", (_Loader,), {"options": self.options})(
            fullname, spec.origin)
        spec.loader = loader
        return spec


class ImportHook:
    """An installed hook: ``uninstall()``, or use it as a context manager."""

    def __init__(self, finder):
        self.finder = finder

    def uninstall(self) -> None:
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)

    def __enter__(self) -> ImportHook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()


def install_import_hook(*packages: str, directories: Iterable[str | os.PathLike[str]] = (),
                        **options: Any) -> ImportHook:
    """Convert every function of the named modules (and their submodules) when
    they are imported; ``directories``: also every module whose file lies there.

    Takes ``autoflow.convert``'s options. Modules imported before the hook is
    installed are not affected. For example:

    ```python
    import autoflow
    with autoflow.install_import_hook("mymodel"):
        import mymodel          # mymodel's functions and methods are converted
    ```
    """
    finder = _Finder(packages, directories, options)
    sys.meta_path.insert(0, finder)
    return ImportHook(finder)


def run_script(path, args=(), **options):
    """Run the script at ``path`` as ``__main__`` with its own functions, and the
    modules next to it, converted (``python -m autoflow run script.py``)."""
    path = os.path.abspath(path)
    directory = os.path.dirname(path)
    with open(path, "rb") as f:
        source = f.read()
    code = converted_code(source, path)
    sys.argv = [path, *args]
    sys.path.insert(0, directory)
    hook = install_import_hook(directories=[directory], **options)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __builtins__=__builtins__,
                         __name__="__main__", __spec__=None)
    main.__dict__[DECORATOR] = _convert_decorator(options)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)
    finally:
        hook.uninstall()
        if saved is not None:
            sys.modules["__main__"] = saved


__all__ = ["ImportHook", "install_import_hook", "run_script"]
