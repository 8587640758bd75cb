"""What a host reports of its hardware beyond counts, in Nova's shapes: its NUMA cells (compute_nodes.numa_topology)
and its PCI device pools (compute_nodes.pci_stats)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct, field

from gantt.model.decoding import MSGSPEC_PATH
from gantt.model.limits import MAX_COUNT, MAX_LIST, FreeForm, Key, Text, check_json
from gantt.model.prepare import prepare_types

# What nova-compute keeps in compute_nodes.numa_topology (Nova's NUMATopology, NUMACell, NUMAPagesTopology), in
# Nova's field names. A host may send the plain form or the versioned-object primitive Nova stores
# ({"nova_object.name": "NUMATopology", "nova_object.data": {...}}, nested objects wrapped alike).

MAX_NUMA_CELLS = 128  # Nova's ImageMetaProps.NUMA_NODES_MAX
MAX_CPU_ID = 65_535
MAX_CPUS = 8_192  # CPUs in one cell
CpuId = Annotated[int, Meta(ge=0, le=MAX_CPU_ID)]
CpuSet = Annotated[list[CpuId], Meta(max_length=MAX_CPUS)]
Count = Annotated[int, Meta(ge=0, le=2**31 - 1)]


# gc=False: parts of a host's record, never in a cycle (model.hosts; tests/test_untracked.py).
class NUMAPages(Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """One page size in one cell (Nova's NUMAPagesTopology); free pages are ``total - used - reserved``."""

    size_kb: Annotated[int, Meta(gt=0, le=2**31 - 1)]
    total: Count
    used: Count = 0
    reserved: Count = 0


class NUMANetworkMetadata(Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """The physical networks (and whether tunnelled networks) a cell has NIC affinity to."""

    physnets: Annotated[list[Text], Meta(max_length=MAX_LIST)] = field(default_factory=list)
    tunneled: bool = False


class NUMACell(Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
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


class NUMATopology(Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
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
                text = MSGSPEC_PATH.sub(lambda m: f"at nova_object.data{m.group(1)[1:]}", str(exc))
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


class PciDevicePoolData(Struct, forbid_unknown_fields=True, gc=False):
    """``nova_object.data`` of one PciDevicePool (version 1.1: numa_node added)."""

    product_id: Text
    vendor_id: Text
    count: int
    numa_node: int | None = None
    tags: Annotated[dict[Key, Text | None], Meta(max_length=MAX_PCI_TAGS)] = field(default_factory=dict)


_NOVA_OBJECT = {"name": "nova_object.name", "namespace": "nova_object.namespace",
                "version": "nova_object.version", "data": "nova_object.data", "changes": "nova_object.changes"}


class PciDevicePoolObject(Struct, forbid_unknown_fields=True, rename=_NOVA_OBJECT, gc=False):
    name: Literal["PciDevicePool"]
    namespace: Literal["nova"]
    version: Text
    data: PciDevicePoolData
    changes: Annotated[list[Text], Meta(max_length=8)] | None = None


class PciDevicePoolListData(Struct, forbid_unknown_fields=True, gc=False):
    objects: Annotated[list[PciDevicePoolObject], Meta(max_length=MAX_PCI_POOLS)]


class PciDevicePoolList(Struct, forbid_unknown_fields=True, rename=_NOVA_OBJECT, gc=False):
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
            data = obj.data
            clash = sorted(set(data.tags) & set(PCI_POOL_FIELDS))
            if clash:  # Nova's to_dict would let the tag overwrite the pool's own field
                raise ValueError(f"pci_stats.nova_object.data.objects[{i}].tags must not name {clash[0]}")
            flat.append({"vendor_id": data.vendor_id, "product_id": data.product_id, "numa_node": data.numa_node,
                         "count": data.count, **data.tags})
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


prepare_types(globals())
