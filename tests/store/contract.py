"""The store contract, written once and run against every backend (memory here; sqlite and etcd beside it).

A backend's test module imports ``CONTRACT`` and parametrizes a ``store`` fixture; see test_memory.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import msgspec
import pytest

from gantt.model import (
    Aggregate,
    Allocation,
    AllocationPart,
    ConsumerConflict,
    GenerationConflict,
    HostReport,
    HostStats,
    InstanceInfo,
    InsufficientCapacity,
    Inventory,
    NotFound,
    Provider,
    Record,
    aggregate_node,
    group_node,
)
from gantt.store.base import (
    Batch,
    Capacity,
    CommitResult,
    ConsumerGeneration,
    ConsumerHeld,
    Expect,
    Generation,
    HostInUse,
    Membership,
    Merge,
    RepeatOf,
    Store,
    StoreConflict,
)


def report(host: str, node: str | None = None, **stats: object) -> HostReport:
    base: dict[str, object] = {"vcpus": 8, "memory_mb": 8192, "local_gb": 100}
    base.update(stats)
    return HostReport(host=host, node=node, stats=HostStats(**base), reported_at=1000.0)  # type: ignore[arg-type]


def alloc(consumer: str, host: str, node: str | None = None, vcpu: int = 1) -> Allocation:
    return Allocation(consumer_uuid=consumer, host=host, nodename=node or host, resources={"VCPU": vcpu},
                      created_at=1000.0)


def check_snapshot_and_feed(store: Store) -> None:
    r1 = store.commit(Batch(reports=[report("h1")])).revision
    r2 = store.commit(Batch(aggregates=[Aggregate(id=1, name="a", hosts=["h1"],
                                                  metadata={"availability_zone": "az1"})])).revision
    assert r2 > r1 > 0
    snap = store.snapshot()
    assert snap.revision == r2
    assert [h.host for h in snap.hosts] == ["h1"]
    assert snap.aggregates[0].metadata == {"availability_zone": "az1"}
    feed = store.changes(0, timeout=0)
    assert [c.kind for c in feed] == ["host", "aggregate"]
    assert [c.revision for c in feed] == [r1, r2]
    assert store.changes(r2, timeout=0) == []


def check_reports_merge(store: Store) -> None:
    store.commit(Batch(reports=[report("h1", hypervisor_type="QEMU",
                                       inventories={"CUSTOM_GPU": Inventory(total=2)})]))
    store.commit(Batch(reports=[HostReport(host="h1", stats=HostStats(vcpus_used=3), reported_at=1001.0)]))
    [merged] = store.snapshot().hosts
    assert merged.stats.vcpus == 8 and merged.stats.vcpus_used == 3
    assert merged.stats.hypervisor_type == "QEMU"
    assert merged.stats.inventories == {"CUSTOM_GPU": Inventory(total=2)}
    assert merged.reported_at == 1001.0


def check_conditional_claims(store: Store) -> None:
    rev = store.commit(Batch(reports=[report("h1")])).revision
    store.commit(Batch(expect=[Expect("h1", "h1", rev)], allocations=[alloc("c1", "h1")]))
    with pytest.raises(StoreConflict) as err:
        store.commit(Batch(expect=[Expect("h1", "h1", rev)], allocations=[alloc("c2", "h1")]))
    assert err.value.keys == [("h1", "h1")]
    snap = store.snapshot()
    assert [a.consumer_uuid for a in snap.allocations] == ["c1"]  # nothing of the losing batch


def check_a_booked_consumer_is_never_moved(store: Store) -> None:
    """A claim for a consumer that already holds an allocation changes nothing and names the consumer."""
    rev = store.commit(Batch(reports=[report("h1"), report("h2")])).revision
    booked = store.commit(Batch(expect=[Expect("h1", "h1", rev)], allocations=[alloc("c1", "h1")])).revision
    with pytest.raises(ConsumerHeld) as err:  # h2 is untouched, so only the consumer check can refuse this
        store.commit(Batch(expect=[Expect("h2", "h2", rev)], allocations=[alloc("c2", "h2"), alloc("c1", "h2")]))
    assert err.value.consumers == ["c1"]
    assert err.value.revision >= booked
    snap = store.snapshot()
    assert [(a.consumer_uuid, a.host) for a in snap.allocations] == [("c1", "h1")]
    assert snap.revision == booked


def check_server_group_members_serialize(store: Store) -> None:
    """A member's claim moves its group's revision; a claim expecting the old one conflicts on the group."""
    rev = store.commit(Batch(reports=[report("h1"), report("h2")])).revision
    group = group_node("g")
    first = Allocation(consumer_uuid="m1", host="h1", nodename="h1", resources={"VCPU": 1}, group="g")
    moved = store.commit(Batch(expect=[Expect("h1", "h1", rev), Expect(*group, 0)], allocations=[first])).revision
    revisions = {(nr.host, nr.node): nr.revision for nr in store.snapshot().node_revisions}
    assert revisions[group] == moved
    second = Allocation(consumer_uuid="m2", host="h2", nodename="h2", resources={"VCPU": 1}, group="g")
    with pytest.raises(StoreConflict) as err:  # h2 is untouched: only the group refuses
        store.commit(Batch(expect=[Expect("h2", "h2", rev), Expect(*group, 0)], allocations=[second]))
    assert err.value.keys == [group]
    store.commit(Batch(expect=[Expect("h2", "h2", rev), Expect(*group, moved)], allocations=[second]))
    released = store.commit(Batch(releases=["m1"])).revision
    assert {(nr.host, nr.node): nr.revision for nr in store.snapshot().node_revisions}[group] == released


def check_a_move_replaces_and_holds_the_source(store: Store) -> None:
    """A move's batch replaces the instance's allocation (``replaces``) and books the migration on the source;
    the node the instance leaves counts as changed; the feed says what was replaced; a revert is the reverse."""
    rev = store.commit(Batch(reports=[report("h1"), report("h2")])).revision
    store.commit(Batch(expect=[Expect("h1", "h1", rev)], allocations=[alloc("x", "h1")]))
    revisions = {(nr.host, nr.node): nr.revision for nr in store.snapshot().node_revisions}
    dest = Allocation(consumer_uuid="x", host="h2", nodename="h2", resources={"VCPU": 2}, migration_uuid="m")
    source = Allocation(consumer_uuid="m", host="h1", nodename="h1", resources={"VCPU": 1}, instance_uuid="x")
    with pytest.raises(ConsumerHeld):  # without ``replaces`` the instance's booking is never moved
        store.commit(Batch(expect=[Expect("h2", "h2", revisions[("h2", "h2")])], allocations=[dest]))
    with pytest.raises(NotFound):  # a move of a consumer that holds nothing
        store.commit(Batch(allocations=[alloc("y", "h2")], replaces=["y"]))
    moved = store.commit(Batch(expect=[Expect("h1", "h1", revisions[("h1", "h1")]),
                                       Expect("h2", "h2", revisions[("h2", "h2")])],
                               allocations=[source, dest], replaces=["x"])).revision
    snap = store.snapshot()
    assert sorted((a.consumer_uuid, a.host) for a in snap.allocations) == [("m", "h1"), ("x", "h2")]
    revisions = {(nr.host, nr.node): nr.revision for nr in snap.node_revisions}
    assert revisions[("h1", "h1")] == revisions[("h2", "h2")] == moved
    feed = store.changes(moved - 1, timeout=0)
    [change] = [c for c in feed if c.allocation and c.allocation.consumer_uuid == "x"]
    # The feed says which node the move left: what it replaced, or (a feed without old values, etcd's) that
    # node's usage change in the same revision.
    left = {c.node for c in feed if c.kind == "usage" and c.revision == moved}
    assert (change.replaced is not None and (change.replaced.host, change.replaced.resources) == ("h1", {"VCPU": 1})) \
        or (change.replaced is None and ("h1", "h1") in left)
    # revert: the instance back on h1 with the source's resources, the migration released, all at once
    back = Allocation(consumer_uuid="x", host="h1", nodename="h1", resources={"VCPU": 1})
    with pytest.raises(StoreConflict):  # expects the destination as it was before the move
        store.commit(Batch(expect=[Expect("h2", "h2", rev)], allocations=[back], releases=["m"],
                           replaces=["x"]))
    reverted = store.commit(Batch(expect=[Expect("h2", "h2", moved)], allocations=[back], releases=["m"],
                                  replaces=["x"])).revision
    snap = store.snapshot()
    assert [(a.consumer_uuid, a.host) for a in snap.allocations] == [("x", "h1")]
    revisions = {(nr.host, nr.node): nr.revision for nr in snap.node_revisions}
    assert revisions[("h2", "h2")] == revisions[("h1", "h1")] == reverted
    with pytest.raises(NotFound):  # the migration is gone: a second revert (or a confirm) changes nothing
        store.commit(Batch(allocations=[back], releases=["m"], replaces=["x"]))
    assert store.snapshot().revision == reverted


def check_a_refusal_is_not_a_write_error(store: Store) -> None:
    """``last_write_error`` is for a store that cannot write; conflicts and unknown names are the batch's own."""
    rev = store.commit(Batch(reports=[report("h1"), report("h2")])).revision
    store.commit(Batch(expect=[Expect("h1", "h1", rev)], allocations=[alloc("c1", "h1")]))
    with pytest.raises(StoreConflict):
        store.commit(Batch(expect=[Expect("h1", "h1", rev)], allocations=[alloc("c2", "h1")]))
    with pytest.raises(ConsumerHeld):
        store.commit(Batch(expect=[Expect("h2", "h2", rev)], allocations=[alloc("c1", "h2")]))
    with pytest.raises(NotFound):
        store.commit(Batch(releases=["nobody"]))
    assert store.last_write_error is None


