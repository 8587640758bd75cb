"""The writer of one SQLite store object: group commit, and the checkpointer beside it.

``commit`` hands its batch to one writer thread per store object and waits. The writer takes the write lock, then
every batch that is waiting, and applies them in one SQLite transaction (one fsync for all): a batch whose
``expect`` fails or that names something unknown is refused before it writes anything, and only its caller gets
the error (a batch that fails part way through its writes has the group written again with a SAVEPOINT around
each). Each batch that changes something gets its own revision (strictly increasing, across processes too: the
counter is read inside the write transaction). A commit never checkpoints (copies the WAL into the database
file): the checkpointer thread does it every ``checkpoint_interval`` (PASSIVE, beside the writers) and when the
store closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
import time
from concurrent.futures import Future
from typing import Any, Protocol

from gantt.model import ReplicaBehind, StoreUnavailable
from gantt.store import planner, sqlite_batch
from gantt.store.base import Batch, CommitResult
from gantt.store.sqlite_feed import KeptChanges, compact
from gantt.store.sqlite_file import read_head

log = logging.getLogger(__name__)

# A batch's outcome: its result, or the error its caller gets.
_Outcome = tuple["Pending", CommitResult | None, BaseException | None]


class Owner(Protocol):
    """What the writer uses of its store object: its file, its connections, and the counters it keeps there."""

    path: str
    retention: int
    groups: int  # transactions committed by the writer
    batches: int
    commit_seconds: float  # time spent in COMMIT (the fsync), summed
    writer_cpu_seconds: float  # CPU the writer thread used (what group commit costs this process)
    checkpoints: int

    def _connect(self, *, in_use: bool = False) -> sqlite3.Connection: ...

    def _give_back(self, conn: sqlite3.Connection) -> None: ...

    def _begin_immediate(self, conn: sqlite3.Connection) -> None: ...

    def _refuse_if_lost(self) -> None: ...

    def _note_write(self, error: BaseException | str | None) -> None: ...


class Pending:
    """A batch waiting for the writer, and how its caller learns the outcome."""

    __slots__ = ("batch", "done", "error", "finished", "future", "loop", "result")

    def __init__(self, batch: Batch, future: Future[CommitResult] | asyncio.Future[CommitResult] | None = None,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.batch = batch
        self.done = threading.Event() if future is None else None  # commit's caller waits on it
        self.future = future  # commit_soon's (completed here) or commit_on_loop's (completed on ``loop``)
        self.loop = loop
        self.result: CommitResult | None = None
        self.error: BaseException | None = None
        self.finished = False

    def finish(self, result: CommitResult | None, error: BaseException | None) -> None:
        self.result, self.error = result, error
        self.finished = True
        if self.done is not None:
            self.done.set()
        if self.future is not None and self.loop is None:
            future: Future[CommitResult] = self.future  # type: ignore[assignment]  # a loop's future has a loop
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)  # type: ignore[arg-type]  # no error: a result


def wake_loops(group: list[Pending]) -> None:
    """Complete the loop futures of a group's finished batches: one wake-up of each loop for all of them."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Pending]] = {}
    for pending in group:
        if pending.loop is not None and pending.finished:
            by_loop.setdefault(pending.loop, []).append(pending)
    for loop, pendings in by_loop.items():
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(_settle, pendings)


def _settle(pendings: list[Pending]) -> None:
    for pending in pendings:
        future: asyncio.Future[CommitResult] = pending.future  # type: ignore[assignment]  # loop: a loop's future
        if future.done():  # its waiter was cancelled (the batch is committed all the same)
            continue
        if pending.error is not None:
            future.set_exception(pending.error)
        else:
            future.set_result(pending.result)  # type: ignore[arg-type]  # no error: a result


