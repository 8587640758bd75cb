"""Replicas on one store: read-your-writes, feed catch-up, and no double booking between instances."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gantt import NoValidHost
from gantt.compute.commit import TableReplaced
from gantt.compute.scheduler import describe
from gantt.config import Config
from gantt.model import Allocation, HostStats, NotFound, ServiceInfo
from gantt.replication.audit import audit
from gantt.replication.replica import DECISION_RELOADS, Replica
from gantt.store.base import Batch, Change, CommitResult, Store, StoreConflict
from gantt.store.memory import MemoryStore
from gantt.store.sqlite import SQLiteStore
from tests.conftest import host_stats, request

CONFIG = Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeFilter"]}})


@contextlib.contextmanager
def _two_stores(backend: str, tmp_path: Path) -> Iterator[tuple[Store, Store]]:
    """One store seen through two handles: the same object (memory), or two connections to one file, as two
    processes would have (sqlite)."""
    if backend == "memory":
        store = MemoryStore()
        yield store, store
        return
    url = f"sqlite:///{tmp_path}/gantt.sqlite"
    first, second = SQLiteStore(url), SQLiteStore(url)
    try:
        yield first, second
    finally:
        first.close()
        second.close()


def test_two_replicas_never_double_book() -> None:
    store = MemoryStore()
    a = Replica(store, CONFIG).start()
    b = Replica(store, CONFIG).start()
    try:
        for i in range(4):
            a.update_resource_stats(f"h{i}", host_stats(vcpus=8))
        b.catch_up()
        placed: list[str] = []
        failures = 0
        lock = threading.Lock()

        def burst(replica: Replica) -> None:
            nonlocal failures
            for _ in range(40):
                try:
                    [[sel, *_]] = replica.select_destinations(request(vcpus=1))
                    with lock:
                        placed.append(sel.host)
                except NoValidHost:
                    with lock:
                        failures += 1

        threads = [threading.Thread(target=burst, args=(r,)) for r in (a, b, a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        snap = store.snapshot()
        assert audit(snap, CONFIG) == []
        assert len(snap.allocations) == len(placed) == 32  # 4 hosts x 8 vCPUs, ratio 1.0
        assert failures == 160 - 32
    finally:
        a.stop()
        b.stop()


def test_follower_applies_other_instances_writes() -> None:
    store = MemoryStore()
    a = Replica(store, CONFIG).start()
    b = Replica(store, CONFIG).start()
    try:
        a.update_resource_stats("h0", host_stats())
        [[sel, *_]] = a.select_destinations(request(vcpus=4, instance_uuids=["vm-1"]))
        deadline = time.monotonic() + 5
        while b.table.allocation("vm-1") is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert b.table.allocation("vm-1").host == sel.host
        assert b.scheduler.host("h0")["inventories"]["VCPU"]["in_flight"] == 4
        b.release("vm-1")
        assert b.table.allocation("vm-1") is None
        deadline = time.monotonic() + 5
        while a.table.allocation("vm-1") is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert a.table.allocation("vm-1") is None
    finally:
        a.stop()
        b.stop()


def test_restart_restores_state_and_liveness() -> None:
    store = MemoryStore()
    a = Replica(store, CONFIG).start(follow=False)
    a.update_resource_stats("h0", host_stats())
    a.select_destinations(request(vcpus=2, instance_uuids=["vm-1"]))
    b = Replica(store, CONFIG).start(follow=False)
    assert b.scheduler.host("h0")["inventories"]["VCPU"]["in_flight"] == 2
    assert b.scheduler.host("h0")["up"]
    later = Replica(store, CONFIG, clock=lambda: time.time() + 3600).start(follow=False)
    assert not later.scheduler.host("h0")["up"]  # a snapshot must not make a silent host look alive


def test_expired_claim_is_released_through_the_store() -> None:
    store = MemoryStore()
    now = [1000.0]
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeFilter"]},
                               "gantt": {"claim_timeout": 10}})
    a = Replica(store, config, clock=lambda: now[0]).start(follow=False)
    a.update_resource_stats("h0", host_stats())
    a.select_destinations(request(vcpus=2, instance_uuids=["vm-1"]))
    now[0] += 11
    a.update_resource_stats("h0", {"instances": []})
    a._flush_expired()
    assert store.snapshot().allocations == []
    assert a.table.allocation("vm-1") is None


@pytest.mark.parametrize("n", [3])
def test_multi_instance_request_commits_as_one_batch(n: int) -> None:
    store = MemoryStore()
    a = Replica(store, CONFIG).start(follow=False)
    for i in range(2):
        a.update_resource_stats(f"h{i}", host_stats(vcpus=8))
    with pytest.raises(NoValidHost):
        a.select_destinations(request(vcpus=6, num_instances=n))
    assert store.snapshot().allocations == []
    answer = a.select_destinations(request(vcpus=4, num_instances=4))
    assert len(answer) == 4 and len(store.snapshot().allocations) == 4


def test_claim_after_own_release_does_not_conflict() -> None:
    """A release is applied in feed order at once, so the next claim expects the node's current revision."""
    store = MemoryStore()
    a = Replica(store, CONFIG).start(follow=False)
    a.update_resource_stats("h0", host_stats(vcpus=2))
    for i in range(5):
        a.select_destinations(request(vcpus=2, instance_uuids=[f"vm-{i}"]))
        a.release(f"vm-{i}")
    assert a.scheduler.engine.stats.commit_conflicts == 0
    assert store.snapshot().allocations == []


