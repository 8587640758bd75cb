"""SQLiteStore: the store contract, group commit, restart, several processes on one file, compaction."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gantt import NoValidHost
from gantt.config import Config
from gantt.model import Aggregate, HostReport, HostStats, InstanceInfo, NotFound, StoreUnavailable
from gantt.replication.audit import audit
from gantt.replication.replica import Replica
from gantt.store import sqlite_batch
from gantt.store.base import Batch, Compacted, Expect, RepeatOf, Store, StoreConflict
from gantt.store.sqlite import SQLiteStore
from gantt.store.sqlite_file import path_of
from gantt.store.urls import open_store
from tests.conftest import host_stats, request
from tests.store.contract import CONTRACT, alloc, at, report
from tests.store.full_disk import FullDiskSQLiteStore

CONFIG = Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeFilter"]}})


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/gantt.sqlite"


@pytest.fixture
def store(url: str) -> Iterator[SQLiteStore]:
    s = SQLiteStore(url)
    yield s
    s.close()


@pytest.mark.parametrize("check", CONTRACT, ids=lambda f: f.__name__)
def test_sqlite_store_contract(check: Callable[[Store], None], store: SQLiteStore) -> None:
    check(store)


def test_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert path_of("sqlite:///rel/g.sqlite") == "rel/g.sqlite"
    assert path_of("sqlite:////abs/g.sqlite") == "/abs/g.sqlite"
    with pytest.raises(ValueError):
        path_of("sqlite://")
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:///sub/dir/g.sqlite?retention=7") as s:
        assert isinstance(s, SQLiteStore) and s.retention == 7
        s.commit(Batch(reports=[report("h1")]))
    assert (tmp_path / "sub/dir/g.sqlite").exists()


def test_group_commit_combines_concurrent_batches(store: SQLiteStore) -> None:
    base = store.commit(Batch(reports=[report(f"h{i}") for i in range(8)])).revision
    results: dict[str, int] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(32)

    def claim(i: int) -> None:
        start.wait()
        consumer = f"c{i}"
        try:
            result = store.commit(Batch(allocations=[alloc(consumer, f"h{i % 8}")]))
        except BaseException as exc:  # pragma: no cover - reported below
            with lock:
                errors.append(exc)
            return
        assert [c.allocation.consumer_uuid for c in result.changes if c.allocation] == [consumer]
        assert all(c.revision == result.revision for c in result.changes)
        with lock:
            results[consumer] = result.revision

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    # one revision per batch, no gaps, no duplicates, even though they shared transactions
    assert sorted(results.values()) == list(range(base + 1, base + 33))
    assert store.groups < 1 + 32  # at least two batches went in one transaction
    assert len(store.snapshot().allocations) == 32


def test_a_conflicting_batch_does_not_sink_its_group(store: SQLiteStore) -> None:
    rev = store.commit(Batch(reports=[report("h1"), report("h2")])).revision
    store.commit(Batch(allocations=[alloc("taken", "h2")]))  # h2's usage revision moves on
    batches = {
        "first": Batch(reports=[report("h3")]),  # the writer waits for the lock with this one queued
        "ok1": Batch(expect=[Expect("h1", "h1", rev)], allocations=[alloc("a", "h1")]),
        "stale": Batch(expect=[Expect("h2", "h2", rev)], allocations=[alloc("b", "h2")]),
        "unknown": Batch(releases=["nobody"], allocations=[alloc("c", "h1")]),
        "ok2": Batch(allocations=[alloc("d", "h2")]),
    }
    outcomes, groups = _commit_queued(store, batches, (StoreConflict, NotFound))
    assert store.groups == groups + 1  # all in one transaction: the writer takes its group once it has the lock
    assert isinstance(outcomes["stale"], StoreConflict) and outcomes["stale"].keys == [("h2", "h2")]
    assert isinstance(outcomes["unknown"], NotFound)
    assert isinstance(outcomes["ok1"], int) and isinstance(outcomes["ok2"], int)
    assert outcomes["first"] == rev + 2
    assert {outcomes["ok1"], outcomes["ok2"]} == {rev + 3, rev + 4}
    assert {a.consumer_uuid for a in store.snapshot().allocations} == {"taken", "a", "d"}
    feed = store.changes(rev, timeout=0)
    assert [c.allocation.consumer_uuid for c in feed if c.allocation] == ["taken", "a", "d"]


def test_a_batch_torn_half_way_through_its_writes_fails_alone(store: SQLiteStore,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A group is written without savepoints; a batch whose writes fail after some rows went in (an I/O error)
    must still leave no row behind and sink no other batch of its group."""
    import sqlite3

    real = sqlite_batch.write
    torn = []

    def write(conn: sqlite3.Connection, plan: object, rev: int, *rest: object) -> object:
        out = real(conn, plan, rev, *rest)  # type: ignore[arg-type]
        if "torn" in getattr(plan, "hosts", {}).get(("torn", "torn"), report("x")).host:
            torn.append(rev)
            raise sqlite3.OperationalError("disk I/O error")
        return out

    monkeypatch.setattr(sqlite_batch, "write", write)
    rev = store.commit(Batch(reports=[report("h1")])).revision
    batches = {"first": Batch(reports=[report("h2")]), "ok1": Batch(reports=[report("h3")]),
               "torn": Batch(reports=[report("torn")]), "ok2": Batch(reports=[report("h4")])}
    outcomes, groups = _commit_queued(store, batches, StoreUnavailable)
    assert store.groups == groups + 1  # all in one transaction: the writer takes its group once it has the lock
    assert torn  # the torn batch did write rows before it failed
    assert isinstance(outcomes["torn"], StoreUnavailable) and "disk I/O error" in str(outcomes["torn"])
    assert outcomes["first"] == rev + 1 and {outcomes["ok1"], outcomes["ok2"]} == {rev + 2, rev + 3}
    assert {h.host for h in store.snapshot().hosts} == {"h1", "h2", "h3", "h4"}
    assert [c.host.host for c in store.changes(rev, timeout=0) if c.host] == ["h2", "h3", "h4"]
    assert store.head() == rev + 3


