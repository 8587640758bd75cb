"""Values derived from a table's static state (aggregates, the row set, inventory shapes), kept until its
``static_revision`` moves."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any


class StaticCache:
    def __init__(self, static_revision: Callable[[], int]) -> None:
        self._static_revision = static_revision
        self._entry: tuple[int, dict[Hashable, Any]] = (-1, {})

    def get(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """``build()``, memoized under ``key`` until the static revision moves."""
        # Readers call this without the lock. The (revision, dict) pair is swapped as one object so that a value
        # built from state of revision r can never land in the dict of a later revision (which a separate
        # "reset dict, then set revision" sequence allowed when another thread reset it mid-build).
        rev = self._static_revision()
        entry = self._entry
        if entry[0] != rev:
            entry = (rev, {})
            self._entry = entry
        cache = entry[1]
        if key in cache:
            return cache[key]
        value = build()
        if self._static_revision() == rev:  # state moved during the build: use the value once, do not keep it
            cache[key] = value
        return value
