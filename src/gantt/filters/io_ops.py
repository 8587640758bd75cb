"""IoOpsFilter and AggregateIoOpsFilter: a node passes while it runs fewer I/O-heavy operations than allowed.

A node's count is what it last reported (``num_io_ops``) plus the builds Gantt placed there that the node has not
reported yet, as Nova's HostState counts each placement as one more I/O operation until the next update.
"""

from __future__ import annotations

import numpy as np

from gantt.filters.agg_meta import limit_per_node
from gantt.filters.base import Filter, register
from gantt.request import RequestContext
from gantt.state import HostTable


def _io_ops(table: HostTable) -> np.ndarray:
    return table.col("io_ops_load")


@register
class IoOpsFilter(Filter):
    """``[filter_scheduler] max_io_ops_per_host`` for every node."""

    name = "IoOpsFilter"

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        return _io_ops(table) < self.config.filter_scheduler.max_io_ops_per_host


@register
class AggregateIoOpsFilter(Filter):
    """Per-aggregate ``max_io_ops_per_host`` (the lowest when a node is in several), else the global option."""

    name = "AggregateIoOpsFilter"

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        limit = limit_per_node(table, "max_io_ops_per_host", float(self.config.filter_scheduler.max_io_ops_per_host))
        return _io_ops(table) < limit
