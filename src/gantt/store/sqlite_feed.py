"""The change feed of a SQLite store: ``changes`` rows ``(revision, seq, kind, payload)``, the payload a
msgpack-encoded ``Change``, read back by ``read_changes``; and the revisions this store object committed, kept in
memory a while (``KeptChanges``), so that a follower in the same process gets them without reading and decoding
them back from the file (with one process, that is every revision)."""

from __future__ import annotations

import operator
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from gantt.store.base import Change, CommitResult, Compacted
from gantt.store.sqlite_file import DEC_CHANGE


class KeptChanges:
    """The newest revision this process knows committed (``head``, its waiters woken by ``cond``), and the changes
    of the revisions its writer committed. Everything here is read and changed under ``cond``."""

    def __init__(self, retention: int) -> None:
        self.head = 0
        self.cond = threading.Condition()
        # Ordered so that the oldest is let go in O(1): ``next(iter(...))`` on a plain dict walks every slot its
        # deletions emptied at the front (up to 8,192), ~3 us per group once the cache is full.
        self.recent: OrderedDict[int, list[Change]] = OrderedDict()
        self.limit = min(retention, 8192)
        # ... and at most this much of it, counted in hosts named (an aggregate of 350,000 hosts weighs
        # 350,000): 8,192 revisions of such aggregate changes would otherwise hold gigabytes.
        self.weight_limit = 400_000
        self.weights: dict[int, int] = {}
        self.total = 0  # the sum of weights
        self.committing = 0  # the head once the writer's COMMIT in progress is done (readers: see wait_kept)
        self.waiters = 0  # readers waiting for the writer to keep a group it committed

    def cached(self, since: int, head: int, limit: int) -> list[Change] | None:
        """Revisions ``since+1 .. head`` from memory if this object committed every one of them (and the feed,
        which keeps at least as many revisions as the cache, still has them)."""
        out: list[Change] = []
        with self.cond:
            if head - since > len(self.recent):
                return None
            for revision in range(since + 1, head + 1):
                changes = self.recent.get(revision)
                if changes is None:
                    return None
                if out and len(out) + len(changes) > limit:
                    break  # whole revisions only, as from the file
                out.extend(changes)
        return out

    def wait_kept(self, head: int) -> None:
        """Wait a moment for this object's writer to keep ``head``, a revision it has committed: rather that than
        read and decode it back from the file (five statements; it happened to ~8 % of catch-ups)."""
        with self.cond:
            self.waiters += 1
            try:
                self.cond.wait_for(lambda: self.head >= head or self.committing < head, 0.05)
            finally:
                self.waiters -= 1

    def wait_past(self, since: int, timeout: float) -> None:
        """Wait up to ``timeout`` for a commit of this process after ``since``."""
        with self.cond:
            if self.head <= since:
                self.cond.wait(timeout)

    def wake_all(self) -> None:
        with self.cond:
            self.cond.notify_all()

    def keep(self, revision: int, results: Iterable[CommitResult | None], *, wake: bool) -> None:
        """A group committed up to ``revision``: keep its batches' changes. ``wake``: wake the feed's readers
        even if none waits for this group in particular."""
        with self.cond:
            if revision > self.head:
                self.head = revision
            for result in results:
                if result is not None and result.changes:
                    self.recent[result.revision] = result.changes
                    weight = sum(1 + (len(c.aggregate.hosts) if c.aggregate is not None else 0)
                                 for c in result.changes)
                    self.weights[result.revision] = weight
                    self.total += weight
            # The total is kept, not summed: summing 8,192 weights per group was a tenth of the writer's time.
            while self.recent and (len(self.recent) > self.limit or self.total > self.weight_limit):
                oldest, _ = self.recent.popitem(last=False)  # inserted in revision order: the first is the oldest
                self.total -= self.weights.pop(oldest, 0)
            if self.waiters or wake:
                self.cond.notify_all()

    def abandon(self) -> None:
        """The writer's transaction failed: nothing beyond the head is coming."""
        with self.cond:
            self.committing = self.head
            self.cond.notify_all()

    def drop_through(self, floor: int) -> None:
        """Let go of the revisions up to ``floor`` (compacted away from the file)."""
        with self.cond:
            for revision in [r for r in self.recent if r <= floor]:
                del self.recent[revision]
                self.total -= self.weights.pop(revision, 0)


def compact(conn: sqlite3.Connection | sqlite3.Cursor, floor: int) -> None:
    """Delete the feed up to revision ``floor``; asking for changes since an older one raises ``Compacted``."""
    conn.execute("DELETE FROM changes WHERE revision <= ?", (floor,))
    conn.execute("UPDATE meta SET value=? WHERE key='floor' AND value < ?", (floor, floor))


