"""AggregateTypeAffinityFilter: aggregates with ``instance_type`` metadata take only the flavors it names.

Each value is a flavor name or a comma-separated list of names; a node passes when one of its aggregates' values
names the request's flavor, or when none of its aggregates sets ``instance_type``.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from gantt.compute.filters.base import Filter, register
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable


def _flavor_name(ctx: RequestContext) -> str | None:
    return ctx.spec.flavor.name if ctx.spec.flavor is not None else None


@register
class AggregateTypeAffinityFilter(Filter):
    name = "AggregateTypeAffinityFilter"
    static = True  # aggregates and the flavor name only
    once_per_request = True

    def cache_key(self, ctx: RequestContext) -> Hashable:
        return _flavor_name(ctx)

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        values_by_code = table.metadata_values("instance_type")
        if not any(values_by_code):
            return None
        flavor = _flavor_name(ctx)

        def passes(values: set[str]) -> bool:
            if not values:
                return True
            return any(flavor in [name.strip() for name in value.split(",")] for value in values)

        lut = np.fromiter((passes(v) for v in values_by_code), dtype=np.bool_, count=len(values_by_code))
        mask: np.ndarray = lut[table.col("aggset_code")]
        return mask