class Writer:
    """One store object's writer thread (started by the first batch) and its checkpointer."""

    def __init__(self, owner: Owner, kept: KeptChanges, *, floor: int, max_group: int,
                 checkpoint_interval: float) -> None:
        self._owner = owner
        self._kept = kept
        self.max_group = max_group
        self.checkpoint_interval = checkpoint_interval
        # callers append, the writer drains
        self._queue: list[Pending] = []
        self._cond = threading.Condition()
        self.closed = False
        self._thread: threading.Thread | None = None
        self.conn: sqlite3.Connection | None = None
        self._checkpointer: threading.Thread | None = None
        self._stop_checkpoints = threading.Event()
        # The head as this writer left the file (None: not known), and the newest revision it found written by
        # anyone else (``Batch.fresh_as_of``): a head other than the one it left is another process's.
        self._head: int | None = None
        self._foreign = 0
        # The feed's floor as last known: a stale (lower) one only makes a compaction come early.
        self._floor_hint = floor

    def enqueue(self, pending: Pending) -> Pending:
        with self._cond:
            if self.closed:
                raise StoreUnavailable("the store is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._write_loop, name="gantt-sqlite-writer", daemon=True)
                self._thread.start()
                self._checkpointer = threading.Thread(target=self._checkpoint_loop, name="gantt-sqlite-checkpoint",
                                                      daemon=True)
                self._checkpointer.start()
            self._queue.append(pending)
            self._cond.notify()
        return pending

    def shut(self) -> bool:
        """Take no more batches (those queued are still written); False if it was shut already."""
        with self._cond:
            if self.closed:
                return False
            self.closed = True
            self._cond.notify_all()
        return True

    def join(self) -> None:
        """Wait for the last group, then for the checkpointer's last copy of it."""
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._stop_checkpoints.set()  # after the writer's last group: the checkpointer copies it too
        if self._checkpointer is not None:
            self._checkpointer.join(timeout=30)

    def _write_loop(self) -> None:
        # In use for the writer's whole life: a close() that gave up waiting for it leaves it to the writer.
        conn = self.conn = self._owner._connect(in_use=True)
        # No checkpoint inside a commit: the one that crossed SQLite's 1,000 WAL pages copied them to the file and
        # synced it while holding the write lock, some eight times a second per worker under load, and every
        # writer waiting for the lock (the other worker's too) waited for it. The checkpointer does it apart.
        conn.execute("PRAGMA wal_autocheckpoint=0")
        try:
            self._write_groups(conn)
        finally:
            self._owner._give_back(conn)

    def _checkpoint_loop(self) -> None:
        """Copy the WAL's committed pages into the database file every ``checkpoint_interval`` while this store
        writes, and once more when it closes. PASSIVE: writers go on meanwhile, readers keep their snapshots (the
        pages they still read stay in the WAL until a later checkpoint), and the interpreter lock is released
        for the copy. A page written many times in an interval is copied once."""
        owner = self._owner
        conn = owner._connect(in_use=True)
        done = 0  # the writer's groups up to the last checkpoint
        try:
            while True:
                stopping = self._stop_checkpoints.wait(self.checkpoint_interval)
                groups = owner.groups
                if groups != done:
                    done = groups
                    try:
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                        owner.checkpoints += 1
                    except sqlite3.Error as exc:  # tried again at the next interval
                        log.warning("sqlite store: checkpoint of %s failed: %s", owner.path, exc)
                if stopping:
                    return
        finally:
            owner._give_back(conn)

    def _take(self) -> list[Pending]:
        with self._cond:
            group = self._queue[: self.max_group]
            del self._queue[: self.max_group]
        return group

    def _write_groups(self, conn: sqlite3.Connection) -> None:
        # The writer waits for the lock in its own fine-grained loop (begin_immediate). Nothing else it runs can
        # be busy in WAL mode once it holds the write lock (it runs no checkpoint: _checkpoint_loop does).
        conn.execute("PRAGMA busy_timeout=0")
        owner = self._owner
        while True:
            with self._cond:
                while not self._queue and not self.closed:
                    self._cond.wait()
                if not self._queue and self.closed:
                    return
            cpu = time.thread_time()
            group: list[Pending] = []
            try:
                # The write lock first, the group after: batches queued while another process holds the lock
                # (its statements and its fsync) join this transaction instead of waiting for the next lock and
                # fsync of their own. Two workers take turns on the lock, so most groups begin with a wait.
                owner._refuse_if_lost()
                owner._begin_immediate(conn)
                group = self._take()
                self.commit_group(conn, group, begun=True)
            except BaseException as exc:  # the whole transaction failed: every caller in it gets the error
                self._fail(group or self._take(), exc)  # no group: the lock was never had, they fail with it
            owner.writer_cpu_seconds += time.thread_time() - cpu

    def _fail(self, group: list[Pending], exc: BaseException) -> None:
        error: BaseException = exc
        if isinstance(exc, sqlite3.Error):
            error = StoreUnavailable(f"{self._owner.path}: {exc}")
            log.error("sqlite store: group commit of %d batch(es) failed: %s", len(group), exc)
        self._owner._note_write(error)
        for pending in group:
            if not pending.finished:
                pending.finish(None, error)
        wake_loops(group)

    def commit_group(self, conn: sqlite3.Connection, group: list[Pending], *, savepoints: bool = False,
                     begun: bool = False) -> None:
        """Write ``group`` in one transaction. A refused batch writes nothing (the planner decides before the
        first write), so no savepoint is needed for it: each SAVEPOINT and RELEASE was a statement per batch,
        and every statement hands the GIL over. Only a batch that fails part way through its writes (a full disk,
        an I/O error) needs one: then the whole transaction is rolled back and the group written again with a
        savepoint around each batch, so that only that batch fails. ``begun``: the caller holds the write lock
        (BEGIN IMMEDIATE) already."""
        owner, kept = self._owner, self._kept
        if not begun:
            owner._begin_immediate(conn)
        try:
            start = read_head(conn, owner.path)
            if start != self._head:  # under the write lock: every other commit is before this read
                self._foreign = start
            outcomes, revision, failed = self._write_batches(conn, group, start, savepoints)
            self._commit(conn, start, revision)
        except sqlite_batch.Torn:
            kept.committing = kept.head
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self.commit_group(conn, group, savepoints=True)
            return
        except BaseException:
            kept.abandon()
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if failed is not None or revision != start:  # a group of refusals only proves nothing either way
            owner._note_write(failed)
        owner.groups += 1
        owner.batches += len(group)
        # A group whose every batch was committed from an event loop is applied there (Replica.written, on
        # the loop, as it answers): the feed's follower need not wake for it; it finds the group at its next
        # poll if the loop has not applied it by then. Woken per group, it raced the loop for the table's
        # lock, and the loop's writes that found it taken went on handler threads.
        kept.keep(revision, (result for _, result, _ in outcomes),
                  wake=any(pending.loop is None for pending in group))
        for pending, result, error in outcomes:
            pending.finish(result, error)
        wake_loops(group)

    def _write_batches(self, conn: sqlite3.Connection, group: list[Pending], revision: int,
                       savepoints: bool) -> tuple[list[_Outcome], int, StoreUnavailable | None]:
        """Plan and write each batch of the group after ``revision``; the outcomes, the last revision written, and
        the last batch the store could not write (though others were)."""
        outcomes: list[_Outcome] = []
        failed: StoreUnavailable | None = None
        later = None if savepoints else sqlite_batch.Later()
        # One cursor for the group's statements (conn.execute makes one per statement); with savepoints, the
        # connection's as before, so that no statement of it is pending at a ROLLBACK TO.
        cur: Any = conn if savepoints else conn.cursor()
        for pending in group:
            result, error = self._write_batch(conn, cur, pending.batch, revision, later, savepoints)
            if isinstance(error, _Unwritten):
                failed = error.failure
                error = failed
            elif result is not None and result.changes:
                revision = result.revision
            outcomes.append((pending, result, error))
        if later is not None:
            try:
                later.write(cur)
            except Exception:
                raise sqlite_batch.Torn() from None
            finally:
                cur.close()  # no statement of it pending at COMMIT
        return outcomes, revision, failed

    def _write_batch(self, conn: sqlite3.Connection, cur: Any, batch: Batch, revision: int,
                     later: sqlite_batch.Later | None, savepoints: bool) -> tuple[CommitResult | None,
                                                                                  BaseException | None]:
        """One batch as revision ``revision + 1``: its result, or the error its caller gets (``_Unwritten``:
        the store could not write it). Torn when it fails part way through its writes without a savepoint."""
        if savepoints:
            conn.execute("SAVEPOINT b")
        try:
            as_of = batch.fresh_as_of
            if as_of is not None and self._foreign > as_of:
                raise ReplicaBehind(f"another process wrote revision {self._foreign}, after {as_of}")
            reads = sqlite_batch.Reads(cur, revision, later, records=bool(batch.generations))
            p = planner.plan(batch, reads)
            try:
                changes, quiet = sqlite_batch.write(cur, p, revision + 1, later)
            except Exception:
                if not savepoints:
                    raise sqlite_batch.Torn() from None
                raise
        except sqlite_batch.Torn:
            raise
        except BaseException as exc:
            if not isinstance(exc, Exception) or not conn.in_transaction:
                # SQLite rolled the whole transaction back (a full disk, an I/O error): the group fails
                # with this error, not with "no such savepoint" from the ROLLBACK TO below.
                raise
            if savepoints:
                conn.execute("ROLLBACK TO b")
                conn.execute("RELEASE b")
            if isinstance(exc, sqlite3.Error):  # a refusal is the batch's own; this is the store's
                log.error("sqlite store: a batch could not be written: %s", exc)
                return None, _Unwritten(StoreUnavailable(f"{self._owner.path}: {exc}"))
            return None, exc
        if savepoints:
            conn.execute("RELEASE b")
        return CommitResult(revision=revision + 1 if changes else revision, changes=changes, quiet=quiet), None

    def _commit(self, conn: sqlite3.Connection, start: int, revision: int) -> None:
        """Move the head from ``start`` to ``revision``, compact the feed now and then, and COMMIT (the fsync)."""
        owner = self._owner
        if revision != start:
            conn.execute("UPDATE meta SET value=? WHERE key='revision'", (revision,))
            # amortized: delete a slice of old feed every retention/10 revisions (at most 1000). The floor is
            # remembered, not read per group: a stale (lower) one only makes a compaction come early.
            retention = owner.retention
            if revision - self._floor_hint >= retention + max(1, min(retention // 10, 1000)):
                compact(conn, revision - retention)
                self._floor_hint = revision - retention
        synced = time.perf_counter()
        self._kept.committing = revision  # from here readers may find it in the file before it is kept
        conn.execute("COMMIT")  # the fsync: every batch of the group is durable from here
        owner.commit_seconds += time.perf_counter() - synced
        owner._refuse_if_lost()  # ... unless it went into files deleted meanwhile: then it is not acknowledged
        self._head = revision


class _Unwritten(Exception):
    """A batch the store could not write (an I/O error on its statements), though the group's others were."""

    def __init__(self, failure: StoreUnavailable) -> None:
        super().__init__(str(failure))
        self.failure = failure