def check_batch_is_atomic(store: Store) -> None:
    rev = store.commit(Batch(reports=[report("h1"), report("h2")])).revision
    store.commit(Batch(allocations=[alloc("x", "h2")]))
    with pytest.raises(StoreConflict):
        store.commit(Batch(expect=[Expect("h1", "h1", rev), Expect("h2", "h2", rev)],
                           allocations=[alloc("a", "h1"), alloc("b", "h2")]))
    assert {a.consumer_uuid for a in store.snapshot().allocations} == {"x"}


def check_releases_and_deletes(store: Store) -> None:
    store.commit(Batch(reports=[report("h1"), report("bm", "n1"), report("bm", "n2")],
                       aggregates=[Aggregate(id="7", hosts=["h1"])]))
    store.commit(Batch(allocations=[alloc("c1", "h1"), alloc("c2", "bm", "n1")]))
    with pytest.raises(NotFound):
        store.commit(Batch(releases=["nope"]))
    store.commit(Batch(releases=["nope"], lenient_releases=True))
    store.commit(Batch(releases=["c1"]))
    store.commit(Batch(delete_hosts=[("bm", None)]))
    store.commit(Batch(delete_aggregates=["7"]))
    with pytest.raises(NotFound):
        store.commit(Batch(delete_aggregates=["7"]))
    snap = store.snapshot()
    assert [h.host for h in snap.hosts] == ["h1"]
    assert snap.allocations == [] and snap.aggregates == []
    kinds = [c.kind for c in store.changes(0, timeout=0)]
    assert kinds.count("host_deleted") == 2 and "allocation_deleted" in kinds


