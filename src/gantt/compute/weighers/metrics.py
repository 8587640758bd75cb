"""MetricsWeigher: weigh nodes by a weighted sum of the metrics they report ([metrics] section, as in Nova).

- ``weight_setting``: ``["name=ratio", …]``; a node's raw value is ``Σ value(name) × ratio``. Malformed
  entries are logged and ignored, as Nova's parse_options does.
- ``weight_multiplier``: the multiplier; aggregates override it with the metadata key
  ``metrics_weight_multiplier``.
- ``required`` (default True): a candidate lacking one of the metrics is an error — Nova raises
  ComputeHostMetricNotFound and the request fails (pair this weigher with MetricsFilter). The engine rolls
  back the request's claims when it propagates.
- ``required = False``: such a node gets the raw value ``weight_of_unavailable`` (default -10000), unless that
  metric's ratio times the node's multiplier is 0, in which case the missing metric is simply left out.
"""

from __future__ import annotations

import numpy as np

from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable
from gantt.compute.weighers.base import Weigher, register
from gantt.config import Config, parse_weight_setting
from gantt.model import GanttError


class ComputeHostMetricNotFound(GanttError):
    """Nova's exception of the same name: a candidate node does not report a metric the weigher requires."""

    status = 409
    title = "Metric not found"

    def __init__(self, host: str, node: str, metric: str) -> None:
        super().__init__(f"metric {metric} not found on host {host} node {node}",
                         detail={"host": host, "nodename": node, "metric": metric})
        self.host = host
        self.node = node
        self.metric = metric


@register
class MetricsWeigher(Weigher):
    name = "MetricsWeigher"
    multiplier_option = "metrics_weight_multiplier"  # the aggregate metadata key (Nova's name)

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.setting = parse_weight_setting(config.metrics.weight_setting)

    def multiplier(self) -> float:
        return float(self.config.metrics.weight_multiplier)

    def raw(self, table: HostTable, ctx: RequestContext, mask: np.ndarray | None = None) -> np.ndarray | None:
        if not self.setting:
            return None
        n = table.n
        metrics = self.config.metrics
        value = np.zeros(n)
        # rows lacking a metric whose ratio is non-zero (a zero ratio never needs the value)
        missing_weighted = np.zeros(n, dtype=np.bool_)
        for name, ratio in self.setting:
            column = table.metric(name)
            absent = np.ones(n, dtype=np.bool_) if column is None else np.isnan(column[:n])
            if metrics.required:
                hit = absent & mask if mask is not None else absent
                if hit.any():
                    row = int(np.flatnonzero(hit)[0])
                    raise ComputeHostMetricNotFound(table.host_names[row], table.node_names[row], name)
            if column is not None:
                value += np.where(absent, 0.0, column[:n]) * ratio
            if ratio != 0.0:
                missing_weighted |= absent
        if missing_weighted.any():
            multiplier = self.multipliers(table)
            # Nova: "do nothing if ratio or weight_multiplier is 0" — per node, with its own multiplier.
            if isinstance(multiplier, np.ndarray):
                missing_weighted &= multiplier != 0.0
            elif multiplier == 0.0:
                missing_weighted[:] = False
            value[missing_weighted] = metrics.weight_of_unavailable
        return value
