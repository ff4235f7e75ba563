"""Fresh names for generated code that never collide with user names."""

from __future__ import annotations

import gast

from .nodes import walk

def referenced_names(tree) -> set[str]:
    """Every identifier that appears anywhere in ``tree``."""
    out = set()
    for node in walk(tree):
        if isinstance(node, gast.Name):
            out.add(node.id)
        elif isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, gast.alias):
            out.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, (gast.Global, gast.Nonlocal)):
            out.update(node.names)
        elif isinstance(node, gast.ExceptHandler) and isinstance(node.name, str):
            out.add(node.name)
        elif isinstance(node, gast.Attribute):
            pass
    return out


class Namer:
    """Hands out readable names (``if_true``, ``broke``, ``retval``...).

    A name is never one the user's code references. Names of generated
    functions may repeat (each ``if_true`` is defined right before its single
    use), while flags are unique per function so nested loops do not share
    them.
    """

    def __init__(self, reserved: set[str]):
        self.reserved = set(reserved)
        self.taken: set[str] = set()
        self._next: dict[str, int] = {}

    def _free(self, base):
        if base not in self.reserved:
            return base
        i = 1
        while f"{base}_{i}" in self.reserved:
            i += 1
        return f"{base}_{i}"

    def reusable(self, base: str) -> str:
        """A name that is not the user's; may be handed out again."""
        return self._free(base)

    def unique(self, base: str) -> str:
        """A name used for nothing else in this conversion."""
        candidate = base
        i = self._next.get(base, 0)  # resume where the last search for `base` ended
        if i:
            candidate = f"{base}_{i}"
        while candidate in self.reserved or candidate in self.taken:
            i += 1
            candidate = f"{base}_{i}"
        self._next[base] = i + 1
        self.taken.add(candidate)
        return candidate