def test_conflict_on_a_node_with_room_is_revalidated_not_redecided() -> None:
    store = MemoryStore()
    a = Replica(store, CONFIG).start(follow=False)
    a.update_resource_stats("h0", host_stats(vcpus=2))
    b = Replica(store, CONFIG).start(follow=False)  # b's view is taken now and never refreshed by a follower
    a.select_destinations(request(vcpus=1, instance_uuids=["from-a"]))
    b.select_destinations(request(vcpus=1, instance_uuids=["from-b"]))  # stale revision: the store refuses once
    assert b.revalidations == 1
    assert b.scheduler.engine.stats.commit_conflicts == 0  # same node re-checked, no second decision
    assert {x.consumer_uuid for x in store.snapshot().allocations} == {"from-a", "from-b"}
    # now h0 is full: a stale claim re-checks, finds no room, and the engine decides again (nothing fits)
    a.release("from-a")
    c = Replica(store, CONFIG).start(follow=False)
    a.select_destinations(request(vcpus=1, instance_uuids=["from-a-again"]))
    c_view_before = c.scheduler.host("h0")["inventories"]["VCPU"]["free"]
    assert c_view_before == 1  # c saw one vCPU free, but it is gone
    with pytest.raises(NoValidHost):
        c.select_destinations(request(vcpus=1, instance_uuids=["from-c"]))
    assert audit(store.snapshot(), CONFIG) == []
    assert "from-c" not in {x.consumer_uuid for x in store.snapshot().allocations}


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_stale_replica_answers_the_booking_another_made(backend: str, tmp_path: Path) -> None:
    """Issue 10: the same instance asked of two instances must get one host, and the store must keep it.

    ``b`` does not follow the feed: it decides from a view without ``a``'s booking (on a host ``b`` has not even
    seen) and claims another host. The store refuses to move the booking; ``b`` answers with ``a``'s host.
    """
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeFilter"],
                                                    "ram_weight_multiplier": -1.0}})  # least free RAM first
    with _two_stores(backend, tmp_path) as (store_a, store_b):
        a = Replica(store_a, config).start(follow=False)
        a.update_resource_stats("h-a", host_stats(memory_mb=4096))
        a.update_resource_stats("h-b", host_stats(memory_mb=8192))
        b = Replica(store_b, config).start(follow=False)
        a.update_resource_stats("h-c", host_stats(memory_mb=2048))
        spec = request(vcpus=1) | {"instance_uuids": ["seq-i"]}
        [[first, *_]] = a.select_destinations(spec)
        assert first.host == "h-c"
        [[second, *_]] = b.select_destinations(spec)
        assert (second.host, second.consumer_uuid) == ("h-c", "seq-i")
        [held] = store_a.snapshot().allocations
        assert (held.consumer_uuid, held.host) == ("seq-i", "h-c")
        assert b.table.allocation("seq-i").host == "h-c"
        assert not any("seq-i" in b.table.node_allocations(key) for key in b.table if key[0] != "h-c")


