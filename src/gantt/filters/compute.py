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
        # Liveness moves with the clock and is one comparison; the service flags change rarely (the table moves
        # static_revision when they do), so their part is built once per static revision.
        enabled = table.static_cache(
            ("service_enabled",), lambda: ~(table.col("disabled") | table.col("forced_down")))
        return table.alive(ctx.now) & enabled
