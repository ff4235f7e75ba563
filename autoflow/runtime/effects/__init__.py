"""Python's effects on traced paths: ``print``, ``assert``, item writes, ``raise``, checks.

* ``statements``: ``print``, ``warnings``, logging, ``assert`` and index assignment in
  converted code (``af.print``, ``af.assert_``, ``af.setitem``, ``af.append``...);
* ``later``: what happens when the compiled code runs, on the path taken (``later``,
  ``check``), where the ``path_condition`` holds, as the effect ``primitive`` or a
  ``jax.debug.callback``;
* ``checks``: exceptions raised when the compiled code runs, and checks at no cost
  (``fast_checks``);
* ``raising``: ``raise`` and ``try`` on a traced path (``af.exception``);
* ``unset``: variables and dict keys a staged loop may leave unset (``af.ld``).
"""

from .raising import checks_after_finally, exception, finally_part, passthrough
from .statements import append, assert_, print, setitem, setitem_in  # noqa: A004
from .unset import ld

__all__ = ["append", "assert_", "checks_after_finally", "exception", "finally_part", "ld", "passthrough", "print", "setitem", "setitem_in"]
