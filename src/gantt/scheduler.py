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
    Utilization,
    ZoneUsage,
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
        alloc = self.table.allocation(consumer_uuid)
        if alloc is None:
            raise NotFound(f"no allocation for consumer {consumer_uuid!r}", field="consumer_uuid")
        return alloc

    def host(self, host: str, node: str | None = None) -> dict[str, Any]:
        """One node, described. A host with several nodes (bare metal) needs ``node``: a 400 otherwise."""
        table = self.table
        with table.lock:
            rows = table.rows_of_host(host)
            if node is None and len(rows) > 1:
                nodes = sorted(table.node_names[r] for r in rows)
                raise InvalidRequest(f"host {host!r} has {len(nodes)} nodes ({', '.join(nodes[:5])}…): name one "
                                     "with ?node=", field="node")
            return describe(table, table.row(host, node))

    def hosts(self) -> list[dict[str, Any]]:
        table = self.table
        with table.lock:
            return [describe(table, row) for row in range(table.n)]

    def aggregates(self) -> list[Aggregate]:
        with self.table.lock:
            return sorted(self.table.aggregates(), key=lambda a: a.key)

    def aggregate(self, aggregate_id: int | str) -> Aggregate:
        aggregate = self.table.aggregate(str(aggregate_id))
        if aggregate is None:
            raise NotFound(f"no such aggregate {aggregate_id!r}", field="id")
        return aggregate

    def allocations(self) -> list[Allocation]:
        with self.table.lock:
            return sorted(self.table.allocations(), key=lambda a: a.consumer_uuid)

    def hosts_up(self) -> int:
        table = self.table
        return int(np.count_nonzero(table.alive())) if table.n else 0

    def counters(self) -> dict[str, Any]:
        """What /metrics exports: the engine's decision counters and the table's sizes and expiries."""
        stats, table = self.engine.stats, self.table
        return {"decisions": stats.decisions, "placements": stats.placements,
                "claim_conflicts": stats.claim_conflicts, "commit_conflicts": stats.commit_conflicts,
                "no_valid_host": dict(stats.no_valid_host), "hosts": table.n, **self._liveness(),
                "allocations": len(table.allocations()), "expired_claims": table.expired_claims}

    def utilization(self) -> Utilization:
        """Nodes by state and, per availability zone and resource class, the capacity and usage of the nodes that
        take requests. A node is in one state only: disabled (whether or not it reports), else down (no report
        within service_down_time, or forced down), else up; only up nodes count towards capacity and usage, as
        only they pass ComputeFilter. A node in no zoned aggregate is in ``default_availability_zone``."""
        table = self.table
        with table.lock:  # only for copies: decisions wait on this lock, the sums are made after it
            n = table.n
            if not n:
                return Utilization(hosts_up=0, hosts_down=0, hosts_disabled=0, zones=[])
            disabled = table.col("disabled").astype(bool)
            down = ~disabled & (~table.alive()[:n] | table.col("forced_down"))
            zone_of, names = self._zone_rows()
            classes = list(table.rc_index)
            k = len(classes)
            has = table.has_inventory[:n, :k].copy()
            capacity = table.rc["capacity"][:n, :k].copy()
            used = table.rc["reported"][:n, :k] + table.rc["inflight"][:n, :k]
        up = ~(disabled | down)
        zones: list[ZoneUsage] = []
        for j, rc in enumerate(classes):
            # A zone keeps its gauges (at 0) while its nodes are down, rather than the series vanishing.
            present = np.bincount(zone_of, weights=has[:, j], minlength=len(names)) > 0
            counted = has[:, j] & up
            capacity_sum = np.bincount(zone_of, weights=np.where(counted, capacity[:, j], 0.0), minlength=len(names))
            used_sum = np.bincount(zone_of, weights=np.where(counted, used[:, j], 0.0), minlength=len(names))
            zones += [ZoneUsage(zone=names[z], resource_class=rc, capacity=float(capacity_sum[z]),
                                used=float(used_sum[z])) for z in np.flatnonzero(present).tolist()]
        return Utilization(hosts_up=int(np.count_nonzero(up)), hosts_down=int(np.count_nonzero(down)),
                           hosts_disabled=int(np.count_nonzero(disabled)), zones=zones)

    def _zone_rows(self) -> tuple[np.ndarray, list[str]]:
        """Per row, the index of its zone in the sorted zone names; kept until aggregates or rows change. One zone
        per aggregate set (there are few), mapped to rows through the sets' codes."""
        table = self.table
        default = self.config.default.default_availability_zone

        def build() -> tuple[np.ndarray, list[str]]:
            per_set = [min(zones) if zones else default for zones in table.zones()]
            names = sorted(set(per_set)) or [default]
            code = {name: i for i, name in enumerate(names)}
            lut = np.array([code[zone] for zone in per_set], dtype=np.intp)
            return lut[table.col("aggset_code")], names

        return table.static_cache(("zone_rows", default), build)  # type: ignore[no-any-return]

    def _liveness(self) -> dict[str, int]:
        """Nodes that report (up) and, of those, the disabled ones (ComputeFilter removes them as it does down
        ones): one pass over the liveness mask for both."""
        table = self.table
        n = table.n
        if not n:
            return {"hosts_up": 0, "hosts_disabled": 0}
        alive = table.alive()[:n]
        return {"hosts_up": int(np.count_nonzero(alive)),
                "hosts_disabled": int(np.count_nonzero(alive & table.col("disabled")[:n].astype(bool)))}


def describe(table: HostTable, row: int) -> dict[str, Any]:
    """One node as the API and the CLI show it (the wire's ``HostInfo``)."""
    caps = table.node_caps(row)
    inventories = {
        rc: {"total": int(inv["total"]), "reserved": int(inv["reserved"]), "min_unit": int(inv["min_unit"]),
             "max_unit": int(inv["max_unit"]), "step_size": int(inv["step_size"]),
             "allocation_ratio": inv["ratio"], "reported_used": int(inv["reported"]),
             "in_flight": int(inv["inflight"]), "capacity": inv["capacity"], "free": inv["free"]}
        for rc, inv in table.inventories(row).items()
    }
    host, node = table.host_names[row], table.node_names[row]
    updated_at = float(table.col("updated_at")[row])
    now = table.clock()
    return {
        "host": host, "nodename": node, "uuid": table.node_uuids[row],
        "hypervisor_hostname": table.hypervisor_hostnames[row], "host_ip": table.host_ips[row],
        "hypervisor_type": caps.hypervisor_type, "hypervisor_version": caps.hypervisor_version,
        "up": bool(updated_at >= now - table.service_down_time),
        "disabled": bool(table.col("disabled")[row]), "forced_down": bool(table.col("forced_down")[row]),
        "disabled_reason": table.disabled_reason((host, node)),
        "updated_at": updated_at,
        # How stale the node is, as an operator asks it: a node is down once this passes service_down_time.
        "last_report_seconds_ago": max(0.0, now - updated_at) if updated_at > 0 else None,
        "num_io_ops": int(table.col("num_io_ops")[row]), "num_instances": int(table.col("num_instances")[row]),
        "failed_builds": int(table.col("failed_builds")[row]),
        "free_ram_mb": float(table.col("free_ram_mb")[row]), "free_disk_mb": float(table.col("free_disk_mb")[row]),
        "inventories": inventories, "traits": sorted(table.node_traits(row)),
        "aggregates": [a.key for a in table.node_aggregates(row)],
        "availability_zone": table.zone(row),
        "instances": sorted(table.instances(row)),
        "allocations": sorted(table.node_allocations((host, node))),
    }
