"""Host reports: what ``update_resource_stats`` carries (HostStats, its inventories, metrics and service state), the
node as a resource provider, the instances a host runs, and how a store merges one report into the record it keeps."""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct, field

from gantt.model.classes import TRAIT_RE, check_resource_class
from gantt.model.decoding import MSGSPEC_PATH, decode
from gantt.model.errors import InvalidRequest
from gantt.model.hardware import MAX_PCI_POOLS, NUMATopology, PciDevicePoolList, PciPool, pci_pools
from gantt.model.limits import (
    MAX_COUNT,
    MAX_INSTANCES,
    MAX_LIST,
    MAX_RATIO,
    FreeForm,
    JsonText,
    Key,
    Name,
    Text,
    check_json,
    check_json_text,
    valid_name,
)
from gantt.model.prepare import prepare_types


# The records of nodes and what they hold are made per report, per touch and per claim and live as long as the
# table: ``gc=False`` (on every Struct of this module, allocations, hardware, the store's Change and Batch) keeps
# them out of the cyclic collector's generations (its young collections counted them, its full ones walked every
# record a touch replaced). They cannot form a cycle: their fields hold scalars, other gc=False Structs and
# containers of those, or free-form JSON (tests/test_untracked.py walks the types to prove it).
class Inventory(Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """One resource class on one host, as Placement sees it."""

    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int | None = None  # None: total
    step_size: int = 1
    allocation_ratio: float = 1.0
    used: int | None = None  # what the host itself says it uses (None: it does not say)

    def __post_init__(self) -> None:
        for name in ("total", "reserved", "min_unit", "max_unit", "step_size", "used"):
            value = getattr(self, name)
            if value is not None and value > MAX_COUNT:
                raise ValueError(f"{name} must be <= {MAX_COUNT}")
        if self.total < 0:
            raise ValueError("total must be >= 0")
        if self.reserved < 0:
            raise ValueError("reserved must be >= 0")
        if self.min_unit < 1:
            raise ValueError("min_unit must be >= 1")
        if self.max_unit is not None and self.max_unit < self.min_unit:
            raise ValueError("max_unit must be >= min_unit")
        if self.step_size < 1:
            raise ValueError("step_size must be >= 1")
        if not (self.allocation_ratio > 0 and math.isfinite(self.allocation_ratio)
                and self.allocation_ratio <= MAX_RATIO):
            raise ValueError(f"allocation_ratio must be > 0 and <= {MAX_RATIO:g}")
        if self.used is not None and self.used < 0:
            raise ValueError("used must be >= 0")

    @property
    def capacity(self) -> float:
        return (self.total - self.reserved) * self.allocation_ratio


class ServiceInfo(Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    disabled: bool = False
    disabled_reason: Text | None = None
    forced_down: bool = False


def _finite(name: str, value: float | None, low: float, high: float) -> None:
    if value is not None and not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"{name} must be a finite number in [{low:g}, {high:g}]")


class Metric(Struct, omit_defaults=True, gc=False):
    name: Text
    value: float
    source: Text = ""
    timestamp: Text | float | None = None  # Nova sends an ISO 8601 string

    def __post_init__(self) -> None:
        _finite("value", self.value, -1e15, 1e15)


def _stored_json(name: str, text: str, type_: Any) -> Any:
    """A field as compute_nodes stores it (JSON text), decoded to the form the report would carry it in."""
    try:
        return msgspec.convert(json.loads(text), type_, strict=True)
    except ValueError as exc:  # msgspec.ValidationError is a ValueError, and so is a JSONDecodeError
        inner = MSGSPEC_PATH.sub(lambda m: f"at {m.group(1)[1:] or 'the top'}", str(exc))
        raise ValueError(f"{name} must be the JSON text of a {name} (as compute_nodes stores it): {inner}") \
            from None


class HostStats(Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """The ``stats`` of ``update_resource_stats``: Nova's compute_nodes fields. A report replaces what it names."""

    uuid: Text | None = None
    vcpus: int | None = None
    vcpus_used: int | None = None
    memory_mb: int | None = None
    memory_mb_used: int | None = None
    local_gb: int | None = None
    local_gb_used: int | None = None
    disk_available_least: int | None = None
    cpu_allocation_ratio: float | None = None
    ram_allocation_ratio: float | None = None
    disk_allocation_ratio: float | None = None
    hypervisor_type: Text | None = None
    hypervisor_version: int | None = None
    hypervisor_hostname: Text | None = None
    cpu_info: FreeForm | JsonText | None = None
    # Each entry is Nova's HVSpec: (architecture, hypervisor type, vm mode).
    supported_instances: Annotated[list[Annotated[list[Text | None], Meta(max_length=3)]],
                                   Meta(max_length=MAX_LIST)] | None = None
    host_ip: Text | None = None
    running_vms: int | None = None
    num_instances: int | None = None
    num_io_ops: int | None = None
    current_workload: int | None = None
    failed_builds: int | None = None
    metrics: Annotated[list[Metric], Meta(max_length=MAX_LIST)] | None = None
    stats: FreeForm | None = None
    service: ServiceInfo | None = None
    inventories: Annotated[dict[Key, Inventory], Meta(max_length=MAX_LIST)] | None = None
    traits: Annotated[list[Text], Meta(max_length=MAX_LIST)] | None = None
    instances: Annotated[list[Name], Meta(max_length=MAX_INSTANCES)] | None = None
    # Either decoded, or as the JSON text nova-compute stores in compute_nodes (the same data, kept decoded).
    numa_topology: NUMATopology | JsonText | None = None
    # Nova's PCI device pools: the plain list, or the PciDevicePoolList primitive (kept as the plain list).
    pci_stats: Annotated[list[PciPool], Meta(max_length=MAX_PCI_POOLS)] | PciDevicePoolList | JsonText | None = None

    def __post_init__(self) -> None:
        if isinstance(self.numa_topology, str):
            self.numa_topology = _stored_json("numa_topology", self.numa_topology, NUMATopology | None)
        pci = self.pci_stats
        if isinstance(pci, str):
            pci = _stored_json("pci_stats", pci,
                               Annotated[list[PciPool], Meta(max_length=MAX_PCI_POOLS)] | PciDevicePoolList | None)
        if pci is not None:
            self.pci_stats = pci_pools(pci)
        if isinstance(self.cpu_info, str):
            check_json_text("cpu_info", self.cpu_info)
        else:
            check_json("cpu_info", self.cpu_info)
        check_json("stats", self.stats)
        for name in ("vcpus", "vcpus_used", "memory_mb", "memory_mb_used", "local_gb", "local_gb_used",
                     "running_vms", "num_instances", "num_io_ops", "current_workload", "failed_builds"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= MAX_COUNT:
                raise ValueError(f"{name} must be >= 0 and <= {MAX_COUNT}")
        if self.disk_available_least is not None and abs(self.disk_available_least) > MAX_COUNT:
            raise ValueError(f"disk_available_least must be within ±{MAX_COUNT}")
        for name in ("cpu_allocation_ratio", "ram_allocation_ratio", "disk_allocation_ratio"):
            value = getattr(self, name)
            if value is not None and not (value > 0 and math.isfinite(value) and value <= MAX_RATIO):
                raise ValueError(f"{name} must be > 0 and <= {MAX_RATIO:g}")
        if self.inventories:
            for rc in self.inventories:
                check_resource_class(rc, "inventories")
        if self.traits:
            for trait in self.traits:
                if not TRAIT_RE.match(trait):
                    raise ValueError(f"traits must be upper-case names, not {trait!r}")


class Provider(Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """What Placement knows of a node beyond its stats: its identity in a provider tree and its generation.

    A node is a resource provider (design §5). A host that only reports through ``/v1`` has no ``Provider`` yet:
    its uuid is ``stats.uuid``, its name its node name, it is a root at generation 0. The record is written by the
    Placement face; ``generation`` is Placement's concurrency token, moved by every change Placement bumps it for.
    """

    uuid: Text
    name: Text
    generation: Annotated[int, Meta(ge=0)] = 0
    parent_provider_uuid: Text | None = None
    root_provider_uuid: Text | None = None  # None: the provider is a root
    created_at: float = 0.0
    updated_at: float = 0.0
    # Placement has set the node's inventories (nova-compute's update_provider_tree): they are its whole offer, as
    # Nova's Placement holds it. The host's classic fields (a cell's vcpus, memory_mb, local_gb) are then figures
    # for the filters, never capacity: a host with only PCPU offers no VCPU, whatever its vcpus say.
    inventories_set: bool = False


class HostReport(Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """``update_resource_stats(name, stats)`` as one message. ``node`` defaults to the host's own name."""

    host: Name
    node: Name | None = None
    stats: HostStats = field(default_factory=HostStats)
    # When the host reported (epoch seconds). Set by whoever receives the report, so that a replica rebuilt
    # from a store later still knows which hosts have gone quiet.
    reported_at: float | None = None
    # The node as a resource provider (Placement's view); written by the Placement face, kept by reports.
    provider: Provider | None = None
    # Per class, what the node's allocations held when a write lowered its capacity below that (Placement allows
    # it, logging the provider over capacity; no allocation write takes the node further): ``gantt audit``
    # accepts allocations up to this. Set by the store (store.planner), kept by reports.
    held_over: dict[str, int] | None = None

    def __post_init__(self) -> None:
        # Checked here as well as by the Name type: a report built in Python (HostReport.of, the service's
        # name field) is not decoded, and msgspec checks constraints only when it decodes.
        for part, value in (("host", self.host), ("node", self.node)):
            if value is not None and not valid_name(value):
                raise ValueError(f"{part} must be 1-255 characters, without '/' or control characters, "
                                 "and not '.' or '..'")

    @property
    def nodename(self) -> str:
        return self.node if self.node is not None else self.host

    @classmethod
    def of(cls, name: str | list[str] | tuple[str, str], stats: HostStats | dict[str, Any]) -> HostReport:
        """Build from Nova's calling convention: ``name`` is ``"host"`` or ``["host", "node"]``."""
        if isinstance(name, str):
            host, node = name, None
        elif isinstance(name, list | tuple) and len(name) == 2 and all(isinstance(p, str) for p in name):
            host, node = name[0], name[1]
        else:
            raise InvalidRequest("name must be \"host\" or [\"host\", \"node\"]", field="$.name")
        if isinstance(stats, dict):
            stats = decode(stats, HostStats, path="$.stats")
        check_reserved(stats)
        try:
            return cls(host=host, node=node, stats=stats)
        except ValueError as exc:  # pragma: no cover - re-raised with the field named
            raise InvalidRequest(str(exc), field="$.name") from exc


def check_reserved(stats: HostStats, where: str = "$.stats") -> None:
    """Refuse an inventory that reserves more than its total, as Placement does: its capacity would be negative,
    and every allocation on it over capacity (``gantt audit``'s finding). Checked on what a report or an operator
    sends, not on records a store holds (one written before this check still loads)."""
    for rc, inv in (stats.inventories or {}).items():
        if inv.reserved > inv.total:
            raise InvalidRequest(f"inventory {rc}: reserved ({inv.reserved}) is greater than total ({inv.total})",
                                 field=f"{where}.inventories.{rc}.reserved")


def merge_reports(old: HostReport | None, new: HostReport) -> HostReport:
    """The record a store keeps: ``new`` replaces what it names; inventories are replaced class by class.

    Reports are ordered by the store (the last one written wins), never by ``reported_at``: that is the
    receiving server's wall clock, which may be behind another server's or step back, and a report dropped for
    it was a report answered and lost.
    """
    if old is None:
        return new
    if same_stats(new.stats, old.stats):
        # Most reports of a real cloud repeat the host's last one: the merge is the old stats (every field it
        # names equal, every field it leaves out kept), and rebuilding them would validate their free-form JSON
        # again (HostStats.__post_init__ encodes it), the larger part of what the store's writer spent per report.
        stats = old.stats
    else:
        stats = _merged_stats(old.stats, new.stats)
    return HostReport(host=new.host, node=new.node, stats=stats,
                      reported_at=new.reported_at if new.reported_at is not None else old.reported_at,
                      provider=new.provider if new.provider is not None else old.provider,
                      held_over=old.held_over)


def merge_nodes(src: HostReport, dst: HostReport) -> HostReport:
    """One node's two records made one, at ``dst``'s key: the same resource provider uuid kept under two node
    names (nova-compute's report client created it through Placement, keyed by its uuid, and Nova's cell database
    names it ``(compute.host, hypervisor_hostname)``; or a node renamed or moved to another compute service).

    The host's figures are ``dst``'s where it names them, ``src``'s otherwise; Placement's part (the provider:
    identity, generation, tree) is that of the record Placement wrote, the later generation when both were, and
    its inventories and traits come with it (a host's report names neither, unless it says so itself)."""
    placed = [r for r in (dst, src) if r.provider is not None]
    writer = max(placed, key=lambda r: r.provider.generation if r.provider is not None else 0) if placed else None
    stats = _merged_stats(src.stats, dst.stats)
    if writer is not None:
        other = src if writer is dst else dst
        inventories = {**(other.stats.inventories or {}), **(writer.stats.inventories or {})} \
            if writer.stats.inventories is not None or other.stats.inventories is not None else None
        traits = writer.stats.traits if writer.stats.traits is not None else other.stats.traits
        stats = msgspec.structs.replace(stats, inventories=inventories, traits=traits)
    reported = [t for t in (src.reported_at, dst.reported_at) if t is not None]
    return HostReport(host=dst.host, node=dst.node, stats=stats, reported_at=max(reported) if reported else None,
                      provider=writer.provider if writer is not None else None, held_over=dst.held_over)


def same_stats(a: HostStats, b: HostStats) -> bool:
    """The same report: equal, and of the same JSON types throughout the free-form values, where Python's
    ``46 == 46.0`` and ``1 == True`` are different reports that ComputeCapabilitiesFilter tells apart as Nova does
    (by ``str()``: "46" and "46.0"). Decoding gives each typed field one type: ``==`` is enough there."""
    return a == b and _same_json(a.cpu_info, b.cpu_info) and _same_json(a.stats, b.stats)


_LEAVES = frozenset({str, int, float, bool, type(None)})  # JSON's scalars: nothing inside them to compare


def _same_json(a: Any, b: Any) -> bool:
    """Of equal values (given), whether they have the same types throughout."""
    kind = type(a)
    if kind is not type(b):
        return False
    # A loop, not a generator per container: every repeated report compares its cpu_info and stats so, and the
    # generators were most of that. A scalar costs its type test; anything else recurses.
    if kind is dict:
        for key, value in a.items():
            other = b[key]
            leaf = type(value)
            if leaf is not type(other) or (leaf not in _LEAVES and not _same_json(value, other)):
                return False
    elif kind is list:
        for value, other in zip(a, b, strict=True):
            leaf = type(value)
            if leaf is not type(other) or (leaf not in _LEAVES and not _same_json(value, other)):
                return False
    elif isinstance(a, dict):  # a subclass, as built in Python (the library face)
        return all(_same_json(value, b[key]) for key, value in a.items())
    elif isinstance(a, list):
        return all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    return True


def repeats(old: HostReport, merged: HostReport) -> bool:
    """``merged`` is ``old`` reported again: the report changed nothing but the node's liveness. Its time differs
    (either way: servers' clocks differ); at the same time it is an operator's change, written as a record
    (``Replica.update_host`` keeps the report time, and may write what the node already holds)."""
    return (old.reported_at is not None and merged.reported_at is not None and merged.reported_at != old.reported_at
            and merged.provider == old.provider
            and (merged.stats is old.stats or same_stats(merged.stats, old.stats)))


def repeated_by(old: HostReport, report: HostReport) -> bool:
    """``repeats(old, merge_reports(old, report))``, without building the merge: a report without a provider
    repeats the record when it names the record's stats exactly (most reports), or when each field it names holds
    what the record holds (the merge keeps the rest). Building the merge to compare it (a HostStats validated
    again) was most of what a changed report cost before the store's writer merges it for good."""
    if report.provider is not None:
        return repeats(old, merge_reports(old, report))
    if old.reported_at is None or report.reported_at in (None, old.reported_at):
        return False
    new, held = report.stats, old.stats
    if same_stats(new, held):
        return True
    for name in HostStats.__struct_fields__:
        value = getattr(new, name)
        if value is None:
            continue  # kept as the record holds it
        mine = getattr(held, name)
        if name == "inventories" and held.inventories:  # merged class by class
            if any(mine.get(rc) != inventory for rc, inventory in value.items()):
                return False
        elif value != mine or (name in ("cpu_info", "stats") and not _same_json(value, mine)):
            return False
    return True


def _merged_stats(old: HostStats, new: HostStats) -> HostStats:
    changes = {name: getattr(new, name) for name in HostStats.__struct_fields__ if getattr(new, name) is not None}
    if new.inventories is not None and old.inventories:
        changes["inventories"] = {**old.inventories, **new.inventories}
    return msgspec.structs.replace(old, **changes)


class InstanceInfo(Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """What a host runs, for the affinity filters (Nova's update_instance_info / sync_instance_info)."""

    host: Name
    instances: Annotated[list[Name], Meta(max_length=MAX_INSTANCES)]


prepare_types(globals())