def test_a_reload_forgets_masks_derived_from_the_old_table() -> None:
    """Issue 10: caches keyed on the static revision must not survive a reload onto a new table."""
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeFilter", "AvailabilityZoneFilter"]}})
    store = MemoryStore()
    replica = Replica(store, config).start(follow=False)
    replica.update_resource_stats("a", host_stats())
    replica.update_resource_stats("b", host_stats())
    replica.update_aggregate({"id": 1, "hosts": ["a"], "metadata": {"availability_zone": "az1"}})
    replica.update_aggregate({"id": 2, "hosts": ["b"], "metadata": {"availability_zone": "az2"}})
    az1 = request(vcpus=1) | {"availability_zone": "az1"}
    assert [c.host for c in replica.candidates(az1)] == ["a"]
    replica.update_aggregate({"id": 1, "hosts": ["b"], "metadata": {"availability_zone": "az1"}})
    replica.update_aggregate({"id": 2, "hosts": ["a"], "metadata": {"availability_zone": "az2"}})
    replica.load()
    fresh = Replica(store, config).start(follow=False)
    assert [c.host for c in fresh.candidates(az1)] == ["b"]
    assert [c.host for c in replica.candidates(az1)] == ["b"]
    [[chosen, *_]] = replica.select_destinations(az1)
    assert chosen.host == "b"


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_report_stamped_earlier_is_applied_in_the_stores_order(backend: str, tmp_path: Path) -> None:
    """Issue 30: the stamp is the receiving server's wall clock, which may be behind another's or step back. The
    last report written is the node's (issue 10 had the store ignore one stamped earlier: answered, and lost)."""
    store = MemoryStore() if backend == "memory" else SQLiteStore(f"sqlite:///{tmp_path}/g.sqlite")
    replica = Replica(store, CONFIG).start(follow=False)
    other = Replica(store, CONFIG).start(follow=False)
    try:
        replica.report({"host": "h", "stats": host_stats(vcpus=8, vcpus_used=6), "reported_at": 2000.0})
        replica.report({"host": "h", "stats": host_stats(vcpus=8, vcpus_used=1), "reported_at": 1000.0})
        [held] = store.snapshot().hosts
        assert (held.reported_at, held.stats.vcpus_used) == (1000.0, 1)
        assert replica.stale_reports == 0
        other.catch_up()
        for r in (replica, other):
            assert describe(r.table, r.table.row("h"))["inventories"]["VCPU"]["reported_used"] == 1
    finally:
        store.close()


def test_the_library_applies_reports_in_the_order_given() -> None:
    from gantt import Scheduler
    sched = Scheduler(CONFIG)
    sched.report({"host": "h", "stats": host_stats(vcpus=8, vcpus_used=6), "reported_at": 2000.0})
    sched.report({"host": "h", "stats": host_stats(vcpus=8, vcpus_used=1), "reported_at": 1000.0})
    assert sched.host("h")["inventories"]["VCPU"]["reported_used"] == 1
    assert sched.table.stale_reports == 0


