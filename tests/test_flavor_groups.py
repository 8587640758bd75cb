"""The flavor's numbered groups (``resources1:VGPU=1``, ``trait1:CUSTOM_X=required``, ``resources_FOO:…``,
``group_policy``) taken as Placement takes them: each group whole from ONE provider of the node's tree (the node's
own or a child), with its traits, ``isolate`` keeping them on different providers; and any request group taken from
the node's own provider when that holds the class. The common real case: vGPU flavors, a VGPU inventory on each
physical GPU's child provider with its type's trait. Real SQLite store, real Placement face; checked against
Placement 16 itself by tests/parity/test_groups_parity.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gantt.config import Config
from gantt.model import HostReport, InvalidRequest, Inventory, NoValidHost, Selection
from gantt.placement.facade import Placement
from gantt.replication.replica import Replica
from tests.test_flavor_on_child import root_also_holds
from tests.test_request_groups import held_by_provider

CN1 = "00000f1a-0000-0000-0000-000000000001"
CN2 = "00000f1a-0000-0000-0000-000000000002"
GPU1A = "00000f1a-0000-0000-0000-0000000001a0"
GPU1B = "00000f1a-0000-0000-0000-0000000001b0"
GPU2 = "00000f1a-0000-0000-0000-000000000200"
TYPE_A, TYPE_B = "CUSTOM_VGPU_TYPE_A", "CUSTOM_VGPU_TYPE_B"
ROOT = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}


def _node(face: Placement, replica: Replica, name: str, uuid: str, memory_mb: int,
          more: dict[str, Inventory] | None = None) -> None:
    face.create_provider(name, uuid)
    face.set_inventories(uuid, 0, {"VCPU": Inventory(total=8), "MEMORY_MB": Inventory(total=memory_mb),
                                   "DISK_GB": Inventory(total=100), **(more or {})}, reserved_may_equal_total=True)
    replica.report_many([HostReport.of([name, name], {"uuid": uuid, "vcpus": 8, "memory_mb": memory_mb,
                                                      "local_gb": 100, "hypervisor_hostname": name})])


def _pgpu(face: Placement, parent: str, uuid: str, trait: str, vgpus: int = 2) -> None:
    """What nova-compute's libvirt driver makes: one provider per physical GPU under the node's, its vGPUs, its
    type's trait."""
    face.create_provider(f"pgpu{uuid[-3:]}", uuid, parent=parent)
    face.set_inventories(uuid, 0, {"VGPU": Inventory(total=vgpus, max_unit=vgpus)}, reserved_may_equal_total=True)
    face.set_provider_traits(uuid, face.provider(uuid).generation, [trait])


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[tuple[Replica, Placement]]:
    """cn1: two pGPUs (type A, type B; 2 vGPUs each); cn2 (more memory: RAMWeigher's pick): one pGPU of type B."""
    replica = Replica.open(f"sqlite:///{tmp_path}/gantt.sqlite", Config.from_dict({"gantt": {"seed": 1}}))
    face = Placement(replica)
    for name in (TYPE_A, TYPE_B):
        face.put_record("trait", name)
    _node(face, replica, "cn1", CN1, 4096)
    _node(face, replica, "cn2", CN2, 16384)
    _pgpu(face, CN1, GPU1A, TYPE_A)
    _pgpu(face, CN1, GPU1B, TYPE_B)
    _pgpu(face, CN2, GPU2, TYPE_B)
    try:
        yield replica, face
    finally:
        replica.close()


def _boot(replica: Replica, consumer: str, extra_specs: dict[str, str], **fields: Any) -> list[Selection]:
    flavor = {"vcpus": 1, "memory_mb": 512, "root_gb": 1, "extra_specs": extra_specs}
    [choices] = replica.select_destinations({"flavor": flavor, "instance_uuids": [consumer], **fields})
    return choices


