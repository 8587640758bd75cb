"""/resource_providers/{uuid}/usages and /usages (1.9; grouped by consumer type from 1.38)."""

from __future__ import annotations

import re
from typing import Any

from gantt.model import NotFound
from gantt.placement.api.errors import PlacementError
from gantt.placement.api.wire import Answer, Call, accept_json, json_response, query

_TYPE_OR_ALL = re.compile(r"^[A-Z0-9_]+$|^all$|^unknown$")


async def for_provider(call: Call) -> Answer:
    accept_json(call.request)
    uuid = call.params["uuid"]
    try:
        found, used = await call.call(call.placement.consumers.provider_usages, uuid)
    except NotFound:
        raise PlacementError(404, f"No resource provider with uuid {uuid} found: No resource provider with uuid "
                                  f"{uuid} found") from None
    return json_response(call, {"resource_provider_generation": found.generation, "usages": used})


async def totals(call: Call) -> Answer:
    accept_json(call.request)
    by_type = call.version.at_least(38)
    params = query(call.request, {"project_id", "user_id", "consumer_type"} if by_type
                   else {"project_id", "user_id"})
    last = {name: values[-1] for name, values in params.items()}
    if "project_id" not in last:
        raise PlacementError(400, "Invalid query string parameters: 'project_id' is a required property")
    for name, value in last.items():
        if not 1 <= len(value) <= 255:
            rule = "minLength" if not value else "maxLength"
            raise PlacementError(400, f"Invalid query string parameters: {value!r} is "
                                      f"{'too short' if not value else 'too long'}  Failed validating "
                                      f"'{rule}' in schema['properties'][{name!r}]")
    consumer_type = last.get("consumer_type")
    if consumer_type is not None and not _TYPE_OR_ALL.match(consumer_type):
        raise PlacementError(400, f"Invalid query string parameters: {consumer_type!r} does not match "
                                  f"'{_TYPE_OR_ALL.pattern}'")
    found = await call.call(call.placement.consumers.usages, last["project_id"], last.get("user_id"), by_type=by_type,
                            consumer_type=consumer_type)
    data: dict[str, Any]
    if by_type:
        data = {group: {**usage.resources, "consumer_count": usage.consumers} for group, usage in found.items()}
    else:
        data = dict(found[""].resources) if "" in found else {}
    return json_response(call, {"usages": data})