def _group(policy: str, members: list[str]) -> dict[str, object]:
    return {"uuid": "g-1", "policy": policy, "members": members}


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
@pytest.mark.parametrize("policy", ["anti-affinity", "affinity"])
def test_a_stale_replica_never_breaks_a_server_group(backend: str, policy: str, tmp_path: Path) -> None:
    """Issue 10: group policy is held at claim time, atomically, like capacity.

    ``b`` loaded before ``a`` placed the first member (on a host ``b`` does not even know), so ``b``'s own view
    breaks the policy; its claim must conflict on the group and be decided again on the state that has it.
    """
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeFilter",
                                                                        "ServerGroupAntiAffinityFilter",
                                                                        "ServerGroupAffinityFilter"]}})
    with _two_stores(backend, tmp_path) as (store_a, store_b):
        a = Replica(store_a, config).start(follow=False)
        a.update_resource_stats("h0", host_stats(memory_mb=65536))
        a.update_resource_stats("h1", host_stats(memory_mb=32768))
        b = Replica(store_b, config).start(follow=False)
        if policy == "affinity":
            a.update_resource_stats("h2", host_stats(memory_mb=131072))  # unknown to b: a's first member goes here
        [[first, *_]] = a.select_destinations(request(instance_uuids=["m1"], instance_group=_group(policy, ["m1"])))
        [[second, *_]] = b.select_destinations(request(instance_uuids=["m2"],
                                                       instance_group=_group(policy, ["m1", "m2"])))
        if policy == "anti-affinity":
            assert first.host == "h0" and second.host != first.host
        else:
            assert first.host == "h2" and second.host == first.host
        held = {x.consumer_uuid: x for x in store_a.snapshot().allocations}
        assert held["m1"].group == held["m2"].group == "g-1"


def test_a_stale_group_member_claim_for_a_booked_consumer_answers_the_booking() -> None:
    """Found by the property test: a stale replica's group claim for a consumer another replica had booked
    outside the group took the group's revision from its own discarded claim, and every later claim of the
    group conflicted forever (and the booking's vCPUs went uncounted)."""
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeFilter",
                                                                        "ServerGroupAntiAffinityFilter"]}})
    store = MemoryStore()
    seed = Replica(store, config).start(follow=False)
    for host in ("h0", "h1"):
        seed.update_resource_stats(host, host_stats(vcpus=4))
    a, b = Replica(store, config).start(follow=False), Replica(store, config).start(follow=False)
    [[first, *_]] = a.select_destinations(request(vcpus=2) | {"instance_uuids": ["c1"]})
    group = {"instance_group": {"uuid": "g", "policy": "anti-affinity"}}
    [[again, *_]] = b.select_destinations(request(vcpus=2) | {"instance_uuids": ["c1"]} | group)
    assert again.host == first.host
    row = b.table.row(first.host)
    assert describe(b.table, row)["inventories"]["VCPU"]["free"] == 2
    [[other, *_]] = b.select_destinations(request(vcpus=1) | {"instance_uuids": ["c2"]} | group)
    assert other.consumer_uuid == "c2"


def test_a_repeat_is_not_answered_from_a_booking_released_elsewhere() -> None:
    """Found by the property test: a replica behind the feed answered a repeated request from its own table
    although another instance had released that booking, so the caller held a booking the store did not."""
    store = MemoryStore()
    a, b = Replica(store, CONFIG).start(follow=False), Replica(store, CONFIG).start(follow=False)
    a.update_resource_stats("h", host_stats())
    spec = request(vcpus=1) | {"instance_uuids": ["c1"]}
    a.select_destinations(spec)
    b.catch_up()
    b.release("c1")  # a has not seen this
    [[again, *_]] = a.select_destinations(spec)
    assert [x.consumer_uuid for x in store.snapshot().allocations] == ["c1"]  # booked anew, not imagined
    assert again.consumer_uuid == "c1"


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_stale_replica_never_rolls_back_a_booking_equal_to_its_own(backend: str, tmp_path: Path) -> None:
    """Found by the property test: a stale replica's group claim lost on the group's revision; catching up
    brought the other instance's booking of the same consumer, equal to the local claim, so the table kept the
    local object, and the rollback then released the store's booking locally. The next round claimed anew and
    answered a host the store did not hold."""
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeFilter",
                                                                        "ServerGroupAntiAffinityFilter"]}})
    group = {"instance_group": {"uuid": "g", "policy": "anti-affinity"}}
    spec = request(vcpus=1) | {"instance_uuids": ["c7"]} | group
    with _two_stores(backend, tmp_path) as (store_a, store_b):
        a = Replica(store_a, config).start(follow=False)
        a.update_resource_stats("h0", host_stats(memory_mb=8192))
        a.update_resource_stats("h1", host_stats(memory_mb=4096))
        b = Replica(store_b, config).start(follow=False)
        [[first, *_]] = a.select_destinations(spec)
        assert first.host == "h0"  # the most free RAM; b, behind, decides the same: an equal claim
        a.update_resource_stats("h0", host_stats(memory_mb=8192, memory_mb_used=7000))  # now h1 weighs best
        [[again, *_]] = b.select_destinations(spec)
        assert again.host == "h0"
        assert [(x.consumer_uuid, x.host) for x in store_a.snapshot().allocations] == [("c7", first.host)]
        assert b.table.allocation("c7").host == first.host


