"""The OpenAPI document's skeleton: every path and operation of Gantt's own API with its parameters, bodies and
answers, and the wire types' schemas with the limits the model's checks enforce."""

from __future__ import annotations

from typing import Any

import msgspec

from gantt.base.version import __version__
from gantt.model import (
    MAX_COUNT,
    MAX_RATIO,
    MAX_TEXT,
    NAME_PATTERN,
    STANDARD_CLASSES,
    Aggregate,
    CapacityAnswer,
    CapacityQuestion,
    RequestSpec,
)
from gantt.model.activity import Overview
from gantt.service.openapi.namespaces import namespaced
from gantt.service.openapi.prose import annotate
from gantt.service.schemas import (
    MAX_LIMIT,
    PROBLEM_JSON,
    REVISION_HEADER,
    AggregateList,
    AllocationList,
    AllocationView,
    Candidates,
    Health,
    HostInfo,
    HostList,
    InstancesIn,
    Problem,
    ReportBatchIn,
    ReportIn,
    Selections,
    Versions,
    Written,
)

_COMPONENTS = (Versions, ReportIn, ReportBatchIn, InstancesIn, Aggregate, RequestSpec, Written, HostInfo, HostList,
               AggregateList, AllocationView, AllocationList, Selections, Candidates, CapacityQuestion,
               CapacityAnswer, Overview, Health, Problem)


def _json(name: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}}


def _problem(description: str) -> dict[str, Any]:
    return {"description": description,
            "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}}


def _op(summary: str, *, ok: str | None = None, body: str | None = None, errors: tuple[int, ...] = (),
        params: list[dict[str, Any]] | None = None, status: str = "200", open_: bool = False,
        description: str | None = None) -> dict[str, Any]:
    responses: dict[str, Any] = {status: {"description": "OK"} if ok is None
                                 else {"description": "OK", "content": _json(ok)}}
    texts = {400: "Invalid input; `field` names it", 401: "Missing or wrong bearer token",
             404: "Unknown host, aggregate, consumer or instance",
             409: "NoValidHost: nothing fits; `explanation` says, filter by filter, how many hosts each removed "
                  "and by how much the nearest host missed",
             413: "Body larger than [gantt] max_body_bytes", 415: "Body is not application/json",
             503: "The store cannot commit; nothing was applied"}
    # Every call refuses a query parameter it does not take (and a bad body or name) with 400.
    for code in (400, *errors):
        responses[str(code)] = _problem(texts[code])
    if not open_:
        responses["401"] = _problem(texts[401])
    op: dict[str, Any] = {"summary": summary, "responses": responses}
    if description:
        op["description"] = description
    if body is not None:
        op["requestBody"] = {"required": True, "content": _json(body)}
        responses.setdefault("400", _problem(texts[400]))
        responses["413"] = _problem(texts[413])
        responses["415"] = _problem(texts[415])
    if params:
        op["parameters"] = params
    if open_:
        op["security"] = []
    return op


def _deleted(op: dict[str, Any]) -> dict[str, Any]:
    op["responses"]["204"] = {
        "description": "Done; no body. The store revision that holds the change is in the Gantt-Revision header",
        "headers": {REVISION_HEADER: {"description": "the store revision that holds the change",
                                      "schema": {"type": "integer", "minimum": 0}}}}
    return op


_PAGING = [
    {"name": "limit", "in": "query", "required": False,
     "schema": {"type": "integer", "minimum": 1, "maximum": 1000},
     "description": "At most this many items (1-1000); without it, every item"},
]


def _marker(description: str) -> dict[str, Any]:
    return {"name": "marker", "in": "query", "required": False,
            "schema": {"type": "string", "minLength": 1, "maxLength": 2 * MAX_TEXT + 1},
            "description": description + "; one that names nothing is a 400"}


def _move_op(summary: str) -> dict[str, Any]:
    op = _op(summary, ok="AllocationView", errors=(404, 409, 503))
    op["responses"]["404"] = _problem("No move in progress under this migration (never made, confirmed or "
                                      "reverted already)")
    op["responses"]["409"] = _problem("Not a migration; or (revert) the instance was released or moved on since")
    return op


_NAME = {"type": "string", "minLength": 1, "maxLength": MAX_TEXT, "pattern": NAME_PATTERN}


def _path_param(name: str) -> dict[str, Any]:
    # Every path parameter names something made by a body's Name (host, node, consumer, migration, instance,
    # aggregate id): one that is not a Name can name nothing, and is refused as such (400).
    return {"name": name, "in": "path", "required": True, "schema": _NAME}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


_NODE = _query("node", _NAME, "The node of a host with several nodes (bare metal)")
_FORCE = _query("force", {"type": "string", "enum": ["true", "false"], "maxLength": 5, "default": "false"},
                "true: delete a host that holds allocations, removing its parts of them")
_WRITE_ERRORS = (503,)


_COUNT = {"type": "integer", "minimum": 0, "maximum": MAX_COUNT}
_RATIO = {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_RATIO}
_RESOURCE_CLASS = {"anyOf": [{"enum": sorted(STANDARD_CLASSES)}, {"pattern": "^CUSTOM_[A-Z0-9_]+$"}],
                   "description": "a standard resource class (os-resource-classes) or CUSTOM_[A-Z0-9_]+"}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}], "default": None}


