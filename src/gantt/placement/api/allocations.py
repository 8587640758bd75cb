"""/allocations/{consumer_uuid} (GET, PUT, DELETE), POST /allocations (1.13) and
/resource_providers/{uuid}/allocations: a consumer's allocations across providers, per microversion.

The body forms: a list of ``{resource_provider: {uuid}, resources}`` before 1.12, a dict by provider uuid from
1.12; ``project_id``/``user_id`` from 1.8 (required); an empty dict (drop them all) and ``consumer_generation``
(required, null for a new consumer) from 1.28; ``mappings`` from 1.34 (validated and, as in Placement, not
kept); ``consumer_type`` from 1.38 (required).
"""

from __future__ import annotations

import re
import uuid as uuidlib
from typing import Any

import msgspec
from msgspec import UNSET

from gantt.model import Allocation, Conflict, ConsumerConflict, InsufficientCapacity, InvalidRequest, NotFound
from gantt.placement.api.errors import PlacementError
from gantt.placement.api.wire import (
    Answer,
    Call,
    ConsumerIn,
    accept_json,
    empty,
    gantt_error,
    json_body,
    json_response,
    require_json,
    uuid_like,
)
from gantt.resources.providers import UNKNOWN_CONSUMER_TYPE, ConsumerWrite, ProviderView

_UUID = re.compile(r"^[0-9a-fA-F-]{36}$")
_CLASS = re.compile(r"^[A-Z0-9_]+$")
# (field, the microversion that brings it, whether that version requires it)
_FIELDS = (("project_id", 8), ("user_id", 8), ("consumer_generation", 28), ("mappings", 34),
           ("consumer_type", 38))
_CONCURRENT = "placement.concurrent_update"


def invalid(message: str, rule: str | None = None, where: str = "") -> PlacementError:
    """A schema refusal in jsonschema's words (``rule`` at ``where``), as Placement's validation says it."""
    if rule is not None:
        message += f"  Failed validating '{rule}' in schema{where}"
    return PlacementError(400, f"JSON does not validate: {message}")


def _check_amounts(data: Any) -> None:
    """Class names and amounts below 1, named as jsonschema names them: the decoder's message cannot name a
    dict key or the value under one."""
    mappings = data.get("mappings") if isinstance(data, dict) else None
    if isinstance(mappings, dict):
        if not mappings:
            raise invalid("{} does not have enough properties", "minProperties")
        for group, uuids in mappings.items():
            if not isinstance(uuids, list):
                raise invalid(f"{uuids!r} is not of type 'array'", "type", f"['properties']['mappings'][{group!r}]")
    kind = data.get("consumer_type") if isinstance(data, dict) else None
    if isinstance(kind, str) and not _CLASS.match(kind):
        raise invalid(f"'{kind}' does not match '{_CLASS.pattern}'", "pattern")
    entries = data.get("allocations") if isinstance(data, dict) else None
    parts = entries if isinstance(entries, list) else list(entries.values()) if isinstance(entries, dict) else []
    for part in parts:
        resources = part.get("resources") if isinstance(part, dict) else None
        for rc, amount in (resources.items() if isinstance(resources, dict) else ()):
            if not _CLASS.match(rc):
                raise invalid(f"'{rc}' does not match any of the regexes: '{_CLASS.pattern}'",
                               "additionalProperties")
            if isinstance(amount, int) and not isinstance(amount, bool) and amount < 1:
                raise invalid(f"{amount} is less than the minimum of 1", "minimum")


def consumer_uuid(call: Call) -> str:
    value = call.params["consumer_uuid"]
    if not uuid_like(value):
        raise PlacementError(400, f"Malformed consumer_uuid: {value}")
    return str(uuidlib.UUID(value))


def to_write(call: Call, consumer: str, body: ConsumerIn, *, post: bool) -> ConsumerWrite:
    """One consumer's body checked against the request's microversion, as Placement's schema for it would."""
    version = call.version
    for name, since in _FIELDS:
        present = getattr(body, name) is not UNSET
        if present and not version.at_least(since):
            raise invalid(f"Additional properties are not allowed ('{name}' was unexpected)")
        if not present and version.at_least(since) and name != "mappings":
            raise invalid(f"'{name}' is a required property", "required")
    listed = not version.at_least(12) and not post
    if listed != isinstance(body.allocations, list):
        raise invalid(f"{_brief(body.allocations)} is not of type '{'array' if listed else 'object'}'")
    if isinstance(body.allocations, list):
        if not body.allocations:
            raise invalid("[] is too short", "minItems", "['properties']['allocations']")
        given = {entry.resource_provider.uuid: entry.resources for entry in body.allocations}
    else:
        given = {uuid: part.resources for uuid, part in body.allocations.items()}
        if not given and not (post or version.at_least(28)):
            raise invalid("{} does not have enough properties")
    for uuid, resources in given.items():
        if not _UUID.match(uuid):
            raise invalid(f"'{uuid}' does not match any of the regexes: '^[0-9a-fA-F-]{{36}}$'")
        if not resources:
            raise invalid("{} does not have enough properties")
    if body.mappings is not UNSET:
        for group, uuids in body.mappings.items():
            if not uuids or not all(uuid_like(u) for u in uuids):
                raise invalid(f"mappings of {group!r} must be a non-empty list of uuids")
    return ConsumerWrite(
        consumer=consumer, allocations={str(uuidlib.UUID(u)): dict(r) for u, r in given.items()},
        project_id=None if body.project_id is UNSET else body.project_id,
        user_id=None if body.user_id is UNSET else body.user_id,
        generation=None if body.consumer_generation is UNSET else body.consumer_generation,
        check_generation=version.at_least(28),
        consumer_type=None if body.consumer_type is UNSET else body.consumer_type)


