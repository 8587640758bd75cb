"""Resource providers: Placement's view of Gantt's nodes (design §5), and the rules Placement writes follow.

A node record (``HostReport``) is a resource provider. Its identity comes from ``record.provider`` once the
Placement face has written it, else from what the host reports (``stats.uuid``, its node name): a host that
reports through ``/v1`` is a root provider at generation 0. A node without a uuid is no provider (Placement
names every provider by uuid).

Everything here is pure: it reads records and returns new ones. ``ProviderIndex`` is the replica's lookup of
records by uuid and name; the replica keeps it current from the change feed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

import msgspec
import os_resource_classes as orc

from gantt.model import (
    MAX_COUNT,
    MAX_RATIO,
    Allocation,
    Conflict,
    HostReport,
    HostStats,
    InsufficientCapacity,
    InvalidRequest,
    Inventory,
    NodeKey,
    NotFound,
    Provider,
    prepare_types,
)

# Placement's inventory defaults: an inventory that names only its total may be allocated in any unit size.
MAX_UNIT = MAX_COUNT
_CLASSIC = (("VCPU", "vcpus", "cpu_allocation_ratio"), ("MEMORY_MB", "memory_mb", "ram_allocation_ratio"),
            ("DISK_GB", "local_gb", "disk_allocation_ratio"))
_CLASSIC_TOTALS = {"vcpus": None, "memory_mb": None, "local_gb": None, "cpu_allocation_ratio": None,
                   "ram_allocation_ratio": None, "disk_allocation_ratio": None}
RC_PATTERN = re.compile(r"^[A-Z0-9_]+$")
_STANDARD_ORDER = {rc: i for i, rc in enumerate(orc.STANDARDS)}
CUSTOM_PATTERN = re.compile(r"^CUSTOM_[A-Z0-9_]+$")


class InventoryInUse(Conflict):
    """An inventory to delete still has allocations against it."""

    placement_code = "placement.inventory.inuse"


class ProviderInUse(Conflict):
    """A provider to delete still has allocations."""

    placement_code = "placement.resource_provider.inuse"


class ParentInUse(Conflict):
    """A provider to delete still has children."""

    placement_code = "placement.resource_provider.cannot_delete_parent"


class DuplicateName(Conflict):
    """Another provider has the name (or the uuid) already."""

    placement_code = "placement.duplicate_name"


class ProviderView(msgspec.Struct, frozen=True, gc=False):
    """One provider as Placement shows it, with the record it comes from. One is made per report and per touch
    applied (the replica's index follows each node's record): a Struct untracked by the cyclic collector, where a
    frozen dataclass was a tracked object with a tracked ``__dict__``, built field by field through
    ``object.__setattr__``."""

    uuid: str
    name: str
    generation: int
    parent_provider_uuid: str | None
    root_provider_uuid: str
    updated_at: float
    key: NodeKey
    record: HostReport


def view(record: HostReport, key: NodeKey | None = None) -> ProviderView | None:
    """The provider a node record is, or None when it has no uuid. ``key``: the record's node key, when the caller
    holds one (a view lives as long as its record: a tuple of its own per report and per touch was most of what
    the cyclic collector's young generation held under reports)."""
    p = record.provider
    if key is None:
        key = (record.host, record.nodename)
    if p is not None:
        return ProviderView(p.uuid, p.name, p.generation, p.parent_provider_uuid, p.root_provider_uuid or p.uuid,
                            p.updated_at or p.created_at or record.reported_at or 0.0, key, record)
    uuid = record.stats.uuid
    if not uuid:
        return None
    name = record.stats.hypervisor_hostname or record.nodename
    return ProviderView(uuid, name, 0, None, uuid, record.reported_at or 0.0, key, record)


def inventories(record: HostReport, default_ratios: dict[str, float]) -> dict[str, Inventory]:
    """What the provider offers, per class: its inventories, and those a host's classic fields imply (as the
    table derives them: ``gantt.compute.state.reports``) unless Placement set its inventories."""
    stats = record.stats
    out: dict[str, Inventory] = {}
    placed = record.provider is not None and record.provider.inventories_set
    for rc, total_field, ratio_field in () if placed else _CLASSIC:
        total = getattr(stats, total_field)
        if total:  # 0 offers nothing: Placement has no inventory of total 0 (and min_unit 1 > max_unit 0)
            ratio = getattr(stats, ratio_field) or default_ratios.get(rc, 1.0)
            out[rc] = Inventory(total=total, allocation_ratio=float(ratio), max_unit=total)
    out.update(stats.inventories or {})
    return {rc: inv if inv.max_unit is not None else msgspec.structs.replace(inv, max_unit=inv.total)
            for rc, inv in out.items()}


def traits(record: HostReport) -> list[str]:
    return list(record.stats.traits or ())


# ----------------------------------------------------------------------------------------------- checks


def check_inventory(rc: str, inv: Inventory, *, reserved_may_equal_total: bool) -> None:
    """Placement's rule for one inventory beyond its schema: positive capacity (from 1.26 reserved may equal
    total). Like Placement, a step_size above max_unit is taken (such an inventory never fits a request;
    tests/placement/test_candidates_parity.py). One divergence: min_unit above max_unit, which Placement 16
    also takes, is refused by the model (``Inventory``) for both faces, as a mistake nothing could ever use."""
    capacity = (inv.total - inv.reserved) * inv.allocation_ratio
    if capacity < 0 or (capacity == 0 and not reserved_may_equal_total):
        bound = "greater than total" if reserved_may_equal_total else "greater than or equal to total"
        raise InvalidRequest(f"Invalid inventory for '{rc}': the reserved value ({inv.reserved}) is {bound} "
                             f"({inv.total}).", field=f"$.inventories.{rc}.reserved")


def check_ratio(rc: str, ratio: float) -> None:
    if not (ratio > 0 and math.isfinite(ratio) and ratio <= MAX_RATIO):
        raise InvalidRequest(f"Bad inventory {rc}: allocation_ratio must be > 0 and <= {MAX_RATIO:g}",
                             field=f"$.inventories.{rc}.allocation_ratio")


def used(allocations: Iterable[Allocation], key: NodeKey) -> dict[str, int]:
    """What the allocations use on the provider of node ``key``, per class."""
    out: dict[str, int] = {}
    for allocation in allocations:
        for rc, amount in allocation.on(key).items():
            out[rc] = out.get(rc, 0) + amount
    return out


def _class_order(rc: str) -> tuple[int, str]:
    """Placement's order of classes: the standard ones in os-resource-classes' order (their ids), then custom."""
    return (_STANDARD_ORDER.get(rc, len(_STANDARD_ORDER)), rc)


def capacity_lowered(old: HostReport, new: HostReport) -> bool:
    """Whether some class of the node offers less in ``new`` than in ``old`` (or is gone)."""
    a, b = old.stats, new.stats
    if (a.vcpus, a.memory_mb, a.local_gb, a.cpu_allocation_ratio, a.ram_allocation_ratio, a.disk_allocation_ratio,
            a.inventories) == (b.vcpus, b.memory_mb, b.local_gb, b.cpu_allocation_ratio, b.ram_allocation_ratio,
                               b.disk_allocation_ratio, b.inventories):
        return False  # most reports that change something change usage, not capacity: no inventory built
    before, after = inventories(old, {}), inventories(new, {})
    return any(rc not in after or after[rc].capacity < inv.capacity for rc, inv in before.items())


def over_capacity(record: HostReport, default_ratios: dict[str, float],
                  allocations: Iterable[Allocation]) -> dict[str, int]:
    """What the allocations use on the provider beyond its capacity, per class (a record's ``held_over``)."""
    offered = inventories(record, default_ratios)
    return {rc: amount for rc, amount in used(allocations, (record.host, record.nodename)).items()
            if rc in offered and amount > offered[rc].capacity}


def check_room(record: HostReport, default_ratios: dict[str, float], amounts: Iterable[dict[str, int]],
               before: dict[str, int], after: dict[str, int]) -> None:
    """Placement's rule on an allocation write, for one provider: each of ``amounts`` (per class) within the
    inventory's min_unit, max_unit and step_size, and what the provider's allocations use ``after`` the write within
    ``(total - reserved) * allocation_ratio`` per class, unless they used more ``before`` it (a write that leaves a
    provider less over its capacity than it was may land). InsufficientCapacity otherwise."""
    found = view(record)
    name = found.uuid if found is not None else record.nodename
    offered = inventories(record, default_ratios)
    for amount_of in amounts:
        for rc, amount in amount_of.items():
            inv = offered.get(rc)
            if inv is None:
                raise InsufficientCapacity(rc, name, "inventory")
            max_unit = inv.max_unit if inv.max_unit is not None else inv.total
            if amount < inv.min_unit or amount > max_unit or amount % inv.step_size:
                raise InsufficientCapacity(rc, name, "constraints")
            if after[rc] > inv.capacity and after[rc] > before.get(rc, 0):
                raise InsufficientCapacity(rc, name, "capacity")


def check_not_in_use(uuid: str, removed: Iterable[str], in_use: dict[str, int]) -> None:
    busy = sorted((rc for rc in removed if in_use.get(rc, 0) > 0), key=_class_order)
    if busy:
        raise InventoryInUse(f"Inventory for '{', '.join(busy)}' on resource provider '{uuid}' in use.")


# ----------------------------------------------------------------------------------------------- writes


def new_record(uuid: str, name: str, parent: ProviderView | None, now: float) -> HostReport:
    """The record of a provider created through Placement: keyed by its uuid (stable across renames, and a
    valid node name whatever the provider's name holds), generation 0."""
    provider = Provider(uuid=uuid, name=name, parent_provider_uuid=parent.uuid if parent else None,
                        root_provider_uuid=parent.root_provider_uuid if parent else None,
                        created_at=now, updated_at=now)
    return HostReport(host=uuid, node=uuid, stats=HostStats(uuid=uuid, hypervisor_hostname=name), provider=provider)


def provider_of(current: ProviderView) -> Provider:
    p = current.record.provider
    if p is not None:
        return p
    return Provider(uuid=current.uuid, name=current.name, created_at=current.updated_at)


def bumped(current: ProviderView, now: float, **changes: object) -> HostReport:
    """``current``'s record one generation on, with ``changes`` to its provider."""
    return msgspec.structs.replace(current.record, provider=_bumped_provider(current, now, **changes))


def _bumped_provider(current: ProviderView, now: float, **changes: object) -> Provider:
    changes = {"generation": current.generation + 1, **changes}
    return msgspec.structs.replace(provider_of(current), updated_at=now, **changes)


def renamed(current: ProviderView, name: str, parent: ProviderView | None, now: float) -> HostReport:
    """A name or parent change: Placement does not move the generation for it."""
    provider = msgspec.structs.replace(provider_of(current), name=name, updated_at=now,
                                       parent_provider_uuid=parent.uuid if parent else None,
                                       root_provider_uuid=parent.root_provider_uuid if parent else None)
    stats = current.record.stats
    if current.record.host == current.uuid:  # created through Placement: its name is its hypervisor's too
        stats = msgspec.structs.replace(stats, hypervisor_hostname=name)
    return msgspec.structs.replace(current.record, provider=provider, stats=stats)


def with_inventories(current: ProviderView, given: dict[str, Inventory], now: float, *, steps: int = 1
                     ) -> HostReport:
    """The record with exactly ``given`` as its inventories, ``steps`` generations on. The classic totals go
    (they would imply VCPU, MEMORY_MB and DISK_GB beside what Placement set); a host's next report brings back
    what it names."""
    # One copy of the record (each copy validates it again in __post_init__), not one per part changed.
    provider = _bumped_provider(current, now, generation=current.generation + steps, inventories_set=True)
    stats = msgspec.structs.replace(current.record.stats, inventories=dict(given), **_CLASSIC_TOTALS)
    return msgspec.structs.replace(current.record, provider=provider, stats=stats)


def with_traits(current: ProviderView, names: list[str], now: float) -> HostReport:
    stats = msgspec.structs.replace(current.record.stats, traits=sorted(names))
    return msgspec.structs.replace(current.record, provider=_bumped_provider(current, now), stats=stats)


# ---------------------------------------------------------------------------------------------- consumers

# Placement's identifiers for a consumer written before project and user were required (microversions < 1.8):
# its [placement] incomplete_consumer_project_id / incomplete_consumer_user_id defaults.
INCOMPLETE_CONSUMER = "00000000-0000-0000-0000-000000000000"
UNKNOWN_CONSUMER_TYPE = "unknown"  # how Placement shows and groups a consumer that was given no type


@dataclass(frozen=True)
class ConsumerWrite:
    """One consumer's allocations as a Placement write gives them: provider uuid -> {class: amount} (empty:
    drop them all). ``check_generation`` (1.28): the write lands only while the consumer is at ``generation``
    (None: it holds no allocation)."""

    consumer: str
    allocations: dict[str, dict[str, int]]
    project_id: str | None = None
    user_id: str | None = None
    generation: int | None = None
    check_generation: bool = False
    consumer_type: str | None = None


@dataclass(frozen=True)
class Usage:
    """What allocations of one consumer type use (GET /usages): per class, and how many consumers."""

    resources: dict[str, int]
    consumers: int


def usages(allocations: Iterable[Allocation], project_id: str, user_id: str | None, *,
           by_type: bool, consumer_type: str | None) -> dict[str, Usage]:
    """Sum the project's (and user's) allocations over every provider, per class; ``by_type`` (1.38): grouped
    by consumer type ("unknown" for consumers given none), only ``consumer_type``'s when named, all under "all"
    when it is "all"."""
    groups: dict[str, dict[str, int]] = {}
    counts: dict[str, int] = {}
    for allocation in allocations:
        if allocation.project_id != project_id or (user_id and allocation.user_id != user_id):
            continue
        group = "" if not by_type else allocation.consumer_type or UNKNOWN_CONSUMER_TYPE
        if by_type and consumer_type == "all":
            group = "all"
        elif by_type and consumer_type is not None and group != consumer_type:
            continue
        summed = groups.setdefault(group, {})
        counts[group] = counts.get(group, 0) + 1
        for _, resources in allocation.parts():
            for rc, amount in resources.items():
                summed[rc] = summed.get(rc, 0) + amount
    return {group: Usage(summed, counts[group]) for group, summed in groups.items()}


# ------------------------------------------------------------------------------------------------ index


def _shape(found: ProviderView) -> tuple[object, ...]:
    """What places a provider among the others (its tree, its traits), as opposed to its figures."""
    return (found.uuid, found.parent_provider_uuid, found.root_provider_uuid, tuple(found.record.stats.traits or ()))


class ProviderIndex:
    """Every provider by uuid and by name, from the node records (the replica holds it under its table lock)."""

    def __init__(self) -> None:
        self.by_key: dict[NodeKey, ProviderView] = {}
        self.by_uuid: dict[str, ProviderView] = {}
        self.by_name: dict[str, str] = {}  # name -> uuid
        # A uuid that more than one node record carries, by node: one node under two names (Placement's record of
        # it and its host's report; a renamed node), until a report merges them (``twins_of``). ``by_uuid`` shows
        # one of them meanwhile, the one Placement wrote when there is one.
        self.twins: dict[str, dict[NodeKey, ProviderView]] = {}
        # The hosts of root records made through Placement (keyed by their uuid) that no report has merged into a
        # compute node yet: no Nova host is named so (``gantt.nova.manager`` never answers one).
        self.placed_roots: set[str] = set()
        self.version = 0  # moves with every change: what is derived from the index (candidates' forest) keys on it

    def put(self, record: HostReport) -> None:
        key = (record.host, record.nodename)
        old = self.by_key.get(key)
        found = view(record, key if old is None else old.key)
        # (A touch's record shares its stats and provider with the one it lifts: the shape is the same.)
        if old is None or found is None or ((record.stats is not old.record.stats
                                             or record.provider is not old.record.provider)
                                            and _shape(old) != _shape(found)):
            self.version += 1  # a host's routine report changes figures only: what keys on the shape stays
        if old is not None and found is not None and old.uuid == found.uuid and self.by_uuid.get(old.uuid) is old:
            # The same provider changed: kept where it was among the others (a dict keeps a key's place when its
            # value is replaced), since Placement lists providers in creation order, not by their last change.
            self.by_key[key] = found
            self.by_uuid[found.uuid] = found
            if found.uuid in self.twins:
                self.twins[found.uuid][key] = found
            if old.name != found.name and self.by_name.get(old.name) == old.uuid:
                del self.by_name[old.name]
            self.by_name[found.name] = found.uuid
            return
        self._drop(key)
        if found is None:
            return
        self.by_key[key] = found
        if key[0] == key[1] == found.uuid and found.parent_provider_uuid is None:
            self.placed_roots.add(key[0])
        prior = self.by_uuid.get(found.uuid)
        if prior is not None and prior.key != key:
            twins = self.twins.setdefault(found.uuid, {prior.key: prior})
            twins[key] = found
            if prior.record.provider is not None and found.record.provider is None:
                return  # Placement's record stays the provider it shows
            if self.by_name.get(prior.name) == prior.uuid:
                del self.by_name[prior.name]
        self.by_uuid[found.uuid] = found
        self.by_name[found.name] = found.uuid

    def remove(self, key: NodeKey) -> None:
        self.version += 1
        self._drop(key)

    def _drop(self, key: NodeKey) -> None:
        old = self.by_key.pop(key, None)
        if old is None:
            return
        if key[0] == key[1] == old.uuid:
            self.placed_roots.discard(key[0])
        twins = self.twins.get(old.uuid)
        if twins is not None:
            twins.pop(key, None)
            if len(twins) < 2:
                del self.twins[old.uuid]
        if self.by_uuid.get(old.uuid) is old:
            del self.by_uuid[old.uuid]
            if self.by_name.get(old.name) == old.uuid:
                del self.by_name[old.name]
            others = [self.by_key[k] for k in (twins or ()) if k in self.by_key]
            if others:  # the same provider, under its other name, is the one shown now
                other = max(others, key=lambda v: v.record.provider is not None)
                self.by_uuid[other.uuid] = other
                self.by_name[other.name] = other.uuid

    def twins_of(self, uuid: str | None, key: NodeKey) -> list[ProviderView]:
        """The records other than ``key``'s that carry provider ``uuid``: the same node under another name."""
        if uuid is None:
            return []
        twins = self.twins.get(uuid)
        if twins is not None:
            return [self.by_key[k] for k in twins if k != key and k in self.by_key]
        found = self.by_uuid.get(uuid)
        return [found] if found is not None and found.key != key else []

    def get(self, uuid: str) -> ProviderView:
        found = self.by_uuid.get(uuid)
        if found is None:
            raise NotFound(f"No resource provider with uuid {uuid} found", field="uuid")
        return found

    def children(self, uuid: str) -> list[ProviderView]:
        return [p for p in self.by_uuid.values() if p.parent_provider_uuid == uuid]

    def tree(self, uuid: str) -> list[ProviderView]:
        """Every provider in the tree ``uuid`` belongs to."""
        root = self.get(uuid).root_provider_uuid
        return [p for p in self.by_uuid.values() if p.root_provider_uuid == root]

    def descendants(self, uuid: str) -> set[str]:
        out: set[str] = set()
        frontier = [uuid]
        while frontier:
            current = frontier.pop()
            for child in self.children(current):
                if child.uuid not in out:
                    out.add(child.uuid)
                    frontier.append(child.uuid)
        return out


# ------------------------------------------------------------------------------------------------ query


@dataclass(frozen=True)
class ProviderQuery:
    """GET /resource_providers' filters, parsed. ``member_of``: each set "any of these"; ``required``: each set
    "any of these traits"; all entries must hold."""

    name: str | None = None
    uuid: str | None = None
    in_tree: str | None = None
    member_of: tuple[frozenset[str], ...] = ()
    forbidden_aggregates: frozenset[str] = frozenset()
    required: tuple[frozenset[str], ...] = ()
    forbidden_traits: frozenset[str] = frozenset()
    resources: tuple[tuple[str, int], ...] = ()

    def matches_identity(self, found: ProviderView, root: str | None) -> bool:
        """name, uuid, in_tree (``root``: the in_tree provider's root)."""
        return ((self.name is None or found.name == self.name)
                and (self.uuid is None or found.uuid == self.uuid)
                and (self.in_tree is None or found.root_provider_uuid == root))

    def matches_aggregates(self, aggregates: set[str]) -> bool:
        return all(group & aggregates for group in self.member_of) and not (self.forbidden_aggregates & aggregates)

    def matches_traits(self, names: set[str]) -> bool:
        return all(group & names for group in self.required) and not (self.forbidden_traits & names)

    def matches_resources(self, offered: dict[str, Inventory], in_use: dict[str, int]) -> bool:
        """Room for each amount: within the inventory's units and step, and free capacity (Placement's rule)."""
        for rc, amount in self.resources:
            inv = offered.get(rc)
            if inv is None:
                return False
            max_unit = inv.max_unit if inv.max_unit is not None else inv.total
            if amount < inv.min_unit or amount > max_unit or amount % inv.step_size:
                return False
            if in_use.get(rc, 0) + amount > inv.capacity:
                return False
        return True


prepare_types(globals())  # build msgspec type info before any thread encodes (see model.prepare_types)
