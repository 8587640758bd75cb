"""Issue 31: Gantt decides as Nova 34 does before and around the filters (the parity suites under tests/parity
compare generated cases with Nova's own code; these are the issue's cases, one by one)."""

from __future__ import annotations

from typing import Any

import pytest

import gantt
from gantt.config import Config
from gantt.model import InvalidRequest

FLAVOR = {"vcpus": 1, "memory_mb": 64, "root_gb": 1}


def _sched(filters: list[str] | None = None) -> gantt.Scheduler:
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": filters or ["ComputeFilter"]}})
    sched = gantt.Scheduler(config)
    sched.update_resource_stats("h0", {"vcpus": 4, "memory_mb": 4096, "local_gb": 100, "vcpus_used": 4,
                                       "cpu_allocation_ratio": 1.0, "cpu_info": {"arch": "x86_64"},
                                       "supported_instances": [["x86_64", "qemu", "hvm"]]})
    sched.update_resource_stats("h1", {"vcpus": 4, "memory_mb": 4096, "local_gb": 100,
                                       "supported_instances": [["aarch64", "qemu", "hvm"]]})
    return sched


def test_ignore_hosts_match_host_names_in_any_case() -> None:
    """Item 1: Nova lower-cases both sides of ignore_hosts."""
    sched = _sched()
    sched.update_resource_stats("h0", {"vcpus": 4, "memory_mb": 4096, "local_gb": 100})
    for _ in range(4):
        [[chosen, *_]] = sched.select_destinations({"flavor": FLAVOR, "ignore_hosts": ["H0"]})
        assert chosen.host == "h1"


def test_force_nodes_match_node_names_exactly() -> None:
    """Item 2: Nova compares force_nodes as given (force_hosts, unlike it, without regard to case)."""
    sched = _sched()
    with pytest.raises(gantt.NoValidHost):
        sched.select_destinations({"flavor": FLAVOR, "force_nodes": ["H1"]})
    [[chosen, *_]] = sched.select_destinations({"flavor": FLAVOR, "force_hosts": ["H1"]})
    assert chosen.host == "h1"


def _rebuild(image_arch: str, **more: Any) -> dict[str, Any]:
    return {"flavor": FLAVOR, "instance_uuids": ["vm-1"], "force_hosts": ["h0"], "force_nodes": ["h0"],
            "image": {"properties": {"hw_architecture": image_arch}},
            "scheduler_hints": {"_nova_check_type": ["rebuild"]}, **more}


def test_a_rebuild_runs_the_rebuild_filters_and_claims_nothing() -> None:
    """Item 3: h0 is full and ComputeFilter-irrelevant for a rebuild; ImagePropertiesFilter still judges the new
    image. Nothing is claimed either way."""
    sched = _sched(["ImagePropertiesFilter", "ComputeFilter", "NumInstancesFilter"])
    with pytest.raises(gantt.NoValidHost) as refused:
        sched.select_destinations(_rebuild("aarch64"))
    assert "ImagePropertiesFilter" in str(refused.value)
    [[chosen]] = sched.select_destinations(_rebuild("x86_64"))
    assert (chosen.host, chosen.nodename, chosen.allocation, chosen.consumer_uuid) == ("h0", "h0", {}, None)
    assert sched.table.allocation("vm-1") is None
    # the same request without the hint forces the host and skips every filter, but claims (and h0 is full)
    plain = _rebuild("aarch64", scheduler_hints={})
    with pytest.raises(gantt.NoValidHost, match="ResourceFilter"):
        sched.select_destinations(plain)


def test_any_check_type_runs_the_filters_for_forced_hosts() -> None:
    sched = _sched(["ImagePropertiesFilter"])
    sched.update_resource_stats("h1", {"vcpus": 4, "memory_mb": 4096, "local_gb": 100,
                                       "supported_instances": [["aarch64", "qemu", "hvm"]]})
    spec = {"flavor": FLAVOR, "force_hosts": ["h1"], "image": {"properties": {"hw_architecture": "x86_64"}}}
    assert sched.select_destinations(spec)[0][0].host == "h1"  # forced: no filter runs
    with pytest.raises(gantt.NoValidHost):
        sched.select_destinations({**spec, "scheduler_hints": {"_nova_check_type": ["other"]}})


def test_a_rebuild_of_several_instances_or_a_move_is_refused() -> None:
    sched = _sched()
    with pytest.raises(InvalidRequest) as refused:
        sched.select_destinations({**_rebuild("x86_64"), "instance_uuids": ["a", "b"], "num_instances": 2})
    assert refused.value.field == "$.scheduler_hints._nova_check_type"
    with pytest.raises(InvalidRequest):
        sched.select_destinations({**_rebuild("x86_64"), "migration_uuid": "m-1"})


@pytest.mark.parametrize(("name", "text"), [("numa_topology", '{"cells": 3}'), ("numa_topology", "not json"),
                                            ("pci_stats", '[{"count": 1}]'), ("pci_stats", "{")])
def test_stored_json_text_that_is_not_the_field_is_refused_naming_it(name: str, text: str) -> None:
    """Item 11: the JSON text form is read as the field it stands for, and refused as that field would be."""
    sched = gantt.Scheduler()
    with pytest.raises(InvalidRequest) as refused:
        sched.update_resource_stats("h0", {"vcpus": 1, "memory_mb": 1, "local_gb": 1, name: text})
    assert refused.value.field is not None and refused.value.field.startswith(f"$.stats.{name}")
    assert sched.table.n == 0


def _ironic(sched: gantt.Scheduler, node: str, instances: list[str], **more: Any) -> None:
    sched.update_resource_stats(["bm", node], {"hypervisor_type": "ironic", "vcpus": 128, "memory_mb": 524288,
                                               "local_gb": 2000, "instances": instances,
                                               "inventories": {"CUSTOM_BAREMETAL_GOLD": {"total": 1}}, **more})


def test_an_ironic_node_is_one_custom_class_all_or_nothing() -> None:
    """Item 10: Nova's ironic driver reports no VCPU, RAM or disk for a node, only its custom resource class
    (reserved once the node holds an instance): a VM flavor never lands on bare metal, and a taken node is full."""
    sched = gantt.Scheduler(Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeFilter"]}}))
    _ironic(sched, "node-1", ["i-1"])
    _ironic(sched, "node-2", [])
    assert sched.candidates({"flavor": {"vcpus": 2, "memory_mb": 1024, "root_gb": 10}}) == []
    bare = {"flavor": {"vcpus": 0}, "resources": {"CUSTOM_BAREMETAL_GOLD": 1}}
    assert [c.nodename for c in sched.candidates(bare)] == ["node-2"]
    [[chosen]] = sched.select_destinations({**bare, "instance_uuids": ["i-2"]})
    assert chosen.nodename == "node-2"
    with pytest.raises(gantt.NoValidHost):  # the claim took the whole node
        sched.select_destinations({**bare, "instance_uuids": ["i-3"]})


def test_a_node_that_becomes_ironic_drops_what_its_classic_fields_made() -> None:
    sched = gantt.Scheduler()
    sched.update_resource_stats(["bm", "node-1"], {"vcpus": 128, "memory_mb": 524288, "local_gb": 2000})
    assert sched.candidates({"flavor": FLAVOR})
    _ironic(sched, "node-1", [])
    assert sched.candidates({"flavor": FLAVOR}) == []
