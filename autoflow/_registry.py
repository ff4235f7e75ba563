"""What the runtime needs from the public API, registered by ``api`` when it is imported.

``autoflow.runtime`` calls back into ``autoflow.api`` (converting a callee, looking
up a function converted already), and ``api`` calls the runtime: this leaf module
stands between them, so that neither imports the other's module at import time.
``autoflow/__init__.py`` imports ``api``, so the names are set before any
converted code runs.
"""

from typing import Any

convert: Any = None          # api.convert
converted_as: Any = None     # api._by_function: original function -> {options: (code, converted)}
is_jax_wrapper: Any = None   # api.is_jax_wrapper
