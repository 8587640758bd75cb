"""IoOpsFilter, NumInstancesFilter and their per-aggregate variants: a node passes while it is less busy than allowed.

A node's load is what it last reported (``num_io_ops``, ``num_instances``) plus the builds Gantt placed there that
the node has not reported yet, as Nova's HostState counts each placement as one more instance and one more I/O
operation until the next update (so a multi-instance request sees its own earlier picks).

As in Nova, each aggregate variant is its global filter with another limit: the lowest value of the same key across
the node's aggregates, else the global option.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from gantt.compute.filters.agg_meta import limit_per_node
from gantt.compute.filters.base import Filter, register
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable


class _LoadFilter(Filter):
    load_column: ClassVar[str] = ""
    # The [filter_scheduler] option and, for the aggregate variants, the aggregate metadata key.
    option: ClassVar[str] = ""
    per_aggregate: ClassVar[bool] = False

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        return table.col(self.load_column) < self._limit(table)

    def headroom(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        """Each claim adds one to the load (an instance, an I/O operation): ``limit - load`` more pass, rounded
        up."""
        return np.maximum(np.ceil(self._limit(table) - table.col(self.load_column)), 0.0)

    def _limit(self, table: HostTable) -> float | np.ndarray:
        """The option's limit, or per node the lowest its aggregates set (the aggregate variants)."""
        limit = float(getattr(self.config.filter_scheduler, self.option))
        return limit_per_node(table, self.option, limit) if self.per_aggregate else limit


@register
class IoOpsFilter(_LoadFilter):
    """``[filter_scheduler] max_io_ops_per_host`` for every node."""

    name = "IoOpsFilter"
    load_column = "io_ops_load"
    option = "max_io_ops_per_host"


@register
class AggregateIoOpsFilter(IoOpsFilter):
    name = "AggregateIoOpsFilter"
    per_aggregate = True


@register
class NumInstancesFilter(_LoadFilter):
    """``[filter_scheduler] max_instances_per_host`` for every node."""

    name = "NumInstancesFilter"
    load_column = "instances_load"
    option = "max_instances_per_host"


@register
class AggregateNumInstancesFilter(NumInstancesFilter):
    name = "AggregateNumInstancesFilter"
    per_aggregate = True
