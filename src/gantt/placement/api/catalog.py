"""/resource_classes, /traits and /resource_providers/{uuid}/traits."""

from __future__ import annotations

from gantt.placement.api.errors import PlacementError
from gantt.placement.api.wire import (
    Answer,
    Call,
    ProviderTraitsIn,
    ResourceClassIn,
    accept_json,
    empty,
    json_body,
    json_response,
    query,
    require_json,
)


def _class(call: Call, name: str) -> dict[str, object]:
    return {"name": name, "links": [{"rel": "self", "href": call.url(f"/resource_classes/{name}")}]}


async def list_classes(call: Call) -> Answer:
    accept_json(call.request)
    names = await call.call(call.placement.resource_classes)
    return json_response(call, {"resource_classes": [_class(call, n) for n in names]})


async def show_class(call: Call) -> Answer:
    accept_json(call.request)
    name = call.params["name"]
    if not await call.call(call.placement.has_record, "resource_class", name):
        raise PlacementError(404, f"No such resource class {name}.")
    return json_response(call, _class(call, name))


async def create_class(call: Call) -> Answer:
    body = await json_body(call.request, ResourceClassIn)
    if not await call.call(call.placement.put_record, "resource_class", body.name):
        raise PlacementError(409, f"Conflicting resource class already exists: {body.name}",
                             code="placement.duplicate_name")
    location = str(call.request.base_url).rstrip("/") + call.url(f"/resource_classes/{body.name}")
    return empty(201, headers={"location": location})


async def put_class(call: Call) -> Answer:
    name = call.params["name"]
    if not call.version.at_least(7):  # 1.2-1.6: a rename of a custom class
        body = await json_body(call.request, ResourceClassIn)
        await call.call(call.placement.rename_record, "resource_class", name, body.name)
        return json_response(call, _class(call, body.name))
    created = await call.call(call.placement.put_record, "resource_class", name)
    location = str(call.request.base_url).rstrip("/") + call.url(f"/resource_classes/{name}")
    return empty(201 if created else 204, headers={"location": location})


async def delete_class(call: Call) -> Answer:
    await call.call(call.placement.delete_record, "resource_class", call.params["name"])
    return empty()


async def list_traits(call: Call) -> Answer:
    accept_json(call.request)
    params = query(call.request, {"name", "associated"})
    names = await call.call(call.placement.traits)
    if "name" in params:
        names = _by_name(names, params["name"][-1])
    if "associated" in params:
        flag = params["associated"][-1].lower()
        if flag not in ("true", "false"):
            raise PlacementError(400, 'The query parameter "associated" only accepts "true" or "false"')
        used = set(await call.call(call.placement.traits_in_use))
        names = [n for n in names if (n in used) == (flag == "true")]
    return json_response(call, {"traits": names})


def _by_name(names: list[str], value: str) -> list[str]:
    op, sep, arg = value.partition(":")
    if not sep or op not in ("in", "startswith"):
        raise PlacementError(400, "Badly formatted name parameter. Expected name query string parameter in form: "
                                  f"?name=[in|startswith]:[name1,name2|prefix]. Got: \"{value}\"")
    if op == "in":
        wanted = set(arg.split(","))
        return [n for n in names if n in wanted]
    return [n for n in names if n.startswith(arg)]


async def show_trait(call: Call) -> Answer:
    name = call.params["name"]
    if not await call.call(call.placement.has_record, "trait", name):
        raise PlacementError(404, f"No such trait(s): {name}.")
    return empty(call=call)


async def put_trait(call: Call) -> Answer:
    name = call.params["name"]
    created = await call.call(call.placement.put_record, "trait", name)
    location = str(call.request.base_url).rstrip("/") + call.url(f"/traits/{name}")
    return empty(201 if created else 204, headers={"location": location}, call=call)


async def delete_trait(call: Call) -> Answer:
    await call.call(call.placement.delete_record, "trait", call.params["name"])
    return empty()


async def provider_traits(call: Call) -> Answer:
    accept_json(call.request)
    found = await call.call(call.placement.provider, call.params["uuid"])
    return json_response(call, {"traits": sorted(found.record.stats.traits or ()),
                                "resource_provider_generation": found.generation}, modified=found.updated_at)


async def set_provider_traits(call: Call) -> Answer:
    require_json(call.request)
    uuid = call.params["uuid"]
    await call.check_provider(uuid)
    body = await json_body(call.request, ProviderTraitsIn)
    found = await call.steps(call.placement.set_provider_traits_steps, uuid, body.resource_provider_generation,
                            list(dict.fromkeys(body.traits)))
    return json_response(call, {"traits": sorted(found.record.stats.traits or ()),
                                "resource_provider_generation": found.generation}, modified=found.updated_at)


async def delete_provider_traits(call: Call) -> Answer:
    uuid = call.params["uuid"]
    await call.steps(call.placement.set_provider_traits_steps, uuid, None, [])
    return empty()
