"""The volume namespace's data model: Cinder's pool reports, request_spec and scheduler options as Structs.

Field names and defaults are Cinder 29's (``cinder/scheduler/host_manager.py`` PoolState, the volume API's
request_spec, ``cinder/opts.py``), so a Cinder backend's ``update_service_capabilities`` payload and a Cinder
request map one to one.

A backend reports once for all of its pools (``BackendReport``: backend-level keys plus a ``pools`` list);
Gantt keeps one ``PoolReport`` per pool, with the backend-level keys filled in as Cinder's
``BackendState._append_backend_info`` fills them. A pool's report travels through the store in the compute
envelope (``HostReport(host=<cinder host>, node=<pool>, stats=HostStats(stats={"capabilities": …,
"service": …}))``), see ``PoolReport.to_record``.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct, field

from gantt.config.volume import DEFAULT_AZ
from gantt.model import (
    MAX_TEXT,
    FreeForm,
    HostReport,
    HostStats,
    InvalidRequest,
    Key,
    Name,
    Text,
    check_json,
    prepare_types,
)

# Cinder's placeholders for a capacity a backend cannot state (sched_utils.INFINITE_UNKNOWN_VALUES).
Special = Literal["infinite", "unknown"]
Capacity = Annotated[float, Meta(ge=0, le=2**53)] | Special
# Cinder turns a protocol into the list of its spellings (host_manager.get_storage_protocol_variants).
PROTOCOL_VARIANTS: tuple[tuple[str, ...], ...] = (
    ("iSCSI", "iscsi"), ("FC", "fibre_channel", "fc"), ("NFS", "nfs"),
    ("NVMe-oF", "NVMeOF", "nvmeof"),
)


def protocol_variants(protocol: Any) -> Any:
    """What Cinder's scheduler sees as a pool's storage_protocol: the variant list when the protocol has some."""
    for variants in PROTOCOL_VARIANTS:
        if protocol in variants:
            return list(variants)
    return protocol


class PoolService(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """The cinder-volume service a pool belongs to (Cinder reads these from its services table, not the report)."""

    availability_zone: Text = DEFAULT_AZ
    disabled: bool = False
    cluster_name: Text | None = None


class PoolReport(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One pool as Cinder's scheduler sees it (a PoolState).

    ``capabilities`` is the pool's whole capability dict (Cinder's ``PoolState.capabilities``: the pool's keys,
    the backend-level keys filled in, vendor keys kept): CapabilitiesFilter, DriverFilter and GoodnessWeigher read
    it. The typed fields are what Cinder derives from it, with its defaults.
    """

    host: Name  # Cinder's service host, "node1@lvm"
    pool_name: Name
    capabilities: FreeForm = field(default_factory=dict)
    service: PoolService = field(default_factory=PoolService)
    reported_at: float | None = None

    def __post_init__(self) -> None:
        check_json("capabilities", self.capabilities)
        caps = self.capabilities
        for key in ("total_capacity_gb", "free_capacity_gb"):
            value = caps.get(key, 0)
            if value is None and key == "free_capacity_gb":
                continue  # Cinder fails such a pool in CapacityFilter ("volume node info collection broken")
            _capacity(key, value)
        for key in ("allocated_capacity_gb", "provisioned_capacity_gb"):
            if key in caps:
                _number(key, caps[key])
        reserved = caps.get("reserved_percentage", 0)
        _number("reserved_percentage", reserved)
        if not 0 <= float(reserved) <= 100:
            raise ValueError("reserved_percentage must be between 0 and 100")
        ratio = caps.get("max_over_subscription_ratio")
        if ratio is not None and ratio != "auto":
            try:
                if not (math.isfinite(float(ratio)) and float(ratio) >= 0):
                    raise ValueError
            except (TypeError, ValueError):
                raise ValueError("max_over_subscription_ratio must be a number >= 0 or 'auto'") from None
        for key in ("filter_function", "goodness_function"):
            value = caps.get(key)
            if value is not None and not isinstance(value, str | int | float):
                raise ValueError(f"{key} must be an expression (a string)")

    @property
    def backend_id(self) -> str:
        """Cinder's pool id, ``host@backend#pool`` (the cluster's name instead of the host when clustered)."""
        return f"{self.service.cluster_name or self.host}#{self.pool_name}"

    @property
    def pool_host(self) -> str:
        return f"{self.host}#{self.pool_name}"

    def to_record(self) -> HostReport:
        """The store envelope: host = Cinder host, node = pool, stats.stats = capabilities and service."""
        stats = {"capabilities": self.capabilities, "service": msgspec.to_builtins(self.service)}
        return HostReport(host=self.host, node=self.pool_name, stats=HostStats(stats=stats),
                          reported_at=self.reported_at)

    @classmethod
    def from_record(cls, record: HostReport) -> PoolReport:
        stats = record.stats.stats or {}
        try:
            return msgspec.convert({"host": record.host, "pool_name": record.nodename,
                                    "capabilities": stats.get("capabilities", {}),
                                    "service": stats.get("service", {}), "reported_at": record.reported_at},
                                   cls, strict=True)
        except (msgspec.ValidationError, ValueError) as exc:
            raise InvalidRequest(f"not a volume pool record: {exc}", field="$.stats") from None


