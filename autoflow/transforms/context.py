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

    def builtin_available(self, name: str) -> bool:
        """Does ``name`` in the user's code mean the builtin?"""
        return name not in self.shadowed
