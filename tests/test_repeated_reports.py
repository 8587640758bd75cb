"""A report that repeats its node's record is taken in memory (``Replica.heartbeat``) and written later with the
others in one batch (``Replica.flush_liveness``), instead of a commit, a catch-up and a feed apply each.

What must hold: nothing a replica shows is ahead of the store (a taken report is seen nowhere until it is written,
then everywhere alike); a taken report is a touch, whose figures never replace a record written since (through
another worker, before it or after it: its answer went out first); a changed report after taken ones wins; what
was acknowledged is written when the replica stops, so a restarted one sees it; a host that stops reporting goes
down on every replica at the same moment; a batch respects a store's size limit (etcd's --max-txn-ops).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gantt.config import Config
from gantt.model import HostReport, HostStats, ServiceInfo
from gantt.replication.replica import Replica
from gantt.store.etcd import EtcdStore
from gantt.store.sqlite import SQLiteStore
from tests.conftest import host_stats, sqlite_replica_pair
from tests.etcd.cluster import LocalCluster, require_etcd

DOWN = 60.0
CONFIG = Config.from_dict({"DEFAULT": {"service_down_time": DOWN}})
T0 = 1_000_000.0


def _stats(host: str, **fields: Any) -> dict[str, Any]:
    return host_stats(**{"uuid": f"uuid-{host}", "vcpus_used": 2, "num_io_ops": 1, **fields})


def _taken(replica: Replica, host: str, stats: dict[str, Any]) -> bool:
    """What the service does with a report: stamp it, offer it as a repeat."""
    report = HostReport.of(host, stats)
    replica.report_batch(report)
    return replica.heartbeat(report)


def _time(replica: Replica, host: str) -> float:
    return float(replica.table.col("updated_at")[replica.table.row(host, host)])


def _all_hold_h1(replicas: tuple[Replica, ...], num_io_ops: int, at: float) -> None:
    """The store and every replica hold h1 with ``num_io_ops`` and report time ``at``."""
    [held] = replicas[0].store.snapshot().hosts
    assert held.stats.num_io_ops == num_io_ops and held.reported_at == at
    for replica in replicas:
        assert replica.table.col("num_io_ops")[replica.table.row("h1", "h1")] == num_io_ops
        assert _time(replica, "h1") == at


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Replica, Replica, list[float], str]]:
    """Two replicas of one SQLite file (two workers of one ``serve``) on one clock; neither follows on its own."""
    with sqlite_replica_pair(tmp_path, CONFIG, T0) as replicas:
        yield replicas


def test_a_repeat_is_written_as_a_touch_only_when_flushed_and_then_seen_alike(
        pair: tuple[Replica, Replica, list[float], str]) -> None:
    a, b, now, _ = pair
    a.update_resource_stats("h1", _stats("h1"))
    a.update_resource_stats("h2", _stats("h2"))
    b.sync()
    revision = a.store.head()
    now[0] += 30.0
    assert _taken(a, "h1", _stats("h1")) and _taken(a, "h2", _stats("h2"))
    # nothing written yet, and no replica shows what the store does not hold
    assert a.store.head() == revision and a.liveness_pending() == 2
    assert {_time(r, h) for r in (a, b) for h in ("h1", "h2")} == {T0}
    assert a.flush_liveness() == 2
    b.sync()
    # one revision of two touches: no record rewritten, the usage revisions left where they were
    assert a.store.head() == revision + 1 and a.touches == 2
    assert [c.kind for c in a.store.changes(revision)] == ["touch", "touch"]
    assert a.node_revisions == b.node_revisions
    assert {_time(r, h) for r in (a, b) for h in ("h1", "h2")} == {T0 + 30.0}
    assert {h.host: h.reported_at for h in a.store.snapshot().hosts} == {"h1": T0 + 30.0, "h2": T0 + 30.0}
    assert a.flush_liveness() == 0 and a.store.head() == revision + 1


def test_a_report_taken_on_a_stale_view_counts_for_liveness_and_leaves_the_newer_record(
        pair: tuple[Replica, Replica, list[float], str]) -> None:
    """Worker b has not read a's change yet: the host's next report, equal to what b still holds, looks like a
    repeat there and is answered at once. When b writes it, the store holds a record written since b's view, and
    cannot tell whether it came before this report or after it (its answer went out first): the record written
    stands (writing the taken figures could roll a newer report back), and the taken report counts for the
    node's liveness, as a touch. The host's next report, compared with b's view caught up, is written in full."""
    a, b, now, _ = pair
    a.update_resource_stats("h1", _stats("h1"))
    b.sync()
    now[0] += 10.0
    a.update_resource_stats("h1", _stats("h1", num_io_ops=6))  # b does not sync: its view is behind
    now[0] += 10.0
    assert _taken(b, "h1", _stats("h1"))  # num_io_ops=1 again: equal to b's (stale) record
    b.flush_liveness()
    a.sync()
    b.sync()
    _all_hold_h1((a, b), 6, T0 + 20.0)
    assert b.touches == 1 and b.stale_reports == 0
    now[0] += 10.0
    assert not _taken(b, "h1", _stats("h1"))
    b.update_resource_stats("h1", _stats("h1"))
    a.sync()
    _all_hold_h1((a, b), 1, T0 + 30.0)


