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


# ------------------------------------------- aliases by resource class and traits (Nova 34's PCI in Placement)

GPU_RC = "CUSTOM_GPU"


def _gpu_cloud(url: str, aliases: list[dict[str, str]]) -> tuple[Replica, Placement]:
    """Two type-PCI devices of one (vendor, product), each its own provider of class CUSTOM_GPU (nova-compute's
    ``resource_class: gpu`` in [pci] device_spec), the first with the traits purple and round, the second with
    HW_GPU_API_VULKAN and purple."""
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": ["PciPassthroughFilter"],
                                                    "pci_in_placement": True},
                               "pci": {"alias": [json.dumps(a) for a in aliases]}, "gantt": {"seed": 1}})
    replica = Replica.open(url, config)
    face = Placement(replica)
    for name in (GPU_RC, "CUSTOM_PURPLE", "CUSTOM_ROUND"):
        face.put_record("trait" if name != GPU_RC else "resource_class", name)
    face.create_provider("cn1", ROOT)
    face.set_inventories(ROOT, 0, {"VCPU": Inventory(total=8), "MEMORY_MB": Inventory(total=8192),
                                   "DISK_GB": Inventory(total=100)}, reserved_may_equal_total=True)
    for provider, traits in ((PF1, ["CUSTOM_PURPLE", "CUSTOM_ROUND"]), (PF2, ["HW_GPU_API_VULKAN", "CUSTOM_PURPLE"])):
        face.create_provider(f"cn1_{provider[-2:]}", provider, parent=ROOT)
        face.set_inventories(provider, 0, {GPU_RC: Inventory(total=1, max_unit=1)}, reserved_may_equal_total=True)
        face.set_provider_traits(provider, face.provider(provider).generation, traits)
    pools = [{"vendor_id": "10de", "product_id": "1db4", "dev_type": "type-PCI", "numa_node": 0, "count": 1,
              "address": address, "rp_uuid": provider} for provider, address in ((PF1, "0000:81:00.0"),
                                                                                (PF2, "0000:81:01.0"))]
    replica.report_many([HostReport.of(["cn1", "cn1"], {
        "uuid": ROOT, "vcpus": 8, "memory_mb": 8192, "local_gb": 100, "hypervisor_hostname": "cn1",
        "pci_stats": pools})])
    return replica, face


def _boot_alias(replica: Replica, consumer: str, alias: str) -> None:
    replica.select_destinations({"flavor": {"vcpus": 1, "memory_mb": 512, "root_gb": 1,
                                            "extra_specs": {"pci_passthrough:alias": alias}},
                                 "instance_uuids": [consumer]})


def test_an_alias_by_class_and_traits_takes_a_device_whose_provider_has_them(url: str) -> None:
    replica, face = _gpu_cloud(url, [{"name": "vulkan", "resource_class": "gpu", "traits": "HW_GPU_API_VULKAN,purple"},
                                     {"name": "round", "resource_class": "GPU", "traits": "round"},
                                     {"name": "big", "resource_class": "GPU", "traits": "purple,big"},
                                     {"name": "pgpu", "resource_class": "PGPU"}])
    try:
        for alias in ("big:1", "pgpu:1"):  # no provider has CUSTOM_BIG, nor the class PGPU
            with pytest.raises(NoValidHost):
                _boot_alias(replica, f"vm-{alias}", alias)
        _boot_alias(replica, "vm-1", "vulkan:1")  # the second device: the pools' first lacks the traits
        assert _held(face, "vm-1") == {ROOT: {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}, PF2: {GPU_RC: 1}}
        with pytest.raises(NoValidHost):  # the one device with these traits is taken
            _boot_alias(replica, "vm-2", "vulkan:1")
        _boot_alias(replica, "vm-3", "round:1")
        assert _held(face, "vm-3")[PF1] == {GPU_RC: 1}
    finally:
        replica.close()


