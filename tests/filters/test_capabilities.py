from __future__ import annotations

import json

import pytest

from gantt import InvalidRequest, NoValidHost
from tests.conftest import make_scheduler, passing, request

F = ["ComputeCapabilitiesFilter"]
CPU_A = {"vendor": "Intel", "features": ["sse", "avx", "avx2"], "maxphysaddr": {"bits": 46}}
CPU_B = {"vendor": "AMD", "features": ["sse"], "maxphysaddr": {"bits": 40}}


def sched():  # type: ignore[no-untyped-def]
    return make_scheduler({
        "a": {"cpu_info": CPU_A, "stats": {"gpu": "nvidia", "tier": "3"}, "hypervisor_version": 8002000},
        "b": {"cpu_info": json.dumps(CPU_B), "hypervisor_type": "hyperv", "vcpus_used": 8},
        "c": {"hypervisor_type": "QEMU", "stats": {}},
    }, filters=F)


def specs(**extra: str) -> dict:  # type: ignore[type-arg]
    return request(extra_specs=extra)


def test_scoped_attributes_and_nested_json_scopes() -> None:
    s = sched()
    assert passing(s, specs(**{"capabilities:hypervisor_type": "s== QEMU"})) == {"a", "c"}
    assert passing(s, specs(**{"capabilities:cpu_info:vendor": "AMD"})) == {"b"}  # cpu_info given as JSON text
    assert passing(s, specs(**{"capabilities:cpu_info:features": "<in> avx"})) == {"a"}
    assert passing(s, specs(**{"capabilities:cpu_info:features": "<all-in> sse avx2"})) == {"a"}
    assert passing(s, specs(**{"capabilities:cpu_info:maxphysaddr:bits": ">= 42"})) == {"a"}
    assert passing(s, specs(**{"hw:maxphysaddr_bits": "40"})) == {"a", "b"}
    assert passing(s, specs(**{"capabilities:hypervisor_version": ">= 8000000"})) == {"a", "b", "c"}


def test_missing_capability_fails_and_stats_are_the_fallback() -> None:
    s = sched()
    assert passing(s, specs(**{"capabilities:gpu": "<or> nvidia <or> amd"})) == {"a"}
    assert passing(s, specs(**{"capabilities:cpu_info:nothing": "x"})) == set()


def test_unscoped_keys_only_when_the_host_has_them() -> None:
    s = sched()
    # 'tier' is in a's stats only: b and c ignore the key
    assert passing(s, specs(tier="= 4")) == {"b", "c"}
    assert passing(s, specs(tier="= 2")) == {"a", "b", "c"}
    # a HostState attribute is always checked
    assert passing(s, specs(hypervisor_type="hyperv")) == {"b"}
    # other scopes belong to other filters
    assert passing(s, specs(**{"hw:cpu_policy": "shared", "aggregate_instance_extra_specs:x": "y"})) == {"a", "b", "c"}


def test_usage_and_identity_attributes() -> None:
    s = sched()
    assert passing(s, specs(vcpus_used="<= 4")) == {"a", "c"}
    assert passing(s, specs(free_ram_mb=">= 65536")) == {"a", "b", "c"}
    assert passing(s, specs(host="s!= b")) == {"a", "c"}
    assert passing(s, specs(num_instances="s== 0")) == {"a", "b", "c"}  # integers compare as Nova prints them
    s.select_destinations(request(extra_specs={"host": "s== c"}))
    assert passing(s, specs(num_instances="== 1")) == {"c"}  # a placement counts until the host reports


def test_multi_node_host_nodes_are_judged_separately() -> None:
    s = make_scheduler({}, filters=F)
    s.update_resource_stats(["ironic", "n1"], {"vcpus": 4, "memory_mb": 4096, "local_gb": 10,
                                               "stats": {"rack": "r1"}})
    s.update_resource_stats(["ironic", "n2"], {"vcpus": 4, "memory_mb": 4096, "local_gb": 10,
                                               "stats": {"rack": "r2"}})
    assert passing(s, specs(**{"capabilities:rack": "r2"})) == {"n2"}


def test_static_part_is_cached_but_follows_new_reports() -> None:
    s = sched()
    spec = specs(**{"capabilities:hypervisor_type": "s== QEMU"})
    assert passing(s, spec) == {"a", "c"}
    s.update_resource_stats("a", {"hypervisor_type": "hyperv"})
    assert passing(s, spec) == {"c"}


def test_malformed_spec_names_the_field() -> None:
    with pytest.raises(InvalidRequest) as err:
        sched().select_destinations(specs(**{"capabilities:hypervisor_version": ">= lots"}))
    assert err.value.field == "$.flavor.extra_specs.capabilities:hypervisor_version"


def test_explanation_names_the_filter() -> None:
    with pytest.raises(NoValidHost) as err:
        sched().select_destinations(specs(**{"capabilities:hypervisor_type": "s== xen"}))
    steps = {step.name: step.removed for step in err.value.explanation.steps}  # type: ignore[union-attr]
    assert steps["ComputeCapabilitiesFilter"] == 3
    assert "ComputeCapabilitiesFilter removed 3" in str(err.value)
