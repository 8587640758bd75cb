"""The OpenAPI document's ``/v1/namespaces/{namespace}/...`` paths: every ``/v1`` operation a compute namespace
serves, and where a volume namespace serves the path too, the volume kind's body and answer beside the compute
kind's."""

from __future__ import annotations

from typing import Any

import msgspec

from gantt.service.openapi.prose import EXAMPLE_TIME, decoded

NAMESPACE_PREFIX = "/v1/namespaces/{namespace}"
_NAMESPACE_PARAM = {
    "name": "namespace", "in": "path", "required": True,
    "schema": {"type": "string", "minLength": 1, "maxLength": 32, "pattern": "^[a-z][a-z0-9_-]{0,31}$"},
    "description": "A namespace the service's configuration declares (`[namespace.<name>]`); the default one, "
                   "`compute`, is served at the plain `/v1/...` paths and not here (404)"}
# The routes a volume namespace serves (gantt.service.volume.ROUTES), as the default's path they share:
# (path, method) -> (request schema, response schema, what differs), None where there is no body.
_VOLUME_OPERATIONS: dict[tuple[str, str], tuple[str | None, str | None, str]] = {
    ("/v1/resource-stats", "post"): (
        "BackendReport", "Written",
        "one backend's update_service_capabilities (its capabilities and `pools`); its pools no longer listed "
        "are removed"),
    ("/v1/hosts", "get"): ("", "VolumePoolList", "every pool with its state as the scheduler sees it (no paging)"),
    ("/v1/hosts/{host}", "delete"): (None, None, "a backend, or one pool with `?pool=`, and the volumes on it"),
    ("/v1/select_destinations", "post"): (
        "VolumeRequest", "VolumeSelections",
        "Cinder's request_spec for one volume (`volume_id` required; operation create_volume only): the first "
        "pool is claimed (VOLUME_GB), then up to two alternates"),
    ("/v1/allocations", "get"): ("", "AllocationList", "every volume's claim (no paging)"),
    ("/v1/allocations/{consumer}", "get"): ("", "AllocationView", "the claim of the volume named"),
    ("/v1/allocations/{consumer}", "delete"): (None, None, "release a volume's claim: its pool gets the space back"),
}
_POOL_PARAM = {"name": "pool", "in": "query", "required": False, "description": "Volume namespaces: the one pool "
               "of the backend to remove (without it: every pool of the backend)",
               "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[^/]*$"}}

