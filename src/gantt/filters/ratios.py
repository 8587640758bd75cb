"""AggregateCoreFilter, AggregateRamFilter, AggregateDiskFilter: per-aggregate allocation ratios.

An aggregate's ``cpu_allocation_ratio`` / ``ram_allocation_ratio`` / ``disk_allocation_ratio`` replaces the node's
own ratio (the lowest wins when the node is in several aggregates that set it; a value that is not a number voids
the override and the node's own ratio applies, as Nova logs and does). A node passes when
``(total - reserved) * ratio - used >= requested`` and the request alone does not exceed ``total`` (an instance
may not overcommit against itself).

The always-on resource check still applies the node's own ratio, so an aggregate can tighten a node's capacity,
never widen it. ``limits`` hands the aggregate capacity to the claim, so a racing claim cannot pass it either.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from gantt.filters.base import Filter, register
from gantt.request import RequestContext
from gantt.state import HostTable


class _AggregateRatioFilter(Filter):
    resource_class: ClassVar[str] = ""
    metadata_key: ClassVar[str] = ""

    def _capacity(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        """Per row, capacity under the aggregate ratio; NaN where no aggregate overrides (None: none anywhere)."""
        # mask() and limits() run back to back on the same state: compute once per table revision
        memo_key = (self.name, "capacity")
        memo = ctx.scratch.get(memo_key)
        if memo is not None and memo[0] == (table.revision, table.n):
            return memo[1]  # type: ignore[no-any-return]
        capacity = self._build_capacity(table)
        ctx.scratch[memo_key] = ((table.revision, table.n), capacity)
        return capacity

    def _build_capacity(self, table: HostTable) -> np.ndarray | None:
        override = table.metadata_min_float(self.metadata_key)
        j = table.rc_index.get(self.resource_class)
        if override is None or j is None:
            return None
        n = table.n
        usable = table.rc["total"][:n, j] - table.rc["reserved"][:n, j]
        capacity = usable * override
        capacity[~table.has_inventory[:n, j]] = np.nan
        return capacity

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        amount = ctx.resources.get(self.resource_class, 0)
        if amount <= 0:
            return None
        capacity = self._capacity(table, ctx)
        if capacity is None:
            return None  # every node keeps its own ratio: the resource check already decides
        j = table.rc_index[self.resource_class]
        n = table.n
        used = table.rc["reported"][:n, j] + table.rc["inflight"][:n, j]
        with np.errstate(invalid="ignore"):
            fits = (used + amount <= capacity + 1e-9) & (amount <= table.rc["total"][:n, j])
        return fits | np.isnan(capacity)

    def limits(self, table: HostTable, ctx: RequestContext) -> dict[str, np.ndarray] | None:
        if ctx.resources.get(self.resource_class, 0) <= 0:
            return None
        capacity = self._capacity(table, ctx)
        if capacity is None:
            return None
        return {self.resource_class: capacity}


@register
class AggregateCoreFilter(_AggregateRatioFilter):
    name = "AggregateCoreFilter"
    resource_class = "VCPU"
    metadata_key = "cpu_allocation_ratio"


@register
class AggregateRamFilter(_AggregateRatioFilter):
    name = "AggregateRamFilter"
    resource_class = "MEMORY_MB"
    metadata_key = "ram_allocation_ratio"


@register
class AggregateDiskFilter(_AggregateRatioFilter):
    name = "AggregateDiskFilter"
    resource_class = "DISK_GB"
    metadata_key = "disk_allocation_ratio"
