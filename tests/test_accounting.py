"""Claims and releases update a node's free columns in place; they must equal a recomputation from scratch."""

from __future__ import annotations

import random

import msgspec
import numpy as np

from gantt import Scheduler
from gantt.compute.scheduler import describe
from gantt.config import Config
from gantt.model import Allocation, AllocationPart, HostReport, HostStats, Inventory
from tests.conftest import FakeClock, host_stats, make_scheduler, request


def test_free_columns_after_claims_and_releases_equal_a_recomputation() -> None:
    rng = random.Random(11)
    # Ratios and usage that are not whole numbers where a host reports them: each figure a claim writes must be
    # the one a recomputation gives, to the last bit (the same operations in the same order).
    sched = make_scheduler({f"h{i}": {"vcpus": 32, "memory_mb": 131072, "local_gb": 2000, "vcpus_used": i % 3,
                                      "cpu_allocation_ratio": 1.0 + 0.1 * (i % 5), "num_io_ops": i % 4,
                                      "memory_mb_used": 100 * i, "local_gb_used": i % 7,
                                      "disk_available_least": 1500 if i % 4 == 0 else None}
                            for i in range(40)})
    table = sched.table
    held: list[str] = []
    for step in range(600):
        if held and rng.random() < 0.4:
            table.release(held.pop(rng.randrange(len(held))))
            continue
        host = f"h{rng.randrange(40)}"
        resources = {"VCPU": rng.choice([1, 2, 4]), "MEMORY_MB": rng.choice([512, 2048, 8192]),
                     "DISK_GB": rng.choice([0, 10, 80])}
        if rng.random() < 0.3:  # a claim that names some of the classic classes only
            del resources[rng.choice(sorted(resources))]
        if rng.random() < 0.05:
            resources["CUSTOM_GPU"] = 1  # a class the table has not seen: the arrays grow
        allocation = Allocation(consumer_uuid=f"c{step}", host=host, nodename=host, resources=resources)
        table.put_allocation(allocation)
        held.append(allocation.consumer_uuid)
    n = table.n
    k = len(table.rc_index)
    incremental = {name: table.rc[name][:n, :k].copy() for name in ("free", "capacity")}
    physical = {name: table.col(name).copy()
                for name in ("free_vcpus", "free_ram_mb", "free_disk_mb", "io_ops_load", "instances_load")}
    for row in range(n):
        table._columns.refresh_free(row)
        table._columns.refresh_load(row)
    for name, values in incremental.items():
        assert np.array_equal(values, table.rc[name][:n, :k]), name
    for name, values in physical.items():
        assert np.array_equal(values, table.col(name)), name


def test_nodes_running_nothing_share_one_empty_instance_set() -> None:
    sched = make_scheduler(3)
    table = sched.table
    assert table.instances(0) is table.instances(1)  # no per-row empty set
    table.put_allocation(Allocation(consumer_uuid="c1", host="h0", nodename="h0", resources={"VCPU": 1}))
    sched.update_instance_info("h1", ["vm-a"])
    assert set(table.instances(0)) == {"c1"} and set(table.instances(1)) == {"vm-a"}
    assert not table.instances(2)  # the shared empty set did not pick anything up
    table.release("c1")
    sched.delete_instance_info("h1", "vm-a")
    assert table.instances(0) is table.instances(1) is table.instances(2)


def _vcpu(sched: Scheduler, host: str) -> dict[str, float]:
    return sched.host(host)["inventories"]["VCPU"]


def test_a_host_that_never_lists_instances_counts_a_claim_once_after_the_timeout() -> None:
    """Issue 10: its reported usage includes a built instance; the claim must not stay on top of it forever."""
    clock = FakeClock()
    sched = make_scheduler({"h": {"vcpus": 8}}, filters=["ComputeFilter"], clock=clock, gantt={"claim_timeout": 600})
    sched.select_destinations(request(vcpus=2) | {"instance_uuids": ["vm-1"]})
    assert _vcpu(sched, "h")["free"] == 6
    clock.advance(60)  # built: the host's usage includes it, the claim still counts on top (safe side)
    sched.update_resource_stats("h", host_stats(vcpus=8, vcpus_used=2))
    assert _vcpu(sched, "h")["free"] == 4
    clock.advance(600)
    sched.update_resource_stats("h", host_stats(vcpus=8, vcpus_used=2))
    assert _vcpu(sched, "h")["free"] == 6  # counted once, by the report
    assert sched.allocation("vm-1").host == "h"  # the booking stays until it is released
    assert sched.table.settled_claims == 1
    sched.release("vm-1")
    assert _vcpu(sched, "h")["free"] == 6  # releasing a settled claim takes nothing off the report