def test_batches_queued_while_the_writer_waits_for_the_lock_join_its_group(store: SQLiteStore) -> None:
    """The writer takes the write lock first and its group after: batches that arrive while another process
    holds the lock go in the transaction the writer was waiting to begin, not in one more (a lock wait and an
    fsync more) after it."""
    store.commit(Batch(reports=[report("h0")]))
    blocker = store._connect()
    blocker.execute("BEGIN IMMEDIATE")
    groups, waits = store.groups, store.lock_waits
    first = store.commit_soon(Batch(reports=[report("h1")]))
    deadline = time.monotonic() + 10
    while store.lock_waits == waits and time.monotonic() < deadline:
        time.sleep(0.001)
    assert store.lock_waits == waits + 1  # the writer waits for the lock, "h1" queued
    later = [store.commit_soon(Batch(reports=[report(f"h{i}")])) for i in range(2, 5)]
    blocker.execute("ROLLBACK")
    revisions = [future.result(timeout=10).revision for future in [first, *later]]
    assert store.groups == groups + 1
    assert revisions == sorted(set(revisions)) and len(revisions) == 4


def test_batches_waiting_for_a_lock_never_had_fail_with_it_and_the_writer_carries_on(url: str) -> None:
    store = SQLiteStore(url, busy_timeout=0.3)
    try:
        store.commit(Batch(reports=[report("h0")]))
        blocker = store._connect()
        blocker.execute("BEGIN IMMEDIATE")
        waiting = [store.commit_soon(Batch(reports=[report(f"h{i}")])) for i in range(1, 4)]
        for future in waiting:
            with pytest.raises(StoreUnavailable, match="cannot take the write lock"):
                future.result(timeout=10)
        blocker.execute("ROLLBACK")
        assert store.last_write_error is not None
        assert store.commit(Batch(reports=[report("h4")])).changes
        assert store.last_write_error is None
        assert {h.host for h in store.snapshot().hosts} == {"h0", "h4"}
    finally:
        store.close()


