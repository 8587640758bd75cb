"""Issue 11: every string and list that reaches the store is bounded, and every name is addressable."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec.inspect as mi
import pytest

from gantt import Scheduler, model
from gantt.model import (
    NAME_PATTERN,
    Aggregate,
    CapacityQuestion,
    Flavor,
    HostReport,
    HostStats,
    InvalidRequest,
    Inventory,
    Metric,
    NUMACell,
    NUMAPages,
    PciDevicePoolData,
    PciDevicePoolList,
    PciDevicePoolListData,
    PciDevicePoolObject,
    PciRequestSpec,
    RequestGroupSpec,
    RequestSpec,
    decode,
)
from gantt.service import schemas as wire
from gantt.service.openapi.document import openapi
from gantt.service.schemas import InstancesIn, ReportBatchIn, ReportIn
from gantt.volume import model as volume
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
    assert not sched.table.allocations()


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
    assert sched.table.aggregate("1").hosts == ["h1", "h0"]


# ------------------------------------------------------------------ every string and list, generated from the types
#
# The walk below covers every Struct an API body can reach, found from the document's request bodies, so that a
# body type or a field added later without a bound fails here rather than in production.


@dataclass(frozen=True)
class Leaf:
    """One string, list or map somewhere in a request body, its stated bound and how to build a body around it."""

    path: str  # the JSON path an error names
    kind: str  # "chars", "items", "entries" or "bytes"
    limit: int | None
    build: Callable[[Any], Any]  # a value for this leaf -> a whole body
    sample: Any  # a value that satisfies the leaf's own type


# What each Struct needs to be valid beside the field under test.
REQUIRED: dict[type, dict[str, Any]] = {
    RequestSpec: {"flavor": {}}, Aggregate: {"id": 1}, Inventory: {"total": 1}, Metric: {"name": "m", "value": 1.0},
    ReportIn: {"name": "h", "stats": {}}, InstancesIn: {"instances": []},
    volume.BackendReport: {"host": "node1@lvm"}, CapacityQuestion: {"requests": [{"flavor": {}}]},
    NUMACell: {"id": 0}, NUMAPages: {"size_kb": 4, "total": 1}, PciRequestSpec: {"spec": [{}]},
    RequestGroupSpec: {"id": "g"},
}
# Free-form JSON whose shape is checked in code, by where it sits: a valid value.
SCHEMA_IN_FREE_FORM: dict[str, Any] = {".nova_object.data": {"cells": []}}
# Maps that must name some keys beside the one under test, by the end of their path: a PCI pool (plain list form)
# names its device and count; every other key is a tag.
MAP_BASE = {"pci_stats[0]": {"vendor_id": "8086", "product_id": "1520", "count": 1}}
_POOL_DATA = {"vendor_id": "8086", "product_id": "1520", "count": 1}
REQUIRED.update({
    PciDevicePoolData: _POOL_DATA,
    PciDevicePoolObject: {"nova_object.name": "PciDevicePool", "nova_object.namespace": "nova",
                          "nova_object.version": "1.1", "nova_object.data": _POOL_DATA},
    PciDevicePoolListData: {"objects": []},
    PciDevicePoolList: {"nova_object.name": "PciDevicePoolList", "nova_object.namespace": "nova",
                        "nova_object.version": "1.1", "nova_object.data": {"objects": []}},
})
# Valid wherever a string goes: a name, a trait, a resource class, a key.
TEXT = "CUSTOM_A"
# Strings that are JSON text of a field (as compute_nodes stores it), by the end of their path: a valid one.
JSON_TEXT = {".numa_topology": '{"cells": []}', ".pci_stats": "[]"}
# A field valid only with a sibling: a move names the one instance it moves.
ALONGSIDE: dict[str, dict[str, Any]] = {"$.migration_uuid": {"instance_uuids": ["vm"]},
                                        "$.requests[0].migration_uuid": {"instance_uuids": ["vm"]}}
# Bounds msgspec cannot carry, each checked in code instead (and exercised below like the others).
CHECKED_IN_CODE = {
    # A constrained str in a union with a tuple crashes msgspec 0.22's GC; HostReport checks the names.
    "$.name": 255, "$.name[0]": 255, "$.name[1]": 255,
    "$.reports[0].name": 255, "$.reports[0].name[0]": 255, "$.reports[0].name[1]": 255,
}


def _sample(info: mi.Type) -> Any:
    if isinstance(info, mi.Metadata):
        return _sample(info.type)
    if isinstance(info, mi.StructType):
        return dict(REQUIRED.get(info.cls, {}))
    if isinstance(info, mi.UnionType):
        return _sample(next(t for t in info.types if not isinstance(t, mi.NoneType)))
    if isinstance(info, mi.LiteralType):
        return info.values[0]
    samples = {mi.StrType: TEXT, mi.IntType: 1, mi.FloatType: 1.0, mi.BoolType: True, mi.AnyType: 1,
               mi.ListType: [], mi.DictType: {}}
    if isinstance(info, mi.TupleType):
        return [_sample(t) for t in info.item_types]
    return samples[type(info)]


def leaves(info: mi.Type, path: str, build: Callable[[Any], Any], byte_bound: bool = False) -> Iterator[Leaf]:
    """Every string, list and map under ``info``; AnyType (free-form JSON) yields a leaf only where no byte bound
    above it covers it."""
    if isinstance(info, mi.Metadata):
        max_bytes = (info.extra or {}).get("max_bytes")
        if max_bytes is not None:
            yield Leaf(path, "bytes", max_bytes, build, _sample(info.type))
        yield from leaves(info.type, path, build, byte_bound or max_bytes is not None)
    elif isinstance(info, mi.StructType):
        base = REQUIRED.get(info.cls, {})
        for f in info.fields:
            where = f"{path}.{f.encode_name}"
            context = {**base, **ALONGSIDE.get(where, {})}
            yield from leaves(f.type, where, lambda v, f=f, context=context: build({**context, f.encode_name: v}),
                              byte_bound)
    elif isinstance(info, mi.UnionType):
        for member in info.types:
            yield from leaves(member, path, build, byte_bound)
    elif isinstance(info, mi.StrType):
        sample = next((text for end, text in JSON_TEXT.items() if path.endswith(end)), TEXT)
        yield Leaf(path, "chars", CHECKED_IN_CODE.get(path, info.max_length), build, sample)
    elif isinstance(info, mi.ListType):
        item = _map_base(f"{path}[0]") or _sample(info.item_type)
        yield Leaf(path, "items", info.max_length, build, [item])
        yield from leaves(info.item_type, f"{path}[0]", lambda v: build([v]), byte_bound)
    elif isinstance(info, mi.TupleType):
        items = [_sample(t) for t in info.item_types]
        for i, member in enumerate(info.item_types):
            yield from leaves(member, f"{path}[{i}]",
                              lambda v, i=i: build([*items[:i], v, *items[i + 1:]]), byte_bound)
    elif isinstance(info, mi.DictType) and path.endswith(tuple(SCHEMA_IN_FREE_FORM)):
        # JSON whose shape is checked in code (Nova's versioned-object data): a valid sample, bounded as a whole.
        valid = next(v for suffix, v in SCHEMA_IN_FREE_FORM.items() if path.endswith(suffix))
        yield Leaf(path, "entries", info.max_length, build, dict(valid))
    elif isinstance(info, mi.DictType):
        value = _sample(info.value_type)
        base = _map_base(path)
        yield Leaf(path, "entries", info.max_length, build, {**base, TEXT: value})
        yield from leaves(info.key_type, path, lambda k: build({**base, k: value}), byte_bound)
        yield from leaves(info.value_type, f"{path}[...]", lambda v: build({**base, TEXT: v}), byte_bound)
    elif isinstance(info, mi.AnyType) and not byte_bound:
        yield Leaf(path, "json", None, build, 1)


def _map_base(path: str) -> dict[str, Any]:
    return next((dict(base) for end, base in MAP_BASE.items() if path.endswith(end)), {})


def _request_bodies() -> list[type]:
    """The Struct of every request body the document names: a wire type's, the model's or the volume kind's."""
    names = set()
    for ops in openapi()["paths"].values():
        for method, op in ops.items():
            if method != "parameters" and "requestBody" in op:
                schema = op["requestBody"]["content"]["application/json"]["schema"]
                # a namespaced path takes either kind's body: compute's or a volume namespace's
                names |= {ref["$ref"].rsplit("/", 1)[1] for ref in schema.get("anyOf", [schema])}
    return [getattr(wire, name, None) or getattr(model, name, None) or getattr(volume, name)
            for name in sorted(names)]