def at(when: float, host: str = "h1", **stats: object) -> HostReport:
    return msgspec.structs.replace(report(host, **stats), reported_at=when)


def check_an_unchanged_report_is_a_touch(store: Store) -> None:
    """A report that changes nothing but its time writes a touch: a few bytes in the feed, no usage revision moved,
    the record's time lifted in reads and snapshots; within ``touch_interval`` of the held time, nothing."""
    first = store.commit(Batch(reports=[at(1000.0, vcpus_used=2)]))
    touch = store.commit(Batch(reports=[at(1010.0, vcpus_used=2)]))
    assert [(c.kind, c.node, c.at) for c in touch.changes] == [("touch", ("h1", "h1"), 1010.0)]
    assert touch.revision > first.revision
    [held] = store.snapshot().hosts
    assert held.reported_at == 1010.0 and held.stats == at(0.0, vcpus_used=2).stats
    # the node's usage did not change: a claim made on what the first report showed still holds
    store.commit(Batch(expect=[Expect("h1", "h1", first.revision)], allocations=[alloc("c1", "h1")]))
    quiet = store.commit(Batch(reports=[at(1012.0, vcpus_used=2)], touch_interval=5.0))
    assert quiet.changes == [] and quiet.quiet == 1
    assert store.snapshot().hosts[0].reported_at == 1010.0
    # Stamped before the time held (a server whose clock is behind, or stepped back): still written, in the
    # store's order, a touch or a record as it repeats or not; the record written drops the touch it follows.
    behind = store.commit(Batch(reports=[at(1002.0, vcpus_used=2)], touch_interval=5.0))
    assert [(c.kind, c.at) for c in behind.changes] == [("touch", 1002.0)]
    assert store.snapshot().hosts[0].reported_at == 1002.0
    changed = store.commit(Batch(reports=[at(1001.0, vcpus_used=3)], touch_interval=5.0))
    assert [c.kind for c in changed.changes] == ["host"]
    assert changed.changes[0].host is not None and changed.changes[0].host.reported_at == 1001.0
    [held] = store.snapshot().hosts
    assert (held.stats.vcpus_used, held.reported_at) == (3, 1001.0)
    store.commit(Batch(delete_hosts=[("h1", None)]))
    store.commit(Batch(reports=[at(1001.0)]))  # the node's liveness went with it: nothing lifts the new one
    assert store.snapshot().hosts[0].reported_at == 1001.0
    kinds = [c.kind for c in store.changes(0, timeout=0) if c.kind != "allocation_deleted"]  # etcd lists those
    assert kinds == ["host", "touch", "allocation", "touch", "host", "host_deleted", "host"]