def _commit_queued(store: SQLiteStore, batches: dict[str, Batch],
                   refused: type[Exception] | tuple[type[Exception], ...]) -> tuple[dict[str, object], int]:
    """Commit ``batches`` from one thread each, in order, while another connection holds the write lock: the
    writer waits for the lock from the first one on, and takes them all as one group once it has it. Returns
    each one's revision (or the ``refused`` error it got) and the writer's group count before the lock was let
    go."""
    blocker = store._connect()
    blocker.execute("BEGIN IMMEDIATE")
    outcomes: dict[str, object] = {}

    def run(name: str, batch: Batch) -> None:
        try:
            outcomes[name] = store.commit(batch).revision
        except refused as exc:
            outcomes[name] = exc

    threads = []
    for name, batch in batches.items():
        threads.append(threading.Thread(target=run, args=(name, batch)))
        threads[-1].start()
        time.sleep(0.02)
    groups = store.groups
    blocker.execute("ROLLBACK")
    for t in threads:
        t.join()
    return outcomes, groups


def test_a_write_the_disk_refuses_is_remembered_until_one_succeeds(url: str) -> None:
    with FullDiskSQLiteStore(url) as store:
        store.commit(Batch(reports=[report("h1")]))
        assert store.last_write_error is None
        store.fill()
        big = report("h2", stats={"blob": "x" * 50_000})  # needs pages the full disk does not have
        before = time.time()
        with pytest.raises(StoreUnavailable, match="database or disk is full"):  # not "no such savepoint"
            store.commit(Batch(reports=[big]))
        failure = store.last_write_error
        assert failure is not None and "database or disk is full" in failure.message
        assert before <= failure.at <= time.time()
        # A refusal is not a write either way: the error stays.
        with pytest.raises(NotFound):
            store.commit(Batch(releases=["nobody"]))
        assert store.last_write_error == failure
        store.free()
        store.commit(Batch(reports=[big]))
        assert store.last_write_error is None
        assert {h.host for h in store.snapshot().hosts} == {"h1", "h2"}


def test_restart_restores_everything_exactly(url: str) -> None:
    with SQLiteStore(url) as s:
        s.commit(Batch(reports=[report("h1", hypervisor_type="QEMU"), report("bm", "n1"), report("bm", "n2")],
                       aggregates=[Aggregate(id=3, name="agg", hosts=["h1"], metadata={"availability_zone": "z"})]))
        s.commit(Batch(allocations=[alloc("c1", "h1", vcpu=2), alloc("c2", "bm", "n2")]))
        s.commit(Batch(instances=[InstanceInfo(host="h1", instances=["c1"])]))
        s.commit(Batch(releases=["c2"]))
        before = s.snapshot()
    with SQLiteStore(url) as again:
        after = again.snapshot()
        assert after == before
        assert after.revision == 4
        assert again.commit(Batch(reports=[report("h9")])).revision == 5  # revisions carry on


def test_replica_on_sqlite_and_restart(url: str) -> None:
    with SQLiteStore(url) as s:
        a = Replica(s, CONFIG).start(follow=False)
        for i in range(3):
            a.update_resource_stats(f"h{i}", host_stats(vcpus=4))
        a.select_destinations(request(vcpus=2, instance_uuids=["vm-1"]))
        a.release("vm-1")
        a.select_destinations(request(vcpus=3, instance_uuids=["vm-2"]))
        held = a.table.allocation("vm-2")
    with SQLiteStore(url) as s:
        b = Replica(s, CONFIG).start(follow=False)
        assert {x.consumer_uuid for x in b.table.allocations()} == {"vm-2"}
        assert b.table.allocation("vm-2").host == held.host
        assert b.scheduler.host(held.host)["inventories"]["VCPU"]["in_flight"] == 3
        assert audit(s.snapshot(), CONFIG) == []