def test_a_repeat_reads_other_processes_commits_past_its_own(tmp_path: Path) -> None:
    """Found by the long property run on SQLite: catching up served this handle's own recent revisions and
    stopped there, before a release another process committed after them; the repeat was answered from the
    released booking. A repeat now reads the feed up to the store's head (Replica.sync)."""
    with _two_stores("sqlite", tmp_path) as (store_a, store_b):
        a = Replica(store_a, CONFIG).start(follow=False)
        a.update_resource_stats("h", host_stats())
        spec = request(vcpus=1) | {"instance_uuids": ["c0"]}
        a.select_destinations(spec)
        b = Replica(store_b, CONFIG).start(follow=False)
        a.select_destinations(request(vcpus=1) | {"instance_uuids": ["c10"]})  # a's own newest revision
        b.release("c0")  # another process, after it
        [[again, *_]] = a.select_destinations(spec)
        assert again.consumer_uuid == "c0"
        assert "c0" in {x.consumer_uuid for x in store_a.snapshot().allocations}  # booked anew, not imagined


class _ConflictingStore(MemoryStore):
    """A store that refuses claims (``StoreConflict`` on every node they expect), running ``before`` first."""

    def __init__(self, refusals: int, before: Callable[[], None] = lambda: None) -> None:
        super().__init__()
        self.refusals, self.before, self.claims = refusals, before, 0

    def commit(self, batch: Batch) -> CommitResult:
        if batch.expect:
            self.claims += 1
            if self.claims <= self.refusals:
                self.before()
                raise StoreConflict([(e.host, e.node) for e in batch.expect])
        return super().commit(batch)


def test_a_reload_during_a_decision_decides_again_on_the_new_table() -> None:
    """Issue 12: a request whose claim was made on a table that a reload replaced goes to the new scheduler.

    (It used to stay in the old engine's retry loop, claiming on a table nothing updates any more, and fail with
    "claims kept conflicting".)"""
    holder: list[Replica] = []
    store = _ConflictingStore(refusals=1, before=lambda: holder[0].load())
    replica = Replica(store, CONFIG).start(follow=False)
    holder.append(replica)
    replica.update_resource_stats("h0", host_stats(vcpus=4))
    old = replica.scheduler
    [[chosen, *_]] = replica.select_destinations(request(vcpus=1, instance_uuids=["vm-1"]))
    assert replica.scheduler is not old  # a fresh scheduler (and engine caches) came with the new table
    assert chosen.host == "h0"
    assert [a.consumer_uuid for a in store.snapshot().allocations] == ["vm-1"]
    assert replica.allocation("vm-1").host == "h0"
    assert not old.table.allocations()  # the claim on the replaced table was rolled back
    assert replica.counters()["decisions"] == 2  # the counters came along with the new scheduler


def test_store_conflicts_are_one_budget_per_request() -> None:
    """Issue 12: ``claim_retries`` is the number of store conflicts a request absorbs, re-validations included
    (the engine's and the replica's loops used to multiply: (retries + 1)² commits)."""
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeFilter"]},
                               "gantt": {"claim_retries": 3}})
    store = _ConflictingStore(refusals=1_000)
    replica = Replica(store, config).start(follow=False)
    replica.update_resource_stats("h0", host_stats(vcpus=4))
    with pytest.raises(NoValidHost, match="kept conflicting"):
        replica.select_destinations(request(vcpus=1))
    assert store.claims == 4
    assert store.snapshot().allocations == []


