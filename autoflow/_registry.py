"""What the runtime needs from the public API, registered by ``api`` when it is imported.

``autoflow.runtime`` calls back into ``autoflow.api`` (converting a callee, looking
up a function converted already), and ``api`` calls the runtime: this leaf module
stands between them, so that neither imports the other's module at import time.
``api``'s own helpers that convert again (``_wrappers``: a class's methods, the
function inside a library's wrapper) call ``convert`` here too.
``autoflow/__init__.py`` imports ``api``, so the names are set before any
converted code runs.
"""

from typing import Any

convert: Any = None          # api.convert
converted_as: Any = None     # _conversion._by_function: original function -> {options: (code, converted)}
is_jax_wrapper: Any = None   # _wrappers.is_jax_wrapper
