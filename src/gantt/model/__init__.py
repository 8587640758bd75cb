"""The one data model of Gantt, shared by engine, service, client and stores.

Field names are Nova's (design §3) so that a Nova operator or a Nova resource tracker maps one to one.
Every Struct validates on decode; an error names the offending field as a JSON path (``$.flavor.vcpus``).

Why one ~700-line module: "one data model" is the point — every type, its bounds (the MAX_* constants and the
annotated string types) and its validation live together, so a field cannot be bounded in one place and
unbounded in another; the client imports it without importing the server.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal, TypeVar

import msgspec
from msgspec import Meta, Struct, field

from gantt.base.quote import clip

# Limits on every string and list an input carries (README "The service"; tests/test_input_limits.py walks
# every request type for one without a bound): what Nova's database holds (255 for names, ids, keys and
# metadata), and list sizes no real cloud reaches, so that one request cannot write hundreds of megabytes. A
# name that is part of a URL (host, node, consumer, aggregate id) must also be addressable: not empty, no '/',
# no control characters, not '.' or '..'.
MAX_TEXT = 255
NAME_PATTERN = r"^(?!\.\.?$)[^/\x00-\x1f\x7f]+$"
Name = Annotated[str, Meta(min_length=1, max_length=MAX_TEXT, pattern=NAME_PATTERN,
                           description="1-255 characters; no '/', no control characters, not '.' or '..'")]
Text = Annotated[str, Meta(max_length=MAX_TEXT)]
Key = Annotated[str, Meta(min_length=1, max_length=MAX_TEXT)]
_NAME_RE = re.compile(NAME_PATTERN)


def valid_name(value: str) -> bool:
    return len(value) <= MAX_TEXT and _NAME_RE.match(value) is not None


MAX_HOSTS = 1_000_000  # hosts in one aggregate
MAX_INSTANCES = 100_000  # instances one host lists
MAX_LIST = 10_000  # hosts or members a request names, traits, metrics, reports in a batch, …
MAX_NUM_INSTANCES = 1_000  # instances in one request
# Nova joins every aggregate a project may use into one comma-separated requested_destination entry, and a
# Placement member_of entry may name as many ("in:a,b,…"): room for MAX_LIST UUIDs, their commas and a "!in:".
MAX_AGGREGATE_REFS = len("!in:") + MAX_LIST * 37
AggregateRefs = Annotated[str, Meta(max_length=MAX_AGGREGATE_REFS)]
# An integer aggregate id is Nova's database id. The service refuses any integer beyond int64 in a body
# (service.app._check_ints); the type says so too, so that the library and the OpenAPI document agree with it.
MAX_INT64 = 2**63 - 1
AggregateId = Annotated[int, Meta(ge=-MAX_INT64, le=MAX_INT64,
                                  description="an integer id is refused beyond int64 (±(2^63-1))")]

__all__ = [
    "STANDARD_CLASSES",
    "Aggregate",
    "Allocation",
    "AllocationPart",
    "Candidate",
    "ConsumerConflict",
    "Flavor",
    "GanttError",
    "GenerationConflict",
    "HostReport",
    "HostStats",
    "Image",
    "InstanceGroup",
    "InstanceInfo",
    "InvalidRequest",
    "Inventory",
    "Metric",
    "NUMACell",
    "NUMACellClaim",
    "NUMANetworkMetadata",
    "NUMAPages",
    "NUMATopology",
    "NUMATopologyLimits",
    "NoValidHost",
    "NotFound",
    "Provider",
    "Record",
    "RequestSpec",
    "RequestedDestination",
    "Selection",
    "ServiceInfo",
    "StoreUnavailable",
    "decode",
    "merge_reports",
    "to_builtins",
]

# --------------------------------------------------------------------------------------------------- errors


class GanttError(Exception):
    """Base of every error Gantt raises on purpose; ``status`` is the HTTP status the service maps it to."""

    status = 500
    title = "Internal error"

    def __init__(self, message: str, *, field: str | None = None, detail: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.detail = detail

    def to_problem(self) -> dict[str, Any]:
        """An RFC 9457 problem body."""
        # clipped: a message or field may quote a client's value, which may be megabytes long (gantt.base.quote)
        body: dict[str, Any] = {"type": "about:blank", "title": self.title, "status": self.status,
                                "detail": clip(self.message)}
        if self.field is not None:
            body["field"] = clip(self.field, 256)
        if self.detail is not None:
            body["explanation"] = self.detail
        return body


class InvalidRequest(GanttError, ValueError):
    status = 400
    title = "Invalid request"


class NotFound(GanttError, LookupError):
    status = 404
    title = "Not found"


class Conflict(GanttError):
    status = 409
    title = "Conflict"


class GenerationConflict(Conflict):
    """A write named a provider generation the store no longer holds (Placement's concurrent update)."""

    placement_code = "placement.concurrent_update"

    def __init__(self, keys: list[NodeKey]) -> None:
        super().__init__("resource provider generation conflict: Resource provider's generation already changed. "
                         "Please update the generation and try again. (" + ", ".join(f"{h}/{n}" for h, n in keys[:5])
                         + ")")
        self.keys = keys


class ReplicaBehind(Conflict):
    """A batch built as of a revision that another process has written past (``Batch.fresh_as_of``): the replica
    catches up and builds it again. Never an answer of its own: the steps that ask for the check handle it."""


class ConsumerConflict(Conflict):
    """A write named a consumer generation the store no longer holds (Placement 1.28's consumer generation)."""

    placement_code = "placement.concurrent_update"

    def __init__(self, consumer: str, held: int | None, given: int | None) -> None:
        super().__init__(f"consumer generation conflict - expected {_null(held)} but got {_null(given)}",
                         field="consumer_generation")
        self.consumer = consumer


def _null(value: int | None) -> str:
    return "null" if value is None else str(value)


class InsufficientCapacity(Conflict):
    """An allocation does not fit a provider's inventory (Placement's capacity and unit rules)."""

    def __init__(self, resource_class: str, provider: str, why: str) -> None:
        reasons = {"capacity": "The requested amount would exceed the capacity.",
                   "constraints": "The requested amount would violate inventory constraints."}
        if why in reasons:
            text = (f"Unable to create allocation for '{resource_class}' on resource provider '{provider}'. "
                    f"{reasons[why]}")
        else:  # no inventory of the class there
            text = f"Inventory for '{resource_class}' on resource provider '{provider}' invalid."
        super().__init__(text, field="allocations")
        self.resource_class = resource_class
        self.provider = provider


class StoreUnavailable(GanttError):
    """The shared store cannot commit (e.g. etcd lost quorum): fail fast, place nothing."""

    status = 503
    title = "Store unavailable"


class NoValidHost(GanttError):
    """Nothing fits. ``explanation`` says, filter by filter, how many hosts each one removed."""

    status = 409
    title = "No valid host"

    def __init__(self, message: str, explanation: Explanation | None = None) -> None:
        super().__init__(message, detail=to_builtins(explanation) if explanation is not None else None)
        self.explanation = explanation


# ------------------------------------------------------------------------------------------- host reports

_RC_RE = re.compile(r"^[A-Z0-9_]+$")
_CUSTOM_RE = re.compile(r"^CUSTOM_[A-Z0-9_]+$")


def _standard_classes() -> frozenset[str]:
    try:
        import os_resource_classes as orc

        return frozenset(orc.STANDARDS)
    except ImportError:  # pragma: no cover - os-resource-classes is a hard dependency
        return frozenset({"VCPU", "MEMORY_MB", "DISK_GB", "PCPU"})


STANDARD_CLASSES = _standard_classes()


def check_resource_class(name: str, where: str) -> None:
    if name in STANDARD_CLASSES or _CUSTOM_RE.match(name):
        return
    raise ValueError(f"{where} must name standard resource classes or CUSTOM_* ones, not {name!r}")


class Inventory(Struct, forbid_unknown_fields=True, omit_defaults=True):
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


class ServiceInfo(Struct, forbid_unknown_fields=True, omit_defaults=True):
    disabled: bool = False
    disabled_reason: Text | None = None
    forced_down: bool = False


# Stated ranges for every number that reaches a column (README "The service"): counts and capacities are
# Placement's inventory bound (a 32-bit signed integer), ratios at most MAX_RATIO, floats finite, so that no
# product or sum over a node overflows into inf or NaN and then into a weight.
MAX_COUNT = 2**31 - 1
MAX_RATIO = 10_000.0


MAX_DEPTH = 32  # free-form JSON (hints, image properties, cpu_info, stats) nests at most this deep
# ... and encodes to at most this many bytes: above the 112 KiB body Nova's own API takes (oslo.middleware's
# max_request_body_size), so every hint Nova accepts fits, and twice the Text column Nova keeps a node's stats
# in. Strings and lists inside it need no bound of their own then.
MAX_JSON_BYTES = 128 * 1024
_FREE_FORM = f"free-form JSON: at most {MAX_JSON_BYTES} bytes encoded, {MAX_DEPTH} levels deep"
FreeForm = Annotated[dict[Text, Any], Meta(max_length=MAX_LIST, extra={"max_bytes": MAX_JSON_BYTES},
                                           extra_json_schema={"x-max-bytes": MAX_JSON_BYTES,
                                                              "description": _FREE_FORM})]
JsonText = Annotated[str, Meta(max_length=MAX_JSON_BYTES, description="JSON text, at most "
                                                                      f"{MAX_JSON_BYTES} characters")]


def check_json(name: str, value: Any) -> None:
    """Refuse free-form JSON nested deeper than MAX_DEPTH or larger than MAX_JSON_BYTES encoded: code that walks
    it (JsonFilter, capabilities, the encoders) recurses, so a body 100,000 levels deep must be a 400, not a
    RecursionError later; and a host's stats are kept, interned and copied into every replica."""
    check_depth(name, value)
    if not value:
        return
    try:
        size = len(msgspec.json.encode(value))
    except (TypeError, msgspec.EncodeError):  # built in Python (the library face): a JSON body cannot do this
        raise ValueError(f"{name} must hold JSON values only") from None
    if size > MAX_JSON_BYTES:
        raise ValueError(f"{name} must encode to at most {MAX_JSON_BYTES} bytes of JSON, not {size}")


def check_json_text(name: str, text: str) -> None:
    """JSON text held as a string (Nova keeps cpu_info so) is decoded where a filter reads into it: held to the
    limits of the same value given as an object, so that 20,000 nested lists in a string cannot pass the report
    and then fail every decision that reads the node. Text that is no JSON is taken: a filter reads nothing in it.
    """
    if "[" not in text and "{" not in text:
        return  # a scalar, or no JSON: nothing nests (most reports send cpu_info as an object anyway)
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return
    except RecursionError:
        raise ValueError(f"{name} must nest at most {MAX_DEPTH} levels deep") from None
    check_depth(name, value)


def check_depth(name: str, value: Any) -> None:
    # Every host report is checked (its cpu_info and stats), most of them flat or nearly: only containers are
    # stacked, so a scalar costs a type test and no tuple.
    if not isinstance(value, dict | list):
        return
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"{name} must nest at most {MAX_DEPTH} levels deep")
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))


