"""MetricsFilter: keep only nodes reporting every metric ``[metrics] weight_setting`` names.

So the MetricsWeigher never meets a node without the data it weighs. Entries of weight_setting that are not
``name=ratio`` are ignored (and logged), as Nova does.
"""

from __future__ import annotations

import numpy as np

from gantt.compute.filters.base import Filter, register
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable
from gantt.config import Config, parse_weight_setting


@register
class MetricsFilter(Filter):
    name = "MetricsFilter"

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.names = list(dict.fromkeys(name for name, _ in parse_weight_setting(config.metrics.weight_setting)))

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        if not self.names:
            return None
        n = table.n
        out = np.ones(n, dtype=np.bool_)
        for name in self.names:
            column = table.metric(name)
            if column is None:
                return np.zeros(n, dtype=np.bool_)
            out &= ~np.isnan(column[:n])
        return out