def test_ids_and_traits_must_name_the_same_device(url: str) -> None:
    """Nova's RCAndTraitBasedPCIAliasTests.test_device_claim_consistent_with_placement_allocation: the pools
    match by ids, Placement by class and traits; one device must satisfy both."""
    replica, face = _gpu_cloud(url, [{"name": "x", "resource_class": "GPU", "traits": "HW_GPU_API_VULKAN",
                                      "vendor_id": "10de", "product_id": "1db4"},
                                     {"name": "y", "resource_class": "GPU", "traits": "HW_GPU_API_VULKAN",
                                      "vendor_id": "10de", "product_id": "1db5"}])
    try:
        with pytest.raises(NoValidHost):
            _boot_alias(replica, "vm-1", "y:1")
        _boot_alias(replica, "vm-2", "x:1")
        assert _held(face, "vm-2")[PF2] == {GPU_RC: 1}
    finally:
        replica.close()


def test_the_devices_follow_the_room_their_providers_have(url: str) -> None:
    """Nova's test_vf_with_split_allocation: what Placement reserves on a device's provider steers the devices
    to the others, and a request of several splits between providers as their room allows."""
    replica, face = _cloud(url, in_placement=True)
    try:
        face.set_inventories(PF1, face.provider(PF1).generation, {RC: Inventory(total=2, max_unit=2, reserved=1)},
                             reserved_may_equal_total=True)
        _boot(replica, "vm-1", 2)  # one from PF1 (the other is reserved), one from PF2
        assert _held(face, "vm-1") == {ROOT: {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}, PF1: {RC: 1},
                                       PF2: {RC: 1}}
        face.set_inventories(PF1, face.provider(PF1).generation, {RC: Inventory(total=2, max_unit=2, reserved=2)},
                             reserved_may_equal_total=True)
        replica.release("vm-1")
        _boot(replica, "vm-2", 1)  # PF1's pool comes first, but its provider has no room: PF2's
        assert _held(face, "vm-2")[PF2] == {RC: 1}
    finally:
        replica.close()


def test_a_request_that_fits_only_when_an_earlier_one_takes_the_other_provider(url: str) -> None:
    """Nova tries every allocation candidate: a first request that could take either provider must leave the one
    with the traits the second asks for (the pools' greedy order alone would take it)."""
    replica, face = _gpu_cloud(url, [{"name": "any", "resource_class": "GPU"},
                                     {"name": "vulkan", "resource_class": "GPU", "traits": "HW_GPU_API_VULKAN"},
                                     {"name": "round", "resource_class": "GPU", "traits": "round"}])
    try:
        _boot_alias(replica, "vm-1", "any:1,round:1")
        assert _held(face, "vm-1") == {ROOT: {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}, PF1: {GPU_RC: 1},
                                       PF2: {GPU_RC: 1}}
    finally:
        replica.close()


def test_group_policy_isolate_takes_each_device_from_a_provider_of_its_own(url: str) -> None:
    """Each device is a request group of its own in Placement; under the flavor's ``group_policy=isolate`` every
    group gets a provider no other group has (Placement's ``_satisfies_group_policy``), so two VFs come from two PFs,
    never both from PF1; three cannot be had from two PFs. Without it (Nova then asks with ``none``) PF1 gives two.
    Against Nova's code on generated hosts: tests/parity/test_pci_alias_parity.py."""
    replica, face = _cloud(url, in_placement=True)
    try:
        isolate = {"group_policy": "isolate"}
        with pytest.raises(NoValidHost):  # the request's own group_policy, as the flavor's: 3 VFs, 2 PFs
            _boot(replica, "vm-3", 3, group_policy="isolate")
        replica.select_destinations({"flavor": {"vcpus": 1, "memory_mb": 512, "root_gb": 1,
                                                "extra_specs": {"pci_passthrough:alias": "vf:2", **isolate}},
                                     "instance_uuids": ["vm-2"]})
        assert _held(face, "vm-2") == {ROOT: {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}, PF1: {RC: 1}, PF2: {RC: 1}}
        replica.release("vm-2")
        _boot(replica, "vm-5", 2)  # group_policy none: PF1 gives both, first in the pools' order
        assert _held(face, "vm-5")[PF1] == {RC: 2} and PF2 not in _held(face, "vm-5")
    finally:
        replica.close()