def test_compaction_makes_replica_resnapshot(url: str) -> None:
    with SQLiteStore(url, retention=5) as s:
        a = Replica(s, CONFIG).start(follow=False)
        a.update_resource_stats("h0", host_stats(vcpus=64))
        behind = Replica(s, CONFIG).start(follow=False)
        seen = behind.revision
        for i in range(20):
            a.select_destinations(request(vcpus=1, instance_uuids=[f"vm-{i}"]))
        head = s.head()
        assert head == seen + 20
        # the writer compacts as it goes: only about the last `retention` revisions are kept
        with pytest.raises(Compacted):
            s.changes(seen, timeout=0)
        assert len({c.revision for c in s.changes(head - 5, timeout=0)}) == 5
        s.compact(keep=2)
        with pytest.raises(Compacted):
            s.changes(head - 3, timeout=0)
        assert s.changes(head - 2, timeout=0)
        behind.catch_up()
        assert behind.resyncs == 1
        assert behind.revision == head
        assert len(behind.table.allocations()) == 20


def test_another_process_reads_the_feed_and_its_floor_in_one_snapshot(url: str) -> None:
    """A reader with none of these revisions in memory reads them from the file: the rows after ``since``, and
    Compacted when ``since`` is below the floor, whether rows are left after it or none are."""
    with SQLiteStore(url) as writer, SQLiteStore(url) as reader:
        start = writer.head()
        for i in range(6):
            writer.commit(Batch(reports=[report(f"h{i}")]))
        head = writer.head()
        assert [c.host.host for c in reader.changes(start, timeout=0) if c.host] == [f"h{i}" for i in range(6)]
        assert [c.revision for c in reader.changes(head - 2, timeout=0)] == [head - 1, head]
        writer.compact(keep=3)
        with pytest.raises(Compacted):
            reader.changes(head - 4, timeout=0)  # rows are left after it, from the floor on
        assert [c.revision for c in reader.changes(head - 3, timeout=0)] == [head - 2, head - 1, head]
        # limited: whole revisions, and the floor still checked
        assert [c.revision for c in reader.changes(head - 3, timeout=0, limit=2)] == [head - 2, head - 1]
        with pytest.raises(Compacted):
            reader.changes(head - 4, timeout=0, limit=2)
        writer.compact(keep=0)
        with pytest.raises(Compacted):
            reader.changes(head - 1, timeout=0)  # no row is left at all: the floor alone says so
        assert reader.changes(head, timeout=0) == []


def test_changes_waits_and_wakes_on_commit(store: SQLiteStore) -> None:
    head = store.commit(Batch(reports=[report("h1")])).revision
    t0 = time.monotonic()
    assert store.changes(head, timeout=0.1) == []
    assert 0.09 <= time.monotonic() - t0 < 1.0
    other = SQLiteStore(store.url)  # another object on the file: found by polling, not by in-process wake-up
    try:
        timer = threading.Timer(0.1, lambda: other.commit(Batch(reports=[report("h2")])))
        timer.start()
        t0 = time.monotonic()
        got = store.changes(head, timeout=5)
        timer.join()
        assert [c.host.host for c in got if c.host] == ["h2"]
        assert time.monotonic() - t0 < 1.0
    finally:
        other.close()


def test_feed_never_splits_a_revision(store: SQLiteStore) -> None:
    store.commit(Batch(reports=[report(f"h{i}") for i in range(10)]))
    store.commit(Batch(reports=[report(f"g{i}") for i in range(10)]))
    part = store.changes(0, timeout=0, limit=5)
    assert len(part) == 10 and {c.revision for c in part} == {1}
    part = store.changes(0, timeout=0, limit=15)
    assert len(part) == 10
    assert len(store.changes(1, timeout=0, limit=3)) == 10