def _state_limits(schemas: dict[str, Any]) -> None:
    """Add to msgspec's schemas the limits the model's own checks enforce (``__post_init__``: ranges, names a
    plain ``str`` field must still satisfy, one field or another), so that the document says what is refused."""
    stats = schemas["HostStats"]["properties"]
    for name in ("vcpus", "vcpus_used", "memory_mb", "memory_mb_used", "local_gb", "local_gb_used", "running_vms",
                 "num_instances", "num_io_ops", "current_workload", "failed_builds"):
        stats[name] = _nullable(_COUNT)
    stats["disk_available_least"] = _nullable({"type": "integer", "minimum": -MAX_COUNT, "maximum": MAX_COUNT})
    for name in ("cpu_allocation_ratio", "ram_allocation_ratio", "disk_allocation_ratio"):
        stats[name] = _nullable(_RATIO)
    stats["traits"]["anyOf"][0]["items"]["pattern"] = "^[A-Z0-9_]+$"
    inventories = stats["inventories"]["anyOf"][0]
    inventories["propertyNames"] = {**inventories["propertyNames"], **_RESOURCE_CLASS}
    inventory = schemas["Inventory"]["properties"]
    inventory["total"] = {**_COUNT}
    inventory["reserved"] = {**_COUNT, "default": 0}
    inventory["used"] = _nullable(_COUNT)
    inventory["min_unit"] = {**_COUNT, "minimum": 1, "default": 1}
    inventory["step_size"] = {**_COUNT, "minimum": 1, "default": 1}
    inventory["max_unit"] = _nullable({**_COUNT, "minimum": 1})
    inventory["max_unit"]["description"] = "at least min_unit; null: total"
    inventory["allocation_ratio"] = {**_RATIO, "default": 1.0}
    schemas["Metric"]["properties"]["value"] = {"type": "number", "minimum": -1e15, "maximum": 1e15}
    schemas["ReportIn"]["properties"]["name"] = {"anyOf": [_NAME, {
        "type": "array", "minItems": 2, "maxItems": 2, "prefixItems": [_NAME, _NAME], "items": False}]}
    for name in ("vcpus", "memory_mb", "root_gb", "ephemeral_gb", "swap"):
        schemas["Flavor"]["properties"][name] = {"type": "integer", "minimum": 0, "default": 0}
    spec = schemas["RequestSpec"]
    resources = spec["properties"]["resources"]["anyOf"][0]
    resources["propertyNames"] = {**resources["propertyNames"], **_RESOURCE_CLASS}
    resources["additionalProperties"] = {"type": "integer", "minimum": 0}
    spec["anyOf"] = [{"required": ["flavor"], "properties": {"flavor": {"$ref": "#/components/schemas/Flavor"}}},
                     {"required": ["resources"], "properties": {"resources": {"type": "object",
                                                                              "minProperties": 1}}}]
    spec["description"] = "`flavor`, or `resources` without one (then they replace the flavor's amounts)."


def _json_op(op: dict[str, Any]) -> dict[str, Any]:
    op["responses"]["200"] = {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}
    return op


def _text(op: dict[str, Any]) -> dict[str, Any]:
    op["responses"]["200"] = {"description": "OK", "content": {"text/plain": {"schema": {"type": "string"}}}}
    return op


