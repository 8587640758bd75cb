"""The SQLite file itself: what a store URL names, the checks before a file is opened, the schema and its
rebuilds, the connections that address one namespace's tables, the write lock shared by every process, whether
the file is still the one opened, and how rows are encoded.

Schema: see ``SCHEMA``; ``schema_version`` holds its version so a later release can migrate.
"""

from __future__ import annotations

import logging
import os
import random
import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from gantt.model import (
    Aggregate,
    Allocation,
    HostReport,
    InstanceInfo,
    Record,
    StoreUnavailable,
    WriteFailure,
    prepare_types,
)
from gantt.model.namespaces import DEFAULT, sqlite_table
from gantt.store.base import Change

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
# PRAGMA application_id of a Gantt store ("GNTT"): a file that carries another id is another program's
# database, and Gantt neither adds its tables to it nor switches its journal mode.
APPLICATION_ID = 0x474E5454
_OUR_TABLES = {"schema_version", "meta", "hosts", "aggregates", "allocations", "instances", "node_revisions",
               "changes"}

SCHEMA = """
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
-- (consumer, host, node) are rebuilt so at their first writable open (``align_parts``).
CREATE TABLE IF NOT EXISTS allocation_parts (host TEXT NOT NULL, node TEXT NOT NULL, consumer TEXT NOT NULL,
                                             PRIMARY KEY (host, node, consumer)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS instances (host TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS records (kind TEXT NOT NULL, name TEXT NOT NULL, data BLOB NOT NULL,
                                    PRIMARY KEY (kind, name));
CREATE TABLE IF NOT EXISTS changes (revision INTEGER NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL,
                                    payload BLOB NOT NULL, PRIMARY KEY (revision, seq)) WITHOUT ROWID;
"""

ENC = msgspec.msgpack.Encoder()


class _ProviderGeneration(msgspec.Struct):
    generation: int = 0


class GenerationOnly(msgspec.Struct):
    """A stored HostReport read for its provider generation alone: the other fields are skipped, not decoded."""

    provider: _ProviderGeneration | None = None


prepare_types(globals())  # before any thread decodes (see model.prepare_types)
DEC_HOST = msgspec.msgpack.Decoder(HostReport)
DEC_GENERATION = msgspec.msgpack.Decoder(GenerationOnly)
DEC_AGG = msgspec.msgpack.Decoder(Aggregate)
DEC_ALLOC = msgspec.msgpack.Decoder(Allocation)
DEC_INST = msgspec.msgpack.Decoder(InstanceInfo)
DEC_CHANGE = msgspec.msgpack.Decoder(Change)
DEC_RECORD = msgspec.msgpack.Decoder(Record)

# Every table and index name of the schema: a named namespace's connections rename them (``Namespaced``).
_NAMES = re.compile(r"\b(schema_version|meta|hosts|liveness|node_revisions|aggregates|allocations_node|allocations|"
                    r"allocation_parts|instances|records|changes)\b")


class Namespaced(sqlite3.Connection):
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

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return super().execute(self._sql(sql), parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        return super().executemany(self._sql(sql), parameters)

    def cursor(self, factory: Any = None) -> sqlite3.Cursor:  # type: ignore[override]  # narrower than sqlite3's
        # A cursor's statements are the namespace's too (the writer runs a group's statements on one cursor).
        return super().cursor(factory or NamespacedCursor)


class NamespacedCursor(sqlite3.Cursor):
    connection: Namespaced

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:  # type: ignore[override]  # narrower than sqlite3's
        return super().execute(self.connection._sql(sql), parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:  # type: ignore[override]  # narrower than sqlite3's
        return super().executemany(self.connection._sql(sql), parameters)


def connection_class(namespace: str) -> type[sqlite3.Connection]:
    if namespace == DEFAULT:
        return sqlite3.Connection
    return type(f"_Namespaced_{namespace}", (Namespaced,), {"namespace": namespace})


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


def check_file(path: Path, namespace: str, *, writable: bool, busy_timeout: float) -> None:
    """Refuse, before writing anything, a file that is not a Gantt store, is damaged, or (for a writer: the
    service) cannot be written: SQLite would open it, serve reads, and fail on the first write or checkpoint."""
    if not path.exists() or path.stat().st_size == 0:
        return  # a new store
    # access(2), not open(): closing any descriptor of the file would drop every POSIX lock this process
    # holds on it, among them those of another namespace's store already open on the same file (SQLite's
    # locking then breaks: another process may checkpoint or reset the WAL under our readers).
    if writable and not os.access(path, os.W_OK):
        raise StoreUnavailable(f"{path}: the store cannot be written (permission denied or a read-only "
                               "file system); a read-only copy can be audited, not served")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=busy_timeout,
                               factory=connection_class(namespace))
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"{path}: cannot open: {exc}") from None
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if app_id not in (0, APPLICATION_ID) or (app_id == 0 and tables and not tables >= _OUR_TABLES):
            raise StoreUnavailable(f"{path}: not a Gantt store (another application's database: tables "
                                   f"{', '.join(sorted(tables)[:5]) or 'none'}); left untouched")
        _check_integrity(conn, path)
        # a named namespace's tables are made when it is first opened; until then it has none to check
        mine = sqlite_table(namespace, "meta").strip('"') in tables
        if tables and mine and conn.execute("SELECT value FROM meta WHERE key='revision'").fetchone() is None:
            raise StoreUnavailable(f"{path}: the meta row 'revision' is missing (a damaged store)")
    except sqlite3.DatabaseError as exc:
        raise StoreUnavailable(f"{path}: not a SQLite database or damaged: {exc}") from None
    finally:
        conn.close()


