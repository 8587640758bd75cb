"""The one data model of Gantt, shared by engine, service, client and stores: this face re-exports it.

Field names are Nova's (design §3), so that a Nova operator or resource tracker maps one to one. Every Struct
validates on decode; an error names the offending field as a JSON path (``$.flavor.vcpus``). The client imports
the model without importing the server. Its modules, by job: errors, limits (the bounds every field uses),
decoding, prepare (Struct types built at import), classes (resource classes and traits), hosts (host reports),
hardware (a report's NUMA cells and PCI pools), aggregates, request_spec, allocations (what a claim holds; node
keys), answers (selections, candidates, explanations), health, capacity; and namespaces and activity.
"""

from gantt.model.aggregates import NUMERIC_METADATA, Aggregate
from gantt.model.allocations import (
    AGGREGATE_HOST,
    GROUP_HOST,
    Allocation,
    AllocationPart,
    NodeKey,
    NUMACellClaim,
    PciTaken,
    aggregate_node,
    group_node,
)
from gantt.model.answers import (
    Candidate,
    Explanation,
    FilterStep,
    NearestMiss,
    NUMATopologyLimits,
    Selection,
    emptied_by,
)
from gantt.model.capacity import (
    MAX_CAPACITY_REQUESTS,
    MAX_CAPACITY_TOP,
    CapacityAnswer,
    CapacityQuestion,
    Displaced,
    DisplacedShape,
    NodeRoom,
    RequestCapacity,
    Without,
)
from gantt.model.classes import STANDARD_CLASSES, Record, RecordKind, check_resource_class
from gantt.model.decoding import decode, to_builtins
from gantt.model.errors import (
    Conflict,
    ConsumerConflict,
    GanttError,
    GenerationConflict,
    InsufficientCapacity,
    InvalidRequest,
    NotFound,
    NoValidHost,
    ReplicaBehind,
    StoreUnavailable,
)
from gantt.model.hardware import (
    MAX_CPU_ID,
    MAX_CPUS,
    MAX_NUMA_CELLS,
    MAX_PCI_POOLS,
    MAX_PCI_TAGS,
    PCI_POOL_FIELDS,
    Count,
    CpuId,
    CpuSet,
    NUMACell,
    NUMANetworkMetadata,
    NUMAPages,
    NUMATopology,
    PciDevicePoolData,
    PciDevicePoolList,
    PciDevicePoolListData,
    PciDevicePoolObject,
    PciPool,
    pci_pools,
)
from gantt.model.health import Utilization, WriteFailure, ZoneUsage
from gantt.model.hosts import (
    HostReport,
    HostStats,
    InstanceInfo,
    Inventory,
    Metric,
    Provider,
    ServiceInfo,
    check_reserved,
    merge_nodes,
    merge_reports,
    repeated_by,
    repeats,
    same_stats,
)
from gantt.model.limits import (
    MAX_AGGREGATE_REFS,
    MAX_COUNT,
    MAX_DEPTH,
    MAX_HOSTS,
    MAX_INSTANCES,
    MAX_INT64,
    MAX_JSON_BYTES,
    MAX_LIST,
    MAX_NUM_INSTANCES,
    MAX_RATIO,
    MAX_TEXT,
    NAME_PATTERN,
    AggregateId,
    AggregateRefs,
    FreeForm,
    JsonText,
    Key,
    Name,
    Text,
    check_depth,
    check_json,
    check_json_text,
    valid_name,
)
from gantt.model.prepare import PREPARED, prepare_types
from gantt.model.request_spec import (
    ARCHITECTURES,
    HV_TYPES,
    VM_MODES,
    Flavor,
    Image,
    InstanceGroup,
    NetworkMetadata,
    PciRequestSpec,
    Policy,
    RequestedDestination,
    RequestGroupSpec,
    RequestSpec,
)

__all__ = [
    "AGGREGATE_HOST", "ARCHITECTURES", "GROUP_HOST", "HV_TYPES", "MAX_AGGREGATE_REFS", "MAX_CAPACITY_REQUESTS",
    "MAX_CAPACITY_TOP", "MAX_COUNT", "MAX_CPUS", "MAX_CPU_ID", "MAX_DEPTH", "MAX_HOSTS", "MAX_INSTANCES",
    "MAX_INT64", "MAX_JSON_BYTES", "MAX_LIST", "MAX_NUMA_CELLS", "MAX_NUM_INSTANCES", "MAX_PCI_POOLS",
    "MAX_PCI_TAGS", "MAX_RATIO", "MAX_TEXT", "NAME_PATTERN", "NUMERIC_METADATA", "PCI_POOL_FIELDS", "PREPARED",
    "STANDARD_CLASSES", "VM_MODES", "Aggregate", "AggregateId", "AggregateRefs", "Allocation", "AllocationPart",
    "Candidate", "CapacityAnswer", "CapacityQuestion", "Conflict", "ConsumerConflict", "Count", "CpuId", "CpuSet",
    "Displaced", "DisplacedShape", "Explanation", "FilterStep", "Flavor", "FreeForm", "GanttError",
    "GenerationConflict", "HostReport", "HostStats", "Image", "InstanceGroup", "InstanceInfo",
    "InsufficientCapacity", "InvalidRequest", "Inventory", "JsonText", "Key", "Metric", "NUMACell", "NUMACellClaim",
    "NUMANetworkMetadata", "NUMAPages", "NUMATopology", "NUMATopologyLimits", "Name", "NearestMiss",
    "NetworkMetadata", "NoValidHost",
    "NodeKey", "NodeRoom", "NotFound", "PciDevicePoolData", "PciDevicePoolList", "PciDevicePoolListData",
    "PciDevicePoolObject", "PciPool", "PciRequestSpec", "PciTaken", "Policy", "Provider", "Record", "RecordKind",
    "ReplicaBehind",
    "RequestCapacity", "RequestGroupSpec",
    "RequestSpec", "RequestedDestination", "Selection", "ServiceInfo", "StoreUnavailable",
    "Text", "Utilization", "Without", "WriteFailure", "ZoneUsage", "aggregate_node", "check_depth", "check_json",
    "check_json_text", "check_reserved", "check_resource_class", "decode", "emptied_by", "group_node",
    "merge_nodes", "merge_reports", "pci_pools", "prepare_types", "repeated_by", "repeats", "same_stats",
    "to_builtins", "valid_name",
]
