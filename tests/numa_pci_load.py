"""A NUMA/PCI claim storm for the concurrency tests (threads, processes, replicas on one SQLite file or etcd).

A few hosts of two cells (SMT cores, all CPUs dedicated, 4 KiB, 2 MiB and 1 GiB pages, SR-IOV VFs on each cell
and a GPU), and workers that place pinned, multi-node huge-page, thread-``require`` and PCI requests until the
cloud is full. ``verify`` then checks the store's allocations by themselves (no CPU of a host in two claims, no
pool held beyond its count, every claim's CPUs dedicated ones) and through ``gantt audit``.
"""

from __future__ import annotations

import json
import random
import sys
import threading
from collections import Counter
from typing import Any

from gantt import NoValidHost
from gantt.config import Config
from gantt.model import Allocation, StoreUnavailable
from gantt.replication.audit import audit
from gantt.replication.replica import Replica
from gantt.store.base import Snapshot

ALIASES = [json.dumps({"name": "vf", "vendor_id": "8086", "product_id": "1520", "device_type": "type-VF"}),
           json.dumps({"name": "gpu", "vendor_id": "10de", "product_id": "1db4"})]
CORES = 4  # per cell, 2 threads each: 16 dedicated CPUs per host
VFS = 3  # per cell
HOSTS = 4


def config(seed: int) -> Config:
    return Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeFilter", "NUMATopologyFilter",
                                                                      "PciPassthroughFilter"],
                                                  "host_subset_size": 2},
                             "pci": {"alias": ALIASES}, "gantt": {"seed": seed}})


def host(i: int) -> dict[str, Any]:
    cells = []
    for c in range(2):
        cpus = list(range(c * CORES * 2, (c + 1) * CORES * 2))
        cells.append({"id": c, "cpuset": [], "pcpuset": cpus, "memory": 16384,
                      "siblings": [cpus[k:k + 2] for k in range(0, len(cpus), 2)],
                      "mempages": [{"size_kb": 4, "total": 8192 * 256}, {"size_kb": 2048, "total": 2048},
                                   {"size_kb": 1048576, "total": 4}]})
    pools = [{"vendor_id": "8086", "product_id": "1520", "numa_node": c, "count": VFS, "dev_type": "type-VF"}
             for c in range(2)]
    pools.append({"vendor_id": "10de", "product_id": "1db4", "numa_node": 0, "count": 1, "dev_type": "type-PCI"})
    return {"vcpus": 16, "vcpus_used": 0, "memory_mb": 32768, "memory_mb_used": 0, "local_gb": 1000,
            "local_gb_used": 0, "hypervisor_type": "QEMU", "hypervisor_version": 8002000,
            "cpu_allocation_ratio": 1.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
            "supported_instances": [["x86_64", "kvm", "hvm"]], "numa_topology": {"cells": cells},
            "inventories": {"PCPU": {"total": 4 * CORES}}, "traits": ["HW_CPU_HYPERTHREADING"],
            "pci_stats": pools}


def spec(rng: random.Random, uuid: str) -> dict[str, Any]:
    kind = rng.choice(["pinned", "two_nodes_1g", "require", "vf", "gpu"])
    specs: dict[str, str] = {}
    vcpus, memory = rng.choice([1, 2, 3]), 1024
    if kind == "pinned":
        specs = {"hw:cpu_policy": "dedicated", "hw:mem_page_size": "2MB"}
    elif kind == "two_nodes_1g":
        specs = {"hw:cpu_policy": "dedicated", "hw:numa_nodes": "2", "hw:mem_page_size": "1GB"}
        vcpus, memory = 2, 2048
    elif kind == "require":
        specs = {"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "require"}
        vcpus = 2
    elif kind == "vf":
        specs = {"pci_passthrough:alias": f"vf:{rng.choice([1, 2])}"}
    else:
        specs = {"pci_passthrough:alias": "gpu:1,vf:1"}
    return {"flavor": {"name": kind, "vcpus": vcpus, "memory_mb": memory, "root_gb": 1, "extra_specs": specs},
            "project_id": "p", "user_id": "u", "instance_uuids": [uuid]}


def hammer(replica: Replica, tag: str, threads: int, requests: int, seed: int) -> list[str]:
    """``threads`` threads placing ``requests`` requests each on ``replica``; the consumers placed."""
    placed: list[str] = []
    lock = threading.Lock()

    def worker(t: int) -> None:
        rng = random.Random(seed * 100 + t)
        for k in range(requests):
            uuid = f"{tag}-{t}-{k}"
            for _ in range(20):
                try:
                    replica.select_destinations(spec(rng, uuid))
                    with lock:
                        placed.append(uuid)
                    break
                except NoValidHost as exc:
                    if exc.explanation is None or exc.explanation.reason != "contention":
                        break  # full for this shape
                except StoreUnavailable:
                    continue  # an overloaded machine: ask again, same consumer (idempotent)

    workers = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    # Switch threads every few microseconds instead of every 5 ms: without it a thread rarely loses the
    # interpreter between fitting a node and claiming it, and the race this storm is for would seldom happen.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        sys.setswitchinterval(interval)
    return placed


def verify(snapshot: Snapshot, seed: int = 0) -> dict[str, int]:
    """No CPU pinned twice, no pool over count, per the allocations and per ``gantt audit``; what was held."""
    pinned: Counter[tuple[str, int]] = Counter()
    devices: Counter[tuple[str, str, int | None]] = Counter()
    allocations: list[Allocation] = list(snapshot.allocations)
    dedicated = set(range(4 * CORES))
    for alloc in allocations:
        for cell in alloc.numa or ():
            assert set(cell.pinned_cpus) <= dedicated
            pinned.update((alloc.host, cpu) for cpu in cell.pinned_cpus)
        for taken in alloc.pci or ():
            devices[(alloc.host, str(taken.pool["product_id"]), taken.pool.get("numa_node"))] += taken.count
    twice = [key for key, count in pinned.items() if count > 1]
    assert not twice, f"CPUs pinned twice: {twice}"
    for (_, product, _), count in devices.items():
        assert count <= (VFS if product == "1520" else 1), devices
    assert audit(snapshot, config(seed)) == []
    return {"allocations": len(allocations), "pinned_cpus": len(pinned), "devices": sum(devices.values())}