def test_a_repeat_taken_before_a_change_never_rolls_the_change_back(
        pair: tuple[Replica, Replica, list[float], str]) -> None:
    """Worker b takes a repeat; before it writes it, the host's next report (a change) lands through worker a.
    The change is the host's newest: the taken repeat only keeps the node alive."""
    a, b, now, _ = pair
    a.update_resource_stats("h1", _stats("h1"))
    b.sync()
    now[0] += 10.0
    assert _taken(b, "h1", _stats("h1"))
    now[0] += 10.0
    a.update_resource_stats("h1", _stats("h1", num_io_ops=6))
    b.flush_liveness()
    a.sync()
    b.sync()
    [held] = a.store.snapshot().hosts
    assert held.stats.num_io_ops == 6
    for replica in (a, b):
        assert replica.table.col("num_io_ops")[replica.table.row("h1", "h1")] == 6


def test_a_changed_report_after_taken_repeats_wins_and_drops_them(
        pair: tuple[Replica, Replica, list[float], str]) -> None:
    a, b, now, _ = pair
    a.update_resource_stats("h1", _stats("h1"))
    now[0] += 10.0
    assert _taken(a, "h1", _stats("h1"))
    now[0] += 10.0
    assert not _taken(a, "h1", _stats("h1", num_io_ops=5))  # a change: not taken, and it drops the older repeat
    assert a.liveness_pending() == 0
    a.update_resource_stats("h1", _stats("h1", num_io_ops=5))
    now[0] += 10.0
    assert _taken(a, "h1", _stats("h1", num_io_ops=5))  # repeating the change now
    a.flush_liveness()
    b.sync()
    _all_hold_h1((a, b), 5, T0 + 30.0)
    assert a.stale_reports == 0


def test_reports_the_replica_cannot_compare_are_not_taken(pair: tuple[Replica, Replica, list[float], str]) -> None:
    a, _, now, _ = pair
    assert not _taken(a, "new", _stats("new"))  # no record yet
    a.update_resource_stats("plain", host_stats(vcpus_used=2))  # no uuid: no record kept to compare with
    now[0] += 30.0
    assert not _taken(a, "plain", host_stats(vcpus_used=2))
    a.update_resource_stats("h1", _stats("h1", cpu_info={"bits": 46}))
    now[0] += 30.0
    assert not _taken(a, "h1", _stats("h1", cpu_info={"bits": 46.0}))  # equal to Python, not to the filters
    assert _taken(a, "h1", _stats("h1", cpu_info={"bits": 46}))
    assert a.liveness_pending() == 1


def test_what_was_taken_is_written_when_the_replica_stops(pair: tuple[Replica, Replica, list[float], str]) -> None:
    a, _, now, url = pair
    a.update_resource_stats("h1", _stats("h1"))
    now[0] += 30.0
    assert _taken(a, "h1", _stats("h1"))
    a.close()  # a worker's restart: the next one is built from the store alone
    restarted = Replica(SQLiteStore(url), CONFIG, clock=lambda: now[0]).start_owning(follow=False)
    try:
        assert _time(restarted, "h1") == T0 + 30.0
    finally:
        restarted.close()


def test_a_host_goes_down_on_both_replicas_at_the_same_moment(
        pair: tuple[Replica, Replica, list[float], str]) -> None:
    a, b, now, _ = pair
    for host in ("up", "quiet"):
        a.update_resource_stats(host, _stats(host))
    b.sync()  # a replica takes a report when it sees it: b's follower would have, at once
    now[0] += 40.0
    assert _taken(a, "up", _stats("up"))
    a.flush_liveness()
    b.sync()

    def alive(replica: Replica, at: float) -> dict[str, bool]:
        mask = replica.table.alive(at)
        return {h: bool(mask[replica.table.row(h, h)]) for h in ("up", "quiet")}

    for at, expected in ((T0 + DOWN, {"up": True, "quiet": True}),
                         (T0 + DOWN + 1.0, {"up": True, "quiet": False}),
                         (T0 + 40.0 + DOWN + 1.0, {"up": False, "quiet": False})):
        assert alive(a, at) == alive(b, at) == expected, at


