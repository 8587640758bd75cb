"""SQLiteStore: the embedded default store, one file shared by every ``gantt serve`` process on a machine.

Durability
- WAL journal with ``synchronous=FULL``: a transaction is on disk (the WAL is fsynced) before ``commit`` returns,
  so an acknowledged write survives ``kill -9`` and power loss alike.
- Writers take the write lock up front (``BEGIN IMMEDIATE``), so a transaction never has to be retried half way
  through because another process got the lock first; waiting for the lock is a short sleep loop (finer grained
  than SQLite's own busy handler, which sleeps 1, 2, 5, 10 … ms).
- A commit never checkpoints (copies the WAL into the database file): a checkpointer thread does it every
  ``checkpoint_interval`` (PASSIVE, beside the writers) and when the store closes.

Group commit
- ``commit`` hands its batch to one writer thread per store object and waits. The writer takes every batch that
  is waiting, applies them in one SQLite transaction (one fsync for all): a batch whose ``expect`` fails or that
  names something unknown is refused before it writes anything, and only its caller gets the error (a batch that
  fails part way through its writes has the group written again with a SAVEPOINT around each).
  Each batch that changes something gets its own revision (strictly increasing, across processes too: the
  counter is read inside the write transaction).

Change feed
- ``changes`` rows ``(revision, seq, kind, payload)``, the payload a msgpack-encoded ``Change``. A waiting reader
  polls the head revision every ``poll_interval`` (a one-row primary-key read) and is woken at once by commits of
  its own process. The last ``retention`` revisions are kept; older rows are deleted by the writer now and then,
  and ``floor`` records the newest deleted revision: asking for changes since an older one raises ``Compacted``.

Schema: see ``_SCHEMA``; ``schema_version`` holds its version so a later release can migrate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import re
import sqlite3
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import msgspec

from gantt.model import (
    Aggregate,
    Allocation,
    HostReport,
    InstanceInfo,
    NodeKey,
    Record,
    ReplicaBehind,
    StoreUnavailable,
    WriteFailure,
    prepare_types,
)
from gantt.model.namespaces import DEFAULT, check_name, sqlite_table
from gantt.store import planner
from gantt.store.base import (
    Batch,
    Change,
    CommitResult,
    Compacted,
    Expect,
    NodeRevision,
    Snapshot,
    Store,
    lifted,
)

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
# PRAGMA application_id of a Gantt store ("GNTT"): a file that carries another id is another program's
# database, and Gantt neither adds its tables to it nor switches its journal mode.
APPLICATION_ID = 0x474E5454
_OUR_TABLES = {"schema_version", "meta", "hosts", "aggregates", "allocations", "instances", "node_revisions",
               "changes"}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS hosts (host TEXT NOT NULL, node TEXT NOT NULL, data BLOB NOT NULL,
                                  PRIMARY KEY (host, node));
-- A node's last touch (a report that changed nothing but its time): a row of three fields instead of a rewrite
-- of the record. Reads and snapshots lift the record's reported_at to it (store.base: touches).
CREATE TABLE IF NOT EXISTS liveness (host TEXT NOT NULL, node TEXT NOT NULL, at REAL NOT NULL,
                                     PRIMARY KEY (host, node)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS node_revisions (host TEXT NOT NULL, node TEXT NOT NULL, revision INTEGER NOT NULL,
                                           PRIMARY KEY (host, node)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS aggregates (id TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS allocations (consumer TEXT PRIMARY KEY, host TEXT NOT NULL, node TEXT NOT NULL,
                                        data BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS allocations_node ON allocations (host, node);
-- Columns in the order of the key: SQLite 3.40.0-3.41.0's quick_check reports "NULL value in ...consumer" on a
-- WITHOUT ROWID table whose key order differs from its column order (integrity_check does not). Files made with
-- (consumer, host, node) are rebuilt so at their first writable open (``_align_parts``).
CREATE TABLE IF NOT EXISTS allocation_parts (host TEXT NOT NULL, node TEXT NOT NULL, consumer TEXT NOT NULL,
                                             PRIMARY KEY (host, node, consumer)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS instances (host TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS records (kind TEXT NOT NULL, name TEXT NOT NULL, data BLOB NOT NULL,
                                    PRIMARY KEY (kind, name));
CREATE TABLE IF NOT EXISTS changes (revision INTEGER NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL,
                                    payload BLOB NOT NULL, PRIMARY KEY (revision, seq)) WITHOUT ROWID;
"""

# Seconds between two looks at the store's files (their identity) by ``SQLiteStore.last_write_error``.
LOOK_INTERVAL = 0.05

# Nodes whose liveness one statement reads (``_Reads.liveness``): two parameters each.
LIVENESS_KEYS = 1000

_ENC = msgspec.msgpack.Encoder()
_DEC_HOST = msgspec.msgpack.Decoder(HostReport)


class _ProviderGeneration(msgspec.Struct):
    generation: int = 0


class _GenerationOnly(msgspec.Struct):
    """A stored HostReport read for its provider generation alone: the other fields are skipped, not decoded."""

    provider: _ProviderGeneration | None = None


prepare_types(globals())  # before any thread decodes (see model.prepare_types)
_DEC_GENERATION = msgspec.msgpack.Decoder(_GenerationOnly)
_DEC_AGG = msgspec.msgpack.Decoder(Aggregate)
_DEC_ALLOC = msgspec.msgpack.Decoder(Allocation)
_DEC_INST = msgspec.msgpack.Decoder(InstanceInfo)
_DEC_CHANGE = msgspec.msgpack.Decoder(Change)
_DEC_RECORD = msgspec.msgpack.Decoder(Record)

# Every table and index name of the schema: a named namespace's connections rename them (``_Namespaced``).
_NAMES = re.compile(r"\b(schema_version|meta|hosts|liveness|node_revisions|aggregates|allocations_node|allocations|"
                    r"allocation_parts|instances|records|changes)\b")


