"""SQLiteStore: the embedded default store, one file shared by every ``gantt serve`` process on a machine.

Durability
- WAL journal with ``synchronous=FULL``: a transaction is on disk (the WAL is fsynced) before ``commit`` returns,
  so an acknowledged write survives ``kill -9`` and power loss alike.
- Writers take the write lock up front (``BEGIN IMMEDIATE``), so a transaction never has to be retried half way
  through because another process got the lock first; waiting for the lock is a short sleep loop
  (``sqlite_file.begin_immediate``).
- A commit never checkpoints: a checkpointer thread does it (``sqlite_writer``).

Group commit: ``sqlite_writer`` (one writer thread per store object, every waiting batch in one transaction),
each batch planned and written by ``sqlite_batch``.

Change feed
- ``changes`` rows (``sqlite_feed``). A waiting reader polls the head revision every ``poll_interval`` (a one-row
  primary-key read) and is woken at once by commits of its own process. The last ``retention`` revisions are
  kept; older rows are deleted by the writer now and then, and ``floor`` records the newest deleted revision:
  asking for changes since an older one raises ``Compacted``.

The file, its schema and its checks: ``sqlite_file``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import msgspec

from gantt.model import StoreUnavailable, WriteFailure
from gantt.model.namespaces import DEFAULT, check_name
from gantt.store.base import Batch, Change, CommitResult, NodeRevision, Snapshot, Store, lifted
from gantt.store.sqlite_feed import KeptChanges, compact, read_all_changes, read_changes
from gantt.store.sqlite_file import (
    DEC_AGG,
    DEC_ALLOC,
    DEC_HOST,
    DEC_INST,
    DEC_RECORD,
    Identity,
    begin_immediate,
    check_file,
    connection_class,
    create_schema,
    path_of,
    read_head,
)
from gantt.store.sqlite_writer import Pending, Writer

log = logging.getLogger(__name__)

# Seconds between two looks at the store's files (their identity) by ``SQLiteStore.last_write_error``.
LOOK_INTERVAL = 0.05


class _Use:
    """One use of a store's connection (``SQLiteStore._reader``): counted from ``with`` to its end."""

    __slots__ = ("conn", "store")

    def __init__(self, store: SQLiteStore, conn: sqlite3.Connection) -> None:
        self.store, self.conn = store, conn

    def __enter__(self) -> sqlite3.Connection:
        store, conn = self.store, self.conn
        with store._conns_lock:
            if store._closed:
                raise StoreUnavailable("the store is closed")
            store._users[conn] = store._users.get(conn, 0) + 1
        return conn

    def __exit__(self, *exc: object) -> None:
        self.store._give_back(self.conn)


