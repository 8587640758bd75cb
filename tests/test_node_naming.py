"""Issue 33 item 4: one node, one record, however it is named.

Nova's nova-compute creates its compute node's resource provider through Gantt's Placement face (a record keyed by
the provider's uuid), while Gantt's Nova scheduler reads the same node from the cell database as ``(compute.host,
hypervisor_hostname)`` with that uuid. Either may come first; host and node names differ with Nova's multi-node
fake driver, FQDN node names and ironic. Both must be the same record in the store: Placement's provider,
generation, inventories (PCPU), traits and aggregates, the host's figures, and every allocation on either name.

Two replicas on one SQLite file stand for `gantt serve` (Placement) and the scheduler manager, as deployed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from gantt.model import HostReport, Inventory, NotFound, NoValidHost
from gantt.placement.facade import Placement
from gantt.replication.replica import Replica
from gantt.resources.providers import ConsumerWrite, DuplicateName
from gantt.store.base import Batch

U1 = "00000033-0000-0000-0000-000000000001"
U2 = "00000033-0000-0000-0000-000000000002"
INSTANCE = "00000033-0000-0000-0000-0000000000a1"


class Cloud:
    """`gantt serve` (``serve``, with its Placement face) and the scheduler (``manager``) on one SQLite file."""

    def __init__(self, url: str, *, manager_follows: bool = True) -> None:
        self.url = url
        self.serve = Replica.open(url)
        self.face = Placement(self.serve)
        self.manager = Replica.open(url, follow=manager_follows)
        self.face.put_record("trait", "CUSTOM_GOLD")

    def close(self) -> None:
        self.manager.close()
        self.serve.close()

    def compute_registers(self, uuid: str, name: str, *, gold: bool = False) -> None:
        """What nova-compute's report client does through Placement: its root provider, named by its node, with
        the inventory its driver reports (PCPU on a host with dedicated CPUs) and the traits it has."""
        self.serve.sync()
        if not self.face.has_provider(uuid):
            with contextlib.suppress(DuplicateName):  # (nova's client reads the tree first: it finds it)
                self.face.create_provider(name, uuid)
        found = self.face.provider(uuid)
        given = {"VCPU": Inventory(total=8), "MEMORY_MB": Inventory(total=8192, reserved=512),
                 "DISK_GB": Inventory(total=100)}
        if gold:
            given["PCPU"] = Inventory(total=4)
        self.face.set_inventories(uuid, found.generation, given, reserved_may_equal_total=True)
        found = self.face.provider(uuid)
        self.face.set_provider_traits(uuid, found.generation,
                                      ["COMPUTE_NODE", *(["CUSTOM_GOLD"] if gold else [])])

    def cells_report(self, host: str, node: str, uuid: str, **more: object) -> None:
        """What the manager's cell reader writes for a compute node (gantt.nova.cells.report_of)."""
        self.manager.report_many([cell_report(host, node, uuid, **more)])

    def records(self, uuid: str) -> list[HostReport]:
        """The store's records of ``uuid``, read by a replica built afresh from the file."""
        fresh = Replica.open(self.url, follow=False)
        try:
            return [v.record for v in fresh.providers.by_key.values() if v.uuid == uuid]
        finally:
            fresh.close()


def cell_report(host: str, node: str, uuid: str, **more: object) -> HostReport:
    stats = {"uuid": uuid, "vcpus": 8, "vcpus_used": 0, "memory_mb": 8192, "memory_mb_used": 512, "local_gb": 100,
             "local_gb_used": 0, "hypervisor_hostname": node, "hypervisor_type": "fake",
             "cpu_allocation_ratio": 1.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
             "service": {"disabled": False, "forced_down": False}, **more}
    return HostReport.of([host, node], stats)


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[Cloud]:
    made = Cloud(f"sqlite:///{tmp_path}/gantt.sqlite")
    yield made
    made.close()


def one_record(cloud: Cloud, uuid: str, key: tuple[str, str]) -> HostReport:
    records = cloud.records(uuid)
    assert [(r.host, r.nodename) for r in records] == [key]
    for replica in (cloud.serve, cloud.manager):
        replica.sync()
        assert replica.providers.by_uuid[uuid].key == key
        assert [k for k, v in replica.providers.by_key.items() if v.uuid == uuid] == [key]
        assert not replica.providers.twins
    return records[0]