def test_release_answers_the_released_allocation_on_the_library_and_the_replica_alike() -> None:
    """Issue 12: the façade has the library's calls with the library's answers (release returned a revision)."""
    from gantt import Scheduler
    library = Scheduler(CONFIG)
    replica = Replica(MemoryStore(), CONFIG).start(follow=False)
    for face in (library, replica):
        face.update_resource_stats("h0", host_stats(vcpus=2))
        face.select_destinations(request(vcpus=1, instance_uuids=["vm-1"]))
        released = face.release("vm-1")
        assert (type(released).__name__, released.consumer_uuid, released.host) == ("Allocation", "vm-1", "h0")
        assert face.allocations() == []


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_an_operator_change_lands_on_the_newest_report_and_keeps_its_time(backend: str, tmp_path: Path) -> None:
    """Issue 17: disabling a host merges into its record without counting as a report. The change carries no
    report time: the store merges it into the newest record it holds (another instance's report that this one
    has not seen yet) and keeps that record's time."""
    with _two_stores(backend, tmp_path) as (first, second):
        a = Replica(first, CONFIG).start(follow=False)
        b = Replica(second, CONFIG).start(follow=False)
        a.report({"host": "h", "stats": host_stats(vcpus=8), "reported_at": 1000.0})
        b.catch_up()
        b.report({"host": "h", "stats": {"vcpus": 12}, "reported_at": 2000.0})  # a has not seen it
        a.update_host("h", None, HostStats(service=ServiceInfo(disabled=True, disabled_reason="rack power")))
        assert a.stale_reports == 0
        [held] = first.snapshot().hosts
        assert held.reported_at == 2000.0 and held.stats.vcpus == 12
        assert held.stats.service == ServiceInfo(disabled=True, disabled_reason="rack power")
        b.catch_up()
        for r in (a, b):
            shown = describe(r.table, r.table.row("h"))
            assert shown["disabled"] and shown["disabled_reason"] == "rack power"
            assert shown["inventories"]["VCPU"]["total"] == 12
        before = float(b.table.col("updated_at")[b.table.row("h")])
        a.update_host("h", None, HostStats(service=ServiceInfo(disabled=False)))
        b.catch_up()
        assert float(b.table.col("updated_at")[b.table.row("h")]) == before  # no report: the time stays
        with pytest.raises(NotFound):
            a.update_host("nobody", None, HostStats(service=ServiceInfo(disabled=True)))


