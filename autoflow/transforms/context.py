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

    def builtin_available(self, name: str) -> bool:
        """Does ``name`` in the user's code mean the builtin?"""
        return name not in self.shadowed
