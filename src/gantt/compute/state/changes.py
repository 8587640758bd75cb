"""What moves when the table changes: its revisions, its row layout, the journal of rows whose usage or report
time changed, and the listeners told of each change. Every part of the table writes through this one object."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from gantt.compute.journal import RowJournal
from gantt.compute.state.columns import Columns

_STATIC_EPOCHS = itertools.count(1)  # one range of static revisions per table (see ``Changes.static_revision``)


class Changes:
    """The table's revisions and journal (see ``gantt.compute.state.table``'s docstring, "Revisions")."""

    __slots__ = ("_columns", "heartbeat_epoch", "journal", "layout", "listeners", "revision", "static_revision")

    def __init__(self, columns: Columns) -> None:
        self._columns = columns
        self.revision = 0  # every change
        self.layout = 0  # rows renumbered (``HostTable.layout``)
        # Caches outside the table (the engine's masks, filters' memos) are keyed on the static revision: a table
        # built by a reload must never repeat a revision an earlier table used, so each starts in its own range.
        self.static_revision = next(_STATIC_EPOCHS) << 32
        self.heartbeat_epoch = 0  # heartbeats, which write report times without journal entries
        self.journal = RowJournal()
        self.listeners: list[Callable[[str, Any], None]] = []

    def changed(self, kind: str, obj: Any, *, static: bool = False) -> None:
        """One change of ``kind`` (``static``: one a static filter can see), told to every listener."""
        self.revision += 1
        if static:
            self.static_revision += 1
        for listener in self.listeners:
            listener(kind, obj)

    def touched(self, row: int) -> None:
        """After a row's usage or report time is written: a new usage version, and a journal entry (last, so a
        reader that sees the entry sees the values)."""
        versions = self._columns.cols["usage_version"]
        versions[row] = versions.item(row) + 1  # a Python int: a numpy scalar's += costs several times more
        self.journal.append(row)
