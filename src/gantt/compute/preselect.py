"""Pre-selection: the rows a request names or excludes before any filter runs (ignore_hosts, force_hosts and
force_nodes, requested_destination, a resize to the same host), as Nova's host manager applies them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from gantt.compute.request import RequestContext
from gantt.compute.state.table import HostTable
from gantt.config import Config

# A ranking's steps: (the filter's or pre-selection's name, its mask over the rows; None: it removes nothing)
Steps = list[tuple[str, np.ndarray | None]]


def preselect(table: HostTable, config: Config, ctx: RequestContext) -> tuple[Steps, bool]:
    """The pre-selection's steps, and whether the request forces hosts or nodes (Nova then skips the filters
    unless the request says ``_nova_check_type``)."""
    spec = ctx.spec
    steps: Steps = []
    roots = table.roots()
    if roots is not None:  # a child provider (NUMA cell, PF) is part of its root's node, never one itself
        steps.append(("root_providers", roots))
    hosts = table.host_names
    n = table.n
    if spec.ignore_hosts:  # host names case-insensitively, node names exactly (Nova's host manager)
        ignored = {h.lower() for h in spec.ignore_hosts}
        steps.append(("ignore_hosts", _name_mask(hosts, n, lambda h: h.lower() not in ignored)))
    source = ctx.move_source
    if source is not None and not config.default.allow_resize_to_same_host:
        steps.append(("allow_resize_to_same_host", _name_mask(hosts, n, lambda h: h != source.host)))
    forced = False
    if spec.force_hosts or spec.force_nodes:
        fh = {h.lower() for h in spec.force_hosts or ()}
        fn = set(spec.force_nodes or ())
        mask = np.ones(n, dtype=np.bool_)
        if fh:
            mask &= _name_mask(hosts, n, lambda h: h.lower() in fh)
        if fn:
            mask &= _name_mask(table.node_names, n, lambda nd: nd in fn)
        steps.append(("force_hosts", mask))
        forced = True
    dest = spec.requested_destination
    if dest is not None:
        mask = np.ones(n, dtype=np.bool_)
        if dest.host:
            mask &= _name_mask(hosts, n, lambda h: h == dest.host)
        if dest.node:
            mask &= _name_mask(table.node_names, n, lambda nd: nd == dest.node)
        for group in dest.aggregates or ():
            mask &= _in_aggregates(table, group)
        steps.append(("requested_destination", mask))
    return steps, forced


def _in_aggregates(table: HostTable, group: str) -> np.ndarray:
    """The rows in any of the aggregates ``group`` names (a comma-separated list of names or UUIDs)."""
    wanted = {g.strip() for g in group.split(",") if g.strip()}
    keys = {a.key for a in table.aggregates() if a.key in wanted or a.uuid in wanted}

    def named(aggs: frozenset[str]) -> bool:
        return bool(aggs & keys)

    return table.factor("aggregates").map(named)


def _name_mask(names: Sequence[str], n: int, keep: Callable[[str], bool]) -> np.ndarray:
    return np.fromiter((keep(name) for name in names[:n]), dtype=np.bool_, count=n)
