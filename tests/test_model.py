"""The data contract: Nova's field names, validation that names the offending field."""

from __future__ import annotations

import pytest

from gantt.compute.request import flavor_groups, resources_from_spec, traits_from_spec
from gantt.model import (
    Aggregate,
    HostReport,
    HostStats,
    InvalidRequest,
    Inventory,
    RequestSpec,
    decode,
    merge_reports,
)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"host": "h", "stats": {"vcpus": "eight"}}, "$.stats.vcpus"),
        ({"host": "h", "stats": {"memory_mb": -1}}, "$.stats.memory_mb"),
        ({"host": "h", "stats": {"inventories": {"VCPU": {"total": 4, "step_size": 0}}}},
         "$.stats.inventories[...].step_size"),
        ({"host": "h", "stats": {"inventories": {"NOT_A_CLASS": {"total": 1}}}}, "$.stats.inventories"),
        ({"host": "h", "stats": {"surprise": 1}}, "$.stats"),
        ({"host": "", "stats": {}}, "$.host"),
        ({"stats": {}}, "$"),
    ],
)
def test_bad_host_reports_name_the_field(data: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        decode(data, HostReport)
    assert err.value.field == field


def test_report_of_accepts_novas_name_forms() -> None:
    assert HostReport.of("h1", {"vcpus": 2}).nodename == "h1"
    bare_metal = HostReport.of(["ironic-1", "node-7"], {"vcpus": 2})
    assert (bare_metal.host, bare_metal.nodename) == ("ironic-1", "node-7")
    with pytest.raises(InvalidRequest) as err:
        HostReport.of(["a", "b", "c"], {})  # type: ignore[arg-type]
    assert err.value.field == "$.name"


def test_request_spec_validation() -> None:
    with pytest.raises(InvalidRequest) as err:
        decode({"flavor": {"vcpus": 1}, "num_instances": 0}, RequestSpec)
    assert err.value.field == "$.num_instances"
    with pytest.raises(InvalidRequest):
        decode({"project_id": "p"}, RequestSpec)  # neither flavor nor resources
    with pytest.raises(InvalidRequest) as err:
        decode({"flavor": {"vcpus": 1}, "instance_group": {"policy": "sometimes"}}, RequestSpec)
    assert err.value.field == "$.instance_group.policy"
    spec = decode({"flavor": {"vcpus": 1}, "num_instances": 1, "instance_uuids": ["a", "b"]}, RequestSpec)
    assert spec.num_instances == 2


def test_resources_from_flavor_follow_nova() -> None:
    spec = decode({"flavor": {"vcpus": 2, "memory_mb": 2048, "root_gb": 20, "ephemeral_gb": 5, "swap": 1500,
                              "extra_specs": {"resources:CUSTOM_GPU": "1", "resources:VCPU": "0"}}}, RequestSpec)
    # swap is MB, rounded up to whole GB; resources:VCPU=0 removes the class.
    assert resources_from_spec(spec) == {"MEMORY_MB": 2048, "DISK_GB": 27, "CUSTOM_GPU": 1}
    pinned = decode({"flavor": {"vcpus": 4, "memory_mb": 1, "extra_specs": {"hw:cpu_policy": "dedicated"}}},
                    RequestSpec)
    assert resources_from_spec(pinned) == {"PCPU": 4, "MEMORY_MB": 1}
    # resources:PCPU=N stands for the flavor's vCPUs: no VCPU besides (Nova's functional NUMA tests' flavors)
    explicit = decode({"flavor": {"vcpus": 2, "memory_mb": 1, "extra_specs": {"resources:PCPU": "2"}}},
                      RequestSpec)
    assert resources_from_spec(explicit) == {"PCPU": 2, "MEMORY_MB": 1}
    # a granular group naming a class replaces the flavor's figure of it, as in Nova, rather than adding to it;
    # the group is a group of its own (one provider of the tree), not the node's part
    granular = decode({"flavor": {"vcpus": 1, "memory_mb": 512, "extra_specs": {"resources1:MEMORY_MB": "64"}}},
                      RequestSpec)
    assert resources_from_spec(granular) == {"VCPU": 1}
    [group] = flavor_groups(granular.flavor.extra_specs)
    assert (group.id, group.resources) == ("1", (("MEMORY_MB", 64),))
    extra = decode({"flavor": {"vcpus": 1}, "resources": {"CUSTOM_FPGA": 2}}, RequestSpec)
    assert resources_from_spec(extra) == {"VCPU": 1, "CUSTOM_FPGA": 2}
    only = decode({"resources": {"DISK_GB": 100}}, RequestSpec)
    assert resources_from_spec(only) == {"DISK_GB": 100}


def test_bad_resource_extra_spec_names_the_field() -> None:
    spec = decode({"flavor": {"vcpus": 1, "extra_specs": {"resources:VCPU": "two"}}}, RequestSpec)
    with pytest.raises(InvalidRequest) as err:
        resources_from_spec(spec)
    assert err.value.field == "$.flavor.extra_specs.resources:VCPU"


def test_traits_from_flavor_and_image() -> None:
    spec = decode({"flavor": {"vcpus": 1, "extra_specs": {"trait:HW_CPU_X86_AVX2": "required"}},
                   "image": {"properties": {"trait:CUSTOM_LICENSED": "forbidden"}},
                   "required_traits": ["COMPUTE_STATUS_DISABLED"]}, RequestSpec)
    required, forbidden = traits_from_spec(spec)
    assert required == {"HW_CPU_X86_AVX2", "COMPUTE_STATUS_DISABLED"}
    assert forbidden == {"CUSTOM_LICENSED"}
    clash = decode({"flavor": {"vcpus": 1, "extra_specs": {"trait:X": "required"}}, "forbidden_traits": ["X"]},
                   RequestSpec)
    with pytest.raises(InvalidRequest):
        traits_from_spec(clash)


def test_merge_replaces_only_what_a_report_names() -> None:
    first = HostReport(host="h", stats=HostStats(vcpus=8, vcpus_used=1, hypervisor_type="QEMU",
                                                 inventories={"CUSTOM_A": Inventory(total=1)}))
    second = HostReport(host="h", stats=HostStats(vcpus_used=5, inventories={"CUSTOM_B": Inventory(total=2)}))
    merged = merge_reports(first, second)
    assert (merged.stats.vcpus, merged.stats.vcpus_used, merged.stats.hypervisor_type) == (8, 5, "QEMU")
    assert set(merged.stats.inventories or {}) == {"CUSTOM_A", "CUSTOM_B"}


def test_aggregate_availability_zone_field_is_metadata() -> None:
    agg = decode({"id": 3, "name": "a", "availability_zone": "az9", "hosts": ["h"]}, Aggregate)
    assert agg.metadata["availability_zone"] == "az9"
    with pytest.raises(InvalidRequest) as err:
        decode({"id": 3, "metadata": {"k": 1}}, Aggregate)
    assert err.value.field == "$.metadata[...]"


def test_an_allocation_stored_before_parts_existed_loads_as_one_part() -> None:
    """A store written by an earlier Gantt holds single-node records: they load, as a one-part allocation."""
    import msgspec

    from gantt.model import Allocation

    old = msgspec.msgpack.encode({"consumer_uuid": "c1", "host": "h1", "nodename": "n1", "resources": {"VCPU": 2},
                                  "project_id": "p", "confirmed": True})
    loaded = msgspec.msgpack.decode(old, type=Allocation)
    assert loaded.parts() == [(("h1", "n1"), {"VCPU": 2})]
    assert loaded.extra == [] and loaded.consumer_generation is None and loaded.consumer_type is None
