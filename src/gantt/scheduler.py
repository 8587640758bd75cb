"""``gantt.Scheduler``: the library face. The service and the client mirror it call for call."""

from __future__ import annotations

from typing import Any

import numpy as np

from gantt.config import Config, load_config
from gantt.engine import CommitHook, Engine, EngineStats
from gantt.model import (
    Aggregate,
    Allocation,
    Candidate,
    Explanation,
    HostReport,
    HostStats,
    InvalidRequest,
    NotFound,
    RequestSpec,
    Selection,
    decode,
)
from gantt.state import HostTable


class Scheduler:
    """An in-memory scheduler: a HostTable replica plus the engine that decides from it.

    Every method accepts the plain dicts of the data contract (design §3) or the Structs.
    """

    def __init__(self, config: Config | dict[str, Any] | str | None = None, *, table: HostTable | None = None,
                 commit: CommitHook | None = None, clock: Any = None, stats: EngineStats | None = None) -> None:
        """``stats``: the counters of a scheduler this one replaces (a replica's reload), so /metrics never
        goes backwards."""
        if isinstance(config, str):
            config = load_config(config)
        elif isinstance(config, dict):
            config = Config.from_dict(config)
        self.config = config or Config()
        if table is None:
            table = HostTable.from_config(self.config, **({"clock": clock} if clock is not None else {}))
        self.table = table
        self.engine = Engine(table, self.config, commit=commit, stats=stats)

    # host state
    def update_resource_stats(self, name: str | list[str] | tuple[str, str],
                              stats: HostStats | dict[str, Any]) -> None:
        self.table.update(HostReport.of(name, stats))

    def report(self, report: HostReport | dict[str, Any]) -> None:
        self.table.update(decode(report, HostReport))

    def delete_host(self, host: str, node: str | None = None) -> None:
        self.table.remove(host, node)

    def update_aggregate(self, aggregate: Aggregate | dict[str, Any]) -> None:
        self.table.update_aggregate(decode(aggregate, Aggregate))

    def delete_aggregate(self, aggregate_id: int | str) -> None:
        self.table.delete_aggregate(aggregate_id)

    def update_instance_info(self, host: str, instances: list[str]) -> None:
        self.table.set_instances(host, instances, replace=False)

    def sync_instance_info(self, host: str, instances: list[str]) -> None:
        self.table.set_instances(host, instances, replace=True)

    def delete_instance_info(self, host: str, instance_uuid: str) -> None:
        self.table.delete_instance(host, instance_uuid)

    # decisions
    def select_destinations(self, request_spec: RequestSpec | dict[str, Any]) -> list[list[Selection]]:
        return self.engine.select_destinations(request_spec)

    def candidates(self, request_spec: RequestSpec | dict[str, Any], limit: int | None = None) -> list[Candidate]:
        return self.engine.candidates(request_spec, limit)

    def explain(self, request_spec: RequestSpec | dict[str, Any]) -> Explanation:
        return self.engine.explain(request_spec)

    def release(self, consumer_uuid: str) -> Allocation:
        return self.engine.release(consumer_uuid)

    def confirm_move(self, migration_uuid: str) -> Allocation:
        """A move is done: drop the source held under ``migration_uuid`` (returned)."""
        return self.table.confirm_move(migration_uuid)

    def revert_move(self, migration_uuid: str) -> Allocation:
        """Undo a move: the instance gets its source back, the destination is freed; returns the allocation."""
        return self.table.revert_move(migration_uuid)

    def allocation(self, consumer_uuid: str) -> Allocation:
        alloc = self.table.allocations.get(consumer_uuid)
        if alloc is None:
            raise NotFound(f"no allocation for consumer {consumer_uuid!r}", field="consumer_uuid")
        return alloc

    def host(self, host: str, node: str | None = None) -> dict[str, Any]:
        """One node, described. A host with several nodes (bare metal) needs ``node``: a 400 otherwise."""
        table = self.table
        with table.lock:
            if node is None and len(table.rows_of_host.get(host, ())) > 1:
                nodes = sorted(table.node_names[r] for r in table.rows_of_host[host])
                raise InvalidRequest(f"host {host!r} has {len(nodes)} nodes ({', '.join(nodes[:5])}…): name one "
                                     "with ?node=", field="node")
            return table.describe(table.row(host, node))

    def hosts(self) -> list[dict[str, Any]]:
        table = self.table
        with table.lock:
            return [table.describe(row) for row in range(table.n)]

    def aggregates(self) -> list[Aggregate]:
        with self.table.lock:
            return sorted(self.table.aggregates.values(), key=lambda a: a.key)

    def aggregate(self, aggregate_id: int | str) -> Aggregate:
        aggregate = self.table.aggregates.get(str(aggregate_id))
        if aggregate is None:
            raise NotFound(f"no such aggregate {aggregate_id!r}", field="id")
        return aggregate

    def allocations(self) -> list[Allocation]:
        with self.table.lock:
            return sorted(self.table.allocations.values(), key=lambda a: a.consumer_uuid)

    def hosts_up(self) -> int:
        table = self.table
        return int(np.count_nonzero(table.alive())) if table.n else 0

    def counters(self) -> dict[str, Any]:
        """What /metrics exports: the engine's decision counters and the table's sizes and expiries."""
        stats, table = self.engine.stats, self.table
        return {"decisions": stats.decisions, "placements": stats.placements,
                "claim_conflicts": stats.claim_conflicts, "commit_conflicts": stats.commit_conflicts,
                "no_valid_host": dict(stats.no_valid_host), "hosts": table.n, "hosts_up": self.hosts_up(),
                "allocations": len(table.allocations), "expired_claims": table.expired_claims}