class _Namespaced(sqlite3.Connection):
    """A connection whose statements address one namespace's tables (``gantt.model.namespaces``): the store's SQL is
    written once, for the default namespace's bare table names, and rewritten here (once per statement text)."""

    namespace = DEFAULT

    def _sql(self, sql: str) -> str:
        cache: dict[str, str] = self.__dict__.setdefault("_mapped", {})
        mapped = cache.get(sql)
        if mapped is None:
            # Only names outside quotes: 'revision', 'floor' and the like are values, never tables.
            parts = re.sub(r"--[^\n]*", "", sql).split("'")
            parts[::2] = [_NAMES.sub(lambda m: sqlite_table(self.namespace, m.group(1)), part) for part in parts[::2]]
            mapped = cache[sql] = "'".join(parts)
        return mapped

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:  # type: ignore[override]
        return super().execute(self._sql(sql), parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:  # type: ignore[override]
        return super().executemany(self._sql(sql), parameters)

    def cursor(self, factory: Any = None) -> sqlite3.Cursor:  # type: ignore[override]
        # A cursor's statements are the namespace's too (the writer runs a group's statements on one cursor).
        return super().cursor(factory or _NamespacedCursor)


class _NamespacedCursor(sqlite3.Cursor):
    connection: _Namespaced

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:  # type: ignore[override]
        return super().execute(self.connection._sql(sql), parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:  # type: ignore[override]
        return super().executemany(self.connection._sql(sql), parameters)


def _factory(namespace: str) -> type[sqlite3.Connection]:
    if namespace == DEFAULT:
        return sqlite3.Connection
    return type(f"_Namespaced_{namespace}", (_Namespaced,), {"namespace": namespace})


def path_of(url: str) -> str:
    """``sqlite:///rel/path`` is relative to the working directory, ``sqlite:////abs/path`` absolute (as in
    SQLAlchemy); a bare path is accepted too."""
    rest = url.split("?", 1)[0]
    if rest.startswith("sqlite:///"):
        rest = rest[len("sqlite:///"):]
    elif rest.startswith("sqlite://"):
        rest = rest[len("sqlite://"):]
    elif rest.startswith("sqlite:"):
        rest = rest[len("sqlite:"):]
    if not rest or rest == ":memory:":
        raise ValueError(f"{url!r}: the SQLite store needs a file (sqlite:///path/to/file.sqlite)")
    return rest


class _Pending:
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
            future: Future[CommitResult] = self.future  # type: ignore[assignment]
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)  # type: ignore[arg-type]


def _wake_loops(group: list[_Pending]) -> None:
    """Complete the loop futures of a group's finished batches: one wake-up of each loop for all of them."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Pending]] = {}
    for pending in group:
        if pending.loop is not None and pending.finished:
            by_loop.setdefault(pending.loop, []).append(pending)
    for loop, pendings in by_loop.items():
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(_settle, pendings)


def _settle(pendings: list[_Pending]) -> None:
    for pending in pendings:
        future: asyncio.Future[CommitResult] = pending.future  # type: ignore[assignment]
        if future.done():  # its waiter was cancelled (the batch is committed all the same)
            continue
        if pending.error is not None:
            future.set_exception(pending.error)
        else:
            future.set_result(pending.result)  # type: ignore[arg-type]


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
        self._connection_class = _factory(namespace)
        self.path = path_of(url)
        query = parse_qs(url.split("?", 1)[1]) if "?" in url else {}
        self.retention = retention if retention is not None else int(query.get("retention", ["100000"])[0])
        if self.retention < 1:
            raise ValueError("retention must be >= 1")
        self.busy_timeout = busy_timeout
        self.poll_interval = poll_interval
        self.max_group = max_group
        self.checkpoint_interval = checkpoint_interval
        parent = Path(self.path).parent
        if not create and not Path(self.path).exists():
            raise StoreUnavailable(f"{self.path}: no such store")
        if not parent.exists():
            parent.mkdir(parents=True, exist_ok=True)
        self._writable = create
        self._check_file(writable=create)
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
        # group commit: callers append, the writer drains
        self._queue: list[_Pending] = []
        self._queue_cond = threading.Condition()
        self._writer: threading.Thread | None = None
        self._writer_conn: sqlite3.Connection | None = None
        self._checkpointer: threading.Thread | None = None
        self._stop_checkpoints = threading.Event()
        self.checkpoints = 0  # checkpoints the checkpointer ran (for tests)
        # in-process wake-up of feed readers; other processes' commits are found by polling
        self._head = 0
        self._head_cond = threading.Condition()
        # The head as this object's writer left the file (None: not known), and the newest revision it found
        # written by anyone else (``Batch.fresh_as_of``): a head other than the one it left is another process's.
        self._writer_head: int | None = None
        self._foreign = 0
        # The changes of revisions this object committed, kept a while: a follower in this process gets them
        # without reading and decoding them back from the file (with one process, that is every revision).
        # Ordered so that the oldest is let go in O(1): ``next(iter(...))`` on a plain dict walks every slot its
        # deletions emptied at the front (up to 8,192), ~3 us per group once the cache is full.
        self._recent: OrderedDict[int, list[Change]] = OrderedDict()
        self._recent_limit = min(self.retention, 8192)
        # ... and at most this much of it, counted in hosts named (an aggregate of 350,000 hosts weighs
        # 350,000): 8,192 revisions of such aggregate changes would otherwise hold gigabytes.
        self._recent_weight_limit = 400_000
        self._recent_weight: dict[int, int] = {}
        self._recent_total = 0  # the sum of _recent_weight
        self._committing = 0  # the head once the writer's COMMIT in progress is done (readers: see changes)
        self._publish_waiters = 0  # readers waiting for the writer to keep a group it committed (under _head_cond)
        self._floor_hint = 0
        self.groups = 0  # transactions committed by this object's writer (for benchmarks and tests)
        self.batches = 0
        self.lock_waits = 0
        self.commit_seconds = 0.0  # time spent in COMMIT (the fsync), summed
        self.writer_cpu_seconds = 0.0  # CPU the writer thread used (what group commit costs this process)
        # The files this store writes, by identity (st_dev, st_ino): deleted or replaced under a running server,
        # SQLite goes on writing into the unlinked inodes, and every write acknowledged from then on is gone at
        # the next start. Checked around each commit and by /health (``lost``).
        self._identity: dict[str, tuple[int, int] | None] = {}
        self._lost: WriteFailure | None = None
        self._last_write_error: WriteFailure | None = None
        self._next_look = 0.0  # monotonic time of the next look at the files by last_write_error
        self._init_schema()
        main = os.path.abspath(self.path)
        self._identity = {main: _identity(main), main + "-wal": _identity(main + "-wal")}

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

    def _check_file(self, *, writable: bool) -> None:
        """Refuse, before writing anything, a file that is not a Gantt store, is damaged, or (for a writer: the
        service) cannot be written: SQLite would open it, serve reads, and fail on the first write or checkpoint."""
        path = Path(self.path)
        if not path.exists() or path.stat().st_size == 0:
            return  # a new store
        # access(2), not open(): closing any descriptor of the file would drop every POSIX lock this process
        # holds on it, among them those of another namespace's store already open on the same file (SQLite's
        # locking then breaks: another process may checkpoint or reset the WAL under our readers).
        if writable and not os.access(path, os.W_OK):
            raise StoreUnavailable(f"{path}: the store cannot be written (permission denied or a read-only "
                                   "file system); a read-only copy can be audited, not served")
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=self.busy_timeout,
                                   factory=self._connection_class)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"{path}: cannot open: {exc}") from None
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if app_id not in (0, APPLICATION_ID) or (app_id == 0 and tables and not tables >= _OUR_TABLES):
                raise StoreUnavailable(f"{path}: not a Gantt store (another application's database: tables "
                                       f"{', '.join(sorted(tables)[:5]) or 'none'}); left untouched")
            problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
            if problems != ["ok"]:
                # integrity_check is the authority (quick_check a faster subset of it): SQLite 3.40.0-3.41.0's
                # quick_check flags good rows of a WITHOUT ROWID table whose key order is not its column order,
                # as this store's allocation_parts had before _align_parts. Only a complaint pays for the full
                # check (about twice quick_check's time).
                problems = [row[0] for row in conn.execute("PRAGMA integrity_check")]
                if problems != ["ok"]:
                    raise StoreUnavailable(f"{path}: the file is damaged: {problems[0]}")
                log.info("%s: quick_check complained, integrity_check says ok (a known SQLite %s false positive)",
                         path, sqlite3.sqlite_version)
            # a named namespace's tables are made when it is first opened; until then it has none to check
            mine = sqlite_table(self.namespace, "meta").strip('"') in tables
            if tables and mine and conn.execute("SELECT value FROM meta WHERE key='revision'").fetchone() is None:
                raise StoreUnavailable(f"{path}: the meta row 'revision' is missing (a damaged store)")
        except sqlite3.DatabaseError as exc:
            raise StoreUnavailable(f"{path}: not a SQLite database or damaged: {exc}") from None
        finally:
            conn.close()

    def _init_schema(self) -> None:
        try:
            self._init_schema_once()
        except sqlite3.Error as exc:  # read-only file or directory, full disk, …: one line naming the file
            raise StoreUnavailable(f"{self.path}: cannot open the store: {exc}") from None

    def _init_schema_once(self) -> None:
        conn = self._connect()
        # journal_mode is persistent in the file; switching needs a moment without other writers
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        if str(mode).lower() != "wal":
            raise StoreUnavailable(f"{self.path}: cannot switch to WAL journal (got {mode!r})")
        self._begin_immediate(conn)
        try:
            # statement by statement: executescript would COMMIT the write lock away first
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            if self._writable:
                self._align_parts(conn)
            row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
            if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
                conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            if row[0] is None:
                conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
                conn.executemany("INSERT OR IGNORE INTO meta (key, value) VALUES (?, 0)", [("revision",), ("floor",)])
            elif row[0] > SCHEMA_VERSION:
                raise StoreUnavailable(f"{self.path}: schema version {row[0]} is newer than this Gantt "
                                       f"({SCHEMA_VERSION}); upgrade Gantt")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self._head = self._read_head(conn)
        self._floor_hint = int(conn.execute("SELECT value FROM meta WHERE key='floor'").fetchone()[0])
        self._local.conn = conn

    @staticmethod
    def _align_parts(conn: sqlite3.Connection) -> None:
        """Rebuild an ``allocation_parts`` made as (consumer, host, node) with its columns in key order (see
        _SCHEMA), inside the schema transaction. The same rows and key, so a Gantt of either layout reads the
        other's file (every statement names its columns): no schema version, no downgrade barrier."""
        columns = [row[1] for row in conn.execute("PRAGMA table_info(allocation_parts)")]
        if columns == ["host", "node", "consumer"]:
            return
        conn.execute("CREATE TEMP TABLE parts_old AS SELECT host, node, consumer FROM allocation_parts")
        conn.execute("DROP TABLE allocation_parts")
        conn.execute("CREATE TABLE allocation_parts (host TEXT NOT NULL, node TEXT NOT NULL, consumer TEXT NOT NULL, "
                     "PRIMARY KEY (host, node, consumer)) WITHOUT ROWID")
        conn.execute("INSERT INTO allocation_parts (host, node, consumer) SELECT host, node, consumer FROM "
                     "temp.parts_old")
        conn.execute("DROP TABLE temp.parts_old")
        log.info("sqlite store: allocation_parts rebuilt with its columns in key order (%s)", columns)

    # ---------------------------------------------------------------------------------- the files themselves

    @property  # type: ignore[override]
    def last_write_error(self) -> WriteFailure | None:
        """The last write the store could not make; a store whose files were deleted or replaced says so here for
        as long as it is open (/health then answers 503), writes or not. Read per host report (``Replica.heartbeat``):
        the files are looked at LOOK_INTERVAL apart at most here; a commit looks every time."""
        if self._lost is None:
            now = time.monotonic()
            if now >= self._next_look:
                self._next_look = now + LOOK_INTERVAL
                self.lost()
        return self._lost or self._last_write_error

    @last_write_error.setter
    def last_write_error(self, value: WriteFailure | None) -> None:
        self._last_write_error = value

    def lost(self) -> WriteFailure | None:
        """Whether the database file or its WAL is no longer the one this store opened (deleted, or replaced by
        another file); once lost, always lost: nothing written since is where a restart will look."""
        if self._lost is None:
            identity = self._identity
            for name, known in identity.items():
                now = _identity(name)
                if known is None:  # not there when the store opened (no WAL yet): the first one seen is ours
                    identity[name] = now
                    continue
                if now != known:
                    why = "deleted" if now is None else "replaced by another file"
                    self._lost = WriteFailure(time.time(), f"{name} was {why} while the store was open: writes are "
                                              "refused, since none would be found at the next start; restore the "
                                              "file, or restart on a new store")
                    log.error("sqlite store: %s", self._lost.message)
                    break
        return self._lost

    def _refuse_if_lost(self) -> None:
        lost = self.lost()
        if lost is not None:
            raise StoreUnavailable(lost.message)

    def _begin_immediate(self, conn: sqlite3.Connection) -> None:
        """Take the write lock, sleeping in short random steps while another process holds it."""
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
        self.lock_waits += 1
        deadline = time.monotonic() + self.busy_timeout
        while True:
            time.sleep(random.uniform(0.0002, 0.001))
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > deadline:
                    raise StoreUnavailable(f"{self.path}: cannot take the write lock: {exc}") from exc

    def _read_head(self, conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT value FROM meta WHERE key='revision'").fetchone()
        if row is None:
            raise StoreUnavailable(f"{self.path}: the meta row 'revision' is missing (a damaged store)")
        return int(row[0])

    def close(self) -> None:
        with self._queue_cond:
            if self._closed:
                return
            self._closed = True
            self._queue_cond.notify_all()
        with self._head_cond:  # feed readers waiting for a revision return now (changes: empty once closed)
            self._head_cond.notify_all()
        if self._writer is not None:
            self._writer.join(timeout=30)
        self._stop_checkpoints.set()  # after the writer's last group: the checkpointer copies it too
        if self._checkpointer is not None:
            self._checkpointer.join(timeout=30)
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
                revision = self._read_head(conn)
                skipped: list[str] = []
                hosts = _rows(conn, "SELECT host || '/' || node, data FROM hosts ORDER BY rowid", _DEC_HOST,
                              "host", skipped)
                aggregates = _rows(conn, "SELECT id, data FROM aggregates ORDER BY rowid", _DEC_AGG, "aggregate",
                                   skipped)
                allocations = _rows(conn, "SELECT consumer, data FROM allocations ORDER BY rowid", _DEC_ALLOC,
                                    "allocation", skipped)
                instances = _rows(conn, "SELECT host, data FROM instances ORDER BY rowid", _DEC_INST, "instances",
                                  skipped)
                records = _rows(conn, "SELECT kind || '/' || name, data FROM records ORDER BY rowid", _DEC_RECORD,
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
            return self._read_head(conn)

    def barrier(self) -> int:
        return self.head()

    def shared_head(self) -> int | None:
        try:
            return self.head()
        except sqlite3.Error as exc:  # read before every request: a 503 naming the file, not a 500
            raise StoreUnavailable(f"{self.path}: cannot read the head revision: {exc}") from None

    def changes(self, since: int, timeout: float = 1.0, *, limit: int = 20_000) -> list[Change]:
        """Every change after ``since`` (up to about ``limit``, always whole revisions), waiting up to ``timeout``."""
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            # Our own commits first: when this object wrote everything after `since`, not even the head is read.
            local = self._head
            if local > since:
                cached = self._cached(since, local, limit)
                if cached is not None:
                    return cached
            with self._reader() as conn:
                head = self._read_head(conn)
            if head > since:
                cached = self._cached(since, head, limit)
                if cached is None and head <= self._committing:
                    # Our own writer's group, committed and about to be kept in memory: wait for that rather than
                    # read and decode it back from the file (five statements; it happened to ~8 % of catch-ups).
                    with self._head_cond:
                        self._publish_waiters += 1
                        try:
                            self._head_cond.wait_for(lambda h=head: self._head >= h or self._committing < h, 0.05)
                        finally:
                            self._publish_waiters -= 1
                    cached = self._cached(since, head, limit)
                if cached is not None:
                    return cached
                with self._reader() as conn:
                    return self._read_changes(conn, since, limit)
            # since >= head >= floor here, so nothing asked for can have been compacted away
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._closed:
                return []
            with self._head_cond:
                if self._head <= since:
                    self._head_cond.wait(min(self.poll_interval, remaining))

    def _cached(self, since: int, head: int, limit: int) -> list[Change] | None:
        """Revisions ``since+1 .. head`` from memory if this object committed every one of them (and the feed,
        which keeps at least as many revisions as the cache, still has them)."""
        out: list[Change] = []
        with self._head_cond:
            if head - since > len(self._recent):
                return None
            for revision in range(since + 1, head + 1):
                changes = self._recent.get(revision)
                if changes is None:
                    return None
                if out and len(out) + len(changes) > limit:
                    break  # whole revisions only, as from the file
                out.extend(changes)
        return out

    def _read_changes(self, conn: sqlite3.Connection, since: int, limit: int) -> list[Change]:
        # The common case in one statement, the floor a column of it (one read transaction, so the rows and the
        # floor agree): an explicit BEGIN, a read of the floor and a COMMIT were three more statements per read,
        # each a GIL hand-over, on every catch-up with another process's revisions (the feed's, and a write's on
        # the event loop).
        rows = conn.execute("SELECT (SELECT value FROM meta WHERE key='floor'), revision, seq, payload FROM changes "
                            "WHERE revision > ? ORDER BY revision, seq LIMIT ?", (since, limit + 1)).fetchall()
        if rows and len(rows) <= limit:
            if since < rows[0][0]:
                raise Compacted(f"revision {since} is compacted; the feed keeps revisions after {rows[0][0]}")
            return self._decoded(rows)
        return self._read_changes_cut(conn, since, limit)

    def _read_changes_cut(self, conn: sqlite3.Connection, since: int, limit: int) -> list[Change]:
        """``_read_changes`` when no row came back (the floor then decides) or more than ``limit`` did."""
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
        return self._decoded(rows)

    def _decoded(self, rows: list[Any]) -> list[Change]:
        """Rows of (floor or NULL, revision, seq, payload) as changes."""
        recent = self._recent
        out: list[Change] = []
        for _, revision, seq, payload in rows:
            mine = recent.get(revision)  # our own revisions between other processes' ones: no decoding
            out.append(mine[seq] if mine is not None and seq < len(mine) else _DEC_CHANGE.decode(payload))
        return out

    # -------------------------------------------------------------------------------------------- writing

    queued_commits = True
    checks_freshness = True

    def commit(self, batch: Batch) -> CommitResult:
        pending = self._enqueue(_Pending(batch))
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
        self._enqueue(_Pending(batch, future))
        return future

    def commit_on_loop(self, batch: Batch, loop: asyncio.AbstractEventLoop) -> asyncio.Future[CommitResult]:
        """``commit_soon`` with a future of ``loop``: the writer completes every such future of a group with one
        wake-up of the loop. (``asyncio.wrap_future`` on commit_soon's future costs a thread-safe future with its
        condition, a chained callback and a wake-up per batch.)"""
        future: asyncio.Future[CommitResult] = loop.create_future()
        self._enqueue(_Pending(batch, future, loop))
        return future

    def _enqueue(self, pending: _Pending) -> _Pending:
        with self._queue_cond:
            if self._closed:
                raise StoreUnavailable("the store is closed")
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_loop, name="gantt-sqlite-writer", daemon=True)
                self._writer.start()
                self._checkpointer = threading.Thread(target=self._checkpoint_loop, name="gantt-sqlite-checkpoint",
                                                      daemon=True)
                self._checkpointer.start()
            self._queue.append(pending)
            self._queue_cond.notify()
        return pending

    def _write_loop(self) -> None:
        # In use for the writer's whole life: a close() that gave up waiting for it leaves it to the writer.
        conn = self._writer_conn = self._connect(in_use=True)
        # No checkpoint inside a commit: the one that crossed SQLite's 1,000 WAL pages copied them to the file and
        # synced it while holding the write lock, some eight times a second per worker under load, and every
        # writer waiting for the lock (the other worker's too) waited for it. The checkpointer does it apart.
        conn.execute("PRAGMA wal_autocheckpoint=0")
        try:
            self._write_groups(conn)
        finally:
            self._give_back(conn)

    def _checkpoint_loop(self) -> None:
        """Copy the WAL's committed pages into the database file every ``checkpoint_interval`` while this store
        writes, and once more when it closes. PASSIVE: writers go on meanwhile, readers keep their snapshots (the
        pages they still read stay in the WAL until a later checkpoint), and the interpreter lock is released
        for the copy. A page written many times in an interval is copied once."""
        conn = self._connect(in_use=True)
        done = 0  # the writer's groups up to the last checkpoint
        try:
            while True:
                stopping = self._stop_checkpoints.wait(self.checkpoint_interval)
                groups = self.groups
                if groups != done:
                    done = groups
                    try:
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                        self.checkpoints += 1
                    except sqlite3.Error as exc:  # tried again at the next interval
                        log.warning("sqlite store: checkpoint of %s failed: %s", self.path, exc)
                if stopping:
                    return
        finally:
            self._give_back(conn)

    def _write_groups(self, conn: sqlite3.Connection) -> None:
        # The writer waits for the lock in its own fine-grained loop (_begin_immediate). Nothing else it runs can
        # be busy in WAL mode once it holds the write lock (it runs no checkpoint: _checkpoint_loop does).
        conn.execute("PRAGMA busy_timeout=0")
        while True:
            with self._queue_cond:
                while not self._queue and not self._closed:
                    self._queue_cond.wait()
                if not self._queue and self._closed:
                    return
            cpu = time.thread_time()
            group: list[_Pending] = []
            try:
                # The write lock first, the group after: batches queued while another process holds the lock
                # (its statements and its fsync) join this transaction instead of waiting for the next lock and
                # fsync of their own. Two workers take turns on the lock, so most groups begin with a wait.
                self._refuse_if_lost()
                self._begin_immediate(conn)
                with self._queue_cond:
                    group = self._queue[: self.max_group]
                    del self._queue[: self.max_group]
                self._commit_group(conn, group, begun=True)
            except BaseException as exc:  # the whole transaction failed: every caller in it gets the error
                if not group:  # the lock was never had: the batches waiting for it fail with it
                    with self._queue_cond:
                        group = self._queue[: self.max_group]
                        del self._queue[: self.max_group]
                error: BaseException = exc
                if isinstance(exc, sqlite3.Error):
                    error = StoreUnavailable(f"{self.path}: {exc}")
                    log.error("sqlite store: group commit of %d batch(es) failed: %s", len(group), exc)
                self._note_write(error)
                for pending in group:
                    if not pending.finished:
                        pending.finish(None, error)
                _wake_loops(group)
            self.writer_cpu_seconds += time.thread_time() - cpu

    def _commit_group(self, conn: sqlite3.Connection, group: list[_Pending], *, savepoints: bool = False,
                      begun: bool = False) -> None:
        """Write ``group`` in one transaction. A refused batch writes nothing (the planner decides before the
        first write), so no savepoint is needed for it: each SAVEPOINT and RELEASE was a statement per batch,
        and every statement hands the GIL over. Only a batch that fails part way through its writes (a full disk,
        an I/O error) needs one: then the whole transaction is rolled back and the group written again with a
        savepoint around each batch, so that only that batch fails. ``begun``: the caller holds the write lock
        (BEGIN IMMEDIATE) already."""
        if not begun:
            self._begin_immediate(conn)
        outcomes: list[tuple[_Pending, CommitResult | None, BaseException | None]] = []
        try:
            revision = self._read_head(conn)
            if revision != self._writer_head:  # under the write lock: every other commit is before this read
                self._foreign = revision
            start = revision
            failed: StoreUnavailable | None = None  # a batch the store could not write, though others were
            later = None if savepoints else _Later()
            # One cursor for the group's statements (conn.execute makes one per statement); with savepoints, the
            # connection's as before, so that no statement of it is pending at a ROLLBACK TO.
            cur: Any = conn if savepoints else conn.cursor()
            for pending in group:
                if savepoints:
                    conn.execute("SAVEPOINT b")
                try:
                    as_of = pending.batch.fresh_as_of
                    if as_of is not None and self._foreign > as_of:
                        raise ReplicaBehind(f"another process wrote revision {self._foreign}, after {as_of}")
                    reads = _Reads(cur, revision, later, records=bool(pending.batch.generations))
                    p = planner.plan(pending.batch, reads)
                    try:
                        changes, quiet = _write(cur, p, revision + 1, later)
                    except Exception:
                        if not savepoints:
                            raise _Torn() from None
                        raise
                except _Torn:
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
                        failed = StoreUnavailable(f"{self.path}: {exc}")
                        log.error("sqlite store: a batch could not be written: %s", exc)
                        exc = failed
                    outcomes.append((pending, None, exc))
                    continue
                if savepoints:
                    conn.execute("RELEASE b")
                if changes:
                    revision += 1
                outcomes.append((pending, CommitResult(revision=revision, changes=changes, quiet=quiet), None))
            if later is not None:
                try:
                    later.write(cur)
                except Exception:
                    raise _Torn() from None
                finally:
                    cur.close()  # no statement of it pending at COMMIT
            if revision != start:
                conn.execute("UPDATE meta SET value=? WHERE key='revision'", (revision,))
                # amortized: delete a slice of old feed every retention/10 revisions (at most 1000). The floor is
                # remembered, not read per group: a stale (lower) one only makes a compaction come early.
                if revision - self._floor_hint >= self.retention + max(1, min(self.retention // 10, 1000)):
                    self._compact(conn, revision - self.retention)
                    self._floor_hint = revision - self.retention
            synced = time.perf_counter()
            self._committing = revision  # from here readers may find it in the file before it is in _recent
            conn.execute("COMMIT")  # the fsync: every batch of the group is durable from here
            self.commit_seconds += time.perf_counter() - synced
            self._refuse_if_lost()  # ... unless it went into files deleted meanwhile: then it is not acknowledged
            self._writer_head = revision
        except _Torn:
            self._committing = self._head
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._commit_group(conn, group, savepoints=True)
            return
        except BaseException:
            with self._head_cond:
                self._committing = self._head
                self._head_cond.notify_all()
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if failed is not None or revision != start:  # a group of refusals only proves nothing either way
            self._note_write(failed)
        self.groups += 1
        self.batches += len(group)
        with self._head_cond:
            if revision > self._head:
                self._head = revision
            for _, result, _ in outcomes:
                if result is not None and result.changes:
                    self._recent[result.revision] = result.changes
                    weight = sum(1 + (len(c.aggregate.hosts) if c.aggregate is not None else 0)
                                 for c in result.changes)
                    self._recent_weight[result.revision] = weight
                    self._recent_total += weight
            # The total is kept, not summed: summing 8,192 weights per group was a tenth of the writer's time.
            while self._recent and (len(self._recent) > self._recent_limit
                                    or self._recent_total > self._recent_weight_limit):
                oldest, _ = self._recent.popitem(last=False)  # inserted in revision order: the first is the oldest
                self._recent_total -= self._recent_weight.pop(oldest, 0)
            # A group whose every batch was committed from an event loop is applied there (Replica.written, on
            # the loop, as it answers): the feed's follower need not wake for it; it finds the group at its next
            # poll if the loop has not applied it by then. Woken per group, it raced the loop for the table's
            # lock, and the loop's writes that found it taken went on handler threads.
            if self._publish_waiters or any(pending.loop is None for pending in group):
                self._head_cond.notify_all()
        for pending, result, error in outcomes:
            pending.finish(result, error)
        _wake_loops(group)

    @staticmethod
    def _compact(conn: sqlite3.Connection, floor: int) -> None:
        conn.execute("DELETE FROM changes WHERE revision <= ?", (floor,))
        conn.execute("UPDATE meta SET value=? WHERE key='floor' AND value < ?", (floor, floor))

    def compact(self, keep: int | None = None) -> int:
        """Delete the feed older than the last ``keep`` (default ``retention``) revisions now; returns the floor."""
        keep = self.retention if keep is None else keep
        with self._reader() as conn:
            self._begin_immediate(conn)
            try:
                head = self._read_head(conn)
                floor = max(head - keep, 0)
                self._compact(conn, floor)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        with self._head_cond:
            for revision in [r for r in self._recent if r <= floor]:
                del self._recent[revision]
                self._recent_total -= self._recent_weight.pop(revision, 0)
        return floor


# ------------------------------------------------------------------------------------ one batch, in SQL


def _identity(path: str) -> tuple[int, int] | None:
    """A file's identity (device and inode), None if there is none at ``path``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


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


class _Torn(Exception):
    """A batch failed part way through its writes in a group written without savepoints."""


class _Later:
    """The rows of a group that no batch of it reads back (its feed rows) or that the planner reads through this
    overlay (the nodes' usage revisions), written once for the whole group: one statement each per group instead
    of one each per batch."""

    __slots__ = ("changes", "revisions")

    def __init__(self) -> None:
        self.revisions: dict[NodeKey, int] = {}
        self.changes: list[tuple[int, int, str, bytes]] = []

    def write(self, conn: sqlite3.Connection | sqlite3.Cursor) -> None:
        if self.revisions:
            conn.executemany("INSERT INTO node_revisions (host, node, revision) VALUES (?, ?, ?) ON CONFLICT "
                             "(host, node) DO UPDATE SET revision=excluded.revision",
                             [(h, n, rev) for (h, n), rev in self.revisions.items()])
        if self.changes:
            conn.executemany("INSERT INTO changes (revision, seq, kind, payload) VALUES (?, ?, ?, ?)", self.changes)


def _write(conn: sqlite3.Connection | sqlite3.Cursor, p: planner.Plan, rev: int,
           later: _Later | None = None) -> tuple[list[Change], int]:
    """Write what the planner decided (``planner.plan``, which raises StoreConflict, ConsumerHeld or NotFound
    before anything is written) as revision ``rev``; returns its changes and how many of its touches were too
    fresh to write (``CommitResult.quiet``). With ``later``, the usage revisions and feed rows are left to it."""
    if not p.changes:
        return [], p.quiet
    ex = conn.execute

    def many(sql: str, rows: list[tuple[Any, ...]]) -> None:
        # Each statement, even one with no rows, releases and takes back the GIL: with handler threads waiting
        # for it, that is a thread switch. Most batches leave most of these lists empty.
        if rows:
            conn.executemany(sql, rows)

    many("INSERT INTO liveness (host, node, at) VALUES (?, ?, ?) ON CONFLICT (host, node) DO UPDATE SET at=excluded.at",
         [(*key, at) for key, at in p.touches.items()])
    for key, report in p.hosts.items():
        if report is None:
            ex("DELETE FROM hosts WHERE host=? AND node=?", key)
        else:
            ex("INSERT INTO hosts (host, node, data) VALUES (?, ?, ?) "
               "ON CONFLICT (host, node) DO UPDATE SET data=excluded.data", (*key, _ENC.encode(report)))
    # a node's touch goes with it, and is older than a record written now (store.base: lifted)
    many("DELETE FROM liveness WHERE host=? AND node=?", list(p.hosts))
    for aggregate_id, aggregate in p.aggregates.items():
        if aggregate is None:
            ex("DELETE FROM aggregates WHERE id=?", (aggregate_id,))
        else:
            ex("INSERT INTO aggregates (id, data) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET data=excluded.data",
               (aggregate_id, _ENC.encode(aggregate)))
    for consumer, allocation in p.allocations.items():
        if consumer in p.unindexed:
            ex("DELETE FROM allocation_parts WHERE consumer=?", (consumer,))
        if allocation is None:
            ex("DELETE FROM allocations WHERE consumer=?", (consumer,))
        else:
            ex("INSERT INTO allocations (consumer, host, node, data) VALUES (?, ?, ?, ?) ON CONFLICT (consumer) "
               "DO UPDATE SET host=excluded.host, node=excluded.node, data=excluded.data",
               (consumer, allocation.host, allocation.nodename, _ENC.encode(allocation)))
            # The first part is the row's own (host, node); the index of the further ones, for allocations_on.
            many("INSERT INTO allocation_parts (consumer, host, node) VALUES (?, ?, ?)",
                 [(consumer, part.host, part.nodename) for part in allocation.extra])
    many("INSERT INTO instances (host, data) VALUES (?, ?) ON CONFLICT (host) DO UPDATE SET data=excluded.data",
         [(host, _ENC.encode(info)) for host, info in p.instances.items()])
    for (kind, name), record in p.records.items():
        if record is None:
            ex("DELETE FROM records WHERE kind=? AND name=?", (kind, name))
        else:
            ex("INSERT INTO records (kind, name, data) VALUES (?, ?, ?) "
               "ON CONFLICT (kind, name) DO UPDATE SET data=excluded.data", (kind, name, _ENC.encode(record)))
    changes = [msgspec.structs.replace(c, revision=rev) for c in p.changes]
    rows = [(rev, seq, c.kind, _ENC.encode(c)) for seq, c in enumerate(changes)]
    if later is not None:
        later.revisions.update(dict.fromkeys(p.bumped, rev))
        later.changes += rows
        return changes, p.quiet
    many("INSERT INTO node_revisions (host, node, revision) VALUES (?, ?, ?) "
         "ON CONFLICT (host, node) DO UPDATE SET revision=excluded.revision", [(h, n, rev) for h, n in p.bumped])
    many("INSERT INTO changes (revision, seq, kind, payload) VALUES (?, ?, ?, ?)", rows)
    return changes, p.quiet


class _Reads:
    """The planner's reads, inside the writer's open transaction (so they and the writes are one atomic step)."""

    def __init__(self, conn: sqlite3.Connection | sqlite3.Cursor, head: int, later: _Later | None = None, *,
                 records: bool = True) -> None:
        self._ex = conn.execute
        self._head = head
        self._nodes: dict[NodeKey, tuple[int, bytes | None]] = {}
        # Whether the batch reads nodes' records too (its provider generations): else an ``expect`` (every claim)
        # reads the usage revision alone. Reading the record with it walked the hosts table and its index for a
        # blob nobody used: most of the pages a claim read, and with two processes writing, SQLite's page cache
        # starts each group empty, so every one of them was a read from the file.
        self._records = records
        # A release asks for its allocation twice (the check, then the plan): one statement and one decode.
        self._allocations: dict[str, Allocation | None] = {}
        self._later = later  # revisions written earlier in the group, not yet in the table

    def head(self) -> int:
        return self._head

    def expect_holds(self, expect: Expect) -> bool:
        return self._node((expect.host, expect.node))[0] == expect.revision

    def _node(self, key: NodeKey) -> tuple[int, bytes | None]:
        """A node's usage revision and stored record, in one statement (each is a GIL hand-over): a provider write
        asks both of the same node, its ``expect`` and its generation. Kept for the batch being planned: nothing
        is written until the planner is done."""
        known = self._nodes.get(key)
        if known is None:
            if self._records:
                row = self._ex("SELECT (SELECT revision FROM node_revisions WHERE host=?1 AND node=?2), "
                               "(SELECT data FROM hosts WHERE host=?1 AND node=?2)", key).fetchone()
            else:
                row = self._ex("SELECT (SELECT revision FROM node_revisions WHERE host=?1 AND node=?2), NULL",
                               key).fetchone()
            revision = self._later.revisions.get(key) if self._later is not None else None
            known = self._nodes[key] = (revision if revision is not None else row[0] or 0, row[1])
        return known

    def liveness(self, keys: list[NodeKey]) -> dict[NodeKey, tuple[int, float | None]]:
        # One statement per LIVENESS_KEYS nodes: a statement per node was a fifth of what the writer spent per
        # repeated report, and SQLite takes at most 32,766 parameters per statement.
        found: dict[NodeKey, tuple[int, float | None]] = {}
        for start in range(0, len(keys), LIVENESS_KEYS):
            part = keys[start:start + LIVENESS_KEYS]
            rows = self._ex("WITH k (host, node) AS (VALUES " + ", ".join(["(?, ?)"] * len(part)) + ") "
                            "SELECT k.host, k.node, r.revision, l.at FROM k "
                            "LEFT JOIN node_revisions r ON r.host = k.host AND r.node = k.node "
                            "LEFT JOIN liveness l ON l.host = k.host AND l.node = k.node",
                            [name for key in part for name in key])
            for host, node, revision, at in rows:
                found[(host, node)] = (revision or 0, at)
        if self._later is not None:
            for key in keys:
                revision = self._later.revisions.get(key)
                if revision is not None:
                    found[key] = (revision, found[key][1])
        return found

    def host(self, key: NodeKey) -> HostReport | None:
        row = self._ex("SELECT h.data, l.at FROM hosts h LEFT JOIN liveness l ON l.host = h.host AND l.node = h.node "
                       "WHERE h.host=? AND h.node=?", key).fetchone()
        return lifted(_DEC_HOST.decode(row[0]), row[1]) if row else None

    def generation(self, key: NodeKey) -> int | None:
        if self._records:
            data = self._node(key)[1]
        else:
            row = self._ex("SELECT data FROM hosts WHERE host=? AND node=?", key).fetchone()
            data = row[0] if row else None
        if data is None:
            return None
        provider = _DEC_GENERATION.decode(data).provider
        return provider.generation if provider is not None else 0

    def nodes_of(self, host: str, node: str | None) -> list[NodeKey]:
        if node is None:
            return [(h, n) for h, n in self._ex("SELECT host, node FROM hosts WHERE host=? ORDER BY rowid", (host,))]
        found = self._ex("SELECT 1 FROM hosts WHERE host=? AND node=?", (host, node)).fetchone()
        return [(host, node)] if found else []

    def has_aggregate(self, aggregate_id: str) -> bool:
        return self._ex("SELECT 1 FROM aggregates WHERE id=?", (aggregate_id,)).fetchone() is not None

    def aggregate(self, aggregate_id: str) -> Aggregate | None:
        row = self._ex("SELECT data FROM aggregates WHERE id=?", (aggregate_id,)).fetchone()
        return _DEC_AGG.decode(row[0]) if row else None

    def allocation(self, consumer: str) -> Allocation | None:
        if consumer in self._allocations:
            return self._allocations[consumer]
        row = self._ex("SELECT data FROM allocations WHERE consumer=?", (consumer,)).fetchone()
        found = self._allocations[consumer] = _DEC_ALLOC.decode(row[0]) if row else None
        return found

    def unbooked(self, consumer: str) -> bool:
        return self._ex("SELECT 1 FROM allocations WHERE consumer=?", (consumer,)).fetchone() is None

    def allocations_on(self, nodes: set[NodeKey]) -> list[Allocation]:
        found: dict[str, bytes] = {}
        for host, node in nodes:
            found.update(self._ex("SELECT consumer, data FROM allocations WHERE host=? AND node=?", (host, node)))
            found.update(self._ex("SELECT a.consumer, a.data FROM allocation_parts p JOIN allocations a "
                                  "ON a.consumer = p.consumer WHERE p.host=? AND p.node=?", (host, node)))
        return [_DEC_ALLOC.decode(data) for data in found.values()]

    def record(self, key: tuple[str, str]) -> Record | None:
        row = self._ex("SELECT data FROM records WHERE kind=? AND name=?", key).fetchone()
        return _DEC_RECORD.decode(row[0]) if row else None
