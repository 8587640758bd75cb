"""A catch-up that knows a committed revision (``Store.changes(..., head=)``: the head a request has just read, a
write's own revision) reads the feed without reading the store's head again: under another process's writes every
read transaction finds the WAL moved, ~20-50 us of CPU each, and a placement took two head reads for one. The
changes are the same; a head that is not committed yet is read and waited for as before, never spun on."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from gantt.config import Config
from gantt.model import HostReport
from gantt.replication.replica import Replica
from gantt.service.app import create_app
from gantt.store import sqlite as sqlite_module
from gantt.store.base import Batch, Compacted
from gantt.store.sqlite import SQLiteStore
from tests.conftest import host_stats

FLAVOR = {"name": "m1.tiny", "vcpus": 1, "memory_mb": 16, "root_gb": 1}
CONFIG = Config.from_dict({"DEFAULT": {"service_down_time": 86400}, "gantt": {"seed": 3}})


def _counting_heads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every read of a store's head revision by a request or a caller (not a follower thread's polls), by the
    thread that made it."""
    reads: list[str] = []
    from gantt.store.sqlite_file import read_head  # what gantt.store.sqlite calls by this name

    def counted(conn: Any, path: str) -> int:
        name = threading.current_thread().name
        if name != Replica.FEED_THREAD:
            reads.append(name)
        return read_head(conn, path)

    monkeypatch.setattr(sqlite_module, "read_head", counted)
    return reads


def _report(i: int, vcpus: int = 8) -> Batch:
    return Batch(reports=[HostReport.of(f"h{i}", host_stats(vcpus=vcpus))])


def test_a_known_head_reads_the_same_changes_without_the_head(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path}/gantt.sqlite"
    ours, theirs = SQLiteStore(url), SQLiteStore(url)  # two processes' worth: theirs are not in our memory
    try:
        ours.commit(_report(0))
        since = ours.head()
        for i in range(1, 4):
            theirs.commit(_report(i))
        head = theirs.head()
        reads = _counting_heads(monkeypatch)
        plain = ours.changes(since, timeout=0)
        assert len(reads) == 1  # the head, then the rows
        known = ours.changes(since, timeout=0, head=head)
        assert len(reads) == 1  # no head read for the known one
        assert [(c.revision, c.kind, c.host) for c in known] == [(c.revision, c.kind, c.host) for c in plain]
        assert [c.revision for c in known] == list(range(since + 1, head + 1))
        # a known head below the real one: everything after since still comes (whole revisions, as read)
        assert [c.revision for c in ours.changes(since, timeout=0, head=since + 1)] == [c.revision for c in plain]
        assert len(reads) == 1

        # Our own commit after theirs (the follower woken by it): its revision is a head known without a read
        ours.commit(_report(9))
        mine = ours.head()
        assert len(reads) == 2
        after = ours.changes(since, timeout=0)
        assert len(reads) == 2
        assert [c.revision for c in after] == list(range(since + 1, mine + 1))
    finally:
        ours.close()
        theirs.close()


def test_the_changes_committed_by_now_in_one_read(tmp_path: Path) -> None:
    """``shared_changes``: what ``changes`` reads after a head read, in one statement; nothing when nothing moved;
    Compacted below the floor; None past the limit (the caller reads in parts)."""
    url = f"sqlite:///{tmp_path}/gantt.sqlite"
    ours, theirs = SQLiteStore(url), SQLiteStore(url)
    try:
        ours.commit(_report(0))
        since = ours.head()
        assert ours.shared_changes(since) == []
        for i in range(1, 4):
            theirs.commit(_report(i))
        ours.commit(_report(9))
        theirs.commit(_report(5))
        read = ours.shared_changes(since)
        assert read is not None
        assert [(c.revision, c.kind, c.host) for c in read] == \
            [(c.revision, c.kind, c.host) for c in ours.changes(since, timeout=0)]
        assert [c.revision for c in read] == list(range(since + 1, theirs.head() + 1))
        assert ours.shared_changes(since, limit=2) is None
        assert ours.shared_changes(theirs.head()) == []
        theirs.compact(keep=1)
        with pytest.raises(Compacted):
            ours.shared_changes(since)
    finally:
        ours.close()
        theirs.close()