def _health() -> dict[str, Any]:
    op = _op("Liveness and replica status (no token needed; without it, only `status`)", open_=True)
    body = {"anyOf": [{"$ref": "#/components/schemas/Health"},
                      {"type": "object", "properties": {"status": {"enum": ["ok", "degraded"]}},
                       "required": ["status"], "additionalProperties": False}]}
    op["responses"]["200"] = {"description": "ok", "content": {"application/json": {"schema": body}}}
    op["responses"]["503"] = {"description": "degraded: the change feed is stale, or the last store write failed",
                              "content": {"application/json": {"schema": body}}}
    return op


def openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document the service serves at /openapi.json."""
    _, components = msgspec.json.schema_components(_COMPONENTS, ref_template="#/components/schemas/{name}")
    _state_limits(components)
    document = {
        "openapi": "3.1.0",
        "info": {"title": "Gantt scheduler", "version": __version__,
                 "description": "Errors are application/problem+json (RFC 9457). Every call but / and /health "
                                "needs `Authorization: Bearer <token>` when the service has a "
                                "token (the live view's page at /ui needs none; it reads /v1/overview with "
                                "one). Wrong method: 405; unknown path: 404; a query parameter the call does "
                                "not take, or one given twice: 400."},
        "paths": _paths(),
        "components": {"schemas": components,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
    }
    annotate(document)
    namespaced(document)
    return document


def _paths() -> dict[str, Any]:
    return {**_host_paths(), **_scheduling_paths()}


def _host_paths() -> dict[str, Any]:
    """The service's own documents, host reports, hosts and aggregates."""
    return {
        "/": {"get": _op("The API versions this service speaks (no token needed)", ok="Versions", open_=True)},
        "/health": {"get": _health()},
        "/metrics": {"get": _text(_op("Prometheus text metrics"))},
        "/openapi.json": {"get": _json_op(_op("This document"))},
        "/v1/resource-stats": {"post": _op("update_resource_stats(name, stats): one host report", ok="Written",
                                           body="ReportIn", errors=_WRITE_ERRORS)},
        "/v1/resource-stats/batch": {"post": _op("Several host reports, applied atomically", ok="Written",
                                                 body="ReportBatchIn", errors=_WRITE_ERRORS)},
        "/v1/hosts": {"get": _op(
            "Compute nodes, in (host, node) order, a page at a time", ok="HostList",
            params=[*_PAGING, _marker("Start after this node: its host name, or \"host/node\" for a node named "
                                      "otherwise (the last item of the previous page; `hosts_links` has it)")])},
        "/v1/hosts/{host}": {
            "parameters": [_path_param("host")],
            "get": _op("One compute node", ok="HostInfo", errors=(400, 404), params=[_NODE]),
            "patch": _op(
                "Change a node's record as an operator: merged as a report is, without counting as one",
                ok="Written", body="HostStats", errors=(404, 409, 503), params=[_NODE],
                description="Nova's `openstack compute service set --disable --disable-reason`: send "
                            "`{\"service\": {\"disabled\": true, \"disabled_reason\": \"…\"}}`. A disabled "
                            "node keeps its record and allocations; ComputeFilter removes it. Unlike a report, "
                            "this leaves the node's last-report time as it is: a host that stopped reporting "
                            "stays down. Without `node`, every node of the host changes. 409: the host kept "
                            "reporting while the change was made; try again."),
            "delete": _deleted(_op(
                "Forget a host (or one of its nodes)", status="204", errors=(400, 404, 409, 503),
                params=[_NODE, _FORCE],
                description="Refused (409) while allocations have parts on it, as Placement refuses to delete a "
                            "provider with allocations. With `force=true` it goes all the same and takes its "
                            "parts of those allocations with it: a consumer keeps what it holds on other nodes "
                            "(its allocation goes only when nothing else is left).")),
        },
        "/v1/aggregates": {"get": _op("Every aggregate", ok="AggregateList")},
        "/v1/aggregates/{id}": {
            "parameters": [_path_param("id")],
            "get": _op("One aggregate", ok="Aggregate", errors=(404,)),
            "put": _op("Create or replace an aggregate (the body's id must match the path)", ok="Written",
                       body="Aggregate", errors=_WRITE_ERRORS),
            "delete": _deleted(_op("Delete an aggregate", status="204", errors=(404, 503))),
        },
    }


