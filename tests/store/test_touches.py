"""Reports that change nothing but their time (touches, ``store.base``): liveness kept on every replica without a
record write, and nothing else observable changed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from gantt import NoValidHost
from gantt.compute.state.intake import VECTOR_ROWS
from gantt.config import Config
from gantt.model import Allocation, HostReport
from gantt.replication.audit import audit
from gantt.replication.replica import TOUCH_FRACTION, Replica
from gantt.store.base import Batch, Change, Store, lifted
from gantt.store.memory import MemoryStore
from gantt.store.sqlite import SQLiteStore
from tests.conftest import host_stats, request
from tests.store.test_replica import _two_stores

CONFIG = Config.from_dict({"DEFAULT": {"service_down_time": 60.0}, "gantt": {"claim_timeout": 600.0}})


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def liveness_through_two_replicas(first: Store, second: Store) -> None:
    """A host that keeps sending the same report stays up on a replica that only reads the feed, for as long as it
    reports, on touches alone; it goes down there service_down_time after it stops, as on the replica it reports
    to; a replica started from a snapshot in between sees it up too."""
    clock = Clock(1000.0)
    a = Replica(first, CONFIG, clock=clock).start(follow=False)
    b = Replica(second, CONFIG, clock=clock).start(follow=False)
    try:
        stats = host_stats(vcpus_used=2, instances=["i1"])
        a.update_resource_stats("h1", stats)
        start = b.sync()
        assert b.hosts_up() == 1
        for _ in range(12):  # four minutes of reports every 20 s: four times service_down_time
            clock.now += 20.0
            a.update_resource_stats("h1", stats)
            b.sync()
            assert a.hosts_up() == b.hosts_up() == 1
            assert b.host("h1")["last_report_seconds_ago"] == 0.0
        written = a.sync()
        clock.now += 0.5 * CONFIG.default.service_down_time * TOUCH_FRACTION  # too soon to be worth a write
        a.update_resource_stats("h1", stats)
        assert second.barrier() == written and a.touches == 13
        feed = second.changes(start, timeout=0)
        assert [c.kind for c in feed] == ["touch"] * 12
        assert max(len(msgspec.msgpack.encode(c)) for c in feed) < 64  # the record is not in it
        c = Replica(second, CONFIG, clock=clock).start(follow=False)
        assert c.hosts_up() == 1
        assert c.host("h1") == b.host("h1") == a.host("h1")
        clock.now += CONFIG.default.service_down_time - 5.0  # the last written report is 55 s old
        assert a.hosts_up() == b.hosts_up() == c.hosts_up() == 1
        clock.now += 10.0
        assert a.hosts_up() == b.hosts_up() == c.hosts_up() == 0
    finally:
        a.stop()
        b.stop()


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_identical_reports_keep_a_host_up_on_the_other_replica(backend: str, tmp_path: Path) -> None:
    with _two_stores(backend, tmp_path) as (first, second):
        liveness_through_two_replicas(first, second)


def _node_state(replica: Replica, host: str) -> dict[str, Any]:
    table = replica.table
    row = table.row(host, host)
    # as text, so that NaN (a figure not reported) equals NaN
    columns = {name: str(table.col(name)[row]) for name in table._columns.cols if name != "usage_version"}
    rc = {name: str(table.rc[name][row]) for name in table.rc}
    allocations = sorted((a.consumer_uuid, a.confirmed) for a in replica.allocations())
    return {"host": replica.host(host), "columns": columns, "rc": rc, "allocations": allocations,
            "instances": sorted(table.instances(row)), "counters": replica.counters()}


@contextlib.contextmanager
def _three_replicas(tmp_path: Path, clock: Clock) -> Iterator[tuple[SQLiteStore, SQLiteStore, Replica, Replica,
                                                                  Replica]]:
    """One SQLite file, two stores on it: ``a`` writes through the first; ``b`` and ``old`` follow the second
    (``old`` is given the full records the store wrote before touches existed: ``_as_rewrites``)."""
    url = f"sqlite:///{tmp_path}/gantt.sqlite"
    with SQLiteStore(url) as store, SQLiteStore(url) as other:
        replicas = [Replica(s, CONFIG, clock=clock).start(follow=False) for s in (store, other, other)]
        try:
            yield store, other, replicas[0], replicas[1], replicas[2]
        finally:
            for replica in replicas:
                replica.stop()


def _as_rewrites(old: Replica, touches: list[Change], before: dict[str, HostReport]) -> None:
    """What the store wrote for a repeated report before touches: the merged record, through the feed."""
    old.apply([Change(revision=c.revision, kind="host", host=lifted(before[c.node[0]], c.at))
               for c in touches if c.node is not None and c.at is not None])


def test_a_touch_changes_what_a_rewrite_would_and_nothing_else(tmp_path: Path) -> None:
    """Two replicas follow one SQLite file: ``b`` gets a repeated report as the touch it is, ``old`` as the full
    record the store wrote for it before touches existed. Claims confirmed, expired (a node listing instances)
    and settled (a node reporting usage only) on the report's time: both end alike, and the store holds the
    record a rewrite would have held."""
    clock = Clock(1000.0)
    with _three_replicas(tmp_path, clock) as (store, other, a, b, old):
        listing = host_stats(vcpus_used=1, memory_mb_used=2048, instances=["i0"])
        quiet = host_stats(vcpus_used=1, memory_mb_used=2048)
        a.update_resource_stats("listing", listing)
        a.update_resource_stats("quiet", quiet)
        a.write(Batch(allocations=[
            Allocation(consumer_uuid="i0", host="listing", nodename="listing", resources={"VCPU": 1},
                       created_at=1001.0),
            Allocation(consumer_uuid="unlisted", host="listing", nodename="listing",
                       resources={"VCPU": 2, "MEMORY_MB": 1024}, created_at=1001.0),
            Allocation(consumer_uuid="unsettled", host="quiet", nodename="quiet",
                       resources={"VCPU": 2, "MEMORY_MB": 1024}, created_at=1001.0),
        ]))
        before = {h.host: h for h in store.snapshot().hosts}
        since = old.sync()
        b.sync()
        clock.now = 1700.0  # past claim_timeout for every claim
        a.update_resource_stats("listing", listing)
        a.update_resource_stats("quiet", quiet)
        touches = other.changes(since, timeout=0)
        assert [(c.kind, c.at) for c in touches] == [("touch", 1700.0)] * 2
        b.sync()
        _as_rewrites(old, touches, before)
        for host in ("listing", "quiet"):
            assert _node_state(b, host) == _node_state(old, host) == _node_state(a, host)
        assert ("unsettled", True) in _node_state(b, "quiet")["allocations"]  # settled on the report's time
        assert ("unlisted", False) in _node_state(b, "quiet")["allocations"]  # expired: its release is queued
        assert b.counters()["expired_claims"] == 1
        assert np.all(b.table.alive())
        snap = store.snapshot()
        assert {h.host: h for h in snap.hosts} == {h: lifted(r, 1700.0) for h, r in before.items()}
        assert audit(snap, CONFIG) == []


def test_touches_applied_together_change_what_rewrites_would(tmp_path: Path) -> None:
    """A flush of repeated reports is one revision of many touches, applied together (``HostTable.touch_many``:
    the rows' figures computed again at once): every node ends as a rewrite of its record leaves it, claims
    confirmed, expired and settled on the report's time included."""
    clock = Clock(1000.0)
    with _three_replicas(tmp_path, clock) as (store, other, a, b, old):
        hosts = [f"h{i}" for i in range(2 * VECTOR_ROWS)]
        stats = {h: host_stats(uuid=f"uuid-{h}", vcpus_used=1 + i % 3, memory_mb_used=2048,
                               **({"instances": [f"i-{h}"]} if i % 2 else {})) for i, h in enumerate(hosts)}
        for h in hosts:
            a.update_resource_stats(h, stats[h])
        a.write(Batch(allocations=[
            Allocation(consumer_uuid=f"{kind}-{h}", host=h, nodename=h, resources={"VCPU": 2, "MEMORY_MB": 1024},
                       created_at=1001.0 if i % 4 < 2 else 1650.0)
            for i, h in enumerate(hosts) for kind in ("i", "c")]))
        before = {h.host: h for h in store.snapshot().hosts}
        since = old.sync()
        b.sync()
        clock.now = 1700.0  # past claim_timeout for half of the claims
        for h in hosts:
            report = HostReport.of(h, stats[h])
            a.report_batch(report)
            assert a.heartbeat(report)
        assert a.flush_liveness() == len(hosts)
        touches = other.changes(since, timeout=0)
        assert [c.kind for c in touches] == ["touch"] * len(hosts) and len({c.revision for c in touches}) == 1
        b.sync()
        _as_rewrites(old, touches, before)
        for h in hosts:
            assert _node_state(b, h) == _node_state(old, h) == _node_state(a, h), h
        assert b.counters()["expired_claims"] > 0


def test_figures_computed_again_for_rows_together_are_those_row_by_row() -> None:
    """``touch_many`` computes the touched rows' load and free figures over an index array (``refresh_rows``):
    from rows whose figures were lost, they must come back as the rows' own updates left them (claims in flight,
    a disk_available_least under the accounted free space, and none reported, among them)."""
    replica = Replica(MemoryStore(), CONFIG, clock=Clock(1000.0)).start(follow=False)
    hosts = [f"h{i}" for i in range(3 * VECTOR_ROWS)]
    for i, h in enumerate(hosts):
        extra = {"disk_available_least": 100 + i} if i % 3 == 0 else {}
        replica.update_resource_stats(h, host_stats(vcpus_used=i % 5, memory_mb_used=1024 * i, local_gb_used=i,
                                                    num_io_ops=i % 4, num_instances=i % 6, **extra))
    replica.write(Batch(allocations=[Allocation(consumer_uuid=f"c-{h}", host=h, nodename=h, created_at=1000.0,
                                                resources={"VCPU": 1 + i % 2, "MEMORY_MB": 512, "DISK_GB": 3})
                                     for i, h in enumerate(hosts) if i % 2]))
    columns = replica.table._columns
    figures = ["io_ops_load", "instances_load", "free_vcpus", "free_ram_mb", "free_disk_mb"]

    def held() -> list[str]:
        return [str(columns.cols[name].tolist()) for name in figures] + [str(columns.rc[name].tolist())
                                                                         for name in ("free", "capacity")]

    expected = held()
    rows = np.array(sorted(replica.table.row(h, h) for h in hosts[1::2] + hosts[:3]), dtype=np.intp)
    for name in figures:
        columns.cols[name][rows] = -1
    classes = len(columns.rc_index)  # the slots beyond are for classes not seen yet
    columns.rc["free"][rows, :classes] = -1
    columns.rc["capacity"][rows, :classes] = -1
    columns.refresh_rows(rows)
    assert held() == expected
    replica.stop()


@pytest.mark.parametrize(("field", "first", "then", "spec"), [
    # Nova compares capabilities as str() of the host's value: 46 and 46.0 are "46" and "46.0"
    ("cpu_info", {"topology": {"cores": 46}}, {"topology": {"cores": 46.0}}, "capabilities:cpu_info:topology:cores"),
    # ... and 1 and True are "1" and "True"
    ("stats", {"gpu": 1}, {"gpu": True}, "capabilities:gpu"),
])
def test_a_report_equal_only_by_python_equality_is_not_a_touch(tmp_path: Path, field: str, first: Any, then: Any,
                                                              spec: str) -> None:
    """``46 == 46.0`` and ``1 == True`` in Python, yet ComputeCapabilitiesFilter (as Nova) tells them apart: a
    report whose free-form values changed type is written, not kept as a touch of the old record; else a request
    for the new value is refused and one for the old value placed, on every replica."""
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeCapabilitiesFilter"]}})
    clock = Clock(1000.0)
    with SQLiteStore(f"sqlite:///{tmp_path}/gantt.sqlite") as store:
        a = Replica(store, config, clock=clock).start(follow=False)
        a.update_resource_stats("h1", host_stats(**{field: first}))
        clock.now += 600.0  # past the touch interval: an identical report would be written as a touch
        a.update_resource_stats("h1", host_stats(**{field: then}))
        b = Replica(store, config, clock=clock).start(follow=False)  # from the file alone
        [stored] = store.snapshot().hosts
        assert msgspec.json.encode(getattr(stored.stats, field)) == msgspec.json.encode(then)
        # the one value each report holds, as the filter's text
        old, new = (str(_leaf(value)) for value in (first, then))
        for replica in (a, b):
            [[chosen]] = replica.select_destinations(request(extra_specs={spec: new}))
            assert chosen.host == "h1"
            replica.release(chosen.consumer_uuid)
            with pytest.raises(NoValidHost):
                replica.select_destinations(request(extra_specs={spec: old}))
        a.stop()
        b.stop()


def _leaf(value: Any) -> Any:
    while isinstance(value, dict):
        [value] = value.values()
    return value
