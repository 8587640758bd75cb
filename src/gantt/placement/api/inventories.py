"""/resource_providers/{uuid}/inventories[/{resource_class}]."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from gantt.model import InvalidRequest, Inventory
from gantt.placement.api.errors import PlacementError
from gantt.placement.api.wire import (
    Answer,
    Call,
    InventoriesIn,
    InventoryIn,
    NewInventoryIn,
    accept_json,
    empty,
    gantt_error,
    json_body,
    json_response,
    require_json,
)
from gantt.resources.providers import InventoryInUse

_FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")
# How Placement's detail of an inventory in use reads: webob's explanation of a 409, then its handler's words (and
# webob's two trailing blanks). Nova's report client raises and logs that text, and Nova's tests match it.
_CONFLICT = "There was a conflict when trying to complete your request.\n\n {}  "


def _in_use(detail: str, code: str = InventoryInUse.placement_code) -> PlacementError:
    return PlacementError(409, _CONFLICT.format(detail), code=code)


def serialize(inv: Inventory) -> dict[str, Any]:
    data = {name: getattr(inv, name) for name in _FIELDS}
    data["allocation_ratio"] = float(inv.allocation_ratio)
    return data


def _one(inv: Inventory, generation: int) -> dict[str, Any]:
    data = serialize(inv)
    if generation:  # as Placement: generation 0 is left out of a single inventory
        data["resource_provider_generation"] = generation
    return data


def to_inventory(rc: str, uuid: str, body: InventoryIn | NewInventoryIn) -> Inventory:
    try:
        return Inventory(total=body.total, reserved=body.reserved, min_unit=body.min_unit, max_unit=body.max_unit,
                         step_size=body.step_size, allocation_ratio=body.allocation_ratio)
    except ValueError as exc:
        raise PlacementError(400, f"Bad inventory {rc} for resource provider {uuid}: {exc}") from None


async def _set(call: Call, verb: str, uuid: str, generation: int | None, given: dict[str, Inventory],
               **how: Any) -> Any:
    """The replica's set_inventories; a refused inventory is Placement's "Unable to <verb> inventory"."""
    try:
        return await call.steps(call.placement.set_inventories_steps, uuid, generation, given,
                               reserved_may_equal_total=call.version.at_least(26), **how)
    except InvalidRequest as exc:
        message = gantt_error(exc).detail
        if message.startswith("Unknown resource class"):
            raise
        raise PlacementError(400, f"Unable to {verb} inventory for resource provider {uuid}: {message}") from None
    except InventoryInUse as exc:
        raise _in_use(f"update conflict: {exc.message}") from None


async def listing(call: Call) -> Answer:
    accept_json(call.request)
    found, inventories = await call.call(call.placement.provider_inventories, call.params["uuid"])
    return json_response(call, {"resource_provider_generation": found.generation,
                                "inventories": {rc: serialize(inv) for rc, inv in inventories.items()}},
                         modified=found.updated_at)


async def replace(call: Call) -> Answer:
    require_json(call.request)
    uuid = call.params["uuid"]
    await call.check_provider(uuid)
    body = await json_body(call.request, InventoriesIn)
    given = {rc: to_inventory(rc, uuid, inv) for rc, inv in body.inventories.items()}
    found, inventories = await _set(call, "update", uuid, body.resource_provider_generation, given)
    return json_response(call, {"resource_provider_generation": found.generation,
                                "inventories": {rc: serialize(inv) for rc, inv in inventories.items()}},
                         modified=found.updated_at)


async def delete_all(call: Call) -> Answer:
    if not call.version.at_least(5):
        raise PlacementError(405, "The method DELETE is not allowed for this resource.",
                             headers={"allow": "GET, POST, PUT"})
    try:
        await call.steps(call.placement.set_inventories_steps, call.params["uuid"], None, {},
                         reserved_may_equal_total=True)
    except InventoryInUse as exc:
        raise _in_use(exc.message) from None
    return empty()


async def create(call: Call) -> Answer:
    require_json(call.request)
    uuid = call.params["uuid"]
    found = await call.steps(call.placement.provider_steps, uuid)
    body = await json_body(call.request, NewInventoryIn)
    rc = body.resource_class
    inv = to_inventory(rc, uuid, body)
    _, current = await call.call(call.placement.provider_inventories, uuid)
    if rc in current:
        raise PlacementError(409, f"Update conflict: inventory of {rc} exists on resource provider {uuid}",
                             code="placement.concurrent_update")
    found, inventories = await _set(call, "create", uuid, None, {rc: inv}, merge=True)
    location = str(call.request.base_url).rstrip("/") + call.url(f"/resource_providers/{uuid}/inventories/{rc}")
    return json_response(call, _one(inventories[rc], found.generation), status=201, modified=found.updated_at,
                         headers={"location": location})


async def show(call: Call) -> Answer:
    accept_json(call.request)
    uuid, rc = call.params["uuid"], call.params["resource_class"]
    found, inventories = await call.call(call.placement.provider_inventories, uuid)
    if rc not in inventories:
        raise PlacementError(404, f"No inventory of class {rc} for {uuid}")
    return json_response(call, _one(inventories[rc], found.generation), modified=found.updated_at)


async def update(call: Call) -> Answer:
    require_json(call.request)
    uuid, rc = call.params["uuid"], call.params["resource_class"]
    await call.check_provider(uuid)
    body = await json_body(call.request, InventoryIn)
    if body.resource_provider_generation is UNSET:
        raise PlacementError(400, "JSON does not validate: 'resource_provider_generation' is a required property")
    inv = to_inventory(rc, uuid, body)
    found, inventories = await _set(call, "update", uuid, body.resource_provider_generation, {rc: inv},
                                    merge=True, existing=True)
    return json_response(call, _one(inventories[rc], found.generation), modified=found.updated_at)


async def delete(call: Call) -> Answer:
    uuid, rc = call.params["uuid"], call.params["resource_class"]
    _, current = await call.call(call.placement.provider_inventories, uuid)
    if rc not in current:
        raise PlacementError(404, f"No inventory of class {rc} found for delete")
    try:
        await call.steps(call.placement.set_inventories_steps, uuid, None, {}, merge=True, remove=[rc],
                         reserved_may_equal_total=True)
    except InventoryInUse as exc:  # Placement's handler calls it a concurrent update
        raise _in_use(f"Unable to delete inventory of class {rc}: {exc.message}", "placement.concurrent_update") \
            from None
    return empty()
