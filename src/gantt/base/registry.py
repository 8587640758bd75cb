"""Plugins of one kind (filters, weighers) by Nova's class name: one helper for both registries.

Filters and weighers never import each other, so the helper they share lives here, beside them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, Protocol, TypeVar


class Named(Protocol):
    name: ClassVar[str]


P = TypeVar("P", bound=Named)


class Registry(dict[str, type[P]]):
    """Name -> class, filled by ``register`` as the plugin modules are imported."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def register(self, cls: type[P]) -> type[P]:
        """Class decorator: make ``cls`` available to the configuration under its ``name``."""
        if not cls.name:
            raise TypeError(f"{cls.__qualname__} has no name")
        if self.get(cls.name, cls) is not cls:
            raise TypeError(f"{self.kind} name {cls.name!r} registered twice")
        self[cls.name] = cls
        return cls

    def find(self, name: str, listed: Iterable[str] | None = None) -> type[P]:
        """Nova accepts full dotted paths (``nova.scheduler.filters.compute_filter.ComputeFilter``); so do we.

        ``listed``: the names an error offers instead (default: every registered one).
        """
        try:
            return self[name.rsplit(".", 1)[-1]]
        except KeyError:
            known = ", ".join(sorted(self if listed is None else listed))
            raise ValueError(f"unknown {self.kind} {name!r}; known {self.kind}s: {known}") from None