def check_a_named_repeat_is_a_touch_only_at_its_revision(store: Store) -> None:
    """``Batch.repeat_of``: reports a replica took for repeats of the record it held at a usage revision, and
    answered before writing. Each is a touch (nothing within ``touch_interval`` after the time the store holds,
    which a later touch may have moved past the one named); the record changed since, what the store holds stands
    (the repeat may have been answered before that write: never rolled back by it) and the report is a touch of
    it; the node deleted, or never written, nothing."""
    first = store.commit(Batch(reports=[at(1000.0, vcpus_used=2)]))
    seen = RepeatOf("h1", "h1", first.revision, 1000.0)

    def repeat(when: float, named: RepeatOf = seen, interval: float = 0.0) -> CommitResult:
        return store.commit(Batch(reports=[at(when, named.host, vcpus_used=2)], repeat_of=[named],
                                  touch_interval=interval, existing_only=True))

    assert [(c.kind, c.node, c.at) for c in repeat(1010.0).changes] == [("touch", ("h1", "h1"), 1010.0)]
    quiet = repeat(1012.0, interval=5.0)  # 12 s after the time named, 2 s after the time held
    assert quiet.changes == [] and quiet.quiet == 1
    store.commit(Batch(reports=[at(1030.0, vcpus_used=2)]))  # another writer's touch, later than the next repeat
    late = repeat(1020.0)  # stamped before the time held: written all the same (clocks differ)
    assert [(c.kind, c.at) for c in late.changes] == [("touch", 1020.0)]
    assert store.snapshot().hosts[0].reported_at == 1020.0
    changed = store.commit(Batch(reports=[at(1040.0, vcpus_used=3, num_io_ops=4)]))  # another writer's change
    written = repeat(1050.0)
    assert [(c.kind, c.at) for c in written.changes] == [("touch", 1050.0)]
    [held] = store.snapshot().hosts
    assert (held.stats.vcpus_used, held.stats.num_io_ops, held.reported_at) == (3, 4, 1050.0)
    store.commit(Batch(delete_hosts=[("h1", None)]))
    assert repeat(1060.0, RepeatOf("h1", "h1", changed.revision, 1050.0)).changes == []
    assert repeat(1060.0, RepeatOf("h9", "h9", 0, 900.0)).changes == []  # a node the store never held
    assert store.snapshot().hosts == []