def test_a_numbered_vgpu_group_takes_the_pgpu_of_its_type(cloud: Any) -> None:
    """Before: the group's trait was asked of the compute node's provider, which has no type trait: no host."""
    replica, face = cloud
    chosen = _boot(replica, "vm-1", {"resources1:VGPU": "1", f"trait1:{TYPE_A}": "required"})[0]
    assert (chosen.host, chosen.allocation) == ("cn1", ROOT)
    assert (chosen.providers, chosen.mappings) == ({GPU1A: {"VGPU": 1}}, {"1": [GPU1A]})
    assert held_by_provider(face, "vm-1") == {CN1: ROOT, GPU1A: {"VGPU": 1}}
    # type B: cn2 has the memory and a type-B pGPU
    chosen = _boot(replica, "vm-2", {"resources_B:VGPU": "1", f"trait_B:{TYPE_B}": "required"})[0]
    assert (chosen.host, chosen.mappings) == ("cn2", {"_B": [GPU2]})
    # a forbidden type: cn2's only pGPU is of type B
    chosen = _boot(replica, "vm-3", {"resources1:VGPU": "1", f"trait1:{TYPE_B}": "forbidden"})[0]
    assert (chosen.host, chosen.mappings) == ("cn1", {"1": [GPU1A]})


def test_isolate_puts_each_numbered_group_on_a_pgpu_of_its_own(cloud: Any) -> None:
    """Before: the two groups were summed on the node, and VGPU spilled whole onto one child."""
    replica, face = cloud
    two = {"resources1:VGPU": "1", "resources2:VGPU": "1"}
    chosen = _boot(replica, "vm-1", {**two, "group_policy": "isolate"})[0]
    assert chosen.host == "cn1"  # cn2 has one pGPU only
    assert sorted(u for uuids in chosen.mappings.values() for u in uuids) == sorted([GPU1A, GPU1B])
    assert held_by_provider(face, "vm-1") == {CN1: ROOT, GPU1A: {"VGPU": 1}, GPU1B: {"VGPU": 1}}
    chosen = _boot(replica, "vm-2", {**two, "group_policy": "none"})[0]
    assert (chosen.host, chosen.mappings) == ("cn2", {"1": [GPU2], "2": [GPU2]})
    assert held_by_provider(face, "vm-2") == {CN2: ROOT, GPU2: {"VGPU": 2}}
    with pytest.raises(NoValidHost):  # cn2's pGPU is full now, cn1's have one vGPU left each: never two on one
        _boot(replica, "vm-3", {"resources1:VGPU": "2"})


def test_several_numbered_groups_without_a_policy_are_refused_as_placement_refuses_them(cloud: Any) -> None:
    replica, _ = cloud
    with pytest.raises(InvalidRequest) as refused:
        _boot(replica, "vm-1", {"resources1:VGPU": "1", "resources2:VGPU": "1"})
    assert refused.value.field == "$.flavor.extra_specs.group_policy"
    with pytest.raises(InvalidRequest) as refused:  # Placement 1.36: a resourceless group outside same_subtree
        _boot(replica, "vm-1", {f"trait1:{TYPE_A}": "required"})
    assert refused.value.field == "$.flavor.extra_specs.trait1"


def test_a_group_takes_the_nodes_own_provider_when_it_holds_the_class(cloud: Any, tmp_path: Path) -> None:
    """Placement takes a group from any provider of the tree, the root included; what the root gives it is summed
    with the flavor's own classes there. Before: a port's group was never taken from the root (no host)."""
    replica, face = cloud
    root_also_holds(face, CN1, 4096, "CUSTOM_ROOTY", 3)
    port = {"id": "port-1", "resources": {"CUSTOM_ROOTY": 2}}
    chosen = _boot(replica, "vm-1", {}, request_groups=[port])[0]
    assert (chosen.host, chosen.allocation, chosen.mappings) == ("cn1", {**ROOT, "CUSTOM_ROOTY": 2},
                                                                {"port-1": [CN1]})
    assert held_by_provider(face, "vm-1") == {CN1: {**ROOT, "CUSTOM_ROOTY": 2}}
    # the flavor's own ROOTY and a group's share the root: 1 left, both cannot fit together
    with pytest.raises(NoValidHost):
        _boot(replica, "vm-2", {"resources:CUSTOM_ROOTY": "1", "resources1:CUSTOM_ROOTY": "1"})
    chosen = _boot(replica, "vm-3", {"resources1:CUSTOM_ROOTY": "1", "resources2:VGPU": "1",
                                     "group_policy": "isolate"})[0]
    assert (chosen.host, chosen.allocation["CUSTOM_ROOTY"], chosen.mappings["1"]) == ("cn1", 1, [CN1])