def _finite(name: str, value: float | None, low: float, high: float) -> None:
    if value is not None and not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"{name} must be a finite number in [{low:g}, {high:g}]")


class Metric(Struct, omit_defaults=True):
    name: Text
    value: float
    source: Text = ""
    timestamp: Text | float | None = None  # Nova sends an ISO 8601 string

    def __post_init__(self) -> None:
        _finite("value", self.value, -1e15, 1e15)


# ------------------------------------------------------------------------------------------- NUMA topology
# What nova-compute keeps in compute_nodes.numa_topology (Nova's NUMATopology, NUMACell, NUMAPagesTopology), in
# Nova's field names. A host may send the plain form or the versioned-object primitive Nova stores
# ({"nova_object.name": "NUMATopology", "nova_object.data": {...}}, nested objects wrapped alike).

MAX_NUMA_CELLS = 128  # Nova's ImageMetaProps.NUMA_NODES_MAX
MAX_CPU_ID = 65_535
MAX_CPUS = 8_192  # CPUs in one cell
CpuId = Annotated[int, Meta(ge=0, le=MAX_CPU_ID)]
CpuSet = Annotated[list[CpuId], Meta(max_length=MAX_CPUS)]
Count = Annotated[int, Meta(ge=0, le=2**31 - 1)]