def test_feed_read_from_the_file_never_splits_a_revision(store: SQLiteStore, url: str) -> None:
    """The same through another handle, which reads the rows from the file (not from its own commits)."""
    store.commit(Batch(reports=[report(f"h{i}") for i in range(10)]))
    store.commit(Batch(reports=[report(f"g{i}") for i in range(10)]))
    store.commit(Batch(reports=[report("f0")]))
    with SQLiteStore(url) as other:
        for since, limit, revisions in [(0, 5, [1] * 10), (0, 15, [1] * 10), (0, 20, [1] * 10 + [2] * 10),
                                        (0, 21, [1] * 10 + [2] * 10 + [3]), (1, 3, [2] * 10), (2, 1, [3]),
                                        (0, 1000, [1] * 10 + [2] * 10 + [3]), (3, 5, [])]:
            part = other.changes(since, timeout=0, limit=limit)
            assert [c.revision for c in part] == revisions, (since, limit)
        assert [c.host.host for c in other.changes(1, timeout=0, limit=100) if c.host] == [
            *(f"g{i}" for i in range(10)), "f0"]


# ------------------------------------------------------------------------------- several processes


def _claimer(url: str, hosts: int, attempts: int, start: float, out: multiprocessing.Queue) -> None:
    store = SQLiteStore(url)
    replica = Replica(store, CONFIG).start()
    placed: list[str] = []
    failures = 0
    conflicts_before = replica.scheduler.engine.stats.commit_conflicts
    while time.time() < start:
        time.sleep(0.005)
    for _ in range(attempts):
        try:
            [[sel, *_]] = replica.select_destinations(request(vcpus=1))
            placed.append(sel.consumer_uuid or "")
        except NoValidHost:
            failures += 1
    out.put((placed, failures, replica.scheduler.engine.stats.commit_conflicts - conflicts_before,
             store.groups, store.lock_waits))
    replica.stop()
    store.close()


def test_two_processes_on_one_file_never_double_book(url: str) -> None:
    hosts, vcpus = 20, 8
    with SQLiteStore(url) as s:
        now = time.time()  # reported now, so the hosts are up
        s.commit(Batch(reports=[HostReport(host=f"h{i}", stats=HostStats(**host_stats(vcpus=vcpus)), reported_at=now)
                                for i in range(hosts)]))
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter each: nothing of ours inherited via fork
    out: multiprocessing.Queue = ctx.Queue()
    start = time.time() + 2.5  # let both interpreters import and load before the race
    attempts = 120
    procs = [ctx.Process(target=_claimer, args=(url, hosts, attempts, start, out)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    placed = [c for r in results for c in r[0]]
    failures = sum(r[1] for r in results)
    with SQLiteStore(url) as s:
        snap = s.snapshot()
    assert audit(snap, CONFIG) == []
    assert sorted(a.consumer_uuid for a in snap.allocations) == sorted(placed)
    assert len(placed) == hosts * vcpus  # every vCPU booked once, none twice
    assert failures == 2 * attempts - hosts * vcpus


def _book_once(url: str, consumer: str, out: multiprocessing.Queue) -> None:
    store = SQLiteStore(url)
    replica = Replica(store, CONFIG).start(follow=False)
    [[sel, *_]] = replica.select_destinations(request(vcpus=1) | {"instance_uuids": [consumer]})
    out.put(sel.host)
    store.close()


def test_a_booking_made_by_another_process_is_the_answer(url: str) -> None:
    """Issue 10: process B, whose view predates process A's booking, answers A's host and the file keeps it."""
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeFilter"],
                                                    "host_subset_size": 50}})  # spread the two choices
    with SQLiteStore(url) as s:
        s.commit(Batch(reports=[HostReport(host=f"h{i}", stats=HostStats(**host_stats()), reported_at=time.time())
                                for i in range(50)]))
    ctx = multiprocessing.get_context("spawn")
    moved = 0
    for attempt in range(5):
        store = SQLiteStore(url)
        stale = Replica(store, config).start(follow=False)  # loaded before the other process books
        out: multiprocessing.Queue = ctx.Queue()
        child = ctx.Process(target=_book_once, args=(url, f"seq-{attempt}", out))
        child.start()
        booked = out.get(timeout=60)
        child.join(timeout=30)
        assert child.exitcode == 0
        [[answer, *_]] = stale.select_destinations(request(vcpus=1) | {"instance_uuids": [f"seq-{attempt}"]})
        held = {a.consumer_uuid: a.host for a in store.snapshot().allocations}
        moved += answer.host != booked or held[f"seq-{attempt}"] != booked
        store.close()
    assert moved == 0


