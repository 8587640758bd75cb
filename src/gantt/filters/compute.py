"""ComputeFilter: the node's compute service is enabled, not forced down, and has reported recently."""

from __future__ import annotations

import numpy as np

from gantt.filters.base import Filter, register
from gantt.request import RequestContext
from gantt.state import HostTable


@register
class ComputeFilter(Filter):
    name = "ComputeFilter"

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        up = table.alive(ctx.now)
        up &= ~table.col("disabled")
        up &= ~table.col("forced_down")
        return up