def test_a_flush_respects_the_etcd_txn_size_limit(tmp_path: Path) -> None:
    """etcd's default --max-txn-ops (128) refuses a txn of more operations: 100 repeats must land all the same,
    in batches the store can take."""
    require_etcd()
    with LocalCluster(tmp_path, size=1, extra_args=["--max-txn-ops", "128"]) as cluster:
        now = [T0]
        replica = Replica(EtcdStore(cluster.url("/liveness")), CONFIG, clock=lambda: now[0]).start_owning(
            follow=False)
        try:
            hosts = [f"h{i}" for i in range(100)]
            replica.report_many([HostReport.of(h, _stats(h)) for h in hosts[:30]])
            replica.report_many([HostReport.of(h, _stats(h)) for h in hosts[30:60]])
            replica.report_many([HostReport.of(h, _stats(h)) for h in hosts[60:]])
            now[0] += 30.0
            assert all(_taken(replica, h, _stats(h)) for h in hosts)
            assert replica.flush_liveness() == 100 and replica.liveness_pending() == 0
            assert {h.reported_at for h in replica.store.snapshot().hosts} == {T0 + 30.0}
        finally:
            replica.close()


def test_a_host_deleted_after_its_repeat_was_taken_stays_deleted(
        pair: tuple[Replica, Replica, list[float], str]) -> None:
    """The repeat arrived before the deletion: written after it, it must not bring the node back (written at once
    it would have landed first, and the deletion after it)."""
    a, b, now, _ = pair
    a.update_resource_stats("h1", _stats("h1"))
    a.update_resource_stats("h2", _stats("h2"))
    b.sync()
    now[0] += 30.0
    assert _taken(a, "h1", _stats("h1")) and _taken(a, "h2", _stats("h2"))
    b.delete_host("h1")
    a.flush_liveness()
    a.sync()
    b.sync()
    assert [h.host for h in a.store.snapshot().hosts] == ["h2"]
    for replica in (a, b):
        assert ("h1", "h1") not in replica.table and _time(replica, "h2") == T0 + 30.0


def test_an_operator_change_after_a_repeat_was_taken_stands(
        pair: tuple[Replica, Replica, list[float], str]) -> None:
    """The repeat was answered before the operator's change was made: the change is the newer write and stands
    (a store ordered by the clocks let the report's stamp, later than the time the change kept, undo the
    operator's disabling); the repeat keeps the node alive."""
    a, b, now, _ = pair
    a.update_resource_stats("h1", _stats("h1", service={"disabled": False}))
    b.sync()
    now[0] += 30.0
    assert _taken(a, "h1", _stats("h1", service={"disabled": False}))
    b.update_host("h1", "h1", HostStats(service=ServiceInfo(disabled=True), num_io_ops=7))
    a.flush_liveness()
    a.sync()
    b.sync()
    _all_hold_h1((a, b), 7, T0 + 30.0)
    [held] = a.store.snapshot().hosts
    assert held.stats.service is not None and held.stats.service.disabled
    assert a.touches == 1


def test_the_feed_puts_a_record_in_before_it_moves_the_nodes_usage_revision(
        pair: tuple[Replica, Replica, list[float], str]) -> None:
    """``heartbeat`` reads a node's usage revision, then its record, with no lock, and the store takes a repeat
    named at the revision it holds for a touch without reading the record. Were the revision moved first, a
    report compared with the record before a change could be named with the change's revision, and a report
    that is no repeat of the stored record would be lost as a touch."""
    a, b, now, _ = pair
    a.update_resource_stats("h1", _stats("h1"))
    b.sync()
    before = b.node_revisions[("h1", "h1")]
    now[0] += 10.0
    a.update_resource_stats("h1", _stats("h1", num_io_ops=6))
    seen: list[tuple[int | None, int]] = []
    put = b.providers.put

    def put_watched(record: HostReport) -> None:
        seen.append((record.stats.num_io_ops, b.node_revisions[("h1", "h1")]))
        put(record)

    b.providers.put = put_watched  # type: ignore[method-assign]
    b.sync()
    assert seen == [(6, before)] and b.node_revisions[("h1", "h1")] > before
