"""A claim confirmed by what its node shows, on a node whose reports list no instances (a Nova cell's compute node
row): ``HostTable.confirm_shown``, which Nova's seam calls once ``update_instance_info`` listed the instance and
the node's row was read since (gantt.nova.confirm). Until then the claim counts on top of the node's report,
twice once the compute has applied it; after, once: a second pinned or PCI guest that fits beside the first fits
at once instead of after ``claim_timeout``. Never zero times: a claim nobody confirmed, or one on a node whose
usage is its allocations (Placement's), keeps counting what the report does not hold. Real replicas on a SQLite
store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gantt import NoValidHost
from gantt.config import Config
from gantt.replication.replica import Replica
from gantt.store.sqlite import SQLiteStore
from tests.conftest import host_stats, request

ALIAS = json.dumps({"name": "vf", "vendor_id": "8086", "product_id": "1520"})
CONFIG = Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeFilter", "NUMATopologyFilter",
                                                                    "PciPassthroughFilter"]},
                           "pci": {"alias": [ALIAS]}, "gantt": {"seed": 7}})
KEY = ("h", "h")


def cell_row(pinned: list[int] | None = None, vcpus_used: int = 0, vfs: int = 2) -> dict[str, Any]:
    """A cell's compute node as Gantt reads it: 6 CPUs both shared and dedicated in one cell (``vcpu_pin_set``,
    VCPU inventory), two VFs, usage reported, no instances listed. ``pinned``: the CPUs its compute pinned."""
    cpus = list(range(6))
    cell = {"id": 0, "cpuset": cpus, "pcpuset": cpus, "memory": 8192, "siblings": [[c] for c in cpus],
            "mempages": [{"size_kb": 4, "total": 8192 * 256}], "pinned_cpus": pinned or []}
    return host_stats(vcpus=6, vcpus_used=vcpus_used, memory_mb=8192, numa_topology={"cells": [cell]},
                      pci_stats=[{"vendor_id": "8086", "product_id": "1520", "numa_node": 0, "count": vfs,
                                  "dev_type": "type-VF"}])


def pinned(vcpus: int, uuid: str) -> dict[str, Any]:
    return request(vcpus=vcpus, memory_mb=512, root_gb=1, instance_uuids=[uuid],
                   extra_specs={"hw:cpu_policy": "dedicated"})


def with_vf(uuid: str) -> dict[str, Any]:
    return request(vcpus=1, memory_mb=512, root_gb=1, instance_uuids=[uuid],
                   extra_specs={"pci_passthrough:alias": "vf:1"})


def pins(replica: Replica, uuid: str) -> set[int]:
    alloc = replica.table.allocation(uuid)
    assert alloc is not None and alloc.numa
    return {cpu for cell in alloc.numa for cpu in cell.pinned_cpus}


@pytest.fixture
def replica(tmp_path: Path) -> Iterator[Replica]:
    store = SQLiteStore(f"sqlite:///{tmp_path}/gantt.sqlite")
    replica = Replica(store, CONFIG).start(follow=False)
    try:
        yield replica
    finally:
        replica.stop()
        store.close()


def test_a_pinned_guest_the_row_shows_counts_once_once_confirmed(replica: Replica) -> None:
    replica.update_resource_stats("h", cell_row())
    replica.select_destinations(pinned(4, "a"))
    first = pins(replica, "a")
    # the compute applied the claim: the row shows a's CPUs pinned and its VCPUs used, listing nothing
    replica.update_resource_stats("h", cell_row(pinned=sorted(first), vcpus_used=4))
    with pytest.raises(NoValidHost):  # a counted twice: 4 pinned in the row, 4 more in flight
        replica.select_destinations(pinned(2, "b"))
    assert replica.table.confirm_shown("h", ["a"]) == {KEY: ["a"]}
    assert replica.table.allocation("a").confirmed
    replica.select_destinations(pinned(2, "b"))  # counted once: 2 CPUs are left
    assert pins(replica, "b") == set(range(6)) - first
    with pytest.raises(NoValidHost):  # and no more
        replica.select_destinations(pinned(1, "c"))


def test_a_claim_the_row_does_not_show_yet_still_counts(replica: Replica) -> None:
    replica.update_resource_stats("h", cell_row())
    replica.select_destinations(pinned(4, "a"))
    # the row moved for another reason before the compute applied a's claim: newer than the claim, a not in it
    replica.update_resource_stats("h", cell_row(vcpus_used=0))
    replica.select_destinations(pinned(2, "b"))  # what is left beside a
    with pytest.raises(NoValidHost):
        replica.select_destinations(pinned(2, "c"))
    assert not pins(replica, "a") & pins(replica, "b")
    # nothing to confirm for a consumer that holds nothing there, or on another host
    assert replica.table.confirm_shown("other", ["a"]) == {}
    assert replica.table.confirm_shown("h", ["nobody"]) == {}
    assert not replica.table.allocation("a").confirmed


def test_a_confirmed_claim_released_gives_back_only_what_it_held(replica: Replica) -> None:
    replica.update_resource_stats("h", cell_row())
    replica.select_destinations(pinned(4, "a"))
    replica.update_resource_stats("h", cell_row(pinned=sorted(pins(replica, "a")), vcpus_used=4))
    replica.table.confirm_shown("h", ["a"])
    assert replica.table.confirm_shown("h", ["a"]) == {}  # once
    replica.release("a")  # the row still shows a (the compute has not freed it yet): still full there
    with pytest.raises(NoValidHost):
        replica.select_destinations(pinned(4, "b"))
    replica.update_resource_stats("h", cell_row())
    replica.select_destinations(pinned(4, "b"))


def test_a_pci_guest_the_pools_show_counts_once_once_confirmed(replica: Replica) -> None:
    replica.update_resource_stats("h", cell_row(vfs=1))
    replica.select_destinations(with_vf("a"))
    replica.update_resource_stats("h", cell_row(vfs=0, vcpus_used=1))  # the VF it took is gone from the pool
    replica.update_resource_stats("h", cell_row(vfs=1, vcpus_used=1))  # a second VF came (another reason)
    with pytest.raises(NoValidHost):  # a's device counted on top of a pool that no longer has it
        replica.select_destinations(with_vf("b"))
    replica.table.confirm_shown("h", ["a"])
    replica.select_destinations(with_vf("b"))
    with pytest.raises(NoValidHost):  # b holds the one VF left
        replica.select_destinations(with_vf("c"))


def placed_row(pinned: list[int] | None = None, vfs: int = 2) -> dict[str, Any]:
    """The same node accounted as Placement accounts it: inventories, no usage figures (its allocations are its
    usage, as for a node whose inventories nova-compute set through Gantt's Placement face)."""
    row = cell_row(pinned=pinned, vfs=vfs)
    for name in ("vcpus", "vcpus_used", "memory_mb", "memory_mb_used", "local_gb", "local_gb_used"):
        row.pop(name)
    row["inventories"] = {"VCPU": {"total": 6}, "MEMORY_MB": {"total": 8192}, "DISK_GB": {"total": 100}}
    return row


def test_on_a_node_accounted_by_its_allocations_only_the_cells_and_devices_stop_counting(replica: Replica) -> None:
    replica.update_resource_stats("h", placed_row())
    replica.select_destinations(pinned(3, "a"))
    replica.update_resource_stats("h", placed_row(pinned=sorted(pins(replica, "a"))))
    with pytest.raises(NoValidHost):  # a's CPUs counted twice
        replica.select_destinations(pinned(3, "b"))
    assert replica.table.confirm_shown("h", ["a"]) == {KEY: ["a"]}
    assert not replica.table.allocation("a").confirmed  # its VCPUs are Placement's usage: still counted
    replica.select_destinations(pinned(3, "b"))
    assert not pins(replica, "a") & pins(replica, "b")
    replica.update_resource_stats("h", placed_row(pinned=list(range(6))))
    replica.table.confirm_shown("h", ["b"])
    with pytest.raises(NoValidHost):  # every VCPU allocated, whatever the cells show
        replica.select_destinations(request(vcpus=1, memory_mb=512, root_gb=1, instance_uuids=["c"]))
    # released, a's VCPUs go back; its CPUs stay pinned in the row until the compute frees them
    replica.release("a")
    replica.select_destinations(request(vcpus=1, memory_mb=512, root_gb=1, instance_uuids=["c"]))
    with pytest.raises(NoValidHost):
        replica.select_destinations(pinned(1, "d"))


def test_a_move_from_a_node_that_shows_its_guest_holds_the_source_once(replica: Replica) -> None:
    """An evacuation or a cold migration: the source's row keeps the instance's device (and CPUs) until the move is
    confirmed, so the migration's hold on the source is shown by it as the instance's allocation was. Counted on
    top, the source's one VF was held twice and no claim touching that node (the move's own batch) committed."""
    replica.update_resource_stats("h", cell_row(vfs=1))
    replica.update_resource_stats("g", cell_row(vfs=1))
    [[first, *_]] = replica.select_destinations({**with_vf("a"), "force_hosts": ["h"]})
    assert first.host == "h"
    replica.update_resource_stats("h", cell_row(vfs=0, vcpus_used=1))
    replica.table.confirm_shown("h", ["a"])
    [[dest, *_]] = replica.select_destinations({**with_vf("a"), "migration_uuid": "m", "ignore_hosts": ["h"]})
    assert dest.host == "g"
    hold = replica.table.allocation("m")
    assert hold is not None and hold.host == "h" and hold.confirmed
    assert replica.table.within_capacity(KEY)
    replica.select_destinations({**pinned(2, "b"), "force_hosts": ["h"]})  # h still takes a claim
    with pytest.raises(NoValidHost):  # g's one VF is the moved instance's, in flight until g shows it
        replica.select_destinations(with_vf("c"))