VOLUME_PROPERTIES: dict[str, dict[str, str]] = {
    "BackendReport": {
        "host": "Cinder's volume service host of the backend (\"node1@lvm\")",
        "capabilities": "Backend-level capabilities (volume_backend_name, vendor_name, driver_version, "
                        "storage_protocol, filter_function, goodness_function, vendor keys): every pool gets them",
        "pools": "The backend's pools, each Cinder's capability dict with `pool_name`; null: the backend is one "
                 "pool named after volume_backend_name (Cinder's legacy reports)",
        "service": "The backend's volume service as Cinder's services table holds it"},
    "PoolService": {"availability_zone": "The service's storage availability zone (AvailabilityZoneFilter)",
                    "disabled": "Disabled by an operator: its pools are not chosen",
                    "cluster_name": "The service's cluster (Cinder's active-active backends)"},
    "VolumeRequest": {
        "volume_properties": "The volume: size, zone, project, type, metadata",
        "volume_id": "The volume to place: its claim is keyed by it (asking again returns the pool it holds)",
        "volume_type": "The volume type: extra specs (CapabilitiesFilter; provisioning:type thick or thin), "
                       "QoS specs",
        "availability_zones": "Zones the volume may land in (Cinder's multi-AZ request)",
        "snapshot_id": "Created from this snapshot: needs `resource_backend` (Gantt holds no snapshots)",
        "source_volid": "A clone of this volume: lands on that volume's backend",
        "image_id": "Created from this image: accepted and not used, as Cinder's scheduler does not use it "
                    "(the volume service copies the image after the placement)",
        "group_id": "The volume's group: needs `resource_backend`",
        "consistencygroup_id": "The volume's consistency group: needs `resource_backend`",
        "backup_id": "Restored from this backup: accepted and not used, as Cinder's scheduler does not use it "
                     "(the backup service restores into the placed volume)",
        "resource_backend": "The backend (\"host@backend\") or pool (\"host@backend#pool\") the volume must land on",
        "operation": "What the placement is for: only create_volume (or none) is served",
        "new_size": "Extend's new size, GiB (not served)",
        "scheduler_hints": "Cinder's hints: same_host, different_host, local_to_instance, query (JsonFilter)",
        "instance_hosts": "Instance UUID -> the compute host it runs on, for local_to_instance "
                          "(InstanceLocalityFilter; Cinder asks Nova, Gantt takes it here)"},
    "VolumeProperties": {
        "size": "GiB", "availability_zone": "The zone asked for (AvailabilityZoneFilter)",
        "project_id": "The volume's project", "user_id": "The volume's user",
        "volume_type_id": "The volume type's id", "multiattach": "The volume may attach to several instances",
        "status": "Cinder's volume status", "attach_status": "Cinder's attach status",
        "display_name": "The volume's name", "metadata": "The volume's metadata",
        "qos_specs": "QoS specs (the expression language's `qos`)"},
    "VolumeType": {"name": "The type's name", "id": "The type's id",
                   "extra_specs": "Extra specs: capabilities requirements with Cinder's operators, provisioning:type",
                   "qos_specs": "The type's QoS specs"},
    "SchedulerHints": {"same_host": "Volume id(s): land on a backend holding them (SameBackendFilter)",
                       "different_host": "Volume id(s): land on none of their backends (DifferentBackendFilter)",
                       "local_to_instance": "An instance UUID: land on its compute host (InstanceLocalityFilter)",
                       "query": "A JsonFilter query (JSON text)"},
    "VolumeSelections": {"selections": "The claimed pool first, then up to two unclaimed alternates"},
    "VolumeSelection": {"host": "The backend's service host", "pool": "The pool",
                        "backend_id": "Cinder's \"host@backend#pool\"",
                        "weight": "The pool's weight (higher is better)"},
    "VolumePoolList": {"pools": "Every pool, in (host, pool) order"},
    "VolumePool": {"host": "The backend's service host", "pool": "The pool's name",
                   "state": "Cinder's PoolState attributes with the claims made since the pool's last report "
                            "counted: capacities, ratio, capabilities, service, updated"},
}


def _volume_examples() -> dict[tuple[str, str], Any]:
    from gantt.service.volume import VolumePool, VolumePoolList, VolumeSelection, VolumeSelections
    from gantt.volume.model import BackendReport, VolumeProperties, VolumeRequest, VolumeType

    report = BackendReport(host="node1@lvm", capabilities={"volume_backend_name": "lvm", "storage_protocol": "iSCSI"},
                           pools=[{"pool_name": "fast", "total_capacity_gb": 1000, "free_capacity_gb": 800,
                                   "allocated_capacity_gb": 150, "provisioned_capacity_gb": 300,
                                   "reserved_percentage": 5, "max_over_subscription_ratio": 2.0,
                                   "thin_provisioning_support": True}])
    request = VolumeRequest(volume_id="vol-1", volume_properties=VolumeProperties(size=10, project_id="demo"),
                            volume_type=VolumeType(name="fast", extra_specs={"volume_backend_name": "lvm"}))
    pick = VolumeSelection(host="node1@lvm", pool="fast", backend_id="node1@lvm#fast", weight=1.0)
    pool = VolumePool(host="node1@lvm", pool="fast", state={"total_capacity_gb": 1000, "free_capacity_gb": 790,
                                                             "provisioned_capacity_gb": 310})
    claim = {"consumer_uuid": "vol-1", "host": "node1@lvm", "nodename": "fast", "resources": {"VOLUME_GB": 10},
             "project_id": "demo", "created_at": EXAMPLE_TIME.isoformat().replace("+00:00", "Z")}
    return {("/v1/resource-stats", "post"): (report, {"revision": 42}),
            ("/v1/hosts", "get"): (None, VolumePoolList(pools=[pool])),
            ("/v1/select_destinations", "post"): (request, VolumeSelections(selections=[pick])),
            ("/v1/allocations", "get"): (None, {"allocations": [claim], "allocations_links": []}),
            ("/v1/allocations/{consumer}", "get"): (None, claim)}