def test_a_table_grown_through_the_feed_is_frozen_out_of_the_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hosts registered after the start (through another instance's writes) reach the frozen part of the heap as
    a table loaded at the start does: once at GC_FREEZE_ROWS rows, again when the table has doubled, not on
    every write in between."""
    import gc

    import gantt.replication.replica

    monkeypatch.setattr(gantt.replication.replica, "GC_FREEZE_ROWS", 40)
    store = MemoryStore()
    writer = Replica(store, CONFIG).start(follow=False)
    reader = Replica(store, CONFIG).start(follow=False)
    freezes: list[tuple[int, int]] = []  # (the writer's rows, the reader's rows) at each freeze
    monkeypatch.setattr(gc, "freeze", lambda: freezes.append((len(writer.table), len(reader.table))))
    try:
        for i in range(100):
            writer.update_resource_stats(f"h{i}", host_stats())
            reader.catch_up()
        # the writer (its own writes are applied as made), then the reader (from the feed), at 40 and 80 rows
        assert freezes == [(40, 39), (40, 40), (80, 79), (80, 80)]
    finally:
        writer.stop()
        reader.stop()



@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_replicas_keep_nothing_per_released_consumer(backend: str, tmp_path: Path) -> None:
    """A replica remembers the revision it applied each entity at; a released consumer's is forgotten once the feed
    has passed its release (or every consumer ever placed would stay in memory), on the replica that placed and
    released it and on the one that followed, and both still agree."""
    with _two_stores(backend, tmp_path) as (first, second):
        a = Replica(first, CONFIG).start(follow=False)
        b = Replica(second, CONFIG).start(follow=False)
        try:
            a.update_resource_stats("h", host_stats(vcpus=8))
            for i in range(20):
                a.select_destinations(request(vcpus=1) | {"instance_uuids": [f"vm-{i}"]})
                b.catch_up()
                a.release(f"vm-{i}")
                a.sync()
                b.catch_up()
            for replica in (a, b):
                assert not [key for key in replica._applied if key[0] == "allocation"]
                assert not replica.allocations()
                assert replica.host("h")["inventories"]["VCPU"]["free"] == 8
        finally:
            a.close()
            b.close()


def test_a_release_applied_ahead_of_the_feed_is_remembered_until_the_feed_passes_it(tmp_path: Path) -> None:
    """Our own write can be applied before the feed brings the changes that precede it (etcd's feed may lag its
    commit): the release's revision must stay remembered, so that the feed's older booking of the same consumer,
    arriving after it, is not applied again."""
    replica = Replica(SQLiteStore(f"sqlite:///{tmp_path}/gantt.sqlite"), CONFIG).start_owning(follow=False)
    try:
        replica.update_resource_stats("h", host_stats(vcpus=8))
        base = replica.revision
        booking = Allocation(consumer_uuid="vm-1", host="h", nodename="h", resources={"VCPU": 2})
        replica.apply([Change(revision=base + 2, kind="allocation_deleted", allocation=booking)], own="write")
        replica.apply([Change(revision=base + 1, kind="allocation", allocation=booking)], since=replica.revision)
        assert replica.table.allocation("vm-1") is None
        assert replica.host("h")["inventories"]["VCPU"]["free"] == 8
        replica.apply([Change(revision=base + 2, kind="allocation_deleted", allocation=booking)],
                      since=replica.revision)
        assert replica.revision == base + 2 and replica.table.allocation("vm-1") is None
    finally:
        replica.close()


class _Reloading(Replica):
    """A replica whose table is swapped in afresh from the store (``load``, a real reload) right before each of
    the first ``reloads`` commit checks: every decision up to then finds its table replaced."""

    reloads = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        expects = self._claims._expects

        def reloading(table: Any, allocations: list[Allocation]) -> Any:
            if self.reloads:
                self.reloads -= 1
                self.load()
            return expects(table, allocations)

        self._claims._expects = reloading  # type: ignore[method-assign]  # the commit check, reloading first


@pytest.mark.parametrize("reloads", [1, 4, DECISION_RELOADS])
def test_a_request_rides_out_a_run_of_reloads_and_is_decided_on_the_last_table(tmp_path: Path,
                                                                                reloads: int) -> None:
    """Reloads come in runs (a compaction past a lagging follower, again and again): a request decides again on
    each new table, up to DECISION_RELOADS times, and is placed once, where the store holds it."""
    with SQLiteStore(f"sqlite:///{tmp_path}/gantt.sqlite") as store:
        replica = _Reloading(store, CONFIG).start(follow=False)
        replica.update_resource_stats("h1", host_stats())
        replica.reloads = reloads
        [[selection, *_]] = replica.select_destinations(request(instance_uuids=["c1"]))
        assert selection.host == "h1" and replica.reloads == 0
        assert store.snapshot().allocations == [replica.allocation("c1")]


def test_a_request_gives_up_past_its_reloads_and_leaves_nothing_booked(tmp_path: Path) -> None:
    with SQLiteStore(f"sqlite:///{tmp_path}/gantt.sqlite") as store:
        replica = _Reloading(store, CONFIG).start(follow=False)
        replica.update_resource_stats("h1", host_stats())
        replica.reloads = DECISION_RELOADS + 1
        with pytest.raises(TableReplaced):
            replica.select_destinations(request(instance_uuids=["c1"]))
        assert store.snapshot().allocations == [] and replica.allocations() == []
        replica.reloads = 0
        assert replica.select_destinations(request(instance_uuids=["c1"]))[0][0].host == "h1"
