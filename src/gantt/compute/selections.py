"""Selections: what a decision answers per node, named from a table row or from an allocation held."""

from __future__ import annotations

from gantt.compute.groups import Assignment
from gantt.compute.state.table import HostTable
from gantt.config import Config
from gantt.model import Allocation, NUMATopologyLimits, Selection


class Selections:
    """Turns rows and allocations into ``Selection``s, with the node's zone (or the configured default)."""

    def __init__(self, table: HostTable, config: Config) -> None:
        self.table = table
        self.config = config

    def zone(self, row: int) -> str:
        return self.table.zone(row) or self.config.default.default_availability_zone

    def at(self, row: int, resources: dict[str, int], limits: dict[str, float | NUMATopologyLimits],
           consumer: str | None, weight: float, groups: Assignment | Allocation | None = None) -> Selection:
        """The Selection of node ``row`` (read now: the caller checks the table's layout did not move); ``groups``:
        where the request's groups land (an alternate's assignment, or the allocation a claim holds)."""
        table = self.table
        selection = Selection(host=table.host_names[row], nodename=table.node_names[row],
                              uuid=table.node_uuids[row], availability_zone=self.zone(row),
                              allocation=dict(resources), limits=dict(limits), consumer_uuid=consumer, weight=weight)
        if isinstance(groups, Assignment):
            selection.providers, selection.mappings = groups.providers, groups.mappings
        elif groups is not None and groups.mappings:
            selection.providers, selection.mappings = self._held(groups), dict(groups.mappings)
        return selection

    def _held(self, allocation: Allocation) -> dict[str, dict[str, int]]:
        """What ``allocation`` holds on the providers its groups took, by provider uuid."""
        named = {uuid for uuids in allocation.mappings.values() for uuid in uuids}
        out: dict[str, dict[str, int]] = {}
        for part in allocation.extra:
            row = self.table.row_of((part.host, part.nodename))
            uuid = self.table.node_uuids[row] if row is not None else None
            if uuid in named:
                out[str(uuid)] = dict(part.resources)
        return out

    def of(self, allocation: Allocation) -> Selection:
        """The Selection answering with an allocation held (by key: its node may have been removed since)."""
        row = self.table.row_of((allocation.host, allocation.nodename))
        if row is None:
            return Selection(host=allocation.host, nodename=allocation.nodename,
                             allocation=dict(allocation.resources), consumer_uuid=allocation.consumer_uuid)
        return self.at(row, allocation.resources, {}, allocation.consumer_uuid, 0.0, allocation)
