"""POST /reshaper (1.30): new inventories for some providers and new allocations for some consumers, at once.

Used when inventory moves between providers (nova-compute moving VCPU from a compute node to its NUMA children,
or VGPU to child providers) with the allocations already on it; one commit, so no consumer is ever seen without
its resources or over capacity in between.
"""

from __future__ import annotations

import re
import uuid as uuidlib

from gantt.model import ConsumerConflict, GenerationConflict, InsufficientCapacity, NotFound
from gantt.placement.api.allocations import invalid, read_body, to_write
from gantt.placement.api.errors import PlacementError
from gantt.placement.api.inventories import to_inventory
from gantt.placement.api.wire import Answer, Call, ReshapeIn, empty
from gantt.resources.providers import InventoryInUse

_UUID = re.compile(r"^[0-9a-fA-F-]{36}$")
_CONCURRENT = "placement.concurrent_update"


async def reshape(call: Call) -> Answer:
    body = await read_body(call, ReshapeIn)
    if not body.inventories:
        raise invalid("{} does not have enough properties", "minProperties", "['properties']['inventories']")
    for uuid in body.inventories:
        if not _UUID.match(uuid):
            raise invalid(f"'{uuid}' does not match any of the regexes: '^[0-9a-fA-F-]{{36}}$'")
    writes = []  # the whole body is checked (as Placement's schema does) before anything is looked up
    for key, one in body.allocations.items():
        if not _UUID.match(key):
            raise invalid(f"'{key}' does not match any of the regexes: '^[0-9a-fA-F-]{{36}}$'")
        writes.append(to_write(call, str(uuidlib.UUID(key)), one, post=True))
    inventories = {}
    for uuid, given in body.inventories.items():
        try:
            found = await call.call(call.placement.provider_as_read, uuid, given.resource_provider_generation)
        except NotFound as exc:
            raise PlacementError(400, f"Resource provider {uuid} in inventories not found: {exc.message}",
                                 code="placement.resource_provider.not_found") from None
        if found.generation != given.resource_provider_generation:
            raise PlacementError(409, f"resource provider generation conflict for provider {uuid}: actual: "
                                      f"{found.generation}, given: {given.resource_provider_generation}",
                                 code=_CONCURRENT)
        inventories[found.uuid] = (given.resource_provider_generation,
                                   {rc: to_inventory(rc, uuid, inv) for rc, inv in given.inventories.items()})
    try:
        await call.call(call.placement.consumers.reshape, inventories, writes,
                        reserved_may_equal_total=call.version.at_least(26))
    except NotFound as exc:
        raise PlacementError(400, f"malformed reshaper data: {exc.message}") from None
    except (GenerationConflict, ConsumerConflict) as exc:
        raise PlacementError(409, f"update conflict: {exc.message}", code=_CONCURRENT) from None
    except InventoryInUse as exc:
        raise PlacementError(409, f"update conflict: {exc.message}", code=InventoryInUse.placement_code) from None
    except InsufficientCapacity as exc:
        raise PlacementError(409, f"Unable to allocate inventory: {exc.message}") from None
    return empty()