def test_provider_first_then_the_cells_report_is_one_node(cloud: Cloud) -> None:
    cloud.compute_registers(U1, "node1.example.org", gold=True)
    cloud.face.consumers.write_allocations([ConsumerWrite(INSTANCE, {U1: {"PCPU": 2, "MEMORY_MB": 512}}, "p", "u")])
    generation = cloud.face.provider(U1).generation
    cloud.manager.sync()
    cloud.cells_report("compute1", "node1.example.org", U1)

    record = one_record(cloud, U1, ("compute1", "node1.example.org"))
    assert record.provider is not None and record.provider.generation == generation
    assert record.provider.name == "node1.example.org"
    assert record.stats.traits == ["COMPUTE_NODE", "CUSTOM_GOLD"]
    assert record.stats.inventories is not None and record.stats.inventories["PCPU"].total == 4
    assert record.stats.inventories["MEMORY_MB"].reserved == 512  # Placement's, not the classic fields'
    assert record.stats.service is not None and record.stats.hypervisor_type == "fake"
    held, views = cloud.face.consumers.consumer_allocations(INSTANCE)
    assert held is not None and (held.host, held.nodename) == ("compute1", "node1.example.org")
    assert held.consumer_generation == 1  # Placement saw nothing move: Nova's cached generation still holds
    assert [v.uuid for v in views.values()] == [U1]
    assert cloud.face.provider_usage(U1)["PCPU"] == 2
    # Placement's writes land on the one record from here on
    cloud.face.set_provider_traits(U1, generation, ["CUSTOM_GOLD"])
    assert one_record(cloud, U1, ("compute1", "node1.example.org")).stats.traits == ["CUSTOM_GOLD"]


def test_report_first_then_placement_writes_on_the_same_record(cloud: Cloud) -> None:
    cloud.cells_report("compute1", "node1", U1)
    cloud.serve.sync()
    found = cloud.face.provider(U1)
    assert (found.name, found.generation, found.key) == ("node1", 0, ("compute1", "node1"))
    with pytest.raises(DuplicateName):  # Placement's answer to a second create of a uuid
        cloud.face.create_provider("node1", U1)
    cloud.compute_registers(U1, "node1", gold=True)
    cloud.cells_report("compute1", "node1", U1, vcpus_used=1)
    record = one_record(cloud, U1, ("compute1", "node1"))
    assert record.stats.traits == ["COMPUTE_NODE", "CUSTOM_GOLD"] and record.stats.vcpus_used == 1
    assert record.stats.inventories is not None and set(record.stats.inventories) == {
        "VCPU", "MEMORY_MB", "DISK_GB", "PCPU"}


def test_a_report_from_a_scheduler_behind_the_provider_is_merged_in_the_same_call(tmp_path: Path) -> None:
    """The manager's replica has not seen the provider `gantt serve` created an instant ago (another process):
    its report lands as a second record, and the same call merges them once it has caught up."""
    cloud = Cloud(f"sqlite:///{tmp_path}/gantt.sqlite", manager_follows=False)
    try:
        cloud.manager.sync()
        cloud.compute_registers(U1, "node1", gold=True)
        assert U1 not in cloud.manager.providers.by_uuid
        cloud.cells_report("compute1", "node1", U1)
        record = one_record(cloud, U1, ("compute1", "node1"))
        assert record.stats.traits == ["COMPUTE_NODE", "CUSTOM_GOLD"]
    finally:
        cloud.close()


def test_a_repeated_report_of_a_node_known_twice_is_written_with_its_merge(cloud: Cloud) -> None:
    """A report that repeats its record would be only a touch (``heartbeat``): not while another record carries
    its uuid, or the two would stay apart until the node's figures move."""
    cloud.cells_report("compute1", "node1", U1)
    cloud.compute_registers(U2, "node2")
    # a duplicate as a store that does not check freshness (etcd) can be left with: written past the replica
    cloud.manager.store.commit(Batch(reports=[cell_report("compute1", "node2", U2)]))
    cloud.manager.sync()
    assert set(cloud.manager.providers.twins) == {U2}
    stamped = cloud.manager.report_batch(cell_report("compute1", "node2", U2)).reports[0]
    assert not cloud.manager.heartbeat(stamped)
    cloud.manager.report(cell_report("compute1", "node2", U2))
    one_record(cloud, U2, ("compute1", "node2"))
    one_record(cloud, U1, ("compute1", "node1"))


