"""/resource_providers/{uuid}/aggregates: Placement aggregates are Gantt aggregates, found by uuid."""

from __future__ import annotations

from typing import Any

import msgspec

from gantt.placement.api.errors import PlacementError
from gantt.placement.api.wire import (
    AggregatesIn,
    Answer,
    Call,
    accept_json,
    json_body,
    json_response,
    require_json,
    valid_uuid,
)


def _answer(call: Call, generation: int, aggregates: list[str]) -> Answer:
    data: dict[str, Any] = {"aggregates": aggregates}
    if call.version.at_least(19):
        data["resource_provider_generation"] = generation
    return json_response(call, data)


def _check(call: Call) -> None:
    if not call.version.at_least(1):
        raise PlacementError(404, "The resource could not be found.")


async def show(call: Call) -> Answer:
    _check(call)
    accept_json(call.request)
    found, aggregates = await call.call(call.placement.provider_aggregates, call.params["uuid"])
    return _answer(call, found.generation, aggregates)


async def replace(call: Call) -> Answer:
    _check(call)
    require_json(call.request)
    uuid = call.params["uuid"]
    await call.check_provider(uuid)
    with_generation = call.version.at_least(19)
    body: AggregatesIn | list[str] = await json_body(call.request, AggregatesIn) if with_generation \
        else await json_body(call.request, list[str])
    wanted = body.aggregates if isinstance(body, AggregatesIn) else body
    if len(set(wanted)) != len(wanted):
        raise PlacementError(400, f"JSON does not validate: {msgspec.json.encode(wanted).decode()} has "
                                  "non-unique elements")
    wanted = [valid_uuid(a, "aggregates") for a in wanted]
    generation = body.resource_provider_generation if isinstance(body, AggregatesIn) else None
    found, aggregates = await call.steps(call.placement.set_provider_aggregates_steps, uuid, generation, wanted,
                                        bump=with_generation)
    return _answer(call, found.generation, aggregates)