def test_the_in_memory_feed_cache_is_bounded_by_what_it_holds(store: SQLiteStore) -> None:
    """Issue 11: PUT/DELETE of a 350,000-host aggregate, repeated, grew memory without a plateau."""
    hosts = [f"c{i}" for i in range(100_000)]
    for _ in range(12):
        store.commit(Batch(aggregates=[Aggregate(id="big", hosts=hosts)]))
        store.commit(Batch(delete_aggregates=["big"]))
    held = sum(len(c.aggregate.hosts) for changes in store._kept.recent.values() for c in changes if c.aggregate)
    assert held <= 400_000
    assert len(store.changes(0, timeout=0)) == 24  # the file still serves every revision the cache dropped


def test_the_in_memory_feed_cache_lets_the_oldest_revisions_go(store: SQLiteStore) -> None:
    store._kept.limit = 3
    revisions = [store.commit(Batch(reports=[report(f"h{i}")])).revision for i in range(6)]
    assert list(store._kept.recent) == revisions[-3:]
    kept = store._kept.cached(revisions[2], revisions[-1], 100) or []
    assert [c.host.host for c in kept if c.host] == ["h3", "h4", "h5"]


def test_commit_soon_queues_for_the_writer_and_fails_only_the_refused_batch(store: SQLiteStore) -> None:
    # in one group or two, the refusal is its own: the report lands and the writer carries on
    kept = store.commit_soon(Batch(reports=[report("h1")]))
    refused = store.commit_soon(Batch(releases=["nobody"]))
    assert kept.result(timeout=10).revision == store.head() == 1
    assert isinstance(refused.exception(timeout=10), NotFound)
    assert [c.kind for c in store.changes(0, timeout=0)] == ["host"]
    assert store.commit(Batch(reports=[report("h2")])).revision == 2  # the writer carries on


def test_a_store_without_a_writer_commits_soon_in_place() -> None:
    store = open_store("memory://")
    assert not store.queued_commits
    done = store.commit_soon(Batch(reports=[report("h1")]))
    assert done.done() and done.result().revision == 1
    assert isinstance(store.commit_soon(Batch(releases=["nobody"])).exception(timeout=0), NotFound)


def test_commit_on_loop_completes_loop_futures_a_group_at_a_time(store: SQLiteStore) -> None:
    """Batches committed from an event loop get futures of that loop: a group's outcomes, refusals included,
    arrive together; a waiter that gave up leaves the batch committed and the writer unharmed."""
    import asyncio

    rev = store.commit(Batch(reports=[report("h1")])).revision

    async def main() -> tuple[list[object], object]:
        loop = asyncio.get_running_loop()
        blocker = store._connect()
        blocker.execute("BEGIN IMMEDIATE")  # the batches below queue up as one group
        try:
            futures = [store.commit_on_loop(Batch(reports=[report(f"n{i}")]), loop) for i in range(3)]
            futures.append(store.commit_on_loop(Batch(expect=[Expect("h1", "h1", rev + 99)],
                                                      allocations=[alloc("a", "h1")]), loop))
            given_up = store.commit_on_loop(Batch(reports=[report("gone")]), loop)
            given_up.cancel()
            await asyncio.sleep(0.05)
            assert not any(f.done() for f in futures)  # nothing before the group's commit
        finally:
            blocker.execute("ROLLBACK")
        outcomes = await asyncio.gather(*futures, return_exceptions=True)
        return outcomes, given_up

    outcomes, given_up = asyncio.run(main())
    assert [o.revision for o in outcomes[:3]] == [rev + 1, rev + 2, rev + 3]  # type: ignore[attr-defined]
    assert isinstance(outcomes[3], StoreConflict)
    assert given_up.cancelled()  # type: ignore[attr-defined]
    assert {h.host for h in store.snapshot().hosts} == {"h1", "n0", "n1", "n2", "gone"}
    assert store.commit(Batch(reports=[report("after")])).revision == rev + 5  # the writer carries on