def test_renames_and_a_node_moving_to_another_compute_service_keep_its_allocations(cloud: Cloud) -> None:
    """Ironic rebalances a node to another nova-compute (same uuid and node name, another host); a hypervisor
    renamed keeps its uuid. The cells' reader writes the new name, then deletes the old one: nothing is lost."""
    cloud.compute_registers(U1, "node1")
    cloud.cells_report("compute1", "node1", U1)
    cloud.face.consumers.write_allocations([ConsumerWrite(INSTANCE, {U1: {"VCPU": 2}}, "p", "u")])
    cloud.cells_report("compute2", "node1", U1)
    with pytest.raises(NotFound):  # the reader's deletion of the old name finds nothing left (logged there)
        cloud.manager.delete_host("compute1", "node1", force=True)
    cloud.cells_report("compute2", "node1-renamed", U1)
    record = one_record(cloud, U1, ("compute2", "node1-renamed"))
    assert record.provider is not None and record.provider.name == "node1"  # Placement's name is Placement's
    held, _ = cloud.face.consumers.consumer_allocations(INSTANCE)
    assert held is not None and (held.host, held.nodename, held.resources) == ("compute2", "node1-renamed",
                                                                               {"VCPU": 2})
    assert cloud.face.provider_usage(U1)["VCPU"] == 2


def test_placement_aggregates_of_a_provider_follow_it_to_its_compute_host(cloud: Cloud) -> None:
    agg = "00000033-0000-0000-0000-00000000a66a"
    cloud.compute_registers(U1, "node1")
    found = cloud.face.provider(U1)
    cloud.face.set_provider_aggregates(U1, found.generation, [agg], bump=True)
    cloud.cells_report("compute1", "node1", U1)
    one_record(cloud, U1, ("compute1", "node1"))
    assert cloud.face.provider_aggregates(U1)[1] == [agg]
    assert [a.hosts for a in cloud.manager.aggregates()] == [["compute1"]]


@pytest.mark.parametrize("provider_first", [True, False], ids=["provider-first", "report-first"])
def test_several_nodes_per_host_traits_and_pcpu_from_placement_decide(cloud: Cloud, provider_first: bool) -> None:
    """Nova's multi-node fake driver: two nodes of one compute service, one of them with dedicated CPUs and a
    trait that only Placement knows (nova-compute sets them there). A flavor's ``trait:`` extra spec and its
    ``resources:PCPU`` find that node, in either order of registration, and the allocation Placement shows is
    the one the decision booked."""
    if provider_first:
        cloud.compute_registers(U1, "node1", gold=True)
        cloud.compute_registers(U2, "node2")
    cloud.manager.sync()
    cloud.manager.report_many([cell_report("compute1", "node1", U1), cell_report("compute1", "node2", U2)])
    if not provider_first:
        cloud.compute_registers(U1, "node1", gold=True)
        cloud.compute_registers(U2, "node2")
    one_record(cloud, U1, ("compute1", "node1"))
    one_record(cloud, U2, ("compute1", "node2"))

    def flavor(vcpus: int = 2, **extra_specs: str) -> dict[str, object]:
        return {"name": "f", "vcpus": vcpus, "memory_mb": 512, "root_gb": 1, "extra_specs": extra_specs}

    for n, specs in enumerate([{"trait:CUSTOM_GOLD": "required"},
                               {"resources:PCPU": "2", "resources:VCPU": "0"}]):
        instance = f"00000033-0000-0000-0000-0000000000b{n}"
        [[chosen, *_]] = cloud.manager.select_destinations({"flavor": flavor(**specs),
                                                            "instance_uuids": [instance]})
        assert (chosen.host, chosen.nodename) == ("compute1", "node1"), specs
        held, views = cloud.face.consumers.consumer_allocations(instance)
        assert held is not None and [v.uuid for v in views.values()] == [U1]
    assert cloud.face.provider_usage(U1)["PCPU"] == 2
    with pytest.raises(NoValidHost):  # only node1 has PCPU, and it has 2 left
        cloud.manager.select_destinations({"flavor": flavor(3, **{"resources:PCPU": "3", "resources:VCPU": "0"}),
                                           "instance_uuids": ["00000033-0000-0000-0000-0000000000c1"]})
    [[plain, *_]] = cloud.manager.select_destinations({"flavor": flavor(**{"trait:CUSTOM_GOLD": "forbidden"}),
                                                      "instance_uuids": ["00000033-0000-0000-0000-0000000000c2"]})
    assert (plain.host, plain.nodename) == ("compute1", "node2")


