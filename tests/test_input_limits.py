"""Issue 11: every string and list that reaches the store is bounded, and every name is addressable."""

from __future__ import annotations

from typing import Any

import pytest

from gantt import Scheduler
from gantt.model import NAME_PATTERN, Flavor, HostStats, InvalidRequest, Inventory, Metric, RequestSpec, decode
from gantt.service.schemas import ReportIn, openapi
from tests.conftest import host_stats, make_scheduler, request


@pytest.mark.parametrize("name", ["", "a/b", ".", "..", "x" * 256, "tab\there"])
def test_an_unaddressable_host_name_is_refused(name: str) -> None:
    sched = Scheduler()
    with pytest.raises(InvalidRequest):
        sched.update_resource_stats(name, host_stats())
    with pytest.raises(InvalidRequest):
        sched.update_resource_stats(["ok", name], host_stats())
    assert sched.table.n == 0


@pytest.mark.parametrize(("fields", "where"), [
    ({"instance_uuids": ["a/b"]}, "$.instance_uuids[0]"),
    ({"instance_uuids": [""]}, "$.instance_uuids[0]"),
    ({"request_id": "r" * 1_000_000}, "$.request_id"),
    ({"num_instances": 1001}, "$.num_instances"),
    ({"project_id": "p" * 256}, "$.project_id"),
    ({"ignore_hosts": ["h"] * 10_001}, "$.ignore_hosts"),
])
def test_oversized_or_unaddressable_request_fields_are_refused(fields: dict[str, object], where: str) -> None:
    sched = make_scheduler(1)
    with pytest.raises(InvalidRequest) as err:
        sched.select_destinations(request(**fields))
    assert err.value.field == where
    assert sched.table.allocations == {}


@pytest.mark.parametrize(("aggregate", "where"), [
    ({"id": "a/b"}, "$.id"),
    ({"id": 1, "metadata": {"k": "v" * 256}}, "$.metadata[...]"),
    ({"id": 1, "metadata": {"": "v"}}, "$.metadata[...]"),
    ({"id": 1, "hosts": ["x/y"]}, "$.hosts[0]"),
])
def test_aggregate_limits(aggregate: dict[str, object], where: str) -> None:
    sched = make_scheduler(1)
    with pytest.raises(InvalidRequest) as err:
        sched.update_aggregate(aggregate)
    assert err.value.field.startswith(where.split("[")[0])


def test_an_aggregate_of_a_hundred_thousand_hosts_is_valid() -> None:
    sched = make_scheduler(1)
    sched.update_aggregate({"id": 1, "hosts": [f"c{i}" for i in range(100_000)]})


def test_the_openapi_document_states_the_limits() -> None:
    schemas = openapi()["components"]["schemas"]
    spec = schemas["RequestSpec"]["properties"]
    assert spec["request_id"]["anyOf"][0]["maxLength"] == 255
    assert spec["num_instances"]["maximum"] == 1000
    hosts = schemas["Aggregate"]["properties"]["hosts"]
    assert hosts["maxItems"] == 1_000_000 and hosts["items"]["maxLength"] == 255


def _bounds(schema: dict[str, Any]) -> dict[str, Any]:
    return schema["anyOf"][0] if "anyOf" in schema else schema


@pytest.mark.parametrize(("struct", "field"), [
    *[(HostStats, name) for name in ("vcpus", "vcpus_used", "memory_mb", "local_gb_used", "disk_available_least",
                                     "num_io_ops", "failed_builds", "cpu_allocation_ratio", "disk_allocation_ratio")],
    *[(Inventory, name) for name in ("total", "reserved", "min_unit", "step_size", "used", "allocation_ratio")],
    (Metric, "value"), (Flavor, "vcpus"), (Flavor, "swap"),
])
def test_the_document_states_the_ranges_the_model_enforces(struct: type, field: str) -> None:
    # Found by the OpenAPI fuzzer: generated "valid" bodies were refused for ranges the document did not state.
    bounds = _bounds(openapi()["components"]["schemas"][struct.__name__]["properties"][field])
    base = {"total": 8} if struct is Inventory else {"name": "m"} if struct is Metric else {}

    def beyond(value: float, direction: int) -> float:
        return value + direction if bounds["type"] == "integer" else value + direction * max(abs(value) * 1e-6, 1e-6)

    edges = {"maximum": lambda v: (v, beyond(v, 1)), "minimum": lambda v: (v, beyond(v, -1)),
             "exclusiveMinimum": lambda v: (beyond(v, 1), v)}
    for edge, inside_outside in edges.items():
        if edge in bounds:
            inside, outside = inside_outside(bounds[edge])
            decode({**base, field: inside}, struct)
            with pytest.raises(InvalidRequest):
                decode({**base, field: outside}, struct)
    assert "maximum" in bounds or struct is Flavor


def test_the_document_states_which_names_and_which_request_bodies_are_refused() -> None:
    schemas = openapi()["components"]["schemas"]
    name = schemas["ReportIn"]["properties"]["name"]["anyOf"]
    assert name[0]["pattern"] == name[1]["prefixItems"][1]["pattern"] == NAME_PATTERN
    assert {"required": ["resources"]} .items() <= schemas["RequestSpec"]["anyOf"][1].items()
    inventories = schemas["HostStats"]["properties"]["inventories"]["anyOf"][0]["propertyNames"]
    assert "VCPU" in inventories["anyOf"][0]["enum"]
    with pytest.raises(InvalidRequest):
        decode({"flavor": None}, RequestSpec)


def test_aggregate_host_lists_are_deduplicated_in_order() -> None:
    sched = make_scheduler(2)
    sched.update_aggregate({"id": 1, "hosts": ["h1", "h0"] + ["h1"] * 3000})
    assert sched.table.aggregates["1"].hosts == ["h1", "h0"]


@pytest.mark.parametrize(("field", "value"), [
    ("scheduler_hints", {"different_host": ["x" * 36] * 4000}),
    ("image", {"properties": {"p": "x" * 200_000}}),
    ("instance_group", {"policy": "affinity", "rules": {"r": "x" * 200_000}}),
])
def test_free_form_json_is_bounded_by_its_encoded_size(field: str, value: Any) -> None:
    with pytest.raises(InvalidRequest) as err:
        decode(request(**{field: value}), RequestSpec)
    assert err.value.field is not None and err.value.field.startswith(f"$.{field}")
    assert "bytes" in err.value.message
    for stats in ({"stats": {"s": "x" * 200_000}}, {"cpu_info": {"features": ["x" * 36] * 5000}},
                  {"cpu_info": "x" * 200_000}):
        with pytest.raises(InvalidRequest) as err:
            decode({"name": "h", "stats": stats}, ReportIn)
        assert err.value.field == f"$.stats.{next(iter(stats))}"
