"""NumInstancesFilter and AggregateNumInstancesFilter: a node passes while it runs fewer instances than allowed.

The count is the node's reported ``num_instances`` plus Gantt's placements it has not reported yet (Nova's
HostState adds one per placement until the next update, so a multi-instance request sees its own earlier picks).
"""

from __future__ import annotations

import numpy as np

from gantt.filters.agg_meta import limit_per_node
from gantt.filters.base import Filter, register
from gantt.request import RequestContext
from gantt.state import HostTable


def _instances(table: HostTable) -> np.ndarray:
    return table.col("instances_load")


@register
class NumInstancesFilter(Filter):
    """``[filter_scheduler] max_instances_per_host`` for every node."""

    name = "NumInstancesFilter"

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        return _instances(table) < self.config.filter_scheduler.max_instances_per_host


@register
class AggregateNumInstancesFilter(Filter):
    """Per-aggregate ``max_instances_per_host`` (the lowest when a node is in several), else the global option."""

    name = "AggregateNumInstancesFilter"

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        default = float(self.config.filter_scheduler.max_instances_per_host)
        limit = limit_per_node(table, "max_instances_per_host", default)
        return _instances(table) < limit
