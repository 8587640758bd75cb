"""AggregateInstanceExtraSpecsFilter, AggregateImagePropertiesIsolation, AggregateTypeAffinityFilter and
AggregateMultiTenancyIsolation."""

from __future__ import annotations

import pytest

from gantt import InvalidRequest, NoValidHost
from tests.conftest import make_scheduler, passing, request


def sched(filters: list[str], **sections: dict) -> object:  # type: ignore[type-arg]
    s = make_scheduler(4, filters=filters, **sections)
    s.update_aggregate({"id": 1, "hosts": ["h0", "h1"], "metadata": {"ssd": "true", "gpus": "2", "tier": "gold,silver",
                                                                      "os_distro": "windows"}})
    s.update_aggregate({"id": 2, "hosts": ["h1", "h2"], "metadata": {"ssd": "false", "gpus": "8"}})
    return s  # h3 is in no aggregate


def specs(**extra: str) -> dict:  # type: ignore[type-arg]
    return request(extra_specs=extra)


def test_instance_extra_specs_scoped_unscoped_and_operators() -> None:
    s = sched(["AggregateInstanceExtraSpecsFilter"])
    assert passing(s, specs(**{"aggregate_instance_extra_specs:ssd": "true"})) == {"h0", "h1"}
    assert passing(s, specs(ssd="false")) == {"h1", "h2"}  # unscoped keys count too
    assert passing(s, specs(**{"aggregate_instance_extra_specs:gpus": ">= 4"})) == {"h1", "h2"}
    assert passing(s, specs(**{"aggregate_instance_extra_specs:gpus": "s== 2"})) == {"h0", "h1"}
    assert passing(s, specs(**{"aggregate_instance_extra_specs:tier": "silver"})) == {"h0", "h1"}  # comma values
    assert passing(s, specs(**{"aggregate_instance_extra_specs:tier": "<or> bronze <or> gold"})) == {"h0", "h1"}
    # a key no aggregate of the node defines fails the node (h3 is in none)
    assert passing(s, specs(**{"aggregate_instance_extra_specs:fpga": "yes"})) == set()
    # other scopes are other filters' business
    assert passing(s, specs(**{"hw:cpu_policy": "shared", "capabilities:x": "y"})) == {"h0", "h1", "h2", "h3"}


def test_instance_extra_specs_bad_requirement() -> None:
    s = sched(["AggregateInstanceExtraSpecsFilter"])
    with pytest.raises(InvalidRequest) as err:
        s.select_destinations(specs(**{"aggregate_instance_extra_specs:gpus": ">= many"}))
    assert err.value.field == "$.flavor.extra_specs.aggregate_instance_extra_specs:gpus"


def test_image_properties_isolation() -> None:
    s = sched(["AggregateImagePropertiesIsolation"])
    assert passing(s, request(image={"properties": {"os_distro": "windows"}})) == {"h0", "h1", "h2", "h3"}
    assert passing(s, request(image={"properties": {"os_distro": "linux"}})) == {"h2", "h3"}
    # ssd is no image property Nova knows (ImageMetaProps has no such field): it restricts nothing
    assert passing(s, request(image={"properties": {"ssd": True}})) == {"h0", "h1", "h2", "h3"}
    assert passing(s, request(image={"properties": {"ssd": "false"}})) == {"h0", "h1", "h2", "h3"}
    assert passing(s, request()) == {"h0", "h1", "h2", "h3"}


def test_image_properties_isolation_reads_the_image_as_nova_types_it() -> None:
    """Issue 31: Nova compares the ImageMetaProps value, not the raw property (checked against Nova itself in
    tests/parity/test_image_isolation_parity.py)."""
    s = make_scheduler(4, filters=["AggregateImagePropertiesIsolation"])
    s.update_aggregate({"id": 1, "hosts": ["h0"], "metadata": {"license_tier": "gold"}})
    s.update_aggregate({"id": 2, "hosts": ["h1"], "metadata": {"hw_architecture": "x86_64"}})
    s.update_aggregate({"id": 3, "hosts": ["h2"], "metadata": {"hw_boot_menu": "true"}})
    s.update_aggregate({"id": 4, "hosts": ["h3"], "metadata": {"hw_boot_menu": "True"}})
    every = {"h0", "h1", "h2", "h3"}
    assert passing(s, request(image={"properties": {"license_tier": "bronze"}})) == every  # unknown: dropped
    assert passing(s, request(image={"properties": {"hw_architecture": "amd64"}})) == every  # canonical x86_64
    assert passing(s, request(image={"properties": {"architecture": "aarch64"}})) == every - {"h1"}  # legacy name
    # typed: "yes" is True, and str(True) is "True", which the aggregate saying "true" does not list
    assert passing(s, request(image={"properties": {"hw_boot_menu": "yes"}})) == every - {"h2"}
    assert passing(s, request(image={"properties": {"hw_boot_menu": "false"}})) == every  # False never restricts


def test_image_properties_isolation_namespace() -> None:
    s = sched(["AggregateImagePropertiesIsolation"],
              filter_scheduler={"aggregate_image_properties_isolation_namespace": "os",
                                "aggregate_image_properties_isolation_separator": "_"})
    # only os_* keys are isolating now
    assert passing(s, request(image={"properties": {"os_distro": "linux", "ssd": "no"}})) == {"h2", "h3"}
    assert passing(s, request(image={"properties": {"ssd": "no"}})) == {"h0", "h1", "h2", "h3"}


def test_type_affinity() -> None:
    s = make_scheduler(3, filters=["AggregateTypeAffinityFilter"])
    s.update_aggregate({"id": 1, "hosts": ["h0"], "metadata": {"instance_type": "m1.small, m1.test"}})
    s.update_aggregate({"id": 2, "hosts": ["h1"], "metadata": {"instance_type": "m1.large"}})
    assert passing(s, request()) == {"h0", "h2"}  # the flavor is m1.test
    big = request()
    big["flavor"]["name"] = "m1.large"
    assert passing(s, big) == {"h1", "h2"}
    with pytest.raises(NoValidHost) as err:
        s.select_destinations(request(flavor={"name": "m1.tiny", "vcpus": 16}, num_instances=2))
    assert "AggregateTypeAffinityFilter removed 2" in str(err.value)


def test_multi_tenancy_isolation() -> None:
    s = make_scheduler(3, filters=["AggregateMultiTenancyIsolation"])
    s.update_aggregate({"id": 1, "hosts": ["h0"], "metadata": {"filter_tenant_id": "p1,p2"}})
    s.update_aggregate({"id": 2, "hosts": ["h1"], "metadata": {"filter_tenant_id_2": "p3", "filter_tenant_id": "p4"}})
    assert passing(s, request(project_id="p1")) == {"h0", "h2"}
    assert passing(s, request(project_id="p3")) == {"h1", "h2"}
    assert passing(s, request(project_id="p4")) == {"h1", "h2"}
    assert passing(s, request(project_id="p9")) == {"h2"}
    with pytest.raises(NoValidHost) as err:
        s.select_destinations(request(project_id="p9", vcpus=16, num_instances=2))
    assert "AggregateMultiTenancyIsolation removed 2" in str(err.value)
