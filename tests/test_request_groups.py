"""Request groups (``RequestSpec.request_groups``, Nova's ``requested_resources``: Cyborg device profiles, QoS ports)
land on child providers of the chosen node's tree, decided by Gantt and claimed in the node's commit, as Nova's
scheduler takes them from Placement's allocation candidates. The trees are made as Nova's tests make them (the
Cyborg fixture's device providers under the compute node's, through Placement). Nova's own tests of it:
test_servers' Accelerator* classes through ``python -m gantt.nova.functional`` (tests/nova/functional_passing.txt).
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

CN1 = "0000a11c-0000-0000-0000-000000000001"
CN2 = "0000a11c-0000-0000-0000-000000000002"
DEV1A = "0000a11c-0000-0000-0000-0000000001a0"
DEV1B = "0000a11c-0000-0000-0000-0000000001b0"
DEV2 = "0000a11c-0000-0000-0000-000000000200"
TRAIT = "CUSTOM_FAKE_DEVICE"


def _node(face: Placement, replica: Replica, name: str, uuid: str, memory_mb: int) -> None:
    face.create_provider(name, uuid)
    face.set_inventories(uuid, 0, {"VCPU": Inventory(total=8), "MEMORY_MB": Inventory(total=memory_mb),
                                   "DISK_GB": Inventory(total=100)}, reserved_may_equal_total=True)
    replica.report_many([HostReport.of([name, name], {"uuid": uuid, "vcpus": 8, "memory_mb": memory_mb,
                                                      "local_gb": 100, "hypervisor_hostname": name})])


def _device(face: Placement, parent: str, uuid: str, fpga: int = 2, traits: tuple[str, ...] = (TRAIT,)) -> None:
    """What the Cyborg fixture of Nova's tests makes: a provider under the compute node's, its FPGAs, a trait."""
    face.create_provider(f"FakeDevice{uuid[-3:]}", uuid, parent=parent)
    face.set_inventories(uuid, 0, {"FPGA": Inventory(total=fpga, max_unit=fpga)}, reserved_may_equal_total=True)
    face.set_provider_traits(uuid, face.provider(uuid).generation, list(traits))


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[tuple[Replica, Placement]]:
    """cn1 with two devices (FPGA 2 each), cn2 with more memory (RAMWeigher's pick) and a device of the wrong
    kind (no trait)."""
    replica = Replica.open(f"sqlite:///{tmp_path}/gantt.sqlite", Config.from_dict({"gantt": {"seed": 1}}))
    face = Placement(replica)
    for name in (TRAIT, "CUSTOM_OTHER"):
        face.put_record("trait", name)
    face.put_record("resource_class", "CUSTOM_UNUSED")
    _node(face, replica, "cn1", CN1, 4096)
    _node(face, replica, "cn2", CN2, 16384)
    _device(face, CN1, DEV1A)
    _device(face, CN1, DEV1B)
    _device(face, CN2, DEV2, traits=("CUSTOM_OTHER",))
    try:
        yield replica, face
    finally:
        replica.close()


def held_by_provider(face: Placement, consumer: str) -> dict[str, dict[str, int]]:
    """What Placement shows the consumer holds, by provider uuid."""
    held, views = face.consumers.consumer_allocations(consumer)
    assert held is not None
    return {views[key].uuid: dict(resources) for key, resources in held.parts()}


def _group(gid: str, fpga: int = 1, **more: Any) -> dict[str, Any]:
    return {"id": gid, "resources": {"FPGA": fpga}, "required_traits": [TRAIT], **more}


def _boot(replica: Replica, consumer: str, groups: list[dict[str, Any]], **fields: Any) -> list[Selection]:
    [choices] = replica.select_destinations({"flavor": {"vcpus": 1, "memory_mb": 512, "root_gb": 1},
                                             "instance_uuids": [consumer], "request_groups": groups, **fields})
    return choices


def test_a_device_group_lands_on_the_child_that_has_the_device_in_the_nodes_commit(cloud: Any) -> None:
    replica, face = cloud
    [plain] = _boot(replica, "vm-0", [])[:1]
    assert plain.host == "cn2"  # the weighers' choice without a group
    replica.release("vm-0")
    chosen = _boot(replica, "vm-1", [_group("device_profile_0")])[0]
    assert (chosen.host, chosen.uuid) == ("cn1", CN1)
    assert chosen.mappings == {"device_profile_0": [DEV1A]}
    assert chosen.providers == {DEV1A: {"FPGA": 1}}
    assert held_by_provider(face, "vm-1") == {CN1: {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}, DEV1A: {"FPGA": 1}}
    # the device's usage counts: 1 left on DEV1A, 2 on DEV1B; a group of 2 takes DEV1B
    second = _boot(replica, "vm-2", [_group("g", fpga=2)])[0]
    assert second.mappings == {"g": [DEV1B]}
    _boot(replica, "vm-3", [_group("g")])  # DEV1A's last
    with pytest.raises(NoValidHost) as refused:  # every device of the kind is taken
        _boot(replica, "vm-4", [_group("g")])
    assert "RequestGroupsFilter" in refused.value.message
    replica.release("vm-2")
    assert _boot(replica, "vm-5", [_group("g", fpga=2)])[0].mappings == {"g": [DEV1B]}


def test_a_tree_without_a_provider_for_the_group_is_no_candidate(cloud: Any) -> None:
    replica, face = cloud
    with pytest.raises(NoValidHost):  # cn2's device lacks the trait; cn1's have it, not 3 FPGAs on one
        _boot(replica, "vm-1", [_group("g", fpga=3)])
    with pytest.raises(NoValidHost):  # the trait only cn2's device has, and a class only cn1's have
        _boot(replica, "vm-1", [_group("g", required_traits=["CUSTOM_OTHER"], forbidden_traits=[TRAIT]),
                                _group("h")], same_subtree=[["g", "h"]])
    chosen = _boot(replica, "vm-2", [{"id": "g", "resources": {"FPGA": 1}, "forbidden_traits": [TRAIT]}])[0]
    assert (chosen.host, chosen.mappings) == ("cn2", {"g": [DEV2]})
    with pytest.raises(NoValidHost):  # nothing of the class anywhere
        _boot(replica, "vm-3", [{"id": "g", "resources": {"CUSTOM_UNUSED": 1}}])
    assert set(held_by_provider(face, "vm-2")) == {CN2, DEV2}


def test_groups_share_a_provider_unless_isolated(cloud: Any) -> None:
    replica, face = cloud
    both = _boot(replica, "vm-1", [_group("a"), _group("b")])[0]
    assert both.mappings == {"a": [DEV1A], "b": [DEV1A]}  # one provider takes both (policy none)
    assert held_by_provider(face, "vm-1")[DEV1A] == {"FPGA": 2}  # one part, the groups summed
    replica.release("vm-1")
    apart = _boot(replica, "vm-2", [_group("a"), _group("b")], group_policy="isolate")[0]
    assert apart.mappings == {"a": [DEV1A], "b": [DEV1B]}
    assert held_by_provider(face, "vm-2") == {CN1: {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}, DEV1A: {"FPGA": 1},
                                   DEV1B: {"FPGA": 1}}
    with pytest.raises(NoValidHost):  # three groups, two devices: isolate cannot (the flavor's policy too)
        _boot(replica, "vm-3", [_group("a"), _group("b"), _group("c")],
              flavor={"vcpus": 1, "memory_mb": 512, "root_gb": 1, "extra_specs": {"group_policy": "isolate"}})
    # ... and without it, 1 + 1 left on DEV1A and DEV1B take three of one FPGA only if two share: they cannot
    with pytest.raises(NoValidHost):
        _boot(replica, "vm-4", [_group("a"), _group("b"), _group("c")])
    _boot(replica, "vm-5", [_group("a"), _group("b")])  # one on each, what is left


def test_alternates_show_where_the_groups_would_land(cloud: Any) -> None:
    replica, face = cloud
    _device(face, CN2, "0000a11c-0000-0000-0000-000000000201")
    choices = _boot(replica, "vm-1", [_group("g")])
    assert [c.host for c in choices] == ["cn2", "cn1"]
    assert choices[0].mappings == {"g": ["0000a11c-0000-0000-0000-000000000201"]}
    assert choices[1].consumer_uuid is None and choices[1].mappings == {"g": [DEV1A]}
    assert choices[1].providers == {DEV1A: {"FPGA": 1}}
    # the alternate: nothing held
    assert set(held_by_provider(face, "vm-1")) == {CN2, "0000a11c-0000-0000-0000-000000000201"}


def test_a_repeated_request_answers_with_the_groups_it_holds(cloud: Any) -> None:
    replica, _ = cloud
    first = _boot(replica, "vm-1", [_group("g")])[0]
    again = _boot(replica, "vm-1", [_group("g")])[0]
    assert (again.host, again.mappings, again.providers) == (first.host, first.mappings, first.providers)


def test_bad_groups_are_refused_naming_the_field(cloud: Any) -> None:
    replica, _ = cloud
    for groups, field in (([_group("g", required_traits=["not a trait"])], "$.request_groups[0].required_traits"),
                          ([_group("g", member_of=[["!a", "b"]])], "$.request_groups[0].member_of[0]")):
        with pytest.raises(InvalidRequest) as refused:
            _boot(replica, "vm-1", groups)
        assert refused.value.field == field
    for groups in ([_group("g"), _group("g")], [{"id": "g", "resources": {"FPGA": 0}}]):
        with pytest.raises(InvalidRequest):
            _boot(replica, "vm-1", groups)
    with pytest.raises(InvalidRequest):
        _boot(replica, "vm-1", [_group("g")], same_subtree=[["g", "h"]])


def test_same_subtree_and_in_tree(cloud: Any) -> None:
    """A port's groups (Nova's extended resource request: bandwidth and packet rate) in one subtree: the packet
    rate's provider (the agent) above the bandwidth's; a bandwidth provider beside it, first in Gantt's order, does
    not do. ``in_tree`` keeps a group in the tree of the provider it names."""
    replica, face = cloud
    bw, pps = "NET_BW_EGR_KILOBIT_PER_SEC", "NET_PACKET_RATE_KILOPACKET_PER_SEC"
    beside, agent, under = (f"0000a11c-0000-0000-0000-00000000030{i}" for i in range(3))
    for uuid, parent, inventory in ((beside, CN2, {bw: Inventory(total=1000)}),
                                    (agent, CN2, {pps: Inventory(total=100)}),
                                    (under, agent, {bw: Inventory(total=1000)})):
        face.create_provider(f"nic{uuid[-1]}", uuid, parent=parent)
        face.set_inventories(uuid, 0, inventory, reserved_may_equal_total=True)
    port = [{"id": "port-bw", "resources": {bw: 500}}, {"id": "port-pps", "resources": {pps: 10}}]
    loose = _boot(replica, "vm-1", port)[0]
    assert loose.mappings == {"port-bw": [beside], "port-pps": [agent]}
    held = _boot(replica, "vm-2", port, same_subtree=[["port-bw", "port-pps"]])[0]
    assert held.mappings == {"port-bw": [under], "port-pps": [agent]}
    with pytest.raises(NoValidHost):  # 500 left under the agent (and beside it, which same_subtree rules out)
        _boot(replica, "vm-3", [{"id": "port-bw", "resources": {bw: 600}}, port[1]],
              same_subtree=[["port-bw", "port-pps"]])
    with pytest.raises(NoValidHost):  # cn2's device lacks the trait
        _boot(replica, "vm-4", [_group("g", in_tree=CN2)])
    assert _boot(replica, "vm-5", [_group("g", in_tree=DEV1B)])[0].host == "cn1"


def test_a_scheduler_behind_never_books_a_device_another_took(cloud: Any, tmp_path: Path) -> None:
    """The device's provider is compared in the claim's commit like the node: a second scheduler on the same store
    that has not seen the first's claims decides on a stale view, and its commit is refused, not overbooked."""
    replica, _ = cloud
    behind = Replica.open(f"sqlite:///{tmp_path}/gantt.sqlite", Config.from_dict({"gantt": {"seed": 1}}),
                          follow=False)
    try:
        _boot(replica, "vm-1", [_group("g", fpga=2)])
        _boot(replica, "vm-2", [_group("g", fpga=2)])  # both devices of the kind full now
        with pytest.raises(NoValidHost):  # both look free to it: its commit conflicts, the catch-up shows them full
            _boot(behind, "vm-3", [_group("g", fpga=2)])
        fresh = Replica.open(f"sqlite:///{tmp_path}/gantt.sqlite", follow=False)
        try:
            assert fresh.table.allocation("vm-3") is None
            held = [fresh.table.allocation(c) for c in ("vm-1", "vm-2")]
            assert {a.mappings["g"][0] for a in held if a is not None} == {DEV1A, DEV1B}
        finally:
            fresh.close()
    finally:
        behind.close()