def check_instances(store: Store) -> None:
    store.commit(Batch(reports=[report("h1")]))
    store.commit(Batch(instances=[InstanceInfo(host="h1", instances=["i1", "i2"])]))
    assert store.snapshot().instances == [InstanceInfo(host="h1", instances=["i1", "i2"])]


def check_feed_waits_for_a_change(store: Store) -> None:
    head = store.commit(Batch(reports=[report("h1")])).revision
    timer = threading.Timer(0.2, lambda: store.commit(Batch(reports=[report("h2")])))
    timer.start()
    try:
        changes = store.changes(head, timeout=5.0)
    finally:
        timer.join()
    assert [c.host.host for c in changes if c.host] == ["h2"]


def provider_record(uuid: str, generation: int, **stats: object) -> HostReport:
    return HostReport(host=uuid, node=uuid, stats=HostStats(uuid=uuid, **stats),  # type: ignore[arg-type]
                      provider=Provider(uuid=uuid, name=f"rp-{uuid}", generation=generation))


def check_provider_generations(store: Store) -> None:
    """A provider write lands only while the store holds the generation it names; None: the node is new."""
    store.commit(Batch(generations=[Generation("p1", "p1", None)], providers=[provider_record("p1", 0)]))
    with pytest.raises(GenerationConflict) as err:  # created twice
        store.commit(Batch(generations=[Generation("p1", "p1", None)], providers=[provider_record("p1", 0)]))
    assert err.value.keys == [("p1", "p1")]
    gpu = {"CUSTOM_GPU": Inventory(total=4)}
    store.commit(Batch(generations=[Generation("p1", "p1", 0)], providers=[provider_record("p1", 1, inventories=gpu)]))
    with pytest.raises(GenerationConflict):  # a writer that read generation 0 lost to the one above
        store.commit(Batch(generations=[Generation("p1", "p1", 0)], providers=[provider_record("p1", 1)]))
    [held] = store.snapshot().hosts
    assert held.provider is not None and held.provider.generation == 1
    assert held.stats.inventories == gpu


def check_provider_puts_replace_whole_records(store: Store) -> None:
    """A provider put is the node's whole record (an inventory it leaves out is gone); a later report merges
    into it and keeps its provider."""
    store.commit(Batch(reports=[report("h1", inventories={"CUSTOM_A": Inventory(total=1)})]))
    [before] = store.snapshot().hosts
    bare = HostReport(host="h1", node=None, stats=HostStats(uuid="u1"), reported_at=before.reported_at,
                      provider=Provider(uuid="u1", name="h1", generation=1))
    store.commit(Batch(generations=[Generation("h1", "h1", 0)], providers=[bare]))
    [after] = store.snapshot().hosts
    assert after.stats.inventories is None and after.stats.vcpus is None
    store.commit(Batch(reports=[HostReport(host="h1", stats=HostStats(vcpus_used=2), reported_at=1001.0)]))
    [merged] = store.snapshot().hosts
    assert merged.provider == bare.provider and merged.stats.vcpus_used == 2
    assert [c.kind for c in store.changes(0, timeout=0)] == ["host", "host", "host"]