def test_the_unnumbered_groups_traits_are_read_across_the_providers_giving_it_resources(cloud: Any) -> None:
    """Placement (nested trees) checks the unnumbered group's required traits on the union of the providers giving
    it resources, and its forbidden ones on each of them. Before: the node's own provider alone."""
    replica, face = cloud
    face.put_record("resource_class", "CUSTOM_MAGIC")
    face.set_inventories(GPU1B, face.provider(GPU1B).generation,
                         {"VGPU": Inventory(total=2, max_unit=2), "CUSTOM_MAGIC": Inventory(total=4)},
                         reserved_may_equal_total=True)
    magic = {"resources:CUSTOM_MAGIC": "1"}
    chosen = _boot(replica, "vm-1", {**magic, f"trait:{TYPE_B}": "required"})[0]  # the child has it, cn1 not
    assert (chosen.host, chosen.mappings) == ("cn1", {"": [GPU1B]})
    with pytest.raises(NoValidHost):  # the only provider of the magic has the forbidden trait
        _boot(replica, "vm-2", {**magic, f"trait:{TYPE_B}": "forbidden"})
    with pytest.raises(NoValidHost):  # a root-required trait stays the node's own (request_level_params)
        _boot(replica, "vm-3", magic, required_traits=[TYPE_B])


@pytest.mark.parametrize("extra_specs", [
    {"resources1:VGPU": "1"},
    {"resources1:VGPU": "1", "resources2:VGPU": "1", "group_policy": "isolate"},
    {"resources1:VGPU": "1", "resources2:VGPU": "1", "group_policy": "none"},
    {"resources1:VGPU": "2", f"trait1:{TYPE_B}": "required"},
    {"resources:CUSTOM_MAGIC": "1", "resources1:VGPU": "1"},
])
def test_capacity_counts_the_groups_as_claims_take_them(cloud: Any, extra_specs: dict[str, str]) -> None:
    """The capacity question counts what claiming one by one reaches (before: refused, RequestGroupsFilter)."""
    replica, face = cloud
    face.put_record("resource_class", "CUSTOM_MAGIC")
    face.set_inventories(GPU1B, face.provider(GPU1B).generation,
                         {"VGPU": Inventory(total=2, max_unit=2), "CUSTOM_MAGIC": Inventory(total=3)},
                         reserved_may_equal_total=True)
    flavor = {"vcpus": 1, "memory_mb": 512, "root_gb": 1, "extra_specs": extra_specs}
    answer = replica.capacity({"requests": [{"flavor": flavor}]})
    [counted] = answer.requests
    booked: dict[str, int] = {}
    for i in range(20):
        try:
            host = _boot(replica, f"vm-{i}", extra_specs)[0].host
        except NoValidHost:
            break
        booked[host] = booked.get(host, 0) + 1
    assert counted.instances == sum(booked.values()) > 0
    assert {r.host: r.instances for r in counted.top} == booked


def test_a_group_of_traits_alone_names_a_provider_for_same_subtree(cloud: Any) -> None:
    """Placement 1.36 takes a resourceless group when same_subtree names it (else it refuses the query): a provider
    with its traits, the others' providers in its subtree. Before: refused whatever same_subtree said."""
    replica, face = cloud
    face.put_record("trait", "CUSTOM_CARD")
    face.set_provider_traits(CN1, face.provider(CN1).generation, ["CUSTOM_CARD"])
    card = {"id": "card", "resources": {}, "required_traits": ["CUSTOM_CARD"]}
    vgpu = {"id": "vgpu", "resources": {"VGPU": 1}}
    chosen = _boot(replica, "vm-1", {}, request_groups=[card, vgpu], same_subtree=[["card", "vgpu"]])[0]
    assert chosen.host == "cn1" and chosen.mappings["card"] == [CN1] and chosen.mappings["vgpu"][0] in (GPU1A, GPU1B)
    assert set(chosen.providers) == set(chosen.mappings["vgpu"])  # nothing held for the card's group
    with pytest.raises(InvalidRequest) as refused:
        _boot(replica, "vm-2", {}, request_groups=[card, vgpu])
    assert refused.value.field == "$.request_groups[0].resources"
