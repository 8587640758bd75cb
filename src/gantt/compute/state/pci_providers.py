"""The flavor's PCI devices on their Placement providers (``pci_in_placement``): what a claim holds on each child
provider a pool's ``rp_uuid`` tag names, and the room those providers have now. ``providers``: the ledger's child
providers by uuid, each a node of the table."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from gantt.compute.pci import PciRequest, Pool, Room, by_request, placement_class
from gantt.compute.state.columns import Columns
from gantt.compute.state.rejected import ClaimRejected
from gantt.model import AllocationPart, NodeKey


def parts(key: NodeKey, pci: Sequence[PciRequest], taken: list[tuple[Pool, int]], columns: Columns,
          providers: Mapping[str, NodeKey], fits: Callable[[int, dict[str, int]], str | None]
          ) -> list[AllocationPart]:
    """What the flavor's devices hold on their Placement providers (Nova's PCI request groups, one device each,
    of the class ``placement_class`` names): the provider is the one the pool's ``rp_uuid`` tag names, as Nova's
    PCI claim takes the devices of the providers Placement allocated. An SR-IOV port's devices are not in
    Placement (Nova 34). ClaimRejected when a device's provider is unknown or has no room for it."""
    held: dict[str, dict[str, int]] = {}
    for request, entries in zip(pci, by_request(pci, taken), strict=True):
        if not request.alias:
            continue
        rc = placement_class(request)
        for pool, count in entries:
            provider = dict(pool).get("rp_uuid")
            if provider is None:
                raise ClaimRejected(f"{key}: a device the flavor asks for is not reported in Placement")
            resources = held.setdefault(str(provider), {})
            resources[rc] = resources.get(rc, 0) + count
    out = []
    for provider, resources in held.items():
        part_key = providers.get(provider)
        row = None if part_key is None else columns.row_of.get(part_key)
        if part_key is None or row is None:
            raise ClaimRejected(f"{key}: PCI provider {provider} is unknown")
        if fits(row, resources) is not None:
            raise ClaimRejected(f"{key}: PCI provider {provider} has no room for {resources}")
        out.append(AllocationPart(host=part_key[0], nodename=part_key[1], resources=resources))
    return out


def rooms(columns: Columns, providers: Mapping[str, NodeKey], pools: Sequence[Pool]) -> dict[str, Room]:
    """The Placement providers the pools' ``rp_uuid`` tags name, as a request group of one device finds them
    now: per class, the devices they can still give (a provider unknown here offers none)."""
    rc = columns.rc
    out: dict[str, Room] = {}
    for pool in pools:
        provider = dict(pool).get("rp_uuid")
        if provider is None or str(provider) in out:
            continue
        key = providers.get(str(provider))
        row = None if key is None else columns.row_of.get(key)
        if row is None:
            continue
        free: dict[str, int] = {}
        for name, j in columns.rc_index.items():
            # a group of one device: min_unit and step_size must allow 1; max_unit caps the provider's part
            if not columns.has_inventory.item(row, j) or rc["min_unit"].item(row, j) > 1 \
                    or rc["step_size"].item(row, j) != 1:
                continue
            devices = min(int(rc["free"].item(row, j) + 1e-9), int(rc["max_unit"].item(row, j)))
            if devices > 0:
                free[name] = devices
        out[str(provider)] = Room(free, columns.node_traits(row))
    return out
