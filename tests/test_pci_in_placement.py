"""``[filter_scheduler] pci_in_placement``: a claim holds the flavor's PCI devices on their Placement providers too
(the child providers nova-compute reports them as, named by the pools' ``rp_uuid`` tag), in the same commit as the
node's resources, as Nova's allocation candidates do once its request groups carry the devices; a device whose
provider is full or unknown is not taken. Nova's own tests of it: libvirt.test_pci_sriov_servers.PCIServersTest
through ``python -m gantt.nova.functional`` (tests/nova/functional_passing.txt)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from gantt.config import Config
from gantt.model import HostReport, Inventory, NoValidHost
from gantt.placement.facade import Placement
from gantt.replication.replica import Replica

ROOT = "0000005c-0000-0000-0000-000000000001"
PF1 = "0000005c-0000-0000-0000-0000000000f1"
PF2 = "0000005c-0000-0000-0000-0000000000f2"
RC = "CUSTOM_PCI_8086_1520"
ALIAS = json.dumps({"name": "vf", "vendor_id": "8086", "product_id": "1520", "device_type": "type-VF"})


def _pool(provider: str, count: int, node: int = 0) -> dict[str, object]:
    return {"vendor_id": "8086", "product_id": "1520", "dev_type": "type-VF", "numa_node": node, "count": count,
            "rp_uuid": provider}


def _cloud(url: str, *, in_placement: bool) -> tuple[Replica, Placement]:
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": ["PciPassthroughFilter"],
                                                    "pci_in_placement": in_placement},
                               "pci": {"alias": [ALIAS]}, "gantt": {"seed": 1}})
    replica = Replica.open(url, config)
    face = Placement(replica)
    face.put_record("resource_class", RC)  # nova-compute's report client creates the class first
    # what nova-compute's report client makes: the node's root provider, a child provider per PF with its VFs
    face.create_provider("cn1", ROOT)
    face.set_inventories(ROOT, 0, {"VCPU": Inventory(total=8), "MEMORY_MB": Inventory(total=8192),
                                   "DISK_GB": Inventory(total=100)}, reserved_may_equal_total=True)
    for provider, total in ((PF1, 2), (PF2, 1)):
        face.create_provider(f"cn1_{provider[-2:]}", provider, parent=ROOT)
        face.set_inventories(provider, 0, {RC: Inventory(total=total, max_unit=total)}, reserved_may_equal_total=True)
    # ... and what the cells' compute node row says: the devices' pools, one per provider
    replica.report_many([HostReport.of(["cn1", "cn1"], {
        "uuid": ROOT, "vcpus": 8, "memory_mb": 8192, "local_gb": 100, "hypervisor_hostname": "cn1",
        "pci_stats": [_pool(PF1, 2), _pool(PF2, 1)]})])
    return replica, face


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    yield f"sqlite:///{tmp_path}/gantt.sqlite"


def _held(face: Placement, consumer: str) -> dict[str, dict[str, int]]:
    """What Placement shows the consumer holds, by provider uuid."""
    held, views = face.consumers.consumer_allocations(consumer)
    assert held is not None
    return {views[key].uuid: dict(resources) for key, resources in held.parts()}


def _boot(replica: Replica, consumer: str, devices: int, **fields: object) -> None:
    replica.select_destinations({"flavor": {"vcpus": 1, "memory_mb": 512, "root_gb": 1,
                                            "extra_specs": {"pci_passthrough:alias": f"vf:{devices}"}},
                                 "instance_uuids": [consumer], **fields})


def test_the_devices_are_held_on_their_providers_in_the_claims_commit(url: str) -> None:
    replica, face = _cloud(url, in_placement=True)
    try:
        _boot(replica, "vm-1", 3)
        assert _held(face, "vm-1") == {ROOT: {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}, PF1: {RC: 2}, PF2: {RC: 1}}
        with pytest.raises(NoValidHost):  # every device is taken, in the pools and in Placement
            _boot(replica, "vm-2", 1)
        replica.release("vm-1")
        _boot(replica, "vm-3", 1)
    finally:
        replica.close()


def test_a_full_provider_is_not_taken_whatever_the_pools_say(url: str) -> None:
    replica, face = _cloud(url, in_placement=True)
    try:
        face.set_inventories(PF2, face.provider(PF2).generation, {RC: Inventory(total=1, reserved=1)},
                             reserved_may_equal_total=True)
        _boot(replica, "vm-1", 2)  # both of PF1's: the pools' order
        with pytest.raises(NoValidHost):  # PF2's pool has a device, its provider none
            _boot(replica, "vm-2", 1)
    finally:
        replica.close()


def test_without_the_option_only_the_node_is_allocated_unless_the_request_asks(url: str) -> None:
    replica, face = _cloud(url, in_placement=False)
    try:
        _boot(replica, "vm-1", 1)
        assert set(_held(face, "vm-1")) == {ROOT}
        # Nova's seam asks per request (Nova's API makes the devices request groups while the option is on)
        _boot(replica, "vm-2", 2, pci_in_placement=True)
        assert set(_held(face, "vm-2")) == {ROOT, PF1, PF2}  # PF1's one left, then PF2's
    finally:
        replica.close()
