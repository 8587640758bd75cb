"""/resource_providers and /resource_providers/{uuid}: create, list with filters, show, update, delete."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from gantt.placement.api.errors import PlacementError
from gantt.placement.api.queries import in_tree_param, member_of_param, required_param, resources_param
from gantt.placement.api.wire import (
    Answer,
    Call,
    ProviderIn,
    ProviderIn114,
    ProviderUpdate,
    ProviderUpdate114,
    accept_json,
    empty,
    json_body,
    json_response,
    query,
    require_json,
    uuid_like,
    valid_uuid,
)
from gantt.resources.providers import ProviderQuery, ProviderView


def serialize(call: Call, found: ProviderView) -> dict[str, Any]:
    url = call.url(f"/resource_providers/{found.uuid}")
    rels = ["inventories", "usages"]
    rels += ["aggregates"] if call.version.at_least(1) else []
    rels += ["traits"] if call.version.at_least(6) else []
    rels += ["allocations"] if call.version.at_least(11) else []
    data: dict[str, Any] = {"uuid": found.uuid, "name": found.name, "generation": found.generation,
                            "links": [{"rel": "self", "href": url}, *({"rel": r, "href": f"{url}/{r}"} for r in rels)]}
    if call.version.at_least(14):
        data["parent_provider_uuid"] = found.parent_provider_uuid
        data["root_provider_uuid"] = found.root_provider_uuid
    return data


async def create(call: Call) -> Answer:
    body: ProviderIn114 | ProviderIn = await json_body(call.request, ProviderIn114) if call.version.at_least(14) \
        else await json_body(call.request, ProviderIn)
    uuid = valid_uuid(body.uuid, "uuid") if body.uuid is not UNSET else None
    parent = getattr(body, "parent_provider_uuid", None) or None
    if parent is not None:
        parent = valid_uuid(parent, "parent_provider_uuid")
    found = await call.steps(call.placement.create_provider_steps, body.name, uuid, parent)
    location = {"location": str(call.request.base_url).rstrip("/") + call.url(f"/resource_providers/{found.uuid}")}
    if call.version.at_least(20):
        return json_response(call, serialize(call, found), modified=found.updated_at, headers=location)
    return empty(201, headers=location)


async def show(call: Call) -> Answer:
    accept_json(call.request)
    found = await call.call(call.placement.provider, call.params["uuid"])
    return json_response(call, serialize(call, found), modified=found.updated_at)


async def update(call: Call) -> Answer:
    require_json(call.request)
    found = await call.steps(call.placement.provider_steps, call.params["uuid"])
    body: ProviderUpdate114 | ProviderUpdate = await json_body(call.request, ProviderUpdate114) \
        if call.version.at_least(14) else await json_body(call.request, ProviderUpdate)
    parent = getattr(body, "parent_provider_uuid", UNSET)
    if isinstance(parent, str):
        parent = valid_uuid(parent, "parent_provider_uuid")
    updated = await call.steps(call.placement.update_provider_steps, found.uuid, body.name,
                              None if parent is UNSET else parent, set_parent=parent is not UNSET,
                              reparent=call.version.at_least(37))
    return json_response(call, serialize(call, updated), modified=updated.updated_at)


async def delete(call: Call) -> Answer:
    await call.call(call.placement.delete_provider, call.params["uuid"])
    return empty()


_FILTERS = [(0, "name"), (0, "uuid"), (3, "member_of"), (4, "resources"), (14, "in_tree"), (18, "required")]


async def listing(call: Call) -> Answer:
    accept_json(call.request)
    params = query(call.request, {name for minor, name in _FILTERS if call.version.at_least(minor)})
    wanted = parse_query(call, params)
    unknown = await call.call(call.placement.missing_records, "resource_class", [rc for rc, _ in wanted.resources])
    if unknown:
        raise PlacementError(400, f"Invalid resource class in resources parameter: No such resource class "
                                  f"{', '.join(unknown)}.")
    traits = {t for group in wanted.required for t in group} | wanted.forbidden_traits
    unknown = await call.call(call.placement.missing_records, "trait", traits)
    if unknown:
        raise PlacementError(400, f"Invalid trait(s) in \"required\" parameter: No such trait(s): "
                                  f"{', '.join(unknown)}.")
    found = await call.call(call.placement.find_providers, wanted)
    modified = max((p.updated_at for p in found), default=None)
    return json_response(call, {"resource_providers": [serialize(call, p) for p in found]}, modified=modified)


def parse_query(call: Call, params: dict[str, list[str]]) -> ProviderQuery:
    last = {name: values[-1] for name, values in params.items()}
    uuid = last.get("uuid")
    if uuid is not None and not uuid_like(uuid):
        raise PlacementError(400, f"Invalid query string parameters: '{uuid}' is not a 'uuid'")
    in_tree = in_tree_param(last["in_tree"]) if "in_tree" in last else None
    member_of, forbidden_aggs = member_of_param(call, params.get("member_of", []))
    required, forbidden_traits = required_param(call, params.get("required", []))
    resources = resources_param(last["resources"]) if "resources" in last else ()
    return ProviderQuery(name=last.get("name"), uuid=uuid, in_tree=in_tree,
                         member_of=member_of, forbidden_aggregates=forbidden_aggs, required=required,
                         forbidden_traits=forbidden_traits, resources=resources)