def check_a_merge_makes_one_node_of_two_names(store: Store) -> None:
    """Issue 33: the record Placement made for provider u (keyed by u) and a report of the same node under its
    host's name become one record at the report's name, in the report's commit: Placement's provider, generation,
    inventories and traits kept, the report's figures on top, every allocation's part moved (consumer generations
    kept), Placement's aggregate membership by the host's name, the old name deleted."""
    u = "0000000a-0000-0000-0000-000000000001"
    placed = HostReport(host=u, node=u, stats=HostStats(uuid=u, hypervisor_hostname="n1", traits=["CUSTOM_A"],
                                                        inventories={"VCPU": Inventory(total=8),
                                                                     "PCPU": Inventory(total=4)}),
                        provider=Provider(uuid=u, name="n1", generation=3))
    store.commit(Batch(reports=[report("x")], providers=[placed], aggregates=[Aggregate(id="a1", hosts=[u, "y"])]))
    spans = Allocation(consumer_uuid="c2", host="x", nodename="x", resources={"VCPU": 1},
                       extra=[AllocationPart(host=u, nodename=u, resources={"PCPU": 1})], consumer_generation=4)
    store.commit(Batch(allocations=[msgspec.structs.replace(alloc("c1", u, vcpu=2), consumer_generation=1), spans]))
    start = store.changes(0, timeout=0)[-1].revision
    merge = Merge(u, u, "h1", "n1", u)
    store.commit(Batch(reports=[report("h1", "n1", uuid=u, vcpus_used=1)], merges=[merge]))
    snap = store.snapshot()
    assert sorted((h.host, h.nodename) for h in snap.hosts) == [("h1", "n1"), ("x", "x")]
    [one] = [h for h in snap.hosts if h.host == "h1"]
    assert one.provider == placed.provider and one.stats.traits == ["CUSTOM_A"]
    assert one.stats.inventories == placed.stats.inventories and (one.stats.vcpus, one.stats.vcpus_used) == (8, 1)
    held = {a.consumer_uuid: a for a in snap.allocations}
    assert (held["c1"].host, held["c1"].nodename, held["c1"].consumer_generation) == ("h1", "n1", 1)
    assert held["c2"].parts() == [(("x", "x"), {"VCPU": 1}), (("h1", "n1"), {"PCPU": 1})]
    assert held["c2"].consumer_generation == 4
    assert [a.hosts for a in snap.aggregates] == [["y", "h1"]]
    kinds = [c.kind for c in store.changes(start, timeout=0) if c.kind != "usage"]  # (etcd's feed adds those)
    assert sorted(kinds) == ["aggregate", "allocation", "allocation", "host", "host_deleted"]
    # merged already (or the old name gone): nothing to do, and a report's own write is all there is
    again = store.commit(Batch(reports=[report("h1", "n1", uuid=u, vcpus_used=2)], merges=[merge]))
    assert [c.kind for c in again.changes] == ["host"]
    assert sorted(store.snapshot().allocations, key=lambda a: a.consumer_uuid)[0].nodename == "n1"


def check_aggregate_writes_move_their_pseudo_node(store: Store) -> None:
    """A write computed from an aggregate's members expects the aggregate's pseudo-node: of two such writes
    that read the same members, the second conflicts instead of dropping the first one's member."""
    first = store.commit(Batch(aggregates=[Aggregate(id="a", hosts=["h1"])])).revision
    key = aggregate_node("a")
    store.commit(Batch(expect=[Expect(*key, first)], aggregates=[Aggregate(id="a", hosts=["h1", "h2"])]))
    with pytest.raises(StoreConflict):
        store.commit(Batch(expect=[Expect(*key, first)], aggregates=[Aggregate(id="a", hosts=["h1", "h3"])]))
    [kept] = store.snapshot().aggregates
    assert kept.hosts == ["h1", "h2"]


def check_memberships_apply_to_what_the_store_holds(store: Store) -> None:
    """Joins and leaves are applied to the aggregate as stored at commit, not as the writer saw it: two writers
    who both read a one-member aggregate both land their member. A join creates a missing aggregate (id = uuid);
    a join already made, or a leave of what is not a member, writes nothing; each change moves the pseudo-node."""
    store.commit(Batch(memberships=[Membership("a", "h1", join=True)]))
    store.commit(Batch(memberships=[Membership("a", "h2", join=True)]))
    third = store.commit(Batch(memberships=[Membership("a", "h3", join=True), Membership("b", "h3", join=True)]))
    [a, b] = sorted(store.snapshot().aggregates, key=lambda x: x.key)
    assert (a.id, a.uuid, a.hosts) == ("a", "a", ["h1", "h2", "h3"]) and b.hosts == ["h3"]
    assert store.commit(Batch(memberships=[Membership("a", "h3", join=True),
                                           Membership("c", "h1", join=False)])).changes == []
    key = aggregate_node("a")
    store.commit(Batch(expect=[Expect(*key, third.revision)], memberships=[Membership("a", "h2", join=False)]))
    with pytest.raises(StoreConflict):  # the leave moved the pseudo-node
        store.commit(Batch(expect=[Expect(*key, third.revision)], memberships=[Membership("a", "h9", join=True)]))
    a = next(x for x in store.snapshot().aggregates if x.key == "a")
    assert a.hosts == ["h1", "h3"]
    assert [c.aggregate.hosts for c in store.changes(0, timeout=0) if c.aggregate and c.aggregate.key == "a"] == [
        ["h1"], ["h1", "h2"], ["h1", "h2", "h3"], ["h1", "h3"]]


