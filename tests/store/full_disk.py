"""A real SQLite store whose disk can be made full: what the store-write-error tests write to."""

from __future__ import annotations

import contextlib
import sqlite3

from gantt.store.sqlite import SQLiteStore

_NO_CAP = 1_073_741_823  # SQLite's default max_page_count


class FullDiskSQLiteStore(SQLiteStore):
    """``fill()`` caps the file at the pages it has now (``PRAGMA max_page_count``, which each connection holds
    for itself), so the next write that needs a page fails as on a full disk: SQLITE_FULL, "database or disk
    is full". ``free()`` lifts the cap, as an operator freeing space would."""

    cap: int | None = None

    def _connect(self, *, in_use: bool = False) -> sqlite3.Connection:
        conn = super()._connect(in_use=in_use)
        if self.cap is not None:
            conn.execute(f"PRAGMA max_page_count={self.cap}")
        return conn

    def fill(self) -> None:
        with contextlib.closing(sqlite3.connect(self.path)) as probe:
            self.cap = int(probe.execute("PRAGMA page_count").fetchone()[0])
        self._apply_cap()

    def free(self) -> None:
        self.cap = None
        self._apply_cap()

    def _apply_cap(self) -> None:
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            conn.execute(f"PRAGMA max_page_count={self.cap if self.cap is not None else _NO_CAP}")