def _capacity(key: str, value: Any) -> None:
    if value in ("infinite", "unknown"):
        return
    _number(key, value)


def _number(key: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not 0 <= value <= 2**53:
        raise ValueError(f"{key} must be a finite number >= 0" +
                         (" or 'infinite' / 'unknown'" if key in ("total_capacity_gb", "free_capacity_gb") else ""))


class BackendReport(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Cinder's ``update_service_capabilities`` for one backend: backend-level capabilities and its pools.

    ``capabilities`` holds the backend-level keys (volume_backend_name, vendor_name, driver_version,
    storage_protocol, filter_function, goodness_function, vendor keys…) and ``pools`` the pools' dicts (each
    with ``pool_name``). Without ``pools`` the backend is its own single pool, named after volume_backend_name
    (Cinder's legacy reports).
    """

    host: Name
    capabilities: FreeForm = field(default_factory=dict)
    pools: Annotated[list[FreeForm], Meta(max_length=4096)] | None = None
    service: PoolService = field(default_factory=PoolService)

    def __post_init__(self) -> None:
        # free-form JSON is bounded in depth and bytes like a compute host's stats: it is kept and copied per pool
        check_json("capabilities", self.capabilities)
        for i, pool in enumerate(self.pools or ()):
            check_json(f"pools[{i}]", pool)

    def pool_reports(self, reported_at: float | None = None) -> list[PoolReport]:
        """One PoolReport per pool, backend-level keys filled in as Cinder's host manager fills them."""
        backend = dict(self.capabilities)
        backend.pop("pools", None)
        protocol = protocol_variants(backend.get("storage_protocol"))
        if "storage_protocol" in backend:
            backend["storage_protocol"] = protocol
        out: list[PoolReport] = []
        if self.pools is None:
            name = backend.get("volume_backend_name") or self.host.partition("#")[2] or "_pool0"
            caps = dict(backend)
            out.append(_pool(self, str(name), caps, reported_at))
            return out
        seen: set[str] = set()
        for index, pool in enumerate(self.pools):
            name = pool.get("pool_name")
            if not isinstance(name, str) or not name or len(name) > MAX_TEXT:
                raise InvalidRequest("every pool needs a pool_name", field=f"$.pools[{index}].pool_name")
            if name in seen:
                raise InvalidRequest(f"pool {name!r} listed twice", field=f"$.pools[{index}].pool_name")
            seen.add(name)
            caps = dict(pool)
            for key in ("volume_backend_name", "vendor_name", "driver_version"):
                if not caps.get(key):
                    caps[key] = backend.get(key)
            caps["storage_protocol"] = protocol_variants(caps["storage_protocol"]) if caps.get(
                "storage_protocol") else protocol
            for key in ("filter_function", "goodness_function"):
                if key not in caps and key in backend:
                    caps[key] = backend[key]
            out.append(_pool(self, name, caps, reported_at, index))
        return out


def _pool(report: BackendReport, name: str, caps: dict[str, Any], reported_at: float | None,
          index: int | None = None) -> PoolReport:
    try:
        return PoolReport(host=report.host, pool_name=name, capabilities=caps, service=report.service,
                          reported_at=reported_at)
    except ValueError as exc:
        where = "$.capabilities" if index is None else f"$.pools[{index}]"
        raise InvalidRequest(f"pool {name!r}: {exc}", field=where) from None


class VolumeType(Struct, forbid_unknown_fields=True, omit_defaults=True):
    name: Text | None = None
    id: Text | None = None
    extra_specs: Annotated[dict[Key, Text], Meta(max_length=1024)] = field(default_factory=dict)
    qos_specs: FreeForm | None = None

    def __post_init__(self) -> None:
        if self.qos_specs is not None:
            check_json("qos_specs", self.qos_specs)


class VolumeProperties(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Cinder's request_spec.volume_properties (also its resource_properties)."""

    size: Annotated[int, Meta(ge=0, le=2**31 - 1)] = 0
    availability_zone: Text | None = None
    project_id: Text | None = None
    user_id: Text | None = None
    volume_type_id: Text | None = None
    multiattach: bool = False
    status: Text | None = None
    attach_status: Text | None = None
    display_name: Text | None = None
    metadata: Annotated[dict[Key, Text], Meta(max_length=1024)] = field(default_factory=dict)
    # Cinder's filter properties take qos_specs from here (populate_filter_properties): the expression
    # language's ``qos`` dictionary
    qos_specs: FreeForm | None = None

    def __post_init__(self) -> None:
        if self.qos_specs is not None:
            check_json("qos_specs", self.qos_specs)


class SchedulerHints(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """The hints Cinder's filters read. same_host / different_host: a volume id or a list of them."""

    same_host: Text | Annotated[list[Text], Meta(max_length=1024)] | None = None
    different_host: Text | Annotated[list[Text], Meta(max_length=1024)] | None = None
    local_to_instance: Text | None = None
    query: Annotated[str, Meta(max_length=65536)] | None = None


class VolumeRequest(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Cinder's request_spec for one volume (create, retype, migrate, extend: see ``operation``).

    ``instance_hosts``: where instances run (Nova's ``OS-EXT-SRV-ATTR:host``), for InstanceLocalityFilter: Cinder
    asks Nova's API for it; Gantt, which talks to no other service, takes it in the request instead and refuses a
    ``local_to_instance`` hint whose instance it does not name.
    """

    volume_properties: VolumeProperties = field(default_factory=VolumeProperties)
    volume_id: Text | None = None
    volume_type: VolumeType | None = None
    availability_zones: Annotated[list[Text], Meta(max_length=256)] | None = None
    snapshot_id: Text | None = None
    source_volid: Text | None = None
    # Accepted and not read, as in Cinder: its scheduler's filters and weighers never look at the image or the
    # backup a volume is made from (the volume service copies the image, the backup service restores, both after
    # the placement), so refusing them would break Cinder's request_spec for nothing and using them would not be
    # Cinder's decision.
    image_id: Text | None = None
    group_id: Text | None = None
    consistencygroup_id: Text | None = None
    backup_id: Text | None = None  # see image_id
    # Cinder's: the backend ("host@backend") or pool ("host@backend#pool") the volume must land on; its API sets
    # it from the group, consistency group, snapshot or source volume. Gantt derives it from source_volid when
    # it knows where that volume lives; for a snapshot or a group the caller must give it.
    resource_backend: Text | None = None
    operation: Literal["create_volume", "extend_volume", "retype_volume", "migrate_volume",
                       "manage_existing"] | None = None
    new_size: Annotated[int, Meta(ge=0, le=2**31 - 1)] | None = None
    scheduler_hints: SchedulerHints = field(default_factory=SchedulerHints)
    instance_hosts: Annotated[dict[Key, Text], Meta(max_length=1024)] | None = None

    @property
    def size(self) -> int:
        return self.volume_properties.size

    @property
    def extra_specs(self) -> dict[str, str]:
        return self.volume_type.extra_specs if self.volume_type else {}

    @property
    def thin(self) -> bool:
        """Cinder's rule: a volume is thin unless its type asks ``provisioning:type = thick``."""
        return self.extra_specs.get("provisioning:type") != "thick"


class Pick(Struct):
    """One ranked pool: Cinder's weighed backend."""

    host: str
    pool: str
    weight: float

    @property
    def backend_id(self) -> str:
        return f"{self.host}#{self.pool}"


prepare_types(globals())  # build msgspec type info before any thread decodes (see model.prepare_types)
