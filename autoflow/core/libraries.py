"""Which code is library code: never converted, and never wrapped in ``af.call``.

Library code is what lies in the standard library, in an installed
package's directory (site-packages), under ``sys.prefix``, or in autoflow
itself. The rest is the user's code. This module does not import JAX.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
import types

from .caches import Bounded
from .origin import PACKAGE_DIR


def _library_dirs():
    dirs = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(os.path.realpath(path))
    try:
        dirs.update(os.path.realpath(p) for p in site.getsitepackages())
    except AttributeError:  # pragma: no cover - some virtualenvs
        pass
    user = getattr(site, "getusersitepackages", lambda: None)()
    if user:
        dirs.add(os.path.realpath(user))
    dirs.add(os.path.realpath(sys.prefix))
    dirs.add(os.path.realpath(sys.base_prefix))
    return tuple(d.rstrip(os.sep) + os.sep for d in dirs)


_LIBRARY_DIRS = _library_dirs()
_file_verdicts = Bounded(8192)  # filename -> is it library code?


def is_library_file(filename: str) -> bool:
    verdict = _file_verdicts.get(filename)
    if verdict is None:
        if filename.startswith("<"):
            verdict = filename.startswith("<frozen")
        else:
            real = os.path.realpath(filename)
            verdict = real.startswith(PACKAGE_DIR) or real.startswith(_LIBRARY_DIRS)
        _file_verdicts[filename] = verdict
    return verdict


def defining_file(value):
    """The file ``value`` (a module, function, class or instance) comes from; None if built in."""
    if isinstance(value, types.ModuleType):
        return getattr(value, "__file__", None)
    code = getattr(getattr(value, "__func__", value), "__code__", None)
    if isinstance(code, types.CodeType):
        return code.co_filename
    cls = value if isinstance(value, type) else type(value)
    module = sys.modules.get(getattr(cls, "__module__", None) or "")
    filename = getattr(module, "__file__", None)
    if filename is None and module is None:
        # A class from a module that is not in sys.modules (loaded from a
        # spec by hand): its methods know their file.
        for attr in vars(cls).values():
            code = getattr(getattr(attr, "__func__", attr), "__code__", None)
            if isinstance(code, types.CodeType):
                return code.co_filename
    return filename


def is_library_value(value) -> bool:
    filename = defining_file(value)
    return filename is None or is_library_file(filename)
