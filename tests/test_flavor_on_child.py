"""The flavor's own (unnumbered) classes that live on a CHILD provider of the compute node (``resources:CUSTOM_MAGIC=1``
with the magic on ``<node>-child``, as Nova's fake ``MediumFakeDriverWithNestedCustomResources`` reports it): Placement
takes each class of the unnumbered group whole from any one provider of the tree, so the boot fits, the claim holds
the child's part in the node's commit, the Selection's allocation request names the child, and a move's migration
holds the child's part of the source. Nova's own tests of it: test_servers' *WithNested* classes through
``python -m gantt.nova.functional`` (tests/nova/functional_passing.txt). Real SQLite store, real Placement face.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gantt.config import Config
from gantt.model import HostReport, Inventory, NoValidHost, Selection
from gantt.placement.facade import Placement
from gantt.replication.replica import Replica
from tests.test_request_groups import held_by_provider

CN1 = "0000c41d-0000-0000-0000-000000000001"
CN2 = "0000c41d-0000-0000-0000-000000000002"
KID1 = "0000c41d-0000-0000-0000-0000000001c0"
KID2 = "0000c41d-0000-0000-0000-0000000002c0"
MAGIC = "CUSTOM_MAGIC"
ROOT = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}


def _node(face: Placement, replica: Replica, name: str, uuid: str, memory_mb: int, kid: str, magic: int) -> None:
    face.create_provider(name, uuid)
    face.set_inventories(uuid, 0, {"VCPU": Inventory(total=8), "MEMORY_MB": Inventory(total=memory_mb),
                                   "DISK_GB": Inventory(total=100)}, reserved_may_equal_total=True)
    replica.report_many([HostReport.of([name, name], {"uuid": uuid, "vcpus": 8, "memory_mb": memory_mb,
                                                      "local_gb": 100, "hypervisor_hostname": name})])
    face.create_provider(f"{name}-child", kid, parent=uuid)
    face.set_inventories(kid, 0, {MAGIC: Inventory(total=magic, max_unit=magic)}, reserved_may_equal_total=True)


def root_also_holds(face: Placement, uuid: str, memory_mb: int, resource_class: str, total: int) -> None:
    """The compute node's own provider (as ``_node`` made it) given an inventory of a custom class beside its own."""
    face.put_record("resource_class", resource_class)
    face.set_inventories(uuid, face.provider(uuid).generation,
                         {"VCPU": Inventory(total=8), "MEMORY_MB": Inventory(total=memory_mb),
                          "DISK_GB": Inventory(total=100), resource_class: Inventory(total=total)},
                         reserved_may_equal_total=True)


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[tuple[Replica, Placement]]:
    """cn1 and cn2 (more memory: RAMWeigher's pick), each with a child holding the magic (1 on cn2, 10 on cn1)."""
    replica = Replica.open(f"sqlite:///{tmp_path}/gantt.sqlite", Config.from_dict({"gantt": {"seed": 1}}))
    face = Placement(replica)
    face.put_record("resource_class", MAGIC)
    _node(face, replica, "cn1", CN1, 4096, KID1, 10)
    _node(face, replica, "cn2", CN2, 16384, KID2, 1)
    try:
        yield replica, face
    finally:
        replica.close()


def _select(replica: Replica, consumer: str, magic: int = 1, **fields: Any) -> list[Selection]:
    flavor = {"vcpus": 1, "memory_mb": 512, "root_gb": 1, "extra_specs": {f"resources:{MAGIC}": str(magic)}}
    [choices] = replica.select_destinations({"flavor": flavor, "instance_uuids": [consumer], **fields})
    return choices