class SQLiteStore(Store):
    """See the module docstring. ``retention``: how many revisions of change feed to keep."""

    def __init__(self, url: str, *, retention: int | None = None, busy_timeout: float = 30.0,
                 poll_interval: float = 0.005, max_group: int = 512, create: bool = True,
                 namespace: str = DEFAULT, checkpoint_interval: float = 0.25) -> None:
        self.url = url
        self.namespace = check_name(namespace)
        self._connection_class = connection_class(namespace)
        self.path = path_of(url)
        query = parse_qs(url.split("?", 1)[1]) if "?" in url else {}
        self.retention = retention if retention is not None else int(query.get("retention", ["100000"])[0])
        if self.retention < 1:
            raise ValueError("retention must be >= 1")
        self.busy_timeout = busy_timeout
        self.poll_interval = poll_interval
        parent = Path(self.path).parent
        if not create and not Path(self.path).exists():
            raise StoreUnavailable(f"{self.path}: no such store")
        if not parent.exists():
            parent.mkdir(parents=True, exist_ok=True)
        self._writable = create
        check_file(Path(self.path), namespace, writable=create, busy_timeout=busy_timeout)
        self.skipped: list[str] = []  # rows of the last snapshot that did not decode (README: repair)
        self._local = threading.local()
        # Every open connection, and how many calls are using each right now (under _conns_lock). A connection
        # is closed only by a thread that knows nobody is in it: closing one another thread is executing on is
        # a use-after-free in the sqlite3 module (it segfaulted; see _Use).
        self._conns: list[sqlite3.Connection] = []
        self._users: dict[sqlite3.Connection, int] = {}
        self._conns_lock = threading.Lock()
        self._conns_idle = threading.Condition(self._conns_lock)  # close() waits on it for the users to leave
        self._closed = False
        # in-process wake-up of feed readers (other processes' commits are found by polling), and the changes of
        # the revisions this object committed
        self._kept = KeptChanges(self.retention)
        self.checkpoints = 0  # checkpoints the checkpointer ran (for tests)
        self.groups = 0  # transactions committed by this object's writer (for benchmarks and tests)
        self.batches = 0
        self.lock_waits = 0
        self.commit_seconds = 0.0  # time spent in COMMIT (the fsync), summed
        self.writer_cpu_seconds = 0.0  # CPU the writer thread used (what group commit costs this process)
        self._last_write_error: WriteFailure | None = None
        self._next_look = 0.0  # monotonic time of the next look at the files by last_write_error
        floor = self._init_schema()
        self._identity = Identity(self.path)
        self._writer = Writer(self, self._kept, floor=floor, max_group=max_group,
                              checkpoint_interval=checkpoint_interval)

    # ----------------------------------------------------------------------------------------- connections

    def _connect(self, *, in_use: bool = False) -> sqlite3.Connection:
        """A new connection of this store; ``in_use``: counted as used from the start (give it back when done)."""
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                               timeout=self.busy_timeout, cached_statements=256, factory=self._connection_class)
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=OFF")
        with self._conns_lock:
            self._conns.append(conn)
            if in_use:
                self._users[conn] = self._users.get(conn, 0) + 1
        return conn

    def _reader(self) -> _Use:
        """The calling thread's connection, in use until the ``with`` block ends (``close`` leaves it alone till
        then): ``with self._reader() as conn: ...``. StoreUnavailable once the store is closed."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StoreUnavailable("the store is closed")
            conn = self._local.conn = self._connect()
        return _Use(self, conn)

    def _give_back(self, conn: sqlite3.Connection) -> None:
        """The end of a use; the last user of a connection of a closed store closes it (``close`` did not)."""
        with self._conns_lock:
            left = self._users[conn] - 1
            if left:
                self._users[conn] = left
                return
            del self._users[conn]
            if not self._closed:
                return
            self._conns_idle.notify_all()
            if conn not in self._conns:  # close() already closed it (it was idle then) or another user did
                return
            self._conns.remove(conn)
        with contextlib.suppress(sqlite3.Error):  # closing is best effort
            conn.close()

    def _init_schema(self) -> int:
        """Make the schema (or check it) and open this thread's connection; the feed's floor."""
        try:
            conn = self._connect()
            create_schema(conn, self.path, writable=self._writable, busy_timeout=self.busy_timeout,
                          on_wait=self._waited)
            self._kept.head = read_head(conn, self.path)
            floor = int(conn.execute("SELECT value FROM meta WHERE key='floor'").fetchone()[0])
        except sqlite3.Error as exc:  # read-only file or directory, full disk, …: one line naming the file
            raise StoreUnavailable(f"{self.path}: cannot open the store: {exc}") from None
        self._local.conn = conn
        return floor

    # ---------------------------------------------------------------------------------- the files themselves

    @property
    def last_write_error(self) -> WriteFailure | None:
        """The last write the store could not make; a store whose files were deleted or replaced says so here for
        as long as it is open (/health then answers 503), writes or not. Read per host report (``Replica.heartbeat``):
        the files are looked at LOOK_INTERVAL apart at most here; a commit looks every time."""
        lost = self._identity.found
        if lost is None:
            now = time.monotonic()
            if now >= self._next_look:
                self._next_look = now + LOOK_INTERVAL
                lost = self._identity.lost()
        return lost or self._last_write_error

    @last_write_error.setter
    def last_write_error(self, value: WriteFailure | None) -> None:
        self._last_write_error = value

    def lost(self) -> WriteFailure | None:
        """Whether the database file or its WAL is no longer the one this store opened (``sqlite_file.Identity``)."""
        return self._identity.lost()

    def _refuse_if_lost(self) -> None:
        lost = self._identity.lost()
        if lost is not None:
            raise StoreUnavailable(lost.message)

    def _waited(self) -> None:
        self.lock_waits += 1

    def _begin_immediate(self, conn: sqlite3.Connection) -> None:
        """Take the write lock (``sqlite_file.begin_immediate``), counting the waits for it."""
        begin_immediate(conn, self.path, self.busy_timeout, self._waited)

    def close(self) -> None:
        if not self._writer.shut():
            return
        self._closed = True
        self._kept.wake_all()  # feed readers waiting for a revision return now (changes: empty once closed)
        self._writer.join()
        # Readers in a statement finish it (a moment: every read is short) and the writer its group; a connection
        # still in use after that is closed by its last user, never under it.
        with self._conns_lock:
            self._conns_idle.wait_for(lambda: not self._users, timeout=5)
            idle = [conn for conn in self._conns if conn not in self._users]
            self._conns = [conn for conn in self._conns if conn in self._users]
        for conn in idle:
            with contextlib.suppress(sqlite3.Error):  # closing is best effort
                conn.close()

    # -------------------------------------------------------------------------------------------- reading

    def snapshot(self) -> Snapshot:
        with self._reader() as conn:
            conn.execute("BEGIN")  # one read transaction: everything at one revision
            try:
                revision = read_head(conn, self.path)
                skipped: list[str] = []
                hosts = _rows(conn, "SELECT host || '/' || node, data FROM hosts ORDER BY rowid", DEC_HOST,
                              "host", skipped)
                aggregates = _rows(conn, "SELECT id, data FROM aggregates ORDER BY rowid", DEC_AGG, "aggregate",
                                   skipped)
                allocations = _rows(conn, "SELECT consumer, data FROM allocations ORDER BY rowid", DEC_ALLOC,
                                    "allocation", skipped)
                instances = _rows(conn, "SELECT host, data FROM instances ORDER BY rowid", DEC_INST, "instances",
                                  skipped)
                records = _rows(conn, "SELECT kind || '/' || name, data FROM records ORDER BY rowid", DEC_RECORD,
                                "record", skipped)
                self.skipped = skipped
                node_revisions = [NodeRevision(h, n, r)
                                  for h, n, r in conn.execute("SELECT host, node, revision FROM node_revisions")]
                touched = {(h, n): at for h, n, at in conn.execute("SELECT host, node, at FROM liveness")}
            finally:
                conn.execute("COMMIT")
        if touched:
            hosts = [lifted(h, touched.get((h.host, h.nodename))) for h in hosts]
        return Snapshot(revision=revision, hosts=hosts, aggregates=aggregates, allocations=allocations,
                        instances=instances, node_revisions=node_revisions, records=records)

    def head(self) -> int:
        """The newest committed revision (of any process)."""
        with self._reader() as conn:
            return read_head(conn, self.path)

    def barrier(self) -> int:
        return self.head()

    def shared_head(self) -> int | None:
        try:
            return self.head()
        except sqlite3.Error as exc:  # read before every request: a 503 naming the file, not a 500
            raise StoreUnavailable(f"{self.path}: cannot read the head revision: {exc}") from None

    def shared_changes(self, since: int, *, limit: int = 20_000) -> list[Change] | None:
        """``Store.shared_changes``: one read of the file's feed, every process's changes after ``since`` (ours taken
        from memory, not decoded again)."""
        try:
            with self._reader() as conn:
                return read_all_changes(conn, since, limit, self._kept)
        except sqlite3.Error as exc:  # read before every request: a 503 naming the file, not a 500
            raise StoreUnavailable(f"{self.path}: cannot read the change feed: {exc}") from None

    def changes(self, since: int, timeout: float = 1.0, *, limit: int = 20_000,
                head: int | None = None) -> list[Change]:
        """Every change after ``since`` (up to about ``limit``, always whole revisions), waiting up to ``timeout``.
        ``head`` (``Store.changes``): taken for the head on the first pass, which then reads no head of its own:
        the caller has just read it (a request's catch-up, ``Follower.behind``) or committed it (a write's), and
        under another process's writes each read transaction finds the WAL moved (~20-50 us of CPU)."""
        deadline = time.monotonic() + max(timeout, 0.0)
        kept = self._kept
        known, spent = head, False
        while True:
            # Our own commits first: when this object wrote everything after `since`, not even the head is read.
            local = kept.head
            if local > since:
                cached = kept.cached(since, local, limit)
                if cached is not None:
                    return cached
                if known is None and not spent:
                    known = local  # committed by this object: a head known without reading it (the follower, woken
                    # by our own commit after another process's)
            if known is not None and known > since:
                top, known, hinted, spent = known, None, True, True
            else:
                with self._reader() as conn:
                    top, hinted = read_head(conn, self.path), False
            if top > since:
                cached = kept.cached(since, top, limit)
                if cached is None and top <= kept.committing:
                    # Our own writer's group, committed and about to be kept in memory: wait for that.
                    kept.wait_kept(top)
                    cached = kept.cached(since, top, limit)
                if cached is not None:
                    return cached
                with self._reader() as conn:
                    changes = read_changes(conn, since, limit, kept)
                if changes or not hinted:
                    return changes
                continue  # nothing there yet after all (a head not committed): read the head, and wait for it
            # since >= top >= floor here, so nothing asked for can have been compacted away
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._closed:
                return []
            kept.wait_past(since, min(self.poll_interval, remaining))

    # -------------------------------------------------------------------------------------------- writing

    queued_commits = True
    checks_freshness = True

    def commit(self, batch: Batch) -> CommitResult:
        pending = self._writer.enqueue(Pending(batch))
        assert pending.done is not None
        pending.done.wait()
        if pending.error is not None:
            raise pending.error
        assert pending.result is not None
        return pending.result

    def commit_soon(self, batch: Batch) -> Future[CommitResult]:
        """Queued for the writer thread, as ``commit``'s batches are; the future completes when its group has."""
        future: Future[CommitResult] = Future()
        future.set_running_or_notify_cancel()  # a running future cannot be cancelled: the writer always completes it
        self._writer.enqueue(Pending(batch, future))
        return future

    def commit_on_loop(self, batch: Batch, loop: asyncio.AbstractEventLoop) -> asyncio.Future[CommitResult]:
        """``commit_soon`` with a future of ``loop``: the writer completes every such future of a group with one
        wake-up of the loop. (``asyncio.wrap_future`` on commit_soon's future costs a thread-safe future with its
        condition, a chained callback and a wake-up per batch.)"""
        future: asyncio.Future[CommitResult] = loop.create_future()
        self._writer.enqueue(Pending(batch, future, loop))
        return future

    def compact(self, keep: int | None = None) -> int:
        """Delete the feed older than the last ``keep`` (default ``retention``) revisions now; returns the floor."""
        keep = self.retention if keep is None else keep
        with self._reader() as conn:
            self._begin_immediate(conn)
            try:
                head = read_head(conn, self.path)
                floor = max(head - keep, 0)
                compact(conn, floor)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        self._kept.drop_through(floor)
        return floor


def _rows(conn: sqlite3.Connection, query: str, decoder: Any, kind: str, skipped: list[str]) -> list[Any]:
    """Decode every row; one that does not decode is logged with its key and skipped, not fatal to the rest."""
    out = []
    for key, data in conn.execute(query):
        try:
            out.append(decoder.decode(data))
        except (msgspec.DecodeError, msgspec.ValidationError, TypeError) as exc:
            log.error("%s %s in the store does not decode (%s): skipped; see README 'Store files'", kind, key, exc)
            skipped.append(f"{kind} {key}: {exc}")
    return out