@pytest.mark.parametrize("provider_first", [True, False], ids=["provider-first", "report-first"])
def test_placement_owns_the_inventories_it_set_whatever_the_cell_row_says(cloud: Cloud, provider_first: bool) -> None:
    """Nova's libvirt driver with only cpu_dedicated_set: Placement gets PCPU, MEMORY_MB and DISK_GB and no VCPU,
    while the cell row still carries vcpus. What Nova's Placement would hold is the node's whole offer: the
    row's figures, reported before or after and again, add no VCPU (to the Placement face or the decisions), and
    a plain flavor asking ``resources:PCPU`` (without ``resources:VCPU=0``) lands there. A node Placement never
    heard of still offers what its report names."""
    def placement_sets() -> None:
        cloud.serve.sync()
        if not cloud.face.has_provider(U1):
            cloud.face.create_provider("node1", U1)
        cloud.face.set_inventories(U1, cloud.face.provider(U1).generation,
                                   {"PCPU": Inventory(total=4), "MEMORY_MB": Inventory(total=8192),
                                    "DISK_GB": Inventory(total=100)}, reserved_may_equal_total=True)

    if provider_first:
        placement_sets()
    cloud.manager.sync()
    cloud.manager.report_many([cell_report("compute1", "node1", U1), cell_report("compute2", "node2", U2)])
    if not provider_first:
        placement_sets()
    cloud.cells_report("compute1", "node1", U1, vcpus_used=1)
    one_record(cloud, U1, ("compute1", "node1"))
    cloud.serve.sync()
    assert sorted(cloud.face.provider_inventories(U1)[1]) == ["DISK_GB", "MEMORY_MB", "PCPU"]
    assert sorted(cloud.face.provider_inventories(U2)[1]) == ["DISK_GB", "MEMORY_MB", "VCPU"]

    def flavor(vcpus: int, **extra_specs: str) -> dict[str, object]:
        return {"name": "f", "vcpus": vcpus, "memory_mb": 512, "root_gb": 1, "extra_specs": extra_specs}

    for n in range(2):  # node2 has no PCPU: both go to node1, the second after a report of the row again
        pinned = {"flavor": flavor(2, **{"resources:PCPU": "2"}),
                  "instance_uuids": [f"00000033-0000-0000-0000-0000000000e{n}"]}
        [[chosen, *_]] = cloud.manager.select_destinations(pinned)
        assert (chosen.host, chosen.nodename) == ("compute1", "node1")
        cloud.cells_report("compute1", "node1", U1, vcpus_used=2 * (n + 1))
    cloud.serve.sync()
    assert cloud.face.provider_usage(U1) == {"PCPU": 4, "MEMORY_MB": 1024, "DISK_GB": 2}
    [[plain, *_]] = cloud.manager.select_destinations({"flavor": flavor(1),
                                                      "instance_uuids": ["00000033-0000-0000-0000-0000000000f1"]})
    assert (plain.host, plain.nodename) == ("compute2", "node2")
    with pytest.raises(NoValidHost):  # no VCPU on node1, however often its row says vcpus 8
        cloud.manager.select_destinations({"flavor": flavor(1), "force_hosts": ["compute1"],
                                           "instance_uuids": ["00000033-0000-0000-0000-0000000000f2"]})


@pytest.mark.parametrize("provider_first", [True, False], ids=["provider-first", "report-first"])
def test_a_node_placement_set_is_accounted_by_its_allocations_alone(cloud: Cloud, provider_first: bool) -> None:
    """Nova's Placement counts an instance once, by its allocation, and the reserved amount once, by the
    inventory's ``reserved``. The cell row's ``memory_mb_used`` counts both again (nova-compute's resource tracker
    starts it at ``reserved_host_memory_mb`` and adds each instance), and the cells list no instances: taken as
    the node's reported usage, it made the node look full while Nova's Placement had room (Nova's functional
    ServerGroupTestV21.test_boot_servers_with_affinity_no_valid_host failed its second boot)."""
    if provider_first:
        cloud.compute_registers(U1, "node1")
    cloud.manager.sync()
    cloud.cells_report("compute1", "node1", U1)
    if not provider_first:
        cloud.compute_registers(U1, "node1")
    cloud.cells_report("compute1", "node1", U1)
    one_record(cloud, U1, ("compute1", "node1"))
    cloud.manager.sync()

    def boot(memory_mb: int, n: int) -> None:
        cloud.manager.select_destinations({"flavor": {"name": "f", "vcpus": 1, "memory_mb": memory_mb,
                                                      "root_gb": 1},
                                           "instance_uuids": [f"00000033-0000-0000-0000-0000000001b{n}"]})

    boot(4096, 1)
    # the resource tracker's figures once the instance is built: the reserved 512 MB and the instance
    cloud.cells_report("compute1", "node1", U1, memory_mb_used=512 + 4096, vcpus_used=1, local_gb_used=1)
    boot(8192 - 512 - 4096, 2)  # exactly what Placement has left
    cloud.serve.sync()
    assert cloud.face.provider_usage(U1)["MEMORY_MB"] == 8192 - 512
    with pytest.raises(NoValidHost):
        boot(1, 3)