def test_a_flavor_class_only_children_hold_is_taken_from_a_child_in_the_nodes_commit(cloud: Any) -> None:
    replica, face = cloud
    chosen = _select(replica, "vm-1")[0]
    assert (chosen.host, chosen.allocation) == ("cn2", ROOT)  # the node's own part: what the root holds
    assert chosen.providers == {KID2: {MAGIC: 1}}
    assert held_by_provider(face, "vm-1") == {CN2: ROOT, KID2: {MAGIC: 1}}
    # cn2's child is full now: the next boot goes to cn1's, though cn2 has the most memory
    assert _select(replica, "vm-2")[0].host == "cn1"
    assert held_by_provider(face, "vm-2") == {CN1: ROOT, KID1: {MAGIC: 1}}
    with pytest.raises(NoValidHost):  # more than any child has
        _select(replica, "vm-3", magic=11)
    replica.release("vm-1")
    assert _select(replica, "vm-4")[0].host == "cn2"


def test_an_alternate_shows_the_child_its_claim_would_take(cloud: Any) -> None:
    """What the conductor writes for a reschedule is the alternate's allocation request (tests/nova/test_translate.py
    checks that the translation names the providers and maps the group "" to the node and its child)."""
    replica, _ = cloud
    choices = _select(replica, "vm-1")
    assert [c.host for c in choices] == ["cn2", "cn1"]
    assert choices[0].mappings == {"": [KID2]}
    assert choices[1].consumer_uuid is None
    assert (choices[1].providers, choices[1].mappings) == ({KID1: {MAGIC: 1}}, {"": [KID1]})


def test_a_move_holds_the_childs_part_of_the_source_under_the_migration(cloud: Any) -> None:
    replica, face = cloud
    assert _select(replica, "vm-1")[0].host == "cn2"
    moved = _select(replica, "vm-1", migration_uuid="mig-1")[0]
    assert (moved.host, moved.providers) == ("cn1", {KID1: {MAGIC: 1}})
    assert held_by_provider(face, "vm-1") == {CN1: ROOT, KID1: {MAGIC: 1}}
    assert held_by_provider(face, "mig-1") == {CN2: ROOT, KID2: {MAGIC: 1}}  # the source, child's part included
    # the source's magic is still used while the migration holds it: nothing else fits on cn2's child
    assert _select(replica, "vm-2")[0].host == "cn1"
    replica.release("mig-1")  # confirmed
    assert _select(replica, "vm-3")[0].host == "cn2"


def test_a_class_a_root_holds_stays_on_the_root(cloud: Any, tmp_path: Path) -> None:
    replica, face = cloud
    root_also_holds(face, CN1, 4096, "CUSTOM_ROOTY", 2)
    flavor = {"vcpus": 1, "memory_mb": 512, "root_gb": 1, "extra_specs": {"resources:CUSTOM_ROOTY": "1"}}
    [choices] = replica.select_destinations({"flavor": flavor, "instance_uuids": ["vm-1"]})
    assert (choices[0].host, choices[0].providers) == ("cn1", {})
    assert held_by_provider(face, "vm-1") == {CN1: {**ROOT, "CUSTOM_ROOTY": 1}}


def test_isolate_separates_numbered_groups_only_and_instances_share_the_first_candidates(cloud: Any) -> None:
    """Placement's group_policy=isolate keeps the numbered groups apart, never the unnumbered one from them: the
    port's group and the flavor's magic may share cn1's child. Two instances: cn2's child takes one only."""
    replica, face = cloud
    port = {"id": "port-1", "resources": {MAGIC: 1}}
    chosen = _select(replica, "vm-1", request_groups=[port], group_policy="isolate")[0]
    assert (chosen.host, chosen.mappings) == ("cn1", {"port-1": [KID1], "": [KID1]})
    assert held_by_provider(face, "vm-1") == {CN1: ROOT, KID1: {MAGIC: 2}}
    flavor = {"vcpus": 1, "memory_mb": 512, "root_gb": 1, "extra_specs": {f"resources:{MAGIC}": "1"}}
    both = replica.select_destinations({"flavor": flavor, "instance_uuids": ["vm-2", "vm-3"]})
    assert sorted(choices[0].host for choices in both) == ["cn1", "cn2"]