def _scheduling_paths() -> dict[str, Any]:
    """Placements, dry runs, capacity, the overview, allocations, moves and the instances hosts run."""
    return {
        "/v1/select_destinations": {"post": _op(
            "Choose and claim a node per instance", ok="Selections", body="RequestSpec", errors=(409, 503),
            description="Idempotent per consumer: with `instance_uuids`, asking again returns the allocations "
                        "already held. All or nothing: if one instance does not fit, nothing is claimed. "
                        "With `migration_uuid`, a move of the one instance named: decided anew, the source held "
                        "under the migration until `/v1/migrations/{migration}/confirm` or `…/revert`; the "
                        "source host only if `[DEFAULT] allow_resize_to_same_host`. "
                        "409 carries a NoValidHost problem whose `explanation` lists, filter by filter, how "
                        "many hosts each removed (`steps`), why the last candidates went (`reason`) and, for "
                        "resources, by how much the nearest node missed (`nearest_miss`).")},
        "/v1/candidates": {"post": _op(
            "Dry run: rank every node that passes the filters, with per-weigher weights; claims nothing",
            ok="Candidates", body="RequestSpec",
            params=[_query("limit", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                           "At most this many candidates")])},
        "/v1/capacity": {"post": _op(
            "How many more instances of each request fit, per node, zone and aggregate; with `without`, what "
            "those hosts take with them; claims nothing", ok="CapacityAnswer", body="CapacityQuestion",
            description="Counted by the filters in force: each filter whose verdict moves with claims (resources, "
                        "instance and I/O limits, aggregate ratios) says how many more it lets in, the same count "
                        "claims one at a time would reach. Each request is counted alone, not as a mix. A request "
                        "whose count a filter cannot know in advance (a NUMA or PCI flavor, a server group, a JSON "
                        "query, a capabilities spec on usage) is a 400 naming it; so is a host, aggregate or "
                        "zone in `without` that names nothing.")},
        "/v1/overview": {"get": _op(
            "The cloud at a glance: nodes per zone and state, utilization, allocations, recent decisions and "
            "refusals (what the /ui page shows)", ok="Overview",
            description="Nodes per availability zone as up, down (no report within service_down_time, or forced "
                        "down) or disabled; per resource class the totals and, per node, the fraction of its "
                        "capacity in use, for a heat map: at most 2,000 nodes, the most used ones "
                        "(`utilization_omitted` counts the rest) and at most 12 classes, those most nodes have; "
                        "the allocation count and the 10 newest allocations; the last 20 decisions (each "
                        "instance's node and top 3 candidates with their weights) and the last 20 NoValidHost "
                        "answers with their explanations. Decisions and refusals are those of the process that "
                        "answers (`pid`): with several workers each has its own.")},
        "/v1/allocations": {"get": _op(
            "Allocations, in consumer order, a page at a time", ok="AllocationList",
            params=[*_PAGING, _marker("Start after this consumer (the last item of the previous page; "
                                      "`allocations_links` has it)")])},
        "/v1/allocations/{consumer}": {
            "parameters": [_path_param("consumer")],
            "get": _op("The allocation a consumer holds", ok="AllocationView", errors=(404,)),
            "delete": _deleted(_op("Release a consumer's allocation", status="204", errors=(404, 503))),
        },
        "/v1/migrations/{migration}/confirm": {
            "parameters": [_path_param("migration")],
            "post": _move_op("Confirm a move: drop the source held under the migration (returned)"),
        },
        "/v1/migrations/{migration}/revert": {
            "parameters": [_path_param("migration")],
            "post": _move_op("Revert a move: the instance gets its source back, the destination is freed; returns "
                             "the restored allocation"),
        },
        "/v1/instances/{host}": {
            "parameters": [_path_param("host")],
            "post": _op("update_instance_info: add instances a host runs (affinity filters)", ok="Written",
                        body="InstancesIn", errors=(404, 503)),
            "put": _op("sync_instance_info: the full list of instances a host runs", ok="Written",
                       body="InstancesIn", errors=(404, 503)),
        },
        "/v1/instances/{host}/{instance}": {
            "parameters": [_path_param("host"), _path_param("instance")],
            "delete": _deleted(_op("delete_instance_info: the host no longer runs this instance",
                                   status="204", errors=(404, 503))),
        },
    }
