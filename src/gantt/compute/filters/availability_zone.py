"""Availability zones: AvailabilityZoneFilter (opt-in, as in Nova) and the always-on request filter.

A node's zones are the ``availability_zone`` values of its aggregates (a value may list several, comma-separated);
a node in no zoned aggregate is in ``[DEFAULT] default_availability_zone``. A request's ``availability_zone`` may
itself list several zones, comma-separated: the node must be in one of them.

Modern Nova applies the request's zone through Placement (``[scheduler] query_placement_for_availability_zone``,
on by default) rather than through the filter; ``AvailabilityZoneRequestFilter`` is that step. It stands aside
when AvailabilityZoneFilter is enabled, so one rule is not applied, and counted in explanations, twice.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from gantt.compute.filters.base import Filter, register
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable
from gantt.config import Config


def requested_zones(ctx: RequestContext) -> frozenset[str]:
    az = ctx.spec.availability_zone
    if not az:
        return frozenset()
    return frozenset(zone.strip() for zone in az.split(",") if zone.strip())


def zone_mask(table: HostTable, zones: frozenset[str], default_zone: str) -> np.ndarray:
    by_code = table.zones()
    lut = np.fromiter(((bool(node_zones & zones) if node_zones else default_zone in zones) for node_zones in by_code),
                      dtype=np.bool_, count=len(by_code))
    mask: np.ndarray = lut[table.col("aggset_code")]
    return mask


@register
class AvailabilityZoneFilter(Filter):
    name = "AvailabilityZoneFilter"
    static = True  # aggregates and the requested zone only
    once_per_request = True

    def cache_key(self, ctx: RequestContext) -> Hashable:
        return requested_zones(ctx)

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        zones = requested_zones(ctx)
        if not zones:
            return None
        return zone_mask(table, zones, self.config.default.default_availability_zone)


@register
class AvailabilityZoneRequestFilter(AvailabilityZoneFilter):
    """Nova's map_az_to_placement_aggregate pre-filter: the same rule, always on while the option says so."""

    name = "AvailabilityZoneRequestFilter"
    always_on = True

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        enabled = {name.rsplit(".", 1)[-1] for name in config.filter_scheduler.enabled_filters}
        self.active = (config.scheduler.query_placement_for_availability_zone
                       and AvailabilityZoneFilter.name not in enabled)

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        return super().mask(table, ctx) if self.active else None
