"""ComputeFilter: the node's compute service is enabled, not forced down, and has reported recently."""

from __future__ import annotations

import numpy as np

from gantt.compute.filters.base import Filter, register
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable
from gantt.config import Config


@register
class ComputeFilter(Filter):
    name = "ComputeFilter"

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        # (alive, enabled, their AND): the table hands out the same liveness mask until a node changes sides
        # (journal.Liveness), so most decisions reuse the AND instead of a new array each. Held by identity,
        # which the entry's own references keep from being reused by other arrays.
        self._last: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        # Liveness moves with the clock and is one comparison; the service flags change rarely (the table moves
        # static_revision when they do), so their part is built once per static revision.
        enabled = table.static_cache(
            ("service_enabled",), lambda: ~(table.col("disabled") | table.col("forced_down")))
        alive = table.alive(ctx.now)
        last = self._last
        if last is not None and last[0] is alive and last[1] is enabled:
            return last[2]
        both: np.ndarray = alive & enabled
        self._last = (alive, enabled, both)
        return both
