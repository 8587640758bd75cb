"""Issue 33: SR-IOV ports' PCI requests (``RequestSpec.pci_requests``, Nova's InstancePCIRequest without an alias), in
Gantt's own terms. Agreement with Nova's own code: tests/parity/test_nova_parity.py and test_numa_pci_parity.py; the
translation from Nova's RequestSpec: tests/nova/test_translate.py."""

from __future__ import annotations

from typing import Any

import pytest

from gantt.model import InvalidRequest
from tests.conftest import make_scheduler, passing, request
from tests.filters.test_numa import cell, numa_host
from tests.test_numa_pci import ALIAS, vfs

BOTH = ["NUMATopologyFilter", "PciPassthroughFilter"]


def port(physnet: str | None = "physnet1", **spec: Any) -> dict[str, Any]:
    """An SR-IOV port's request as Nova's neutron API makes it."""
    return {"spec": [{"physical_network": physnet, "remote_managed": "False", **spec}]}


def pool(node: int | None = None, count: int = 1, **tags: Any) -> dict[str, Any]:
    return {**vfs(node, count), "remote_managed": "false", **tags}


def test_a_port_takes_a_device_of_its_physical_network_whatever_its_vendor() -> None:
    s = make_scheduler({
        "net1": {"pci_stats": [pool(physical_network="physnet1", vendor_id="15b3", product_id="101e")]},
        "net2": {"pci_stats": [pool(physical_network="physnet2")]},
        "untagged": {"pci_stats": [pool()]},  # a device no physnet is tagged on: only a port without one
        "none": {},
    }, filters=["PciPassthroughFilter"])
    assert passing(s, request(pci_requests=[port("PHYSNET1")])) == {"net1"}  # compared without case, as Nova
    assert passing(s, request(pci_requests=[port(None)])) == {"untagged"}
    assert passing(s, request(pci_requests=[port("physnet1"), port("physnet2")])) == set()


def test_ports_come_after_the_flavors_aliases_and_take_what_those_left() -> None:
    s = make_scheduler({"one": {"pci_stats": [pool(count=1, physical_network="physnet1")]},
                        "two": {"pci_stats": [pool(count=2, physical_network="physnet1")]}},
                       filters=["PciPassthroughFilter"], pci={"alias": [ALIAS]})
    spec = request(extra_specs={"pci_passthrough:alias": "vf:1"}, pci_requests=[port()])
    assert passing(s, spec) == {"two"}
    [[chosen]] = s.select_destinations({**spec, "instance_uuids": ["vm-1"]})
    assert chosen.host == "two"
    assert sum(p.count for p in s.table.allocation("vm-1").pci) == 2  # the alias's device and the port's
    assert passing(s, spec) == set()  # both gone with the claim


def test_a_remote_managed_or_vdpa_device_goes_only_to_a_port_that_asks_for_one() -> None:
    s = make_scheduler({"smartnic": {"pci_stats": [pool(physical_network="physnet1", remote_managed="true")]},
                        "vdpa": {"pci_stats": [pool(physical_network="physnet1", dev_type="vdpa")]}},
                       filters=["PciPassthroughFilter"])
    assert passing(s, request(pci_requests=[port()])) == set()
    assert passing(s, request(pci_requests=[port(remote_managed="True")])) == {"smartnic"}
    assert passing(s, request(pci_requests=[port(remote_managed="False", dev_type="vdpa")])) == {"vdpa"}


def test_a_ports_numa_policy_decides_which_device_a_numa_guest_may_take() -> None:
    cells = [cell(0, range(0, 8), pinned=tuple(range(8)), socket=0), cell(1, range(8, 16), socket=0)]
    s = make_scheduler({"far": numa_host(*cells, pci_stats=[pool(0, physical_network="physnet1")])}, filters=BOTH)
    guest = request(vcpus=2, memory_mb=1024, extra_specs={"hw:cpu_policy": "dedicated"})
    assert passing(s, {**guest, "pci_requests": [port()]}) == set()  # legacy: the device on the full cell
    assert passing(s, {**guest, "pci_requests": [{**port(), "numa_policy": "preferred"}]}) == {"far"}


@pytest.mark.parametrize(("fields", "where"), [
    ({"pci_requests": [{"spec": []}]}, "$.pci_requests[0].spec"),
    ({"pci_requests": [{"spec": [{"physical_network": "p"}], "count": 0}]}, "$.pci_requests[0].count"),
    ({"pci_requests": [{"spec": [{"physical_network": "p"}], "numa_policy": "near"}]},
     "$.pci_requests[0].numa_policy"),
    # (msgspec names no dict key)
    ({"pci_requests": [{"spec": [{"physical_network": 7}]}]}, "$.pci_requests[0].spec[0][...]"),
])
def test_a_malformed_port_request_is_refused_naming_the_field(fields: dict[str, Any], where: str) -> None:
    s = make_scheduler(2, filters=["PciPassthroughFilter"])
    with pytest.raises(InvalidRequest) as err:
        s.select_destinations(request(**fields))
    assert err.value.status == 400 and err.value.field == where, err.value.field
