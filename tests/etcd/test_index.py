"""etcd's per-node index of allocations (``placed/<host>/<node>/<consumer>``) and its ``last-write`` key: a
capacity check reads the allocations on the nodes it checks without scanning every consumer's, and ``barrier``
reads one key instead of sorting the prefix. Both must hold on a store written before them (no index, no
``last-write``) as on a fresh one."""

from __future__ import annotations

import pytest

from gantt.model import Allocation, InsufficientCapacity
from gantt.store.base import Batch, Capacity, ConsumerGeneration
from gantt.store.etcd import EtcdStore, pb
from gantt.store.etcd_keys import prefix_end
from tests.store.contract import alloc, report, spanning, two_providers

pytestmark = pytest.mark.etcd
CHECKED = Capacity(default_ratios={})


def entries(store: EtcdStore) -> set[tuple[str, str]]:
    """(node, consumer) of every index entry."""
    keys = store.keys
    resp = store._client.call("Range", pb.RangeRequest(key=keys.placed, range_end=prefix_end(keys.placed),
                                                       keys_only=True))
    out = set()
    for kv in resp.kvs:
        host, _, rest = kv.key[len(keys.placed):].decode().partition("/")
        node, _, consumer = rest.partition("/")
        assert host == node  # every node here is its own host
        out.add((node, consumer))
    return out


def forget_the_index(store: EtcdStore) -> None:
    """What a store written before the index looks like: allocations, no entries, no completion mark."""
    keys = store.keys
    for key, end in ((keys.placed, prefix_end(keys.placed)), (keys.placed_complete, b""), (keys.last_write, b"")):
        store._client.call("DeleteRange", pb.DeleteRangeRequest(key=key, range_end=end))


def put(store: EtcdStore, allocation: Allocation, generation: int | None = None, replaces: bool = False) -> int:
    return store.commit(Batch(allocations=[allocation], consumers=[ConsumerGeneration(allocation.consumer_uuid,
                                                                                      generation)],
                              replaces=[allocation.consumer_uuid] if replaces else [], capacity=CHECKED)).revision


def test_entries_follow_every_allocation_write(store: EtcdStore) -> None:
    two_providers(store)
    put(store, spanning("c1", 1, 10, 1))
    store.commit(Batch(reports=[report("h1")]))
    store.commit(Batch(allocations=[alloc("v1", "h1")]))  # a /v1 claim, no capacity check: indexed too
    assert entries(store) == {("p1", "c1"), ("p2", "c1"), ("h1", "v1")}
    # a move off the pool drops its entry there; a release drops them all; a host's deletion its own
    put(store, Allocation(consumer_uuid="c1", host="p1", nodename="p1", resources={"VCPU": 1},
                          consumer_generation=2), generation=1, replaces=True)
    assert entries(store) == {("p1", "c1"), ("h1", "v1")}
    store.commit(Batch(releases=["c1"]))
    store.commit(Batch(delete_hosts=[("h1", None)]))
    assert entries(store) == set()


def test_an_older_store_is_indexed_before_its_first_capacity_check(store: EtcdStore, store_url: str) -> None:
    two_providers(store)
    put(store, spanning("c1", 3, 60, 1))
    forget_the_index(store)
    with EtcdStore(store_url) as upgraded:  # a process of this version, starting on the older store
        with pytest.raises(InsufficientCapacity, match="'VCPU' on resource provider 'p1'"):
            put(upgraded, spanning("c2", 2, 10, 1))  # 3 + 2 > 4: c1 must be found although nothing indexed it
        assert entries(upgraded) == {("p1", "c1"), ("p2", "c1")}
        put(upgraded, spanning("c2", 1, 40, 1))  # the pool is full now: 60 + 40
        with pytest.raises(InsufficientCapacity, match="'DISK_GB' on resource provider 'p2'"):
            put(upgraded, Allocation(consumer_uuid="c3", host="p2", nodename="p2", resources={"DISK_GB": 10}))


def test_a_stale_entry_is_skipped_and_dropped(store: EtcdStore) -> None:
    """An entry whose allocation left the node (written by a writer that did not know the old record): a check
    there neither counts it nor keeps it."""
    two_providers(store)
    put(store, spanning("c1", 4, 10, 1))
    stale = store.keys.placement(("p1", "p1"), "gone")
    store._client.call("Put", pb.PutRequest(key=stale))
    with pytest.raises(InsufficientCapacity):
        put(store, Allocation(consumer_uuid="c2", host="p1", nodename="p1", resources={"VCPU": 1}))
    store.commit(Batch(releases=["c1"]))
    put(store, Allocation(consumer_uuid="c2", host="p1", nodename="p1", resources={"VCPU": 4}))
    assert entries(store) == {("p1", "c2")}


def test_barrier_is_the_last_commit_with_or_without_last_write(store: EtcdStore) -> None:
    r1 = store.commit(Batch(reports=[report("h1")])).revision
    r2 = store.commit(Batch(delete_hosts=[("h1", None)])).revision  # a deletion-only commit counts too
    assert store.barrier() == r2 > r1
    forget_the_index(store)
    r3 = store.commit(Batch(reports=[report("h2")])).revision
    store._client.call("DeleteRange", pb.DeleteRangeRequest(key=store.keys.last_write))
    assert store.barrier() == r3  # an older store: the newest key's revision
