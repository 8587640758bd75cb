"""How the service is doing, as /health and the utilization view show it: the store's last failed write, and nodes
and capacity by zone."""

from __future__ import annotations

from msgspec import Struct

from gantt.model.prepare import prepare_types


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


prepare_types(globals())
