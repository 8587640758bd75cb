"""AllHostsFilter: Nova's no-op filter; every host passes."""

from __future__ import annotations

import numpy as np

from gantt.compute.filters.base import Filter, register
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable


@register
class AllHostsFilter(Filter):
    name = "AllHostsFilter"
    once_per_request = True

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        return None
