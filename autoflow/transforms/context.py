"""State shared by the passes of one conversion."""

from __future__ import annotations

import dataclasses

from ..core.naming import Namer


@dataclasses.dataclass
class Context:
    namer: Namer
    af: str  # the alias through which generated code reaches autoflow.runtime
    shadowed: frozenset = frozenset()  # builtins the user's code rebinds (range, print...)
    filename: str = "<unknown>"
    options: dict = dataclasses.field(default_factory=dict)
    # Global names whose values are library code (`jnp`, `np`, `lax`) and ones
    # whose values are the user's (a module or object of theirs): decides
    # which `name.method(...)` calls go through `af.call`.
    library_names: frozenset = frozenset()
    user_names: frozenset = frozenset()
    # Global names bound to modules, classes and functions (not to objects):
    # `jnp.sort(x)` does not change `jnp`, while `LOG.append(v)` changes LOG.
    # None: not known (the command line), then `library_names` stands in.
    module_names: frozenset | None = None
    # The converted function's closure variables (its code's free names): a
    # name the function reads and neither binds nor takes from them is a global.
    free_names: frozenset = frozenset()
    # pipeline.Inventory of the function being converted (while the passes run)
    inventory: object = None

    def is_module_name(self, name: str) -> bool:
        known = self.library_names if self.module_names is None else self.module_names
        return name in known

    def builtin_available(self, name: str) -> bool:
        """Does ``name`` in the user's code mean the builtin?"""
        return name not in self.shadowed
