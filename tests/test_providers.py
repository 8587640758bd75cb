"""The provider rules (gantt.resources.providers) and the catalog rules (gantt.resources.catalog), without HTTP."""

from __future__ import annotations

import pytest

from gantt.model import Conflict, HostReport, HostStats, InvalidRequest, Inventory, NotFound, Record
from gantt.resources.catalog import Catalog, check_custom, check_deletable
from gantt.resources.providers import (
    InventoryInUse,
    ProviderIndex,
    ProviderQuery,
    bumped,
    check_inventory,
    check_not_in_use,
    inventories,
    new_record,
    view,
    with_inventories,
)


def test_a_reported_host_is_a_root_provider_at_generation_0_and_one_without_uuid_is_none() -> None:
    found = view(HostReport(host="h", node="n", stats=HostStats(uuid="u", vcpus=4)))
    assert found is not None
    assert (found.uuid, found.name, found.generation, found.root_provider_uuid) == ("u", "n", 0, "u")
    assert view(HostReport(host="h", stats=HostStats(vcpus=4))) is None


def test_inventories_derive_the_classic_classes_and_a_placement_write_replaces_them() -> None:
    record = HostReport(host="h", stats=HostStats(uuid="u", vcpus=4, memory_mb=1024, cpu_allocation_ratio=2.0))
    derived = inventories(record, {"VCPU": 16.0, "MEMORY_MB": 1.5})
    assert derived["VCPU"] == Inventory(total=4, allocation_ratio=2.0, max_unit=4)
    assert derived["MEMORY_MB"].allocation_ratio == 1.5
    found = view(record)
    assert found is not None
    written = with_inventories(found, {"CUSTOM_X": Inventory(total=2, max_unit=2)}, now=5.0)
    assert set(inventories(written, {})) == {"CUSTOM_X"}
    assert written.provider is not None and written.provider.generation == 1


def test_inventory_rules() -> None:
    check_inventory("VCPU", Inventory(total=4, reserved=4), reserved_may_equal_total=True)
    with pytest.raises(InvalidRequest, match="greater than or equal to total"):
        check_inventory("VCPU", Inventory(total=4, reserved=4), reserved_may_equal_total=False)
    with pytest.raises(InvalidRequest, match="greater than total"):
        check_inventory("VCPU", Inventory(total=4, reserved=5), reserved_may_equal_total=True)
    # Placement 16 takes a step above max_unit (nothing ever fits it): so does Gantt (test_candidates_parity)
    check_inventory("VCPU", Inventory(total=4, max_unit=2, step_size=3), reserved_may_equal_total=True)
    with pytest.raises(InventoryInUse):
        check_not_in_use("u", ["VCPU"], {"VCPU": 1})
    check_not_in_use("u", ["VCPU"], {"MEMORY_MB": 1})


def test_resources_query_follows_units_step_and_free_capacity() -> None:
    offered = {"VCPU": Inventory(total=8, max_unit=4, step_size=2, allocation_ratio=2.0)}
    assert ProviderQuery(resources=(("VCPU", 4),)).matches_resources(offered, {"VCPU": 12})
    assert not ProviderQuery(resources=(("VCPU", 4),)).matches_resources(offered, {"VCPU": 13})  # no room
    assert not ProviderQuery(resources=(("VCPU", 3),)).matches_resources(offered, {})  # not a step
    assert not ProviderQuery(resources=(("VCPU", 6),)).matches_resources(offered, {})  # above max_unit
    assert not ProviderQuery(resources=(("DISK_GB", 1),)).matches_resources(offered, {})


def test_index_follows_trees_renames_and_removals() -> None:
    index = ProviderIndex()
    root = new_record("r", "root", None, 1.0)
    index.put(root)
    child = new_record("c", "child", index.get("r"), 1.0)
    index.put(child)
    assert index.get("c").root_provider_uuid == "r" and index.descendants("r") == {"c"}
    index.put(bumped(index.get("r"), 2.0, name="renamed"))
    assert index.by_name == {"renamed": "r", "child": "c"}
    index.remove(("c", "c"))
    with pytest.raises(NotFound):
        index.get("c")


def test_catalog_rules() -> None:
    catalog = Catalog([Record(kind="trait", name="CUSTOM_A")])
    assert catalog.has("trait", "HW_CPU_X86_AVX2") and catalog.has("trait", "CUSTOM_A")
    assert catalog.missing("resource_class", ["VCPU", "CUSTOM_B"]) == ["CUSTOM_B"]
    with pytest.raises(InvalidRequest):
        check_custom("trait", "NOT_CUSTOM")
    with pytest.raises(InvalidRequest):
        check_deletable("resource_class", "VCPU", catalog, 0)
    with pytest.raises(NotFound):
        check_deletable("trait", "CUSTOM_B", catalog, 0)
    with pytest.raises(Conflict):
        check_deletable("trait", "CUSTOM_A", catalog, 1)


def test_index_knows_a_uuid_held_under_two_names_until_one_goes() -> None:
    """Issue 33: nova-compute's provider (keyed by its uuid) and the cells' report of the same node (keyed by host
    and node) are twins until a report merges them: Placement shows the one it wrote; each name finds the other."""
    index = ProviderIndex()
    reported = HostReport(host="compute1", node="node1", stats=HostStats(uuid="u", vcpus=4))
    index.put(reported)
    assert index.twins_of("u", ("compute1", "node1")) == [] and index.twins == {}
    placed = new_record("u", "node1", None, 1.0)
    index.put(placed)
    assert index.by_uuid["u"].key == ("u", "u") and index.by_name == {"node1": "u"}
    assert [v.key for v in index.twins_of("u", ("compute1", "node1"))] == [("u", "u")]
    assert [v.key for v in index.twins_of("u", ("u", "u"))] == [("compute1", "node1")]
    index.put(reported)  # a report of the cells' name again: Placement's record stays the one shown
    assert index.by_uuid["u"].key == ("u", "u")
    index.remove(("u", "u"))
    assert index.by_uuid["u"].key == ("compute1", "node1") and index.twins == {}
    assert index.twins_of("u", ("compute1", "node1")) == [] and index.by_name == {"node1": "u"}