def _all_leaves() -> list[tuple[type, Leaf]]:
    return [(root, leaf) for root in _request_bodies() for leaf in leaves(mi.type_info(root), "$", lambda v: v)]


def test_every_string_list_and_map_of_a_request_body_has_a_bound() -> None:
    assert {ReportIn, ReportBatchIn, InstancesIn, Aggregate, RequestSpec} <= set(_request_bodies())
    unbounded = [f"{root.__name__} {leaf.path} ({leaf.kind})" for root, leaf in _all_leaves() if leaf.limit is None]
    assert unbounded == []


def _over(leaf: Leaf) -> Any:
    assert leaf.limit is not None
    if leaf.kind == "chars":
        return "A" * (leaf.limit + 1)  # upper case: passes the trait and resource-class patterns, fails on length
    if leaf.kind == "items":
        return leaf.sample * (leaf.limit + 1)
    if leaf.kind == "entries":
        value = leaf.sample.get(TEXT, [])  # a schema'd sample (SCHEMA_IN_FREE_FORM) has no TEXT key
        return {**leaf.sample, **{f"{TEXT}{i}": value for i in range(leaf.limit + 1)}}
    return {TEXT: "x" * leaf.limit}  # bytes: the key and quotes take it over


def _accept(root: type, body: Any) -> None:
    """What the service does with a body before anything is written: decode it, and build the host reports."""
    value = decode(body, root)
    if isinstance(value, ReportIn):
        HostReport.of(list(value.name) if isinstance(value.name, tuple) else value.name, value.stats)
    if isinstance(value, ReportBatchIn):
        for i, item in enumerate(value.reports):
            try:
                HostReport.of(list(item.name) if isinstance(item.name, tuple) else item.name, item.stats)
            except InvalidRequest as exc:
                raise InvalidRequest(exc.message, field=f"$.reports[{i}].name") from None


