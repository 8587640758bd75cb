"""Issue 14, NUMA claims: a claim records the cells, pinned CPUs and pages it takes, they count on the node until
its report lists the instance, a release gives them back, and two schedulers on one store never pin one CPU
twice (the node's usage revision is the compare-and-set; a replica that sees the other's claim late refits)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gantt import NoValidHost
from gantt.config import Config
from gantt.model import Allocation
from gantt.replication.audit import audit
from gantt.replication.replica import Replica
from gantt.store.memory import MemoryStore
from gantt.store.sqlite import SQLiteStore
from tests.conftest import host_stats, make_scheduler, request

CONFIG = Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeFilter", "NUMATopologyFilter"]}})


def numa_stats(cores: int = 4, cells: int = 1, **cell: Any) -> dict[str, Any]:
    """``cells`` cells of ``cores`` SMT cores each, all dedicated CPUs; PCPU inventory to match."""
    out = []
    for i in range(cells):
        cpus = list(range(i * cores * 2, (i + 1) * cores * 2))
        out.append({"id": i, "cpuset": [], "pcpuset": cpus, "memory": 8192,
                    "siblings": [cpus[k:k + 2] for k in range(0, len(cpus), 2)],
                    "mempages": [{"size_kb": 4, "total": 8192 * 256}], **cell})
    return host_stats(vcpus=cores * 2 * cells, numa_topology={"cells": out},
                      inventories={"PCPU": {"total": cores * 2 * cells}}, traits=["HW_CPU_HYPERTHREADING"])


def pinned(vcpus: int, uuid: str, **specs: str) -> dict[str, Any]:
    return request(vcpus=vcpus, memory_mb=1024, instance_uuids=[uuid],
                   extra_specs={"hw:cpu_policy": "dedicated", **specs})


def pins(allocations: list[Allocation]) -> list[int]:
    return sorted(cpu for a in allocations for c in a.numa or () for cpu in c.pinned_cpus)


def test_a_claim_records_its_fit_and_a_release_gives_it_back() -> None:
    s = make_scheduler({"h": numa_stats()}, filters=["NUMATopologyFilter"])
    s.select_destinations(pinned(4, "vm-1"))
    s.select_destinations(pinned(2, "vm-2", **{"hw:cpu_thread_policy": "require"}))
    first, second = s.table.allocation("vm-1"), s.table.allocation("vm-2")
    assert first is not None and second is not None and first.numa and second.numa
    assert first.numa[0].cell == 0 and first.numa[0].memory_mb == 1024 and len(first.numa[0].pinned_cpus) == 4
    assert len(set(pins([first, second]))) == 6  # nothing pinned twice
    with pytest.raises(NoValidHost):  # 2 pCPUs are left
        s.select_destinations(pinned(4, "vm-3"))
    s.release("vm-1")
    s.select_destinations(pinned(4, "vm-4"))
    assert len(set(pins([s.table.allocation("vm-2"), s.table.allocation("vm-4")]))) == 6


def test_a_report_that_lists_the_instance_takes_over_its_pins() -> None:
    s = make_scheduler({"h": numa_stats()}, filters=["NUMATopologyFilter"])
    s.select_destinations(pinned(6, "vm-1"))
    taken = pins([s.table.allocation("vm-1")])
    # the host reports the instance and the CPUs it pinned: counted once (the report), not twice
    s.update_resource_stats("h", {**numa_stats(pinned_cpus=taken), "instances": ["vm-1"]})
    assert s.table.allocation("vm-1").confirmed
    s.select_destinations(pinned(2, "vm-2"))
    assert not set(pins([s.table.allocation("vm-2")])) & set(taken)


def test_the_audit_finds_a_cpu_pinned_twice() -> None:
    store = MemoryStore()
    a = Replica(store, CONFIG).start(follow=False)
    a.update_resource_stats("h", numa_stats())
    a.select_destinations(pinned(2, "vm-1"))
    twin = a.table.allocation("vm-1")
    assert twin is not None and audit(store.snapshot(), CONFIG) == []
    snapshot = store.snapshot()
    snapshot.allocations.append(msgspec.structs.replace(twin, consumer_uuid="vm-2"))  # the same CPUs again
    assert any("pin a CPU twice" in p for p in audit(snapshot, CONFIG))


def test_two_replicas_never_pin_one_cpu_twice(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/gantt.sqlite"
    first, second = SQLiteStore(url), SQLiteStore(url)
    a = Replica(first, CONFIG).start(follow=False)
    b = Replica(second, CONFIG).start(follow=False)
    try:
        a.update_resource_stats("h", numa_stats(cores=4, cells=2))
        b.catch_up()
        # b has not seen a's claim when it decides: the same first-fit CPUs, refused by the store, refitted
        a.select_destinations(pinned(4, "vm-a"))
        b.select_destinations(pinned(4, "vm-b"))
        snapshot = first.snapshot()
        assert audit(snapshot, CONFIG) == []
        assert len(pins(snapshot.allocations)) == len(set(pins(snapshot.allocations))) == 8
    finally:
        a.stop()
        b.stop()
        first.close()
        second.close()


def test_threads_on_two_replicas_pin_every_cpu_once() -> None:
    store = MemoryStore()
    a = Replica(store, CONFIG).start()
    b = Replica(store, CONFIG).start()
    try:
        for h in range(3):
            a.update_resource_stats(f"h{h}", numa_stats(cores=4, cells=2))
        b.catch_up()
        placed: list[str] = []
        lock = threading.Lock()

        def burst(replica: Replica, tag: str) -> None:
            for k in range(12):
                try:
                    replica.select_destinations(pinned(2, f"{tag}-{k}"))
                    with lock:
                        placed.append(f"{tag}-{k}")
                except NoValidHost:
                    pass

        threads = [threading.Thread(target=burst, args=(r, f"t{i}")) for i, r in enumerate((a, b, a, b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        snapshot = store.snapshot()
        assert audit(snapshot, CONFIG) == []
        assert len(placed) == 24  # 3 hosts x 16 pCPUs / 2
        for h in range(3):
            on_host = [x for x in snapshot.allocations if x.host == f"h{h}"]
            assert len(pins(on_host)) == len(set(pins(on_host))) == 16
    finally:
        a.stop()
        b.stop()