class NUMAPages(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One page size in one cell (Nova's NUMAPagesTopology); free pages are ``total - used - reserved``."""

    size_kb: Annotated[int, Meta(gt=0, le=2**31 - 1)]
    total: Count
    used: Count = 0
    reserved: Count = 0


class NUMANetworkMetadata(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """The physical networks (and whether tunnelled networks) a cell has NIC affinity to."""

    physnets: Annotated[list[Text], Meta(max_length=MAX_LIST)] = field(default_factory=list)
    tunneled: bool = False


class NUMACell(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One host NUMA cell (Nova's NUMACell): shared CPUs (``cpuset``), dedicated ones (``pcpuset``), memory in
    MiB, what instances use of them, the pinned dedicated CPUs, the thread siblings and the pages per size."""

    id: Annotated[int, Meta(ge=0, le=MAX_CPU_ID)]
    cpuset: CpuSet = field(default_factory=list)
    pcpuset: CpuSet = field(default_factory=list)
    memory: Count = 0
    cpu_usage: Count = 0
    memory_usage: Count = 0
    pinned_cpus: CpuSet = field(default_factory=list)
    siblings: Annotated[list[CpuSet], Meta(max_length=MAX_CPUS)] = field(default_factory=list)
    mempages: Annotated[list[NUMAPages], Meta(max_length=64)] = field(default_factory=list)
    network_metadata: NUMANetworkMetadata | None = None
    socket: Annotated[int, Meta(ge=0, le=MAX_CPU_ID)] | None = None

    def __post_init__(self) -> None:
        sizes = [p.size_kb for p in self.mempages]
        if len(set(sizes)) != len(sizes):
            raise ValueError("mempages must list each size_kb once")


def _unwrap_nova_object(value: Any) -> Any:
    """A versioned-object primitive as plain JSON: every ``{"nova_object.data": …}`` replaced by its data."""
    if isinstance(value, dict):
        if "nova_object.data" in value:
            return _unwrap_nova_object(value["nova_object.data"])
        return {k: _unwrap_nova_object(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap_nova_object(v) for v in value]
    return value


class NUMATopology(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A host's NUMA cells (Nova's NUMATopology). No cells: the host has no NUMA topology."""

    cells: Annotated[list[NUMACell], Meta(max_length=MAX_NUMA_CELLS)] = field(default_factory=list)
    # Nova's versioned-object envelope: when ``nova_object.data`` is given, ``cells`` come from it.
    nova_object_name: Text | None = field(default=None, name="nova_object.name")
    nova_object_namespace: Text | None = field(default=None, name="nova_object.namespace")
    nova_object_version: Text | None = field(default=None, name="nova_object.version")
    nova_object_changes: Annotated[list[Text], Meta(max_length=64)] | None = field(
        default=None, name="nova_object.changes")
    nova_object_data: FreeForm | None = field(default=None, name="nova_object.data")

    def __post_init__(self) -> None:
        if self.nova_object_data is not None:
            check_json("nova_object.data", self.nova_object_data)
            if self.nova_object_name not in (None, "NUMATopology"):
                raise ValueError(f"nova_object.name must be NUMATopology, not {self.nova_object_name!r}")
            if self.cells:
                raise ValueError("cells must not be given beside nova_object.data")
            try:
                plain = msgspec.convert(_unwrap_nova_object(self.nova_object_data), NUMATopology, strict=True)
            except msgspec.ValidationError as exc:
                # The inner path is said in words: a backticked one would be taken for the field's own path.
                text = _PATH_RE.sub(lambda m: f"at nova_object.data{m.group(1)[1:]}", str(exc))
                raise ValueError(f"nova_object.data must be a NUMATopology: {text}") from None
            self.cells = plain.cells
        self.nova_object_name = self.nova_object_namespace = self.nova_object_version = None
        self.nova_object_changes = self.nova_object_data = None
        ids = [cell.id for cell in self.cells]
        if len(set(ids)) != len(ids):
            raise ValueError("cells must have distinct ids")


# Nova's compute_nodes.pci_stats: a host's PCI device pools (nova.objects.pci_device_pool). A host sends them as
# the versioned-object primitive Nova stores (PciDevicePoolList) or as the older plain list of pools, each pool
# flat: vendor_id, product_id, numa_node, count, and every other key a tag (physical_network, trusted, dev_type,
# remote_managed, …). Gantt keeps the plain list (PciDevicePool.to_dict's shape), so a stored report decodes again.
MAX_PCI_POOLS = 1_024
MAX_PCI_TAGS = 64
PCI_POOL_FIELDS = ("vendor_id", "product_id", "numa_node", "count")
PciPool = Annotated[dict[Key, Text | int | None], Meta(max_length=MAX_PCI_TAGS + len(PCI_POOL_FIELDS))]


class PciDevicePoolData(Struct, forbid_unknown_fields=True):
    """``nova_object.data`` of one PciDevicePool (version 1.1: numa_node added)."""

    product_id: Text
    vendor_id: Text
    count: int
    numa_node: int | None = None
    tags: Annotated[dict[Key, Text | None], Meta(max_length=MAX_PCI_TAGS)] = field(default_factory=dict)


_NOVA_OBJECT = {"name": "nova_object.name", "namespace": "nova_object.namespace",
                "version": "nova_object.version", "data": "nova_object.data", "changes": "nova_object.changes"}


class PciDevicePoolObject(Struct, forbid_unknown_fields=True, rename=_NOVA_OBJECT):
    name: Literal["PciDevicePool"]
    namespace: Literal["nova"]
    version: Text
    data: PciDevicePoolData
    changes: Annotated[list[Text], Meta(max_length=8)] | None = None


class PciDevicePoolListData(Struct, forbid_unknown_fields=True):
    objects: Annotated[list[PciDevicePoolObject], Meta(max_length=MAX_PCI_POOLS)]


class PciDevicePoolList(Struct, forbid_unknown_fields=True, rename=_NOVA_OBJECT):
    """The versioned-object primitive of Nova's PciDevicePoolList, as compute_nodes.pci_stats holds it."""

    name: Literal["PciDevicePoolList"]
    namespace: Literal["nova"]
    version: Text
    data: PciDevicePoolListData
    changes: Annotated[list[Text], Meta(max_length=8)] | None = None


def pci_pools(value: list[dict[str, Any]] | PciDevicePoolList) -> list[dict[str, Any]]:
    """Either shape of ``pci_stats`` as the plain list of flat pools; ValueError names the offending part."""
    if isinstance(value, PciDevicePoolList):
        flat = []
        for i, obj in enumerate(value.data.objects):
            pool = obj.data
            clash = sorted(set(pool.tags) & set(PCI_POOL_FIELDS))
            if clash:  # Nova's to_dict would let the tag overwrite the pool's own field
                raise ValueError(f"pci_stats.nova_object.data.objects[{i}].tags must not name {clash[0]}")
            flat.append({"vendor_id": pool.vendor_id, "product_id": pool.product_id, "numa_node": pool.numa_node,
                         "count": pool.count, **pool.tags})
        value = flat
    for i, pool in enumerate(value):
        for name in ("vendor_id", "product_id", "count"):
            if name not in pool:
                raise ValueError(f"pci_stats[{i}].{name} must be given")
        for name in ("vendor_id", "product_id"):
            if not isinstance(pool[name], str):
                raise ValueError(f"pci_stats[{i}].{name} must be a string")
        count, numa = pool["count"], pool.get("numa_node")
        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= MAX_COUNT:
            raise ValueError(f"pci_stats[{i}].count must be an integer >= 0 and <= {MAX_COUNT}")
        if numa is not None and (not isinstance(numa, int) or isinstance(numa, bool) or not 0 <= numa <= 4096):
            raise ValueError(f"pci_stats[{i}].numa_node must be null or an integer in [0, 4096]")
        for key, tag in pool.items():
            if key not in PCI_POOL_FIELDS and tag is not None and not isinstance(tag, str):
                raise ValueError(f"pci_stats[{i}].{key} must be a string or null (a tag)")
        if len(pool) - sum(1 for name in PCI_POOL_FIELDS if name in pool) > MAX_PCI_TAGS:
            raise ValueError(f"pci_stats[{i}] must have at most {MAX_PCI_TAGS} tags")
    return [{**pool, "numa_node": pool.get("numa_node")} for pool in value]


def _stored_json(name: str, text: str, type_: Any) -> Any:
    """A field as compute_nodes stores it (JSON text), decoded to the form the report would carry it in."""
    try:
        return msgspec.convert(json.loads(text), type_, strict=True)
    except ValueError as exc:  # msgspec.ValidationError is a ValueError, and so is a JSONDecodeError
        inner = _PATH_RE.sub(lambda m: f"at {m.group(1)[1:] or 'the top'}", str(exc))
        raise ValueError(f"{name} must be the JSON text of a {name} (as compute_nodes stores it): {inner}") \
            from None


class HostStats(Struct, forbid_unknown_fields=True, omit_defaults=True):
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
        if isinstance(self.pci_stats, str):
            self.pci_stats = _stored_json(
                "pci_stats", self.pci_stats,
                Annotated[list[PciPool], Meta(max_length=MAX_PCI_POOLS)] | PciDevicePoolList | None)
        if self.pci_stats is not None:
            self.pci_stats = pci_pools(self.pci_stats)
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
                if not _RC_RE.match(trait):
                    raise ValueError(f"traits must be upper-case names, not {trait!r}")


class Provider(Struct, forbid_unknown_fields=True, omit_defaults=True):
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


class HostReport(Struct, forbid_unknown_fields=True, omit_defaults=True):
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


def same_stats(a: HostStats, b: HostStats) -> bool:
    """The same report: equal, and of the same JSON types throughout the free-form values, where Python's
    ``46 == 46.0`` and ``1 == True`` are different reports that ComputeCapabilitiesFilter tells apart as Nova does
    (by ``str()``: "46" and "46.0"). Decoding gives each typed field one type: ``==`` is enough there."""
    return a == b and _same_json(a.cpu_info, b.cpu_info) and _same_json(a.stats, b.stats)


def _same_json(a: Any, b: Any) -> bool:
    """Of equal values (given), whether they have the same types throughout."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return all(_same_json(value, b[key]) for key, value in a.items())
    if isinstance(a, list):
        return all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    return True


def repeats(old: HostReport, merged: HostReport) -> bool:
    """``merged`` is ``old`` reported again: the report changed nothing but the node's liveness. Its time differs
    (either way: servers' clocks differ); at the same time it is an operator's change, written as a record
    (``Replica.update_host`` keeps the report time, and may write what the node already holds)."""
    return (old.reported_at is not None and merged.reported_at is not None and merged.reported_at != old.reported_at
            and merged.provider == old.provider
            and (merged.stats is old.stats or same_stats(merged.stats, old.stats)))


def _merged_stats(old: HostStats, new: HostStats) -> HostStats:
    changes = {name: getattr(new, name) for name in HostStats.__struct_fields__ if getattr(new, name) is not None}
    if new.inventories is not None and old.inventories:
        changes["inventories"] = {**old.inventories, **new.inventories}
    return msgspec.structs.replace(old, **changes)


# ---------------------------------------------------------------------------------------------- aggregates


NUMERIC_METADATA = frozenset({"cpu_allocation_ratio", "ram_allocation_ratio", "disk_allocation_ratio",
                              "max_io_ops_per_host", "max_instances_per_host"})


def _finite_text(key: str, value: str) -> None:
    """A numeric metadata value that parses must be finite (Nova ignores, with a warning, one that does not
    parse at all; Gantt keeps that); 'inf' or 'nan' would reach limits and weights as inf or NaN."""
    try:
        number = float(value)
    except ValueError:
        return
    if not math.isfinite(number) or abs(number) > 1e15:
        raise ValueError(f"metadata.{key} must be a finite number, not {value!r}")


class Aggregate(Struct, forbid_unknown_fields=True, omit_defaults=True):
    id: AggregateId | Name
    name: Text | None = None
    uuid: Text | None = None
    hosts: Annotated[list[Name], Meta(max_length=MAX_HOSTS)] = field(default_factory=list)
    metadata: Annotated[dict[Key, Text], Meta(max_length=MAX_LIST)] = field(default_factory=dict)
    availability_zone: Text | None = None  # Nova's API shows it; it is the same as metadata['availability_zone']

    def __post_init__(self) -> None:
        if isinstance(self.id, str) and not self.id:
            raise ValueError("id must not be empty")
        if len(set(self.hosts)) != len(self.hosts):  # 3,000 x "c0" is one host: keep it once, in order
            self.hosts = list(dict.fromkeys(self.hosts))
        if self.availability_zone is not None and "availability_zone" not in self.metadata:
            self.metadata["availability_zone"] = self.availability_zone
        # Nova stores every metadata value as a string; accept what JSON gives and keep Nova's form.
        for key, value in list(self.metadata.items()):
            if not isinstance(value, str):
                raise ValueError(f"metadata must map keys to strings ({key!r} does not)")
            if key in NUMERIC_METADATA or key.endswith("_weight_multiplier"):
                _finite_text(key, value)

    @property
    def key(self) -> str:
        return str(self.id)


# ----------------------------------------------------------------------------------------------- requests


class Flavor(Struct, forbid_unknown_fields=True, omit_defaults=True):
    name: Text | None = None
    vcpus: int = 0
    memory_mb: int = 0
    root_gb: int = 0
    ephemeral_gb: int = 0
    swap: int = 0  # MB, as in Nova
    extra_specs: Annotated[dict[Key, Text], Meta(max_length=MAX_LIST)] = field(default_factory=dict)
    flavorid: Text | None = None
    id: int | Text | None = None

    def __post_init__(self) -> None:
        for name in ("vcpus", "memory_mb", "root_gb", "ephemeral_gb", "swap"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        for key, value in self.extra_specs.items():
            if not isinstance(value, str):
                raise ValueError(f"extra_specs must map keys to strings ({key!r} does not)")


class Image(Struct, forbid_unknown_fields=True, omit_defaults=True):
    id: Text | None = None
    name: Text | None = None
    disk_format: Text | None = None  # Glance's (qcow2, raw, …): [scheduler] query_placement_for_image_type_support
    properties: FreeForm = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_json("properties", self.properties)


Policy = Literal["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"]


class InstanceGroup(Struct, forbid_unknown_fields=True, omit_defaults=True):
    uuid: Text | None = None
    name: Text | None = None
    policy: Policy | None = None
    policies: Annotated[list[Policy], Meta(max_length=1)] | None = None  # older Nova: a one-element list
    members: Annotated[list[Text], Meta(max_length=MAX_LIST)] = field(default_factory=list)
    hosts: Annotated[list[Text], Meta(max_length=MAX_LIST)] = field(default_factory=list)
    rules: FreeForm = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_json("rules", self.rules)
        if self.policy is None and self.policies:
            self.policy = self.policies[0]
        if "max_server_per_host" in self.rules:
            value = self.rules["max_server_per_host"]
            try:
                number = int(value)
            except (TypeError, ValueError):
                raise ValueError("rules.max_server_per_host must be a positive integer") from None
            if number < 1 or isinstance(value, bool):
                raise ValueError("rules.max_server_per_host must be a positive integer")
            self.rules["max_server_per_host"] = number


class RequestedDestination(Struct, forbid_unknown_fields=True, omit_defaults=True):
    host: Text | None = None
    node: Text | None = None
    # Each a comma-separated "any of" group, as in Nova.
    aggregates: Annotated[list[AggregateRefs], Meta(max_length=MAX_LIST)] | None = None


class RequestSpec(Struct, forbid_unknown_fields=True, omit_defaults=True):
    flavor: Flavor | None = None
    image: Image | None = None
    project_id: Text | None = None
    user_id: Text | None = None
    availability_zone: Text | None = None
    num_instances: Annotated[int, Meta(ge=1, le=MAX_NUM_INSTANCES)] = 1
    instance_uuids: Annotated[list[Name], Meta(max_length=MAX_NUM_INSTANCES)] | None = None
    scheduler_hints: FreeForm = field(default_factory=dict)
    instance_group: InstanceGroup | None = None
    ignore_hosts: Annotated[list[Text], Meta(max_length=MAX_LIST)] | None = None
    force_hosts: Annotated[list[Text], Meta(max_length=MAX_LIST)] | None = None
    force_nodes: Annotated[list[Text], Meta(max_length=MAX_LIST)] | None = None
    requested_destination: RequestedDestination | None = None
    resources: Annotated[dict[Key, int], Meta(max_length=MAX_LIST)] | None = None
    required_traits: Annotated[list[Text], Meta(max_length=MAX_LIST)] | None = None
    forbidden_traits: Annotated[list[Text], Meta(max_length=MAX_LIST)] | None = None
    # Each inner list: "in any of these"; all inner lists must hold.
    member_of: Annotated[list[Annotated[list[AggregateRefs], Meta(max_length=MAX_LIST)]],
                         Meta(max_length=MAX_LIST)] | None = None
    request_id: Text | None = None
    # A move (resize, migration, evacuation) of the one instance named in instance_uuids (design §6): the
    # instance is placed anew and its current allocation is held under this UUID until confirm or revert.
    migration_uuid: Name | None = None

    def __post_init__(self) -> None:
        check_json("scheduler_hints", self.scheduler_hints)
        # The type's bounds hold for decoded input; a RequestSpec built in Python is checked here.
        if not 1 <= self.num_instances <= MAX_NUM_INSTANCES:
            raise ValueError(f"num_instances must be >= 1 and <= {MAX_NUM_INSTANCES}")
        if self.instance_uuids is not None:
            if len(self.instance_uuids) != self.num_instances:
                if self.num_instances == 1 and len(self.instance_uuids) > 1:
                    self.num_instances = len(self.instance_uuids)
                else:
                    raise ValueError("instance_uuids must have num_instances entries")
            if len(set(self.instance_uuids)) != len(self.instance_uuids):
                raise ValueError("instance_uuids must be unique")
        if self.resources:
            for rc, amount in self.resources.items():
                check_resource_class(rc, "resources")
                if amount < 0:
                    raise ValueError(f"resources.{rc} must be >= 0")
        if self.flavor is None and not self.resources:
            raise ValueError("flavor must be given when resources is not")
        if self.migration_uuid is not None:
            if not self.instance_uuids or len(self.instance_uuids) != 1:
                raise ValueError("a move (migration_uuid) names exactly one instance in instance_uuids")
            if self.migration_uuid == self.instance_uuids[0]:
                raise ValueError("migration_uuid must differ from the instance's UUID")


class InstanceInfo(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """What a host runs, for the affinity filters (Nova's update_instance_info / sync_instance_info)."""

    host: Name
    instances: Annotated[list[Name], Meta(max_length=MAX_INSTANCES)]


# ------------------------------------------------------------------------------------------------ answers


class NUMATopologyLimits(Struct):
    """Nova's NUMATopologyLimits: the allocation ratios NUMATopologyFilter fitted the guest's cells under, which
    the compute host's claim fits them under again (``limits["numa_topology"]`` of a Selection)."""

    cpu_allocation_ratio: float
    ram_allocation_ratio: float


class Selection(Struct, omit_defaults=True):
    host: str
    nodename: str
    uuid: str | None = None
    availability_zone: str | None = None
    allocation: dict[str, int] = field(default_factory=dict)
    # Nova's limits: capacity after overcommit per resource class, and ``numa_topology`` (NUMATopologyLimits) on a
    # node NUMATopologyFilter passed for a NUMA guest
    limits: dict[str, float | NUMATopologyLimits] = field(default_factory=dict)
    consumer_uuid: str | None = None  # set on the claimed (first) entry only
    weight: float | None = None


class Candidate(Struct):
    """A node that passes every filter for a request, with its total weight and each weigher's part (a dry run)."""

    host: str
    nodename: str
    weight: float
    uuid: str | None = None
    availability_zone: str | None = None
    weights: dict[str, float] = field(default_factory=dict)


class AllocationPart(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """What a consumer holds on one more node beyond its first (a sharing disk pool, a child provider)."""

    host: str
    nodename: str
    resources: dict[str, int]


class NUMACellClaim(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """What an instance takes of one host NUMA cell (as Nova's numa_usage_from_instance_numa counts it): memory,
    shared vCPUs, the host CPUs it pins (with their siblings under the isolate policy, and the one its emulator
    threads may take) and the page size its memory comes in (None: the cell's smallest, or no page list)."""

    cell: int
    memory_mb: int = 0
    cpus: int = 0
    pinned_cpus: list[int] = field(default_factory=list)
    pagesize_kb: int | None = None


class PciTaken(Struct, forbid_unknown_fields=True):
    """Devices a claim took from one of its node's PCI pools: the pool (every key but ``count``) and how many."""

    pool: dict[str, str | int | None]
    count: int


class Allocation(Struct, omit_defaults=True):
    """Resources a consumer (an instance UUID) holds, on one node or, as Placement allocates, several. Keyed by
    ``consumer_uuid``: one record per consumer, so that writing it is one compare-and-set over every node it
    touches.

    ``host``/``nodename``/``resources`` are its first part: where the consumer runs, the node whose report lists
    it (a ``/v1`` claim has no other). ``extra`` holds its parts on further nodes, one per node; those nodes list
    no instances, so their parts are never confirmed by a report and count in flight for as long as they are
    held (design §1: a node that reports no usage is accounted by its allocations alone).
    """

    consumer_uuid: str
    host: str
    nodename: str
    resources: dict[str, int]
    project_id: str | None = None
    user_id: str | None = None
    request_id: str | None = None
    created_at: float = 0.0
    confirmed: bool = False  # the host's report lists the consumer: its usage is in the reported figures
    # The server group (affinity or anti-affinity) the consumer was placed under: its claim compares and moves
    # the group's revision (group_node) as well as the node's, so two members' claims serialize.
    group: str | None = None
    # Moves (design §6). On an instance's allocation made by a move: the migration holding its source.
    migration_uuid: str | None = None
    # On a migration's allocation: the instance whose source it holds until confirm (dropped) or revert (given
    # back to the instance). The host lists the instance, not the migration: that is what confirms this one.
    instance_uuid: str | None = None
    extra: list[AllocationPart] = field(default_factory=list)
    # Placement's consumer generation (1.28): moves with every write of the consumer's allocations through the
    # Placement face; None on an allocation that face never wrote (shown there as 0).
    consumer_generation: int | None = None
    consumer_type: str | None = None  # Placement's (1.38); None shows as "INSTANCE"
    # The NUMA fit the claim took on its first node (NUMATopologyFilter's request): the cells, pinned CPUs and
    # pages it holds there, counted on top of the node's reported topology until the node's report lists it.
    numa: list[NUMACellClaim] | None = None
    # PCI devices taken on the first node (the flavor's pci_passthrough:alias), counted in flight like resources
    pci: list[PciTaken] = field(default_factory=list)

    def parts(self) -> list[tuple[NodeKey, dict[str, int]]]:
        """Every node the consumer holds resources on, with what it holds there; its first part first."""
        return [((self.host, self.nodename), self.resources),
                *(((p.host, p.nodename), p.resources) for p in self.extra)]

    def nodes(self) -> list[NodeKey]:
        if not self.extra:  # nearly every allocation (a replica asks this per claim and per release it applies)
            return [(self.host, self.nodename)]
        return [(self.host, self.nodename), *((p.host, p.nodename) for p in self.extra)]

    def on(self, key: NodeKey) -> dict[str, int]:
        """What the consumer holds on node ``key`` (empty when it holds nothing there)."""
        for node, resources in self.parts():
            if node == key:
                return resources
        return {}

    @property
    def listed_as(self) -> str:
        """The UUID a host's instance list names when this allocation's resources are in its reported usage."""
        return self.instance_uuid or self.consumer_uuid


NodeKey = tuple[str, str]  # (host, nodename): how claims, stores and replicas name a compute node

GROUP_HOST = "(server-group)"  # not a host name (RFC 1123 has no parentheses): the host part of a group's key


RecordKind = Literal["resource_class", "trait"]


class Record(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A named record of the catalog beside the nodes: a custom resource class or a custom trait (Placement's
    CRUD). Standard classes and traits come from os-resource-classes and os-traits and are never stored."""

    kind: RecordKind
    name: Text
    created_at: float = 0.0

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.name)


class WriteFailure(Struct):
    """The last write a store could not make: when (epoch seconds) and the error it gave (/health shows it)."""

    at: float
    message: str


class ZoneUsage(Struct):
    """One resource class in one availability zone, summed over the nodes that take requests (up and enabled):
    capacity is ``(total - reserved) * allocation_ratio`` (the node's own ratio), used is reported + in flight."""

    zone: str
    resource_class: str
    capacity: float
    used: float


class Utilization(Struct):
    """Nodes by state, each counted once (down, else disabled, else up), and capacity and usage per zone."""

    hosts_up: int
    hosts_down: int
    hosts_disabled: int
    zones: list[ZoneUsage]


AGGREGATE_HOST = "(aggregate)"  # likewise: the host part of an aggregate's key


def aggregate_node(aggregate_id: str) -> tuple[str, str]:
    """The pseudo-node whose revision moves with every write of an aggregate: a write computed from an aggregate's
    members (Placement's provider aggregates) expects it, so two such writes cannot lose each other's member."""
    return (AGGREGATE_HOST, aggregate_id)


def group_node(group: str) -> tuple[str, str]:
    """The pseudo-node whose usage revision is a server group's: stores and replicas count it like a node's."""
    return (GROUP_HOST, group)


class FilterStep(Struct):
    """One line of a NoValidHost explanation."""

    name: str
    before: int
    removed: int
    after: int


class NearestMiss(Struct, omit_defaults=True):
    resource_class: str
    requested: int
    best_free: float
    short_by: float
    host: str | None = None
    nodename: str | None = None
    constraint: str | None = None  # a unit constraint no node can meet (then no amount of free capacity helps)


def emptied_by(steps: Sequence[FilterStep]) -> str | None:
    """The step that removed the last candidates: the one to report as the reason. Not the one that removed the
    most: in a zoned cloud that is nearly always the zone filter, whatever really failed."""
    for step in steps:
        if step.before > 0 and step.after == 0:
            return step.name
    return None


class Explanation(Struct, omit_defaults=True):
    hosts: int
    steps: list[FilterStep]
    nearest_miss: list[NearestMiss] = field(default_factory=list)
    instance_index: int = 0
    reason: str = ""  # the filter that emptied the list, see emptied_by ("contention" when claims lost every race)
    down: int = 0  # nodes without a report for longer than service_down_time
    service_down_time: float = 0.0

    def summary(self) -> str:
        parts = [f"{s.name} removed {s.removed}" for s in self.steps if s.removed]
        passed = self.steps[-1].after if self.steps else self.hosts
        if passed:  # nodes passed the filters: they were taken meanwhile, not ruled out
            text = f"no node could take the request: {passed} of {self.hosts} passed the filters"
        else:
            text = f"no valid host among {self.hosts}"
        if self.reason:
            text += f" ({self.reason})"
        if parts:
            text += ": " + ", ".join(parts)
        if self.down:
            text += f"; {self.down} down: no report for > {self.service_down_time:g} s"
        for miss in self.nearest_miss:
            if miss.constraint:
                text += f"; {miss.resource_class} {miss.requested} can never fit: {miss.constraint}"
                continue
            text += (f"; nearest {miss.resource_class}: {miss.best_free:g} free of {miss.requested} "
                     f"asked (short by {miss.short_by:g})")
        return text


# ------------------------------------------------------------------------------------------- decoding

T = TypeVar("T")

_PATH_RE = re.compile(r"at `([^`]*)`")
_KEY_PATH_RE = re.compile(r"in `(\$[^`]*)`")
# Our own __post_init__ checks start their message with the field's name ("memory_mb must be >= 0"); msgspec
# reports them at the enclosing struct's path, so the name is appended to point at the field itself.
_OWN_FIELD_RE = re.compile(r"^([a-z_][a-z0-9_.\[\]]*) must ")


def decode(data: Any, type_: type[T], *, path: str = "$") -> T:
    """Turn builtins (a dict from JSON) or raw JSON bytes into a Struct, or raise InvalidRequest naming the field."""
    if isinstance(data, type_):
        return data
    try:
        if isinstance(data, bytes | bytearray | memoryview | str):
            return msgspec.json.decode(data, type=type_, strict=True)
        return msgspec.convert(data, type_, strict=True)
    except msgspec.ValidationError as exc:
        message = str(exc)
        match = _KEY_PATH_RE.search(message) or _PATH_RE.search(message)  # a bad dict key: "at `key` in `$.x`"
        where = match.group(1) if match else "$"
        if path != "$":
            where = path + where[1:]
        message = _KEY_PATH_RE.sub("", _PATH_RE.sub("", message)).rstrip(" -")
        own = _OWN_FIELD_RE.match(message)
        if own:
            where = f"{where}.{own.group(1)}"
        raise InvalidRequest(f"{message} (at {where})", field=where) from None
    except msgspec.DecodeError as exc:
        raise InvalidRequest(f"malformed JSON: {exc}", field=path) from None
    except RecursionError:
        raise InvalidRequest(f"JSON nested too deeply (free-form fields: at most {MAX_DEPTH} levels)",
                             field=path) from None
    except UnicodeDecodeError as exc:
        raise InvalidRequest(f"body is not valid UTF-8 (byte {exc.start})", field=path) from None


def to_builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)


PREPARED: set[type] = set()


def prepare_types(namespace: dict[str, Any]) -> None:
    """Build msgspec's type information for every Struct a module defines, at import.

    msgspec builds a Struct type's decoding information lazily, on its first decode, and publishes it before it
    is complete; two threads doing the first decode of one type at once crashed a worker (SIGSEGV in
    ``msgspec.convert``). Building it here, while the module is imported and before any service thread starts,
    leaves the threads nothing to build.
    """
    for value in list(namespace.values()):
        if isinstance(value, type) and issubclass(value, msgspec.Struct) \
                and value.__module__ == namespace["__name__"]:
            msgspec.json.Decoder(value)
            PREPARED.add(value)


# ------------------------------------------------------------------------------------------------ capacity

MAX_CAPACITY_REQUESTS = 20
MAX_CAPACITY_TOP = 1000


class Without(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Hosts taken away: by name, by aggregate (its id, uuid or name: a rack, a power domain) or by zone."""

    hosts: Annotated[list[Name], Meta(max_length=MAX_LIST)] = field(default_factory=list)
    aggregates: Annotated[list[Text], Meta(max_length=MAX_LIST)] = field(default_factory=list)
    zones: Annotated[list[Text], Meta(max_length=MAX_LIST)] = field(default_factory=list)


class CapacityQuestion(Struct, forbid_unknown_fields=True, omit_defaults=True):
    requests: Annotated[list[RequestSpec], Meta(min_length=1, max_length=MAX_CAPACITY_REQUESTS)]
    without: Without | None = None
    # how many of the nodes with the most room each answer lists
    limit: Annotated[int, Meta(ge=0, le=MAX_CAPACITY_TOP)] = 10


class NodeRoom(Struct):
    host: str
    nodename: str
    instances: int


class RequestCapacity(Struct, omit_defaults=True):
    flavor: str | None
    resources: dict[str, int]
    instances: int  # more instances of the request that fit, on the nodes left
    nodes: int  # nodes with room for at least one
    by_zone: dict[str, int]
    by_aggregate: dict[str, int]  # aggregates with room, by name
    top: list[NodeRoom]  # the nodes with the most room, most first
    instances_before: int | None = None  # with ``without``: what fitted with those hosts in
    nodes_before: int | None = None


class DisplacedShape(Struct):
    resources: dict[str, int]  # what one displaced consumer holds on the nodes taken away
    consumers: int
    fit_again: int  # of those, how many the nodes left have room for (this shape alone)


class Displaced(Struct):
    nodes: int
    consumers: int
    resources: dict[str, int]  # the sum of what they hold there
    shapes: list[DisplacedShape]


class CapacityAnswer(Struct, omit_defaults=True):
    requests: list[RequestCapacity]
    displaced: Displaced | None = None


prepare_types(globals())