@pytest.mark.parametrize(("root", "leaf"), [pytest.param(root, leaf, id=f"{root.__name__}{leaf.path}:{leaf.kind}")
                                            for root, leaf in _all_leaves() if leaf.limit is not None])
def test_every_bound_is_enforced_and_names_the_field(root: type, leaf: Leaf) -> None:
    _accept(root, leaf.build(leaf.sample))
    with pytest.raises(InvalidRequest) as err:
        _accept(root, leaf.build(_over(leaf)))
    assert err.value.field is not None
    # An item's error may name the item or its list (a host name: the service names "$.name" for both parts).
    assert err.value.field.startswith(re.sub(r"(\[[^\]]*\])+$", "", leaf.path)), err.value.message


def _document_gaps(schema: dict[str, Any], components: dict[str, Any], where: str,
                   seen: set[str]) -> Iterator[str]:
    """Places in the document where a string, array or object has no stated bound."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        if name not in seen:
            yield from _document_gaps(components[name], components, name, seen | {name})
        return
    if "x-max-bytes" in schema:
        return  # free-form JSON, bounded by its encoded size
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for i, member in enumerate(schema.get(key, ())):
            yield from _document_gaps(member, components, f"{where}/{key}/{i}", seen)
    kind = schema.get("type")
    if kind == "string" and "maxLength" not in schema and "enum" not in schema:
        yield where
    if kind == "array":
        if "maxItems" not in schema:
            yield where
        if isinstance(schema.get("items"), dict):
            yield from _document_gaps(schema["items"], components, f"{where}/items", seen)
    if kind == "object":
        for name, member in schema.get("properties", {}).items():
            yield from _document_gaps(member, components, f"{where}.{name}", seen)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            if "maxProperties" not in schema or "maxLength" not in schema.get("propertyNames", {}):
                yield where
            yield from _document_gaps(extra, components, f"{where}[...]", seen)
    if schema == {}:
        yield f"{where} (any JSON)"


def test_the_document_states_a_bound_for_every_string_list_and_map_a_request_takes() -> None:
    doc = openapi()
    components = doc["components"]["schemas"]
    gaps: list[str] = []
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            params = op if method == "parameters" else op.get("parameters", [])
            for param in params:
                schema = param["schema"]
                if schema.get("type") == "string" and "maxLength" not in schema:
                    gaps.append(f"{path} {param['in']} parameter {param['name']}")
                if schema.get("type") == "integer" and "maximum" not in schema:
                    gaps.append(f"{path} {param['in']} parameter {param['name']}")
            if method != "parameters" and "requestBody" in op:
                body = op["requestBody"]["content"]["application/json"]["schema"]
                gaps += [f"{method.upper()} {path}: {gap}" for gap in _document_gaps(body, components, "$", set())]
    assert gaps == []


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


def test_inputs_nova_accepts_stay_valid() -> None:
    # Nova's own API takes bodies up to 112 KiB (oslo.middleware's max_request_body_size), so a hint of 100 KB
    # is one it can send; it joins aggregate UUIDs with commas into one requested_destination string, and a
    # member_of group may name many aggregates; its HVSpec is (arch, hv_type, vm_mode).
    uuids = [str(uuid.UUID(int=i)) for i in range(500)]
    spec = decode(request(scheduler_hints={"different_host": uuids * 5},
                          requested_destination={"aggregates": [",".join(uuids)]},
                          member_of=[["in:" + ",".join(uuids)]],
                          instance_group={"policies": ["anti-affinity"], "members": uuids}), RequestSpec)
    assert spec.instance_group is not None and spec.instance_group.policy == "anti-affinity"
    decode({"name": "h", "stats": {"supported_instances": [["x86_64", "kvm", "hvm"], ["i686", "qemu", None]],
                                   "metrics": [{"name": "cpu.percent", "value": 3.0, "source": "libvirt.Driver",
                                                "timestamp": "2026-11-23T05:44:09.000000"}]}}, ReportIn)


def test_integer_aggregate_ids_beyond_int64_are_refused_and_the_document_says_so() -> None:
    decode({"id": 2**63 - 1}, Aggregate)
    for beyond in (2**63, -(2**63), 10**30):
        with pytest.raises(InvalidRequest) as err:
            decode({"id": beyond}, Aggregate)
        assert err.value.field == "$.id"
    [integer] = [s for s in openapi()["components"]["schemas"]["Aggregate"]["properties"]["id"]["anyOf"]
                 if s.get("type") == "integer"]
    assert integer["maximum"] == 2**63 - 1 and integer["minimum"] == -(2**63 - 1)
