"""AggregateMultiTenancyIsolation: hosts in tenant-isolated aggregates take only those tenants' instances.

A node whose aggregates set any ``filter_tenant_id*`` key (each value a comma-separated list of projects) passes
only for a request whose project is among all the values found; other nodes take any project. It does not keep an
isolated tenant out of the other hosts.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from gantt.compute.filters.agg_meta import Metadata, rows_where
from gantt.compute.filters.base import Filter, register
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable

_PREFIX = "filter_tenant_id"


@register
class AggregateMultiTenancyIsolation(Filter):
    name = "AggregateMultiTenancyIsolation"
    static = True  # aggregates and the request's project only
    once_per_request = True

    def cache_key(self, ctx: RequestContext) -> Hashable:
        return ctx.spec.project_id

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        named = table.static_cache(("tenant_isolation_projects",), lambda: _named_projects(table))
        if named is None:
            return None
        # Every project no aggregate names gets the same mask: build it once, not once per project (a cloud has
        # thousands of projects and only a few isolated ones).
        project = ctx.spec.project_id if ctx.spec.project_id in named else None

        def allowed(meta: Metadata) -> bool:
            tenants: set[str] = set()
            for key, values in meta.items():
                if key.startswith(_PREFIX):
                    tenants |= values
            return not tenants or project in tenants

        return table.static_cache(("tenant_isolation_mask", project), lambda: rows_where(table, allowed))


def _named_projects(table: HostTable) -> frozenset[str] | None:
    """Every project some aggregate isolates for; None when no aggregate isolates at all."""
    found = False
    projects: set[str] = set()
    for agg in table.aggregates():
        for key, value in agg.metadata.items():
            if key.startswith(_PREFIX):
                found = True
                projects.update(part.strip() for part in value.split(","))
    return frozenset(projects) if found else None