def test_a_host_that_lists_instances_confirms_or_releases() -> None:
    clock = FakeClock()
    sched = make_scheduler({"h": {"vcpus": 8}}, filters=["ComputeFilter"], clock=clock, gantt={"claim_timeout": 600})
    sched.select_destinations(request(vcpus=2) | {"instance_uuids": ["vm-1"]})
    sched.select_destinations(request(vcpus=2) | {"instance_uuids": ["vm-2"]})
    clock.advance(60)
    sched.update_resource_stats("h", host_stats(vcpus=8, vcpus_used=2, instances=["vm-1"]))
    assert _vcpu(sched, "h")["free"] == 4  # vm-1 by the report, vm-2 in flight
    clock.advance(600)
    sched.update_resource_stats("h", host_stats(vcpus=8, vcpus_used=2, instances=["vm-1"]))
    assert _vcpu(sched, "h")["free"] == 6  # vm-2 never built: released
    assert sched.table.expired_claims == 1
    assert sched.allocation("vm-1").host == "h"


def test_a_replica_loading_old_claims_on_an_unlisting_host_counts_them_as_settled() -> None:
    from gantt.replication.replica import Replica
    from gantt.store.memory import MemoryStore

    clock = FakeClock()
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeFilter"]},
                               "gantt": {"claim_timeout": 600}})
    store = MemoryStore()
    first = Replica(store, config, clock=clock).start(follow=False)
    first.update_resource_stats("h", host_stats(vcpus=8))
    first.select_destinations(request(vcpus=2) | {"instance_uuids": ["vm-1"]})
    clock.advance(700)
    first.update_resource_stats("h", host_stats(vcpus=8, vcpus_used=2))
    later = Replica(store, config, clock=clock).start(follow=False)
    for replica in (first, later):
        assert describe(replica.table, replica.table.row("h"))["inventories"]["VCPU"]["free"] == 6


def test_an_allocation_across_nodes_counts_each_part_on_its_own_row() -> None:
    """A consumer's parts on further nodes (a sharing disk pool) count in flight there, with no instance, and
    stay counted whatever the nodes report; the first part follows the host's instance list as before."""
    clock = FakeClock()
    sched = make_scheduler({"h1": {"vcpus": 8, "memory_mb": 8192, "local_gb": 0},
                            "pool": {"vcpus": 0, "memory_mb": 0, "local_gb": 1000}}, clock=clock)
    table = sched.table
    spanning = Allocation(consumer_uuid="c1", host="h1", nodename="h1", resources={"VCPU": 2},
                          extra=[AllocationPart(host="pool", nodename="pool", resources={"DISK_GB": 40})])
    table.put_allocation(spanning)
    h1, pool = table.row_of(("h1", "h1")), table.row_of(("pool", "pool"))
    assert table.used("VCPU")[h1] == 2 and table.used("DISK_GB")[pool] == 40
    assert table.col("inflight_instances")[pool] == 0 and table.col("inflight_instances")[h1] == 1
    assert table.node_allocations(("pool", "pool")) == {"c1"}
    clock.advance(10_000)  # long past claim_timeout: the pool lists no instances, yet its part stays counted
    table.update(HostReport(host="pool", stats=HostStats(local_gb=1000)))
    table.update(HostReport(host="h1", stats=HostStats(instances=["c1"], vcpus_used=2)))
    assert table.used("DISK_GB")[pool] == 40 and table.used("VCPU")[h1] == 2  # h1's now from its report
    table.release("c1")
    assert table.used("DISK_GB")[pool] == 0 and table.node_allocations(("pool", "pool")) == frozenset()


def test_a_node_that_reports_no_usage_keeps_its_claims_counted() -> None:
    """Design §1: a node without reported usage (a provider Placement wrote) is accounted by its allocations
    alone; a claim there is not settled away by claim_timeout."""
    clock = FakeClock()
    table = make_scheduler({}, clock=clock).table
    table.update(HostReport(host="p1", stats=HostStats(inventories={"VCPU": Inventory(total=4)})))
    table.put_allocation(Allocation(consumer_uuid="c1", host="p1", nodename="p1", resources={"VCPU": 3}))
    clock.advance(10_000)
    table.update(HostReport(host="p1", stats=HostStats(inventories={"VCPU": Inventory(total=4)})))
    assert table.used("VCPU")[table.row_of(("p1", "p1"))] == 3


def test_a_claim_applied_again_changes_nothing_and_the_stores_equal_record_replaces_it() -> None:
    """A replica applies its own claim from its commit's result (the same object: nothing to do), and then may
    receive the store's record of it, equal but not the same: that one becomes the record (a rollback of ours goes
    by identity and must not take the store's), counted once."""
    sched = make_scheduler(2)
    table = sched.table
    local = Allocation(consumer_uuid="c1", host="h0", nodename="h0", resources={"VCPU": 2, "MEMORY_MB": 512})
    table.claim(("h0", "h0"), local)
    figures = {name: table.col(name).copy() for name in ("free_vcpus", "free_ram_mb", "instances_load")}
    free = table.rc["free"].copy()
    revision = table.revision
    table.put_allocation(local)
    assert table.allocation("c1") is local and table.revision == revision
    stored = msgspec.msgpack.decode(msgspec.msgpack.encode(local), type=Allocation)
    table.put_allocation(stored)
    assert table.allocation("c1") is stored
    assert np.array_equal(free, table.rc["free"])
    for name, values in figures.items():
        assert np.array_equal(values, table.col(name)), name
    table.release("c1")
    assert table.rc_col("free", "VCPU")[0] == table.rc_col("capacity", "VCPU")[0]