def test_a_head_not_committed_yet_is_waited_for_not_spun_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SQLiteStore(f"sqlite:///{tmp_path}/gantt.sqlite", poll_interval=0.01)
    try:
        store.commit(_report(0))
        since = store.head()
        reads = _counting_heads(monkeypatch)
        started = time.monotonic()
        assert store.changes(since, timeout=0.3, head=since + 5) == []
        assert time.monotonic() - started >= 0.3
        assert 1 <= len(reads) <= 40  # polled every poll_interval, as without a head (a spin: thousands)
    finally:
        store.close()


def _ask(app: Any, method: str, path: str, **kwargs: Any) -> httpx.Response:
    async def run() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gantt") as http:
            return await http.request(method, path, **kwargs)

    return anyio.run(run)


def test_a_placement_after_another_workers_write_reads_the_head_once(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The request's catch-up (``Guard.stale``) reads the head, then the feed up to it with no second head read;
    and its own claim's answer still holds the other worker's write (read your writes across workers)."""
    url = f"sqlite:///{tmp_path}/gantt.sqlite"
    placing = Replica.open(url, CONFIG)
    serving = Replica.open(url, CONFIG, follow=False)  # behind until a request of its own catches it up
    try:
        placing.report_many([HostReport.of(f"h{i}", host_stats(vcpus=8)) for i in range(3)])
        consumer = str(uuid.uuid4())
        placing.select_destinations({"flavor": FLAVOR, "instance_uuids": [consumer]})
        placed_at = placing.revision
        reads = _counting_heads(monkeypatch)
        app = create_app(serving)
        answer = _ask(app, "POST", "/v1/select_destinations", json={"flavor": FLAVOR})
        assert answer.status_code == 200, answer.text
        assert serving.revision >= placed_at and serving.table.allocation(consumer) is not None
        assert len(reads) == 0  # before: two (Guard's, then the feed's own before its rows): one read of the feed
        # the release's write catches up past its own revision with no head read either
        mine = answer.json()["selections"][0][0]["consumer_uuid"]
        placing.select_destinations({"flavor": FLAVOR})  # another worker's write again: a gap before ours
        before = len(reads)
        released = _ask(app, "DELETE", f"/v1/allocations/{mine}")
        assert released.status_code == 204, released.text
        assert len(reads) == before
        assert serving.revision >= int(released.headers["gantt-revision"]) > placing.revision - 1
    finally:
        serving.close()
        placing.close()


def test_the_one_read_catch_up_gives_changes_in_feed_order_whatever_order_sqlite_returns(tmp_path: Path) -> None:
    """SQLite promises no order for a compound SELECT without ORDER BY (the floor row, then the feed's rows):
    a planner returning the feed's rows in another order must not reorder the changes a replica applies."""
    import sqlite3

    from gantt.store.sqlite_feed import KeptChanges, read_all_changes

    replica = Replica(SQLiteStore(f"sqlite:///{tmp_path}/gantt.sqlite"), CONFIG).start()
    try:
        replica.report_many([HostReport.of(f"h{i}", host_stats()) for i in range(3)])
        replica.report_many([HostReport.of("h3", host_stats())])
    finally:
        replica.close()
    conn = sqlite3.connect(tmp_path / "gantt.sqlite")
    try:
        expected = read_all_changes(conn, 0, 100, KeptChanges(100))
        assert expected is not None and len(expected) >= 4

        class Reversing:
            """The real connection, the compound's rows after the floor handed back in reverse."""

            def execute(self, sql: str, args: Any = ()) -> Any:
                rows = conn.execute(sql, args).fetchall()
                return type("Rows", (), {"fetchall": lambda _self: rows[:1] + rows[:0:-1]})()

        reversed_read = read_all_changes(Reversing(), 0, 100, KeptChanges(100))  # type: ignore[arg-type]  # stands in for execute alone
        assert reversed_read == expected
    finally:
        conn.close()
