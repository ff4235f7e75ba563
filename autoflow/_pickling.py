"""Plain ``pickle`` of a converted module-level function, by reference.

``pickle`` (and so ``multiprocessing`` with the spawn start method) saves a function
as the name ``module.qualname`` and checks that the name gives back the same object.
``g = autoflow.convert(f)`` kept under another name than ``f`` fails that check: the
name ``f`` holds the original. So a converted module-level function names its module
``autoflow._converted.<options>.<the user's module>``: a module made on import (by the
finder below) whose attribute ``f`` is ``autoflow.convert(<the user's module>.f,
<options>)``, the same object (conversion is cached). Loading it in a fresh process
imports the user's module and converts ``f`` there. Its ``__qualname__`` (and so its
``repr``) stays the user's.

Nothing here imports JAX. Functions nested in others (``<locals>``), methods and
functions of ``__main__`` run as a script keep their own ``__module__`` (``cloudpickle``
pickles those by value).
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import inspect
import sys
import types

PREFIX = "autoflow._converted"
_DEFAULT = "plain"


def _tag(options) -> str:
    """The module-name part that gives back ``options`` (``api._options``'s tuple)."""
    defaults = (("asserts", True), ("checkpoints", None), ("debug", False), ("debug_loops", None),
                ("include", ()), ("lanes", "auto"), ("max_loop_iterations", None),
                ("recursive", True), ("strict", False))
    if tuple(options) == defaults:
        return _DEFAULT
    return "o" + repr(tuple(options)).encode().hex()


def _options(tag: str):
    if tag == _DEFAULT:
        return {}
    return dict(ast.literal_eval(bytes.fromhex(tag[1:]).decode()))


def module_name(fn, options) -> str | None:
    """The ``__module__`` a converted ``fn`` pickles under, or None to keep its own."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or "." in qualname or "<" in qualname or module == "__main__" \
            or module.startswith(PREFIX):
        return None
    owner = sys.modules.get(module)
    if owner is None or getattr(owner, qualname, None) is not fn:
        return None  # not reachable by its name: pickle could not find the original either
    return f"{PREFIX}.{_tag(options)}.{module}"


class _Converted(types.ModuleType):
    """``autoflow._converted.<tag>.<module>``: the converted functions of ``<module>``."""

    def __getattr__(self, name):
        parts = self.__name__.split(".")
        if name.startswith("__") or len(parts) < 4:
            raise AttributeError(name)
        try:
            target = importlib.import_module(".".join(parts[3:]))
        except ImportError:
            raise AttributeError(name) from None
        fn = getattr(target, name, None)
        if not inspect.isfunction(fn):
            raise AttributeError(name)
        from . import _registry  # (api.convert, registered when api is imported)

        return _registry.convert(fn, **_options(parts[2]))


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname == PREFIX or fullname.startswith(PREFIX + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Converted(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def install() -> None:
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())