def namespaced(document: dict[str, Any]) -> None:
    """Add ``/v1/namespaces/{namespace}/...`` (after ``annotate``): every ``/v1`` operation a compute namespace
    serves, and for the ones a volume namespace serves too, the volume kind's body and answer beside the compute
    kind's (``anyOf``, with an example of each); the volume kind's schemas join the components."""
    from gantt.service.volume import ROUTES as VOLUME_ROUTES
    from gantt.service.volume import VolumePoolList, VolumeSelections
    from gantt.volume.model import BackendReport, VolumeRequest

    _, extra = msgspec.json.schema_components((BackendReport, VolumeRequest, VolumeSelections, VolumePoolList),
                                              ref_template="#/components/schemas/{name}")
    components = document["components"]["schemas"]
    for name, schema in extra.items():
        if name in components and components[name] != schema:
            raise AssertionError(f"volume schema {name} would replace the compute one")
        for prop, spec in schema.get("properties", {}).items():
            text = VOLUME_PROPERTIES.get(name, {}).get(prop)
            if text is not None:
                spec["description"] = text
        components[name] = schema
    examples = _volume_examples()
    # The volume kind's paths as the document spells them (it names an allocation's consumer {consumer} throughout)
    volume_paths = {route.path.replace("{volume}", "{consumer}") for route in VOLUME_ROUTES}
    paths = document["paths"]
    for path in [p for p in paths if p.startswith("/v1/")]:
        item = msgspec.json.decode(msgspec.json.encode(paths[path]))  # a deep copy
        item["parameters"] = [_NAMESPACE_PARAM, *item.get("parameters", [])]
        for method, op in item.items():
            if method == "parameters":
                continue
            op["operationId"] = f"{op['operationId']}_in_namespace"
            op["responses"].setdefault("404", {"description": "Not found",
                                               "content": {"application/problem+json": {"schema": {
                                                   "$ref": "#/components/schemas/Problem"}}}})
            op["responses"]["404"]["description"] += "; or the namespace is not served (the problem names it)"
            volume = _VOLUME_OPERATIONS.get((path, method))
            if volume is None:
                op["summary"] = f"Compute namespaces: {op['summary']}"
                if path in volume_paths:  # a volume namespace serves the path, with other methods only
                    op["responses"].setdefault("405", {
                        "description": "Method not allowed: a volume namespace serves other methods on this path",
                        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}})
                continue
            body, answer, what = volume
            op["summary"] = f"{op['summary']} (a volume namespace: {what})"
            request, response = examples.get((path, method), (None, None))
            if body:
                media = op["requestBody"]["content"]["application/json"]
                media["schema"] = {"anyOf": [media["schema"], {"$ref": f"#/components/schemas/{body}"}]}
                media["examples"] = {"compute": {"value": media.pop("example")},
                                     "volume": {"value": decoded(request)}}
            if answer:
                ok = next(code for code in op["responses"] if code.startswith("2"))
                media = op["responses"][ok]["content"]["application/json"]
                if media["schema"] != {"$ref": f"#/components/schemas/{answer}"}:
                    media["schema"] = {"anyOf": [media["schema"], {"$ref": f"#/components/schemas/{answer}"}]}
                media["examples"] = {"compute": {"value": media.pop("example")},
                                     "volume": {"value": decoded(response)}}
            if (path, method) == ("/v1/hosts/{host}", "delete"):
                op["parameters"] = [*op.get("parameters", []), _POOL_PARAM]
        paths[NAMESPACE_PREFIX + path[len("/v1"):]] = item