def check_records(store: Store) -> None:
    """Custom resource classes and traits: put, deleted (NotFound when absent), in snapshots and the feed."""
    first = store.commit(Batch(records=[Record(kind="trait", name="CUSTOM_A"),
                                        Record(kind="resource_class", name="CUSTOM_A")])).revision
    assert sorted(r.key for r in store.snapshot().records) == [("resource_class", "CUSTOM_A"), ("trait", "CUSTOM_A")]
    store.commit(Batch(delete_records=[("trait", "CUSTOM_A")]))
    assert [r.key for r in store.snapshot().records] == [("resource_class", "CUSTOM_A")]
    with pytest.raises(NotFound):
        store.commit(Batch(delete_records=[("trait", "CUSTOM_A")]))
    feed = store.changes(0, timeout=0)
    assert [(c.kind, c.record.key if c.record else None) for c in feed] == [
        ("record", ("trait", "CUSTOM_A")), ("record", ("resource_class", "CUSTOM_A")),
        ("record_deleted", ("trait", "CUSTOM_A"))]
    assert feed[0].revision == first


def spanning(consumer: str, vcpu: int, disk: int, generation: int | None = None) -> Allocation:
    """VCPU on provider p1, DISK_GB on provider p2 (a sharing pool): one consumer, one record, two nodes."""
    return Allocation(consumer_uuid=consumer, host="p1", nodename="p1", resources={"VCPU": vcpu},
                      extra=[AllocationPart(host="p2", nodename="p2", resources={"DISK_GB": disk})],
                      consumer_generation=generation, project_id="p", user_id="u")


def two_providers(store: Store) -> int:
    return store.commit(Batch(providers=[
        provider_record("p1", 0, inventories={"VCPU": Inventory(total=4, max_unit=4)}),
        provider_record("p2", 0, inventories={"DISK_GB": Inventory(total=100, step_size=10, max_unit=100)})],
        generations=[Generation("p1", "p1", None), Generation("p2", "p2", None)])).revision


def check_an_allocation_spans_nodes(store: Store) -> None:
    """One consumer's record across two nodes: both nodes' usage revisions move with it, it loads back whole,
    and deleting either node takes that node's part (and its index) away, never the part on the other (issue 30:
    a deletion freed another provider's usage); a deletion that must refuse while allocations are there does."""
    two_providers(store)
    put = store.commit(Batch(allocations=[spanning("c1", 2, 20, 1)])).revision
    revisions = {(nr.host, nr.node): nr.revision for nr in store.snapshot().node_revisions}
    assert revisions[("p1", "p1")] == revisions[("p2", "p2")] == put
    [held] = store.snapshot().allocations
    assert held == spanning("c1", 2, 20, 1)
    released = store.commit(Batch(releases=["c1"])).revision
    revisions = {(nr.host, nr.node): nr.revision for nr in store.snapshot().node_revisions}
    assert revisions[("p1", "p1")] == revisions[("p2", "p2")] == released
    store.commit(Batch(allocations=[spanning("c2", 1, 10), spanning("c3", 1, 10)]))
    only_p1 = Allocation(consumer_uuid="c3", host="p1", nodename="p1", resources={"VCPU": 1})
    store.commit(Batch(allocations=[only_p1], replaces=["c3"]))  # c3 leaves the pool
    with pytest.raises(HostInUse) as refused:
        store.commit(Batch(delete_hosts=[("p2", None)], refuse_held_hosts=True))
    assert refused.value.consumers == ["c2"]
    assert len(store.snapshot().allocations) == 2  # nothing written
    deleted = store.commit(Batch(delete_hosts=[("p2", None)])).revision  # the sharing pool goes, with c2's part
    c2_on_p1 = Allocation(consumer_uuid="c2", host="p1", nodename="p1", resources={"VCPU": 1},
                          project_id="p", user_id="u")
    assert sorted(store.snapshot().allocations, key=lambda a: a.consumer_uuid) == [c2_on_p1, only_p1]
    revisions = {(nr.host, nr.node): nr.revision for nr in store.snapshot().node_revisions}
    assert revisions[("p1", "p1")] == deleted  # c2's record there changed: a claim read before must not land
    # the index no longer names c2 on p2: a p2 made again holds nothing, and goes without force
    store.commit(Batch(providers=[provider_record("p2", 0, inventories={"DISK_GB": Inventory(total=100)})],
                       generations=[Generation("p2", "p2", None)]))
    store.commit(Batch(delete_hosts=[("p2", None)], refuse_held_hosts=True))


