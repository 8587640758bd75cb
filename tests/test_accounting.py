"""Claims and releases update a node's free columns in place; they must equal a recomputation from scratch."""

from __future__ import annotations

import random

import numpy as np

from gantt.model import Allocation
from tests.conftest import make_scheduler


def test_free_columns_after_claims_and_releases_equal_a_recomputation() -> None:
    rng = random.Random(11)
    sched = make_scheduler({f"h{i}": {"vcpus": 32, "memory_mb": 131072, "local_gb": 2000, "vcpus_used": i % 3,
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
        if rng.random() < 0.05:
            resources["CUSTOM_GPU"] = 1  # a class the table has not seen: the arrays grow
        allocation = Allocation(consumer_uuid=f"c{step}", host=host, nodename=host, resources=resources)
        table.put_allocation(allocation)
        held.append(allocation.consumer_uuid)
    n = table.n
    k = len(table.rc_names)
    incremental = {name: table.rc[name][:n, :k].copy() for name in ("free", "capacity")}
    physical = {name: table.col(name).copy() for name in ("free_ram_mb", "free_disk_mb")}
    for row in range(n):
        table._refresh_free(row)
    for name, values in incremental.items():
        assert np.array_equal(values, table.rc[name][:n, :k]), name
    for name, values in physical.items():
        assert np.array_equal(values, table.col(name)), name


def test_nodes_running_nothing_share_one_empty_instance_set() -> None:
    sched = make_scheduler(3)
    table = sched.table
    assert table.instances[0] is table.instances[1]  # no per-row empty set
    table.put_allocation(Allocation(consumer_uuid="c1", host="h0", nodename="h0", resources={"VCPU": 1}))
    sched.update_instance_info("h1", ["vm-a"])
    assert set(table.instances[0]) == {"c1"} and set(table.instances[1]) == {"vm-a"}
    assert not table.instances[2]  # the shared empty set did not pick anything up
    table.release("c1")
    sched.delete_instance_info("h1", "vm-a")
    assert table.instances[0] is table.instances[1] is table.instances[2]