def _brief(value: Any) -> str:
    return "[...]" if isinstance(value, list) else "{...}"


async def write(call: Call, writes: list[ConsumerWrite], *, post: bool) -> None:
    """The replica's write, its refusals in Placement's words."""
    try:
        await call.steps(call.placement.consumers.write_allocations_steps, writes)
    except InvalidRequest as exc:
        message = gantt_error(exc).detail
        if message.startswith("No such resource class"):
            prefix = "Unable to allocate inventory " if post else \
                f"Unable to allocate inventory for consumer {writes[0].consumer}: "
            raise PlacementError(400, prefix + message) from None
        raise
    except InsufficientCapacity as exc:
        raise PlacementError(409, f"Unable to allocate inventory: {exc.message}") from None
    except ConsumerConflict:
        raise
    except Conflict as exc:
        raise PlacementError(409, exc.message, code=_CONCURRENT) from None


async def read_body(call: Call, type_: Any) -> Any:
    require_json(call.request)
    raw = await call.request.body()
    try:
        data = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        data = None  # json_body names it
    for one in (data.values() if type_ is not ConsumerIn and isinstance(data, dict) else [data]):
        _check_amounts(one)
    return await json_body(call.request, type_)


async def put(call: Call) -> Answer:
    consumer = consumer_uuid(call)
    body = await read_body(call, ConsumerIn)
    await write(call, [to_write(call, consumer, body, post=False)], post=False)
    return empty()


async def post(call: Call) -> Answer:
    if not call.version.at_least(13):
        raise PlacementError(404, "The resource could not be found.")
    body = await read_body(call, dict[str, ConsumerIn])
    if not body:
        raise invalid("{} does not have enough properties")
    writes = []
    for key, one in body.items():
        if not _UUID.match(key):
            raise invalid(f"'{key}' does not match any of the regexes: '^[0-9a-fA-F-]{{36}}$'")
        writes.append(to_write(call, str(uuidlib.UUID(key)), one, post=True))
    await write(call, writes, post=True)
    return empty()


async def delete(call: Call) -> Answer:
    consumer = call.params["consumer_uuid"]
    await call.steps(call.placement.consumers.delete_allocations_steps, consumer)
    return empty()


async def show(call: Call) -> Answer:
    accept_json(call.request)
    held, views = await call.call(call.placement.consumers.consumer_allocations, call.params["consumer_uuid"])
    data: dict[str, Any] = {"allocations": _by_provider(held, views)}
    if held is not None and call.version.at_least(12):
        data["project_id"] = held.project_id
        data["user_id"] = held.user_id
        if call.version.at_least(28):
            data["consumer_generation"] = held.placement_generation()
        if call.version.at_least(38):
            data["consumer_type"] = held.consumer_type or UNKNOWN_CONSUMER_TYPE
    return json_response(call, data, modified=held.created_at if held is not None else None)


def _by_provider(held: Allocation | None, views: dict[tuple[str, str], ProviderView]) -> dict[str, Any]:
    if held is None:
        return {}
    out: dict[str, Any] = {}
    for key, resources in held.parts():
        found = views.get(key)
        if found is not None:  # a part on a node that is no provider (no uuid) has no name in Placement
            out[found.uuid] = {"generation": found.generation, "resources": dict(resources)}
    return out


async def for_provider(call: Call) -> Answer:
    accept_json(call.request)
    uuid = call.params["uuid"]
    try:
        found, held = await call.call(call.placement.consumers.provider_allocations, uuid)
    except NotFound:
        raise PlacementError(404, f"Resource provider '{uuid}' not found: No resource provider with uuid {uuid} "
                                  "found") from None
    data: dict[str, Any] = {}
    for allocation in held:
        one: dict[str, Any] = {"resources": dict(allocation.on(found.key))}
        if call.version.at_least(28):
            one["consumer_generation"] = allocation.placement_generation()
        data[allocation.consumer_uuid] = one
    modified = max((a.created_at for a in held), default=None)
    return json_response(call, {"resource_provider_generation": found.generation, "allocations": data},
                         modified=modified)