def read_changes(conn: sqlite3.Connection, since: int, limit: int, kept: KeptChanges) -> list[Change]:
    """Every change after ``since`` from the file (up to about ``limit``, always whole revisions)."""
    # The common case in one statement, the floor a column of it (one read transaction, so the rows and the
    # floor agree): an explicit BEGIN, a read of the floor and a COMMIT were three more statements per read,
    # each a GIL hand-over, on every catch-up with another process's revisions (the feed's, and a write's on
    # the event loop).
    rows = conn.execute("SELECT (SELECT value FROM meta WHERE key='floor'), revision, seq, payload FROM changes "
                        "WHERE revision > ? ORDER BY revision, seq LIMIT ?", (since, limit + 1)).fetchall()
    if rows and len(rows) <= limit:
        if since < rows[0][0]:
            raise Compacted(f"revision {since} is compacted; the feed keeps revisions after {rows[0][0]}")
        return _decoded(rows, kept)
    return _read_changes_cut(conn, since, limit, kept)


_FEED_ORDER = operator.itemgetter(1, 2)  # (revision, seq) of a compound row


def read_all_changes(conn: sqlite3.Connection, since: int, limit: int, kept: KeptChanges) -> list[Change] | None:
    """Every change after ``since`` committed when read, in one statement (one read transaction) whatever follows,
    nothing included; None when more than ``limit`` rows follow (the caller reads in parts). The floor comes first,
    as its own row, so that a read that finds nothing after ``since`` still knows whether it was compacted."""
    # A compound of the two, left one first, the rows in their primary key's order (no sort: an ORDER BY over the
    # compound put a temporary b-tree in every read, +3 us when nothing moved)
    rows = conn.execute("SELECT value, NULL, NULL, NULL FROM meta WHERE key='floor' UNION ALL SELECT * FROM "
                        "(SELECT NULL, revision, seq, payload FROM changes WHERE revision > ? "
                        "ORDER BY revision, seq LIMIT ?)", (since, limit + 1)).fetchall()
    if not rows or rows[0][1] is not None:
        return None  # no floor row first (a damaged store): the ordinary read says what is wrong
    floor = int(rows[0][0])
    if since < floor:
        raise Compacted(f"revision {since} is compacted; the feed keeps revisions after {floor}")
    if len(rows) - 1 > limit:
        return None
    # SQLite promises no order for a compound without ORDER BY; the inner ORDER BY ... LIMIT fixes which rows
    # come, and sorting the few here (already in order: one linear pass) makes their order ours, not the planner's.
    body = rows[1:]
    body.sort(key=_FEED_ORDER)
    return _decoded(body, kept)


def _read_changes_cut(conn: sqlite3.Connection, since: int, limit: int, kept: KeptChanges) -> list[Change]:
    """``read_changes`` when no row came back (the floor then decides) or more than ``limit`` did."""
    conn.execute("BEGIN")
    try:
        floor = int(conn.execute("SELECT value FROM meta WHERE key='floor'").fetchone()[0])
        if since < floor:
            raise Compacted(f"revision {since} is compacted; the feed keeps revisions after {floor}")
        # Finding the cut first (another statement) walked every row twice.
        rows = conn.execute("SELECT NULL, revision, seq, payload FROM changes WHERE revision > ? "
                            "ORDER BY revision, seq LIMIT ?", (since, limit + 1)).fetchall()
        if len(rows) > limit:
            # never split a revision: the reader takes the last revision it sees as fully applied
            cut = rows[limit][1]
            if cut - 1 > since:
                rows = [row for row in rows[:limit] if row[1] < cut]
            else:  # the first revision alone is past the limit: all of it
                rows = conn.execute("SELECT NULL, revision, seq, payload FROM changes WHERE revision = ? "
                                    "ORDER BY seq", (cut,)).fetchall()
    finally:
        conn.execute("COMMIT")
    return _decoded(rows, kept)


def _decoded(rows: list[Any], kept: KeptChanges) -> list[Change]:
    """Rows of (floor or NULL, revision, seq, payload) as changes."""
    recent = kept.recent
    out: list[Change] = []
    for _, revision, seq, payload in rows:
        mine = recent.get(revision)  # our own revisions between other processes' ones: no decoding
        out.append(mine[seq] if mine is not None and seq < len(mine) else DEC_CHANGE.decode(payload))
    return out
