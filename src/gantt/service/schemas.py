"""The wire: request/response types of the HTTP API and its errors (the OpenAPI document describing them is
``gantt.service.openapi``).

Domain types (HostStats, Aggregate, RequestSpec, Selection, Allocation, Explanation) are gantt.model's own; this
module only adds the envelopes around them. The client imports it too, so it must not import Starlette.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct, field

from gantt.base.version import __version__
from gantt.model import (
    MAX_INSTANCES,
    MAX_LIST,
    Aggregate,
    Allocation,
    AllocationPart,
    Candidate,
    Conflict,
    Explanation,
    GanttError,
    HostStats,
    InvalidRequest,
    Name,
    NotFound,
    NoValidHost,
    NUMACellClaim,
    PciTaken,
    Selection,
    StoreUnavailable,
    WriteFailure,
    prepare_types,
)
from gantt.model.activity import Overview

# ---------------------------------------------------------------------------------------------- errors


class Unauthorized(GanttError):
    status = 401
    title = "Unauthorized"


class MethodNotAllowed(GanttError):
    status = 405
    title = "Method not allowed"


class PayloadTooLarge(GanttError):
    status = 413
    title = "Payload too large"


class UnsupportedMediaType(GanttError):
    status = 415
    title = "Unsupported media type"


ERRORS: dict[int, type[GanttError]] = {
    400: InvalidRequest, 401: Unauthorized, 404: NotFound, 405: MethodNotAllowed, 409: Conflict,
    413: PayloadTooLarge, 415: UnsupportedMediaType, 503: StoreUnavailable,
}

PROBLEM_JSON = "application/problem+json"
# A DELETE answers 204 No Content; the store revision that holds it comes in this header.
REVISION_HEADER = "Gantt-Revision"

# -------------------------------------------------------------------------------------------- requests


class ReportIn(Struct, forbid_unknown_fields=True):
    """``update_resource_stats(name, stats)``: ``name`` is ``"host"`` or ``["host", "node"]``."""

    # Plain strings here: msgspec 0.22 crashes the garbage collector once a decoder has been built for a union
    # of a constrained str and a tuple of them; HostReport checks the names when it is built from these.
    name: str | tuple[str, str]
    stats: HostStats


class ReportBatchIn(Struct, forbid_unknown_fields=True):
    reports: Annotated[list[ReportIn], Meta(max_length=MAX_LIST)]


class InstancesIn(Struct, forbid_unknown_fields=True):
    instances: Annotated[list[Name], Meta(max_length=MAX_INSTANCES)]


# ------------------------------------------------------------------------------------------- responses


class Written(Struct):
    """Every write answers with the store revision that holds it (a client can wait for a replica to reach it).
    A host report that repeats the node's record answers with the revision that holds those figures; its time is
    written within ``replica.LIVENESS_DELAY``."""

    revision: int
    count: int = 1


class InventoryView(Struct):
    total: int
    reserved: int
    min_unit: int
    max_unit: int
    step_size: int
    allocation_ratio: float
    reported_used: int
    in_flight: int
    capacity: float
    free: float


class HostInfo(Struct):
    """One compute node as the replica sees it."""

    host: str
    nodename: str
    up: bool
    disabled: bool
    inventories: dict[str, InventoryView]
    uuid: str | None = None
    hypervisor_hostname: str | None = None
    host_ip: str | None = None
    hypervisor_type: str | None = None
    hypervisor_version: int | None = None
    forced_down: bool = False
    disabled_reason: str | None = None
    updated_at: datetime | None = None
    # Seconds since the node last reported (None: never); past ``service_down_time`` the node is down.
    last_report_seconds_ago: float | None = None
    num_io_ops: int = 0
    num_instances: int = 0
    failed_builds: int = 0
    free_ram_mb: float = 0.0
    free_disk_mb: float = 0.0
    traits: list[str] = field(default_factory=list)
    aggregates: list[str] = field(default_factory=list)
    availability_zone: str | None = None
    instances: list[str] = field(default_factory=list)
    allocations: list[str] = field(default_factory=list)
    name: str | None = None  # its resource provider's name (Placement's), None when it is no provider


class Link(Struct):
    rel: str
    href: str


class HostList(Struct):
    """A page of nodes in (host, nodename) order; ``hosts_links`` has a ``next`` link when more follow."""

    hosts: list[HostInfo]
    hosts_links: list[Link] = field(default_factory=list)


class AggregateList(Struct):
    aggregates: list[Aggregate]


def timestamp(epoch: float | None) -> datetime | None:
    """An instant the model keeps as epoch seconds, as the API shows it (ISO 8601, UTC); None: never."""
    if epoch is None or not epoch > 0 or epoch == float("inf"):
        return None
    return datetime.fromtimestamp(epoch, UTC)


def epoch(instant: datetime | None) -> float:
    return instant.timestamp() if instant is not None else 0.0


class AllocationView(Struct, omit_defaults=True):
    """``gantt.model.Allocation`` on the wire: the same fields, ``created_at`` in ISO 8601."""

    consumer_uuid: str
    host: str
    nodename: str
    resources: dict[str, int]
    project_id: str | None = None
    user_id: str | None = None
    request_id: str | None = None
    created_at: datetime | None = None
    confirmed: bool = False
    group: str | None = None
    migration_uuid: str | None = None
    instance_uuid: str | None = None
    extra: list[AllocationPart] = field(default_factory=list)  # its parts on further nodes (Placement's)
    consumer_generation: int | None = None
    consumer_type: str | None = None
    numa: list[NUMACellClaim] | None = None
    pci: list[PciTaken] = field(default_factory=list)  # PCI devices taken on the first node
    mappings: dict[str, list[str]] = field(default_factory=dict)  # the request groups' providers, by group id

    @classmethod
    def of(cls, allocation: Allocation) -> AllocationView:
        fields = msgspec.structs.asdict(allocation)
        fields["created_at"] = timestamp(allocation.created_at)
        return cls(**fields)

    def to_model(self) -> Allocation:
        fields = msgspec.structs.asdict(self)
        fields["created_at"] = epoch(self.created_at)
        return Allocation(**fields)


class AllocationList(Struct):
    """A page of allocations in consumer order; ``allocations_links`` has a ``next`` link when more follow."""

    allocations: list[AllocationView]
    allocations_links: list[Link] = field(default_factory=list)


class Selections(Struct):
    """One list per instance: the claimed node first, then unclaimed alternates."""

    selections: list[list[Selection]]


class Candidates(Struct):
    """A dry run: every node that passes the filters, best first, and the filter-by-filter explanation."""

    candidates: list[Candidate]
    explanation: Explanation


class ApiVersion(Struct):
    id: str
    status: str
    links: list[Link]


class Versions(Struct):
    """``GET /``: the API versions this service speaks (OpenStack's version discovery), and Gantt's release."""

    versions: list[ApiVersion]
    release: str


def versions() -> Versions:
    return Versions(versions=[ApiVersion(id="v1", status="CURRENT", links=[Link(rel="self", href="/v1/")])],
                    release=__version__)


class Health(Struct):
    """``status`` is "ok", or "degraded" (503) when the change feed has not been read for a while or the store's
    last write failed (``last_write_error``: a full disk, an I/O error, no quorum) and none has succeeded since."""

    status: str
    version: str
    pid: int
    store: str
    revision: int
    hosts: int
    hosts_up: int
    seconds_since_sync: float
    last_write_error: LastWriteError | None = None
    # The named namespaces served beside the default one (gantt.model.namespaces), each with the figures above
    namespaces: dict[str, dict[str, Any]] | None = None


class LastWriteError(Struct):
    """The last write the store could not make: when, and the error it gave."""

    at: datetime
    message: str

    @classmethod
    def of(cls, failure: WriteFailure) -> LastWriteError:
        return cls(at=timestamp(failure.at) or datetime.fromtimestamp(0, UTC), message=failure.message)


class Problem(Struct, omit_defaults=True):
    """RFC 9457. ``field`` is the JSON path of the offending input; ``explanation`` comes with a 409 NoValidHost."""

    type: str
    title: str
    status: int
    detail: str
    field: str | None = None
    explanation: Explanation | None = None


# The most ?limit= may say: 1-9 ASCII digits.
MAX_LIMIT = 999_999_999


__all__ = [
    "ERRORS",
    "PROBLEM_JSON",
    "REVISION_HEADER",
    "AggregateList",
    "AllocationList",
    "AllocationView",
    "Candidates",
    "Health",
    "HostInfo",
    "HostList",
    "InstancesIn",
    "LastWriteError",
    "Link",
    "MethodNotAllowed",
    "NoValidHost",
    "Overview",
    "PayloadTooLarge",
    "Problem",
    "ReportBatchIn",
    "ReportIn",
    "Selections",
    "Unauthorized",
    "UnsupportedMediaType",
    "Versions",
    "Written",
    "versions",
]


prepare_types(globals())  # build msgspec type info before any thread decodes (see model.prepare_types)
