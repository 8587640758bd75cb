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

from gantt.compute.filters.base import Filter, register
from gantt.compute.journal import Rows
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable


class _AggregateRatioFilter(Filter):
    resource_class: ClassVar[str] = ""
    metadata_key: ClassVar[str] = ""

    def _overrides(self, table: HostTable) -> tuple[np.ndarray, np.ndarray, float] | None:
        """(capacity under the aggregate ratio, NaN where none overrides; the per-row ``delta``; smallest total).

        ``used + amount <= aggregate capacity`` is ``free >= amount + delta`` with ``delta = capacity under the
        node's own ratio - capacity under the aggregate's`` (``-inf`` where no aggregate overrides), ``free``
        being the column the resource check just read. ``delta`` depends only on aggregates and inventory shape
        (total, reserved, ratio), which move ``static_revision``, so it is built once per static revision and a
        decision costs one add and one comparison instead of gathering usage columns.
        """

        def build() -> tuple[np.ndarray, np.ndarray, float] | None:
            override = table.metadata_min(self.metadata_key)
            j = table.rc_index.get(self.resource_class)
            if override is None or j is None:
                return None
            n = table.n
            capacity = (table.rc["total"][:n, j] - table.rc["reserved"][:n, j]) * override
            capacity[~table.has_inventory[:n, j]] = np.nan
            overridden = ~np.isnan(capacity)
            delta = np.full(n, -np.inf)
            delta[overridden] = table.rc["capacity"][:n, j][overridden] - capacity[overridden]
            totals = table.rc["total"][:n, j][overridden]
            return capacity, delta, float(totals.min()) if totals.size else np.inf

        return table.static_cache(("aggregate_ratio_capacity", self.metadata_key, self.resource_class), build)

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        amount = ctx.resources.get(self.resource_class, 0)
        if amount <= 0:
            return None
        overrides = self._overrides(table)
        if overrides is None:
            return None  # every node keeps its own ratio: the resource check already decides
        capacity, delta, smallest_total = overrides
        j = table.rc_index[self.resource_class]

        def fits(rows: Rows) -> np.ndarray:
            ok = table.rc["free"][rows, j] >= (delta[rows] + (amount - 1e-9))
            if amount > smallest_total:  # an instance may not overcommit a node against itself
                ok &= np.isnan(capacity[rows]) | (amount <= table.rc["total"][rows, j])
            return ok

        # Patched on the rows whose usage changed since the last request of the same size, not recomputed.
        return table.derived.usage_mask((self.name, amount), fits)

    def headroom(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        """Each claim takes ``amount`` off ``free``; under an aggregate's ratio ``(free - delta) // amount`` more
        fit (no cap where no aggregate overrides)."""
        amount = ctx.resources.get(self.resource_class, 0)
        overrides = self._overrides(table) if amount > 0 else None
        if overrides is None:
            return None
        capacity, delta, smallest_total = overrides
        j = table.rc_index[self.resource_class]
        n = table.n
        with np.errstate(invalid="ignore"):
            count = np.floor((table.rc["free"][:n, j] - delta + 1e-9) / amount)
        count[np.isneginf(delta)] = np.inf
        if amount > smallest_total:
            count[~(np.isnan(capacity) | (amount <= table.rc["total"][:n, j]))] = 0.0
        headroom: np.ndarray = np.maximum(count, 0.0)
        return headroom

    def limits(self, table: HostTable, ctx: RequestContext) -> dict[str, np.ndarray] | None:
        if ctx.resources.get(self.resource_class, 0) <= 0:
            return None
        overrides = self._overrides(table)
        if overrides is None:
            return None
        return {self.resource_class: overrides[0]}


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
