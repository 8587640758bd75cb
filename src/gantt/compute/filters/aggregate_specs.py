"""AggregateInstanceExtraSpecsFilter: flavor extra specs matched against the metadata of the node's aggregates.

Keys scoped ``aggregate_instance_extra_specs:`` and unscoped keys count (other scopes belong to other filters).
A node passes when, for every such key, its aggregates define the key and one of the values (comma-separated
values are separate values) satisfies the requirement, with the operators of ``extra_specs_ops``. A node in no
aggregate therefore fails any flavor carrying such a key.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from gantt.compute.filters import extra_specs_ops
from gantt.compute.filters.agg_meta import Metadata, rows_where
from gantt.compute.filters.base import Filter, register
from gantt.compute.filters.extra_specs_ops import Requirement
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable
from gantt.model import InvalidRequest

_SCOPE = "aggregate_instance_extra_specs"


def relevant_specs(extra_specs: dict[str, str]) -> list[tuple[str, Requirement]]:
    out: list[tuple[str, Requirement]] = []
    for key, text in extra_specs.items():
        scope, sep, rest = key.partition(":")
        if sep:
            if scope != _SCOPE:
                continue
            name = rest
        else:
            name = key
        try:
            out.append((name, extra_specs_ops.parse(text)))
        except ValueError as exc:
            raise InvalidRequest(f"extra spec {key}: {exc}", field=f"$.flavor.extra_specs.{key}") from None
    return out


@register
class AggregateInstanceExtraSpecsFilter(Filter):
    name = "AggregateInstanceExtraSpecsFilter"
    static = True  # aggregates and the flavor's extra specs only
    once_per_request = True

    def cache_key(self, ctx: RequestContext) -> Hashable:
        return tuple(sorted(ctx.extra_specs.items()))

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        specs = relevant_specs(ctx.extra_specs)
        if not specs:
            return None

        def passes(meta: Metadata) -> bool:
            for name, requirement in specs:
                values = meta.get(name)
                if not values:
                    return False
                if not any(requirement.matches(value) for value in values):
                    return False
            return True

        return rows_where(table, passes)