def check_placement_writes_check_capacity_and_generations(store: Store) -> None:
    """Placement's allocation writes: room per node and class (min/max/step too), the consumer generation
    compared and the touched providers' generations moved, all in the one commit."""
    two_providers(store)
    checked = Capacity(default_ratios={})
    store.commit(Batch(allocations=[spanning("c1", 3, 60, 1)], consumers=[ConsumerGeneration("c1", None)],
                       bump_providers=[("p1", "p1"), ("p2", "p2")], capacity=checked))
    assert {h.host: h.provider.generation for h in store.snapshot().hosts if h.provider} == {"p1": 1, "p2": 1}
    with pytest.raises(InsufficientCapacity, match=r"'DISK_GB' on resource provider 'p2'\. The requested amount "
                                                   "would exceed"):
        store.commit(Batch(allocations=[spanning("c2", 1, 50, 1)], capacity=checked))
    with pytest.raises(InsufficientCapacity, match="violate inventory constraints"):
        store.commit(Batch(allocations=[spanning("c2", 1, 15, 1)], capacity=checked))
    with pytest.raises(ConsumerConflict, match="expected 1 but got 0"):
        store.commit(Batch(allocations=[spanning("c1", 1, 10, 1)], replaces=["c1"],
                           consumers=[ConsumerGeneration("c1", 0)], capacity=checked))
    with pytest.raises(ConsumerConflict, match="expected 1 but got null"):
        store.commit(Batch(allocations=[spanning("c1", 1, 10, 1)], replaces=["c1"],
                           consumers=[ConsumerGeneration("c1", None)], capacity=checked))
    # Replacing its own allocation with as much again fits: the old one is not counted twice.
    store.commit(Batch(allocations=[spanning("c1", 4, 100, 2)], replaces=["c1"],
                       consumers=[ConsumerGeneration("c1", 1)], bump_providers=[("p1", "p1")], capacity=checked))
    [held] = store.snapshot().allocations
    assert held.consumer_generation == 2 and held.resources == {"VCPU": 4}
    assert {h.host: h.provider.generation for h in store.snapshot().hosts if h.provider} == {"p1": 2, "p2": 1}
    with pytest.raises(InsufficientCapacity, match=r"'VCPU' on resource provider 'p2' invalid\."):
        store.commit(Batch(allocations=[Allocation(consumer_uuid="c3", host="p2", nodename="p2",
                                                   resources={"VCPU": 1})], capacity=checked))


CONTRACT: list[Callable[[Store], None]] = [
    check_snapshot_and_feed,
    check_reports_merge,
    check_conditional_claims,
    check_a_booked_consumer_is_never_moved,
    check_server_group_members_serialize,
    check_memberships_apply_to_what_the_store_holds,
    check_a_move_replaces_and_holds_the_source,
    check_batch_is_atomic,
    check_a_refusal_is_not_a_write_error,
    check_releases_and_deletes,
    check_instances,
    check_an_unchanged_report_is_a_touch,
    check_a_named_repeat_is_a_touch_only_at_its_revision,
    check_feed_waits_for_a_change,
    check_provider_generations,
    check_aggregate_writes_move_their_pseudo_node,
    check_provider_puts_replace_whole_records,
    check_a_merge_makes_one_node_of_two_names,
    check_records,
    check_an_allocation_spans_nodes,
    check_placement_writes_check_capacity_and_generations,
]