def test_a_usage_revision_moved_earlier_in_the_group_refuses_a_later_batch(store: SQLiteStore) -> None:
    """A group writes its usage revisions once, at its end: a later batch of the same group that expects the
    revision an earlier one moved must still be refused."""
    rev = store.commit(Batch(reports=[report("h1")])).revision
    batches = {"first": Batch(reports=[report("h2")]),
               "a": Batch(expect=[Expect("h1", "h1", rev)], allocations=[alloc("a", "h1")]),
               "b": Batch(expect=[Expect("h1", "h1", rev)], allocations=[alloc("b", "h1")])}
    outcomes, groups = _commit_queued(store, batches, StoreConflict)
    assert store.groups == groups + 1  # all in one transaction: the writer takes its group once it has the lock
    assert outcomes["a"] == rev + 2
    assert isinstance(outcomes["b"], StoreConflict)
    assert {a.consumer_uuid for a in store.snapshot().allocations} == {"a"}
    held = {(r.host, r.node): r.revision for r in store.snapshot().node_revisions}
    assert held[("h1", "h1")] == rev + 2


def test_a_record_written_earlier_in_the_group_is_not_taken_for_a_named_repeat(store: SQLiteStore) -> None:
    """A repeat named at the usage revision a replica saw (``RepeatOf``), in the same group as a batch that wrote
    the node's record first: the revision is the group's own (written at its end), and the record that batch
    wrote stands (the repeat was answered before it was written: it is a touch of that record)."""
    rev = store.commit(Batch(reports=[at(1000.0, vcpus_used=2)])).revision
    batches = {"first": Batch(reports=[report("h2")]),
               "change": Batch(reports=[at(1010.0, vcpus_used=3, num_io_ops=4)]),
               "repeat": Batch(reports=[at(1020.0, vcpus_used=2)], repeat_of=[RepeatOf("h1", "h1", rev, 1000.0)],
                               existing_only=True)}
    outcomes, groups = _commit_queued(store, batches, ())
    assert store.groups == groups + 1  # all in one transaction: the writer takes its group once it has the lock
    assert outcomes["repeat"] == rev + 3
    held = next(h for h in store.snapshot().hosts if h.host == "h1")
    assert (held.stats.vcpus_used, held.stats.num_io_ops, held.reported_at) == (3, 4, 1020.0)
    assert [c.kind for c in store.changes(rev + 2, timeout=0)] == ["touch"]


def test_named_repeats_past_one_statements_worth_are_all_read(store: SQLiteStore,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_batch, "LIVENESS_KEYS", 2)
    hosts = [f"h{i}" for i in range(5)]
    rev = store.commit(Batch(reports=[at(1000.0, h, vcpus_used=2) for h in hosts])).revision
    store.commit(Batch(reports=[at(1030.0, "h3", vcpus_used=2)]))  # a touch stamped later than the repeat of h3
    result = store.commit(Batch(reports=[at(1020.0, h, vcpus_used=2) for h in hosts], existing_only=True,
                                repeat_of=[RepeatOf(h, h, rev, 1000.0) for h in hosts], touch_interval=15.0))
    assert [(c.kind, c.node) for c in result.changes] == [("touch", (h, h)) for h in hosts]
    assert result.quiet == 0  # h3's: stamped before the time held (clocks differ), so written