def _check_integrity(conn: sqlite3.Connection, path: Path) -> None:
    problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
    if problems != ["ok"]:
        # integrity_check is the authority (quick_check a faster subset of it): SQLite 3.40.0-3.41.0's
        # quick_check flags good rows of a WITHOUT ROWID table whose key order is not its column order,
        # as this store's allocation_parts had before align_parts. Only a complaint pays for the full
        # check (about twice quick_check's time).
        problems = [row[0] for row in conn.execute("PRAGMA integrity_check")]
        if problems != ["ok"]:
            raise StoreUnavailable(f"{path}: the file is damaged: {problems[0]}")
        log.info("%s: quick_check complained, integrity_check says ok (a known SQLite %s false positive)",
                 path, sqlite3.sqlite_version)


def create_schema(conn: sqlite3.Connection, path: str, *, writable: bool, busy_timeout: float,
                  on_wait: Callable[[], None] | None = None) -> None:
    """Switch the file to WAL and make (or check) this namespace's tables, under the write lock."""
    # journal_mode is persistent in the file; switching needs a moment without other writers
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
    if str(mode).lower() != "wal":
        raise StoreUnavailable(f"{path}: cannot switch to WAL journal (got {mode!r})")
    begin_immediate(conn, path, busy_timeout, on_wait)
    try:
        # statement by statement: executescript would COMMIT the write lock away first
        for statement in SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        if writable:
            align_parts(conn)
        row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
        if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
            conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
        if row[0] is None:
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            conn.executemany("INSERT OR IGNORE INTO meta (key, value) VALUES (?, 0)", [("revision",), ("floor",)])
        elif row[0] > SCHEMA_VERSION:
            raise StoreUnavailable(f"{path}: schema version {row[0]} is newer than this Gantt "
                                   f"({SCHEMA_VERSION}); upgrade Gantt")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def align_parts(conn: sqlite3.Connection) -> None:
    """Rebuild an ``allocation_parts`` made as (consumer, host, node) with its columns in key order (see
    SCHEMA), inside the schema transaction. The same rows and key, so a Gantt of either layout reads the
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


def begin_immediate(conn: sqlite3.Connection, path: str, busy_timeout: float,
                    on_wait: Callable[[], None] | None = None) -> None:
    """Take the write lock, sleeping in short random steps while another process holds it (finer grained than
    SQLite's own busy handler, which sleeps 1, 2, 5, 10 … ms). ``on_wait``: called once, as the wait begins."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        return
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc) and "busy" not in str(exc):
            raise
    if on_wait is not None:
        on_wait()
    deadline = time.monotonic() + busy_timeout
    while True:
        time.sleep(random.uniform(0.0002, 0.001))
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > deadline:
                raise StoreUnavailable(f"{path}: cannot take the write lock: {exc}") from exc


def read_head(conn: sqlite3.Connection | sqlite3.Cursor, path: str) -> int:
    """The newest committed revision."""
    row = conn.execute("SELECT value FROM meta WHERE key='revision'").fetchone()
    if row is None:
        raise StoreUnavailable(f"{path}: the meta row 'revision' is missing (a damaged store)")
    return int(row[0])


def identity(path: str) -> tuple[int, int] | None:
    """A file's identity (device and inode), None if there is none at ``path``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


class Identity:
    """The files a store writes, by identity (st_dev, st_ino): deleted or replaced under a running server, SQLite
    goes on writing into the unlinked inodes, and every write acknowledged from then on is gone at the next
    start. Checked around each commit and by /health."""

    def __init__(self, path: str) -> None:
        main = os.path.abspath(path)
        self._known = {main: identity(main), main + "-wal": identity(main + "-wal")}
        self.found: WriteFailure | None = None  # once lost, always lost

    def lost(self) -> WriteFailure | None:
        """Whether the database file or its WAL is no longer the one this store opened (deleted, or replaced by
        another file); once lost, always lost: nothing written since is where a restart will look."""
        if self.found is None:
            known = self._known
            for name, was in known.items():
                now = identity(name)
                if was is None:  # not there when the store opened (no WAL yet): the first one seen is ours
                    known[name] = now
                    continue
                if now != was:
                    why = "deleted" if now is None else "replaced by another file"
                    self.found = WriteFailure(time.time(), f"{name} was {why} while the store was open: writes are "
                                              "refused, since none would be found at the next start; restore the "
                                              "file, or restart on a new store")
                    log.error("sqlite store: %s", self.found.message)
                    break
        return self.found
