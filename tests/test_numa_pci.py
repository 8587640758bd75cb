"""Issue 14: PCI devices for NUMA guests (the SR-IOV NFV flavor). The devices' NUMA affinity is part of the fit
(each policy: required, legacy, preferred, socket), the claim takes the devices of the cells it fitted, the
Selection carries Nova's NUMA limits, and alternates are offered only where the devices can be taken.
(Agreement with Nova itself: tests/parity/test_numa_pci_parity.py.)"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gantt import NoValidHost, Scheduler
from gantt.compute.request import RequestContext
from gantt.config import Config
from gantt.model import InvalidRequest, NUMATopologyLimits, RequestSpec, Selection, decode
from gantt.replication.audit import audit
from gantt.replication.replica import Replica
from gantt.store.sqlite import SQLiteStore
from tests.conftest import host_stats, make_scheduler, passing, request
from tests.filters.test_numa import cell, numa_host

ALIAS = json.dumps({"name": "vf", "vendor_id": "8086", "product_id": "1520", "device_type": "type-VF"})
BOTH = ["NUMATopologyFilter", "PciPassthroughFilter"]


def vfs(node: int | None, count: int = 1) -> dict[str, Any]:
    return {"vendor_id": "8086", "product_id": "1520", "numa_node": node, "count": count, "dev_type": "type-VF"}


def host(cells: list[dict[str, Any]], *pools: dict[str, Any], **stats: Any) -> dict[str, Any]:
    # every host reports its cells' sockets (the trait the socket policy asks Placement for)
    return {**numa_host(*cells), "pci_stats": list(pools), "traits": ["COMPUTE_SOCKET_PCI_NUMA_AFFINITY"], **stats}


def nfv(vcpus: int = 2, policy: str | None = None, devices: int = 1, **fields: Any) -> dict[str, Any]:
    specs = {"hw:cpu_policy": "dedicated", "pci_passthrough:alias": f"vf:{devices}"}
    if policy:
        specs["hw:pci_numa_affinity_policy"] = policy
    return request(vcpus=vcpus, memory_mb=1024, extra_specs=specs, **fields)


def sched(hosts: dict[str, dict[str, Any]], filters: list[str] | None = None, weighers: list[str] | None = None,
          **sections: Any) -> Scheduler:
    return make_scheduler(hosts, filters=filters or BOTH, weighers=weighers, pci={"alias": [ALIAS]}, **sections)


def two_cells(*, busy0: bool = False, socket1: int | None = 0) -> list[dict[str, Any]]:
    """Two cells of 8 dedicated CPUs on socket 0 (the second on ``socket1``); the first all pinned with ``busy0``."""
    return [cell(0, range(0, 8), pinned=tuple(range(8)) if busy0 else (), socket=0),
            cell(1, range(8, 16), socket=socket1)]


@pytest.mark.parametrize(("policy", "expected"), [
    ("required", {"near"}),
    (None, {"near", "unknown"}),  # the alias's own policy: legacy
    ("legacy", {"near", "unknown"}),
    ("preferred", {"near", "unknown", "far", "same-socket"}),
    ("socket", {"near", "same-socket"}),
])
def test_each_policy_decides_which_devices_a_numa_guest_may_take(policy: str | None, expected: set[str]) -> None:
    s = sched({
        "near": host(two_cells(busy0=True), vfs(1)),  # the guest fits cell 1 only, where the device is
        "unknown": host(two_cells(busy0=True), vfs(None)),  # a device whose NUMA node the host does not know
        "far": host(two_cells(busy0=True, socket1=1), vfs(0)),  # the device on the full cell, another socket
        "same-socket": host(two_cells(busy0=True), vfs(0)),  # the device on the full cell, the same socket
    })
    assert passing(s, nfv(policy=policy)) == expected


def test_the_claim_takes_the_device_of_the_cell_it_fitted() -> None:
    # the pool on cell 0 has one key more, so it comes second in Nova's pool order: a claim taking the first pool
    # that matches would give the guest on cell 0 the device on cell 1
    s = sched({"h": host(two_cells(busy0=False), {**vfs(0), "physical_network": "physnet1"}, vfs(1))})
    placed = []
    for vm in ("vm-1", "vm-2"):
        s.select_destinations(nfv(vcpus=8, policy="required", instance_uuids=[vm]))
        held = s.allocation(vm)
        assert held.numa is not None and held.pci
        placed.append((held.numa[0].cell, held.pci[0].pool["numa_node"]))
    # each guest fills one cell and takes the device on that cell, not merely the first pool that matches
    assert sorted(placed) == [(0, 0), (1, 1)]
    with pytest.raises(NoValidHost):
        s.select_destinations(nfv(vcpus=1, policy="preferred", instance_uuids=["vm-3"]))


def test_a_device_on_another_cell_does_not_stop_a_guest_that_fits_there_with_its_cells() -> None:
    # The guest fits either cell; its device sits on cell 1 only: Nova's order puts cells with devices first,
    # and only the combination where the device is near holds under the required policy.
    s = sched({"h": host(two_cells(), vfs(1))})
    s.select_destinations(nfv(vcpus=4, policy="required", instance_uuids=["vm"]))
    held = s.allocation("vm")
    assert held.numa is not None and held.numa[0].cell == 1 and held.pci[0].pool["numa_node"] == 1


def test_racing_threads_never_hand_out_a_device_or_a_cpu_twice() -> None:
    s = sched({"h": host(two_cells(), vfs(0), vfs(1))})
    won: list[str] = []
    lock = threading.Lock()

    def place(vm: str) -> None:
        try:
            s.select_destinations(nfv(vcpus=4, policy="required", instance_uuids=[vm]))
        except NoValidHost:
            return
        with lock:
            won.append(vm)

    threads = [threading.Thread(target=place, args=(f"vm-{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 2  # two devices, one per cell
    cpus = [cpu for vm in won for c in s.allocation(vm).numa or () for cpu in c.pinned_cpus]
    assert len(cpus) == len(set(cpus)) == 8
    devices = sorted(s.allocation(vm).pci[0].pool["numa_node"] for vm in won)
    assert devices == [0, 1]


def test_the_selection_carries_novas_numa_limits() -> None:
    s = sched({"h": host(two_cells(), vfs(0), vfs(1), cpu_allocation_ratio=4.0, ram_allocation_ratio=1.5),
               "g": host(two_cells(), vfs(0), vfs(1), cpu_allocation_ratio=2.0)})
    [selections] = s.select_destinations(nfv(instance_uuids=["vm"]))
    assert len(selections) == 2
    for selection in selections:
        ratios = {"h": NUMATopologyLimits(4.0, 1.5), "g": NUMATopologyLimits(2.0, 1.0)}[selection.host]
        assert selection.limits["numa_topology"] == ratios
    # on the wire as Nova's limits dict, and read back
    wire = msgspec.json.decode(msgspec.json.encode(selections[0]))
    assert set(wire["limits"]["numa_topology"]) == {"cpu_allocation_ratio", "ram_allocation_ratio"}
    assert msgspec.json.decode(msgspec.json.encode(selections[0]), type=Selection) == selections[0]
    # no NUMA guest, no NUMA limits
    [plain] = s.select_destinations(request(instance_uuids=["plain"]))
    assert all("numa_topology" not in sel.limits for sel in plain)


def test_alternates_are_offered_only_where_the_devices_can_be_taken() -> None:
    # Neither NUMATopologyFilter nor PciPassthroughFilter enabled: the claim fits the cells and takes the devices
    # anyway, so alternates must be checked for both.
    # h1 and h3 weigh least (less free RAM), so they come up as alternates, never as the node first claimed
    hosts = {"h0": host(two_cells(), vfs(0)), "h1": host(two_cells(), memory_mb=32768),
             "h2": host(two_cells(), vfs(1)), "h3": host(two_cells(busy0=True), vfs(0), memory_mb=32768)}
    s = sched(hosts, filters=["ComputeFilter"], weighers=["RAMWeigher"], scheduler={"max_attempts": 4})
    [selections] = s.select_destinations(nfv(policy="required", instance_uuids=["vm"]))
    chosen, *alternates = selections
    # h1 has no device; h3's only device is on its full cell
    assert {sel.host for sel in selections} == {"h0", "h2"} and chosen.consumer_uuid == "vm"
    assert all(alt.consumer_uuid is None for alt in alternates)
    # a guest without a NUMA topology: alternates checked for the devices alone
    s2 = sched(hosts, filters=["ComputeFilter"], weighers=["RAMWeigher"], scheduler={"max_attempts": 4})
    [selections] = s2.select_destinations(request(extra_specs={"pci_passthrough:alias": "vf:1"},
                                                  instance_uuids=["vm"]))
    assert {sel.host for sel in selections} == {"h0", "h2", "h3"}


def _ctx(spec: dict[str, Any]) -> RequestContext:
    s = sched({})
    return RequestContext.build(decode(spec, RequestSpec), s.config, 0.0)


def test_the_policy_overrides_the_alias_and_is_checked() -> None:
    ctx = _ctx(nfv(policy="preferred"))
    assert [r.numa_policy for r in ctx.pci_requests] == ["preferred"]
    image = {"id": "i", "properties": {"hw_pci_numa_affinity_policy": "socket"}}
    ctx = _ctx({**nfv(), "image": image})
    assert [r.numa_policy for r in ctx.pci_requests] == ["socket"]
    assert "COMPUTE_SOCKET_PCI_NUMA_AFFINITY" in ctx.required_traits  # as Nova asks Placement
    for spec, field in [(nfv(policy="bogus"), "$.flavor.extra_specs.hw:pci_numa_affinity_policy"),
                        ({**nfv(policy="required"), "image": image}, "$.image.properties.hw_pci_numa_affinity_policy"),
                        ({**nfv(), "image": {"id": "i", "properties": {"hw_pci_numa_affinity_policy": "x"}}},
                         "$.image.properties.hw_pci_numa_affinity_policy")]:
        with pytest.raises(InvalidRequest) as err:
            _ctx(spec)
        assert err.value.field == field


def test_two_replicas_on_one_store_never_hand_out_a_device_twice(tmp_path: Path) -> None:
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": BOTH}, "pci": {"alias": [ALIAS]}})
    url = f"sqlite:///{tmp_path}/gantt.sqlite"
    first, second = SQLiteStore(url), SQLiteStore(url)
    a = Replica(first, config).start(follow=False)
    b = Replica(second, config).start(follow=False)
    try:
        a.update_resource_stats("h", host_stats(**host(two_cells(), vfs(0), vfs(1))))
        b.catch_up()
        # b has not seen a's claim when it decides: the same cell and device, refused by the store, refitted
        a.select_destinations(nfv(vcpus=4, policy="required", instance_uuids=["vm-a"]))
        b.select_destinations(nfv(vcpus=4, policy="required", instance_uuids=["vm-b"]))
        snapshot = first.snapshot()
        assert audit(snapshot, config) == []
        held = {x.consumer_uuid: x for x in snapshot.allocations}
        nodes = sorted(held[vm].pci[0].pool["numa_node"] for vm in ("vm-a", "vm-b"))
        cells = sorted(c.cell for vm in ("vm-a", "vm-b") for c in held[vm].numa or ())
        assert nodes == cells == [0, 1]
        with pytest.raises(NoValidHost):
            b.select_destinations(nfv(vcpus=1, policy="preferred", instance_uuids=["vm-c"]))
    finally:
        a.stop()
        b.stop()
        first.close()
        second.close()