def test_a_feed_reader_finds_a_group_committed_from_a_loop_within_a_poll(store: SQLiteStore) -> None:
    """A group committed from an event loop is applied there and does not wake the feed's follower; a reader
    waiting on the feed still gets it at its next poll, long before its timeout."""
    import asyncio

    rev = store.commit(Batch(reports=[report("h1")])).revision
    got: list[list[object]] = []
    waited: list[float] = []

    def follow() -> None:
        began = time.monotonic()
        got.append(store.changes(rev, timeout=5.0))  # type: ignore[arg-type]
        waited.append(time.monotonic() - began)

    reader = threading.Thread(target=follow)
    reader.start()
    time.sleep(0.05)

    async def main() -> int:
        return (await store.commit_on_loop(Batch(reports=[report("h2")]), asyncio.get_running_loop())).revision

    assert asyncio.run(main()) == rev + 1
    reader.join()
    assert [c.host.host for c in got[0] if c.host] == ["h2"]  # type: ignore[attr-defined]
    assert waited[0] < 1.0


def test_a_release_reads_its_allocation_once(store: SQLiteStore) -> None:
    """The planner asks for a released allocation twice (the check, then the plan): the store reads and decodes
    it once per batch, and still releases exactly it."""
    store.commit(Batch(reports=[report("h1")]))
    store.commit(Batch(allocations=[alloc("a", "h1"), alloc("b", "h1")]))
    reads: list[str] = []
    conn = store._writer.conn
    assert conn is not None
    wanted = "SELECT data FROM allocations WHERE consumer"
    conn.set_trace_callback(lambda sql: reads.append(sql) if sql.startswith(wanted) else None)
    try:
        result = store.commit(Batch(releases=["a"]))
    finally:
        conn.set_trace_callback(None)
    assert len(reads) == 1
    assert [(c.kind, c.allocation.consumer_uuid if c.allocation else None) for c in result.changes] == [
        ("allocation_deleted", "a")]
    assert {a.consumer_uuid for a in store.snapshot().allocations} == {"b"}


def _file_alone(path: str, tmp: Path) -> int:
    """The revision the database file holds without its WAL (what checkpoints have copied into it; 0: not even
    the schema)."""
    import shutil
    import sqlite3 as sqlite3_module

    copy = tmp / "alone.sqlite"
    shutil.copyfile(path, copy)  # the main file only: its -wal is not copied
    conn = sqlite3_module.connect(f"file:{copy}?immutable=1", uri=True)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='revision'").fetchone()
        return int(row[0])
    except sqlite3_module.OperationalError:  # no such table yet
        return 0
    finally:
        conn.close()


def test_commits_never_checkpoint_and_the_checkpointer_copies_the_wal_apart(url: str, tmp_path: Path) -> None:
    """A commit does not copy the WAL into the database file (that held the write lock, and every writer waiting
    for it, through a copy and a sync); the checkpointer does it apart, while writes go on and when the store
    closes. Held off, the WAL only grows; SQLite's own checkpoint in a commit would have kept it near 1,000
    pages and copied the file up to date."""
    path = path_of(url)
    held = SQLiteStore(url, checkpoint_interval=3600)
    try:
        held.commit(Batch(reports=[report(f"h{i}") for i in range(400)]))
        for i in range(1500):
            held.commit(Batch(allocations=[alloc(f"c{i}", f"h{i % 400}")]))
        assert Path(path + "-wal").stat().st_size > 1200 * 4096
        assert held.checkpoints == 0
        assert _file_alone(path, tmp_path) < held.head()  # the file lags: only the WAL holds the commits
    finally:
        held.close()
    assert held.checkpoints == 1  # once more as it closes
    with SQLiteStore(url, checkpoint_interval=0.02) as s:
        assert _file_alone(path, tmp_path) == s.head() == 1501
        s.commit(Batch(releases=["c0", "c1"]))
        deadline = time.monotonic() + 10
        while _file_alone(path, tmp_path) != s.head() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _file_alone(path, tmp_path) == s.head() == 1502 and s.checkpoints >= 1
