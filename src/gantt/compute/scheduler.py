"""``gantt.Scheduler``: the library face. The service and the client mirror it call for call."""

from __future__ import annotations

import contextlib
import heapq
import os
import time
from typing import Any

import numpy as np

from gantt.compute.capacity import capacity
from gantt.compute.commit import CommitHook, CommitSteps
from gantt.compute.engine import Engine
from gantt.compute.state import HostTable
from gantt.compute.stats import EngineStats
from gantt.config import Config, load_config
from gantt.model import (
    Aggregate,
    Allocation,
    Candidate,
    CapacityAnswer,
    CapacityQuestion,
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
from gantt.model.activity import ClassUsage, HostUsage, Overview, RecentAllocation, ZoneHosts, instant


class Scheduler:
    """An in-memory scheduler: a HostTable replica plus the engine that decides from it.

    Every method accepts the plain dicts of the data contract (design §3) or the Structs.
    """

    def __init__(self, config: Config | dict[str, Any] | str | None = None, *, table: HostTable | None = None,
                 commit: CommitHook | None = None, commit_steps: CommitSteps | None = None, clock: Any = None,
                 stats: EngineStats | None = None) -> None:
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
        self.engine = Engine(table, self.config, commit=commit, commit_steps=commit_steps, stats=stats)

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

    def capacity(self, question: CapacityQuestion | dict[str, Any]) -> CapacityAnswer:
        """How many more instances of each request fit, where, and (``without``) what a set of hosts takes with
        it; claims nothing (``gantt.compute.capacity``)."""
        return capacity(self.engine, question)

    def explain(self, request_spec: RequestSpec | dict[str, Any]) -> Explanation:
        return self.engine.explain(request_spec)

    def release(self, consumer_uuid: str) -> Allocation:
        return self.engine.release(consumer_uuid)

    def confirm_move(self, migration_uuid: str) -> Allocation:
        """A move is done: drop the source held under ``migration_uuid`` (returned); the instance keeps its new
        allocation, if it still has one."""
        table = self.table
        with table.lock:
            return table.release(table.migration(migration_uuid).consumer_uuid)

    def revert_move(self, migration_uuid: str) -> Allocation:
        """Undo a move: the instance gets its source back, the destination is freed; returns the allocation."""
        table = self.table
        with table.lock:
            held, _ = table.revertible(migration_uuid)
            restored = table.reverted(held)
            table.release(held.consumer_uuid)
            table.put_allocation(restored)
            return restored

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

    def overview(self, max_hosts: int = 2000, recent: int = 10) -> Overview:
        """The cloud at a glance (``GET /v1/overview``): nodes per zone and state, utilization per resource class
        for a heat map (the ``max_hosts`` most used nodes when there are more; ``utilization_omitted`` says how
        many were left out), the allocation count and the ``recent`` newest allocations. The decisions and
        refusals are the caller's to add (``gantt.model.activity``)."""
        table = self.table
        default_zone = self.config.default.default_availability_zone
        # Decisions wait on this lock: it is held to copy the columns the overview reads, then again to name the
        # few rows it shows, unless a node was deleted in between (rows renumbered: their names moved); the
        # last try holds it throughout.
        for attempt in range(3):
            with table.lock if attempt == 2 else contextlib.nullcontext():
                with table.lock:
                    layout, n = table.layout, table.n
                    state = _states(table, n)
                    codes = table.col("aggset_code")[:n].astype(np.int64)
                    zone_of_code = [min(z) if z else default_zone for z in table.zones()]
                    names, columns = _heat_classes(table, n)
                    has = table.has_inventory[:n, columns]  # fancy indexing: copies
                    used = table.rc["reported"][:n, columns] + table.rc["inflight"][:n, columns]
                    capacity = table.rc["capacity"][:n, columns]
                classes, fractions = _utilization(names, has, used, capacity)
                shown = _most_used(fractions, max_hosts).tolist()
                with table.lock:
                    if table.layout != layout:
                        continue
                    hosts, nodes = table.host_names, table.node_names
                    picked = [(zone_of_code[codes[r]], hosts[r], nodes[r], r) for r in shown]
                    allocations = list(table.allocations())
                break
        picked.sort()
        heat = [HostUsage(host=host, nodename=node, zone=zone, state=_STATE_NAMES[state[r]],
                          usage=[None if f != f else round(f, 4) for f in fractions[r].tolist()])
                for zone, host, node, r in picked]
        newest = heapq.nlargest(recent, allocations, key=lambda a: a.created_at)
        count = len(allocations)
        zones: dict[str, ZoneHosts] = {}
        per_code = np.bincount(codes * 3 + state, minlength=3 * len(zone_of_code)).reshape(-1, 3)
        for code in np.flatnonzero(per_code.sum(axis=1)).tolist():
            name = zone_of_code[code]
            counts = zones.setdefault(name, ZoneHosts(zone=name))
            up, disabled, down = per_code[code].tolist()
            counts.up += up
            counts.disabled += disabled
            counts.down += down
        stats = self.engine.stats
        return Overview(
            at=instant(time.time()), pid=os.getpid(), revision=table.revision, hosts=n,
            zones=sorted(zones.values(), key=lambda z: z.zone), classes=classes, resource_classes=names,
            utilization=heat, utilization_omitted=n - len(heat), allocations=count,
            recent_allocations=[RecentAllocation(consumer_uuid=a.consumer_uuid, host=a.host, nodename=a.nodename,
                                                 resources=dict(a.resources), project_id=a.project_id,
                                                 created_at=instant(a.created_at) if a.created_at > 0 else None)
                                for a in newest],
            decisions=[], refusals=[],
            counters={"decisions": stats.decisions, "placements": stats.placements,
                      "no_valid_host": sum(stats.no_valid_host.values())})

    def utilization(self) -> Utilization:
        """Nodes by state (``_states``: each counted once) and, per availability zone and resource class, the
        capacity and usage of the up nodes: only they pass ComputeFilter. A node in no zoned aggregate is in
        ``default_availability_zone``."""
        table = self.table
        with table.lock:  # only for copies: decisions wait on this lock, the sums are made after it
            n = table.n
            if not n:
                return Utilization(hosts_up=0, hosts_down=0, hosts_disabled=0, zones=[])
            state = _states(table, n)
            zone_of, names = self._zone_rows()
            classes = list(table.rc_index)
            k = len(classes)
            has = table.has_inventory[:n, :k].copy()
            capacity = table.rc["capacity"][:n, :k].copy()
            used = table.rc["reported"][:n, :k] + table.rc["inflight"][:n, :k]
        up = state == 0
        zones: list[ZoneUsage] = []
        for j, rc in enumerate(classes):
            # A zone keeps its gauges (at 0) while its nodes are down, rather than the series vanishing.
            present = np.bincount(zone_of, weights=has[:, j], minlength=len(names)) > 0
            counted = has[:, j] & up
            capacity_sum = np.bincount(zone_of, weights=np.where(counted, capacity[:, j], 0.0), minlength=len(names))
            used_sum = np.bincount(zone_of, weights=np.where(counted, used[:, j], 0.0), minlength=len(names))
            zones += [ZoneUsage(zone=names[z], resource_class=rc, capacity=float(capacity_sum[z]),
                                used=float(used_sum[z])) for z in np.flatnonzero(present).tolist()]
        counts = np.bincount(state, minlength=len(_STATE_NAMES)).tolist()
        return Utilization(hosts_up=counts[0], hosts_disabled=counts[1], hosts_down=counts[2], zones=zones)

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

        return table.static_cache(("zone_rows", default), build)

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


# Heat map columns: at most this many resource classes, those most nodes have (a bare-metal cloud may have a
# custom class per node flavor).
MAX_CLASSES = 12
_STATE_NAMES = ("up", "disabled", "down")


def _states(table: HostTable, n: int) -> np.ndarray:
    """Per node: 0 up, 1 disabled (reporting, disabled by an operator), 2 down (no report within
    service_down_time, or forced down)."""
    if not n:
        return np.zeros(0, dtype=np.int8)
    down = ~table.alive()[:n] | table.col("forced_down")[:n].astype(bool)
    disabled = table.col("disabled")[:n].astype(bool) & ~down
    return np.where(down, 2, np.where(disabled, 1, 0)).astype(np.int8)


def _heat_classes(table: HostTable, n: int) -> tuple[list[str], list[int]]:
    """The resource classes some node has (at most ``MAX_CLASSES``, those most nodes have) and their columns."""
    present = [(rc, j, int(np.count_nonzero(table.has_inventory[:n, j]))) for rc, j in table.rc_index.items()]
    present = [p for p in present if p[2]]
    if len(present) > MAX_CLASSES:
        keep = {rc for rc, _, _ in sorted(present, key=lambda p: -p[2])[:MAX_CLASSES]}
        present = [p for p in present if p[0] in keep]
    return [rc for rc, _, _ in present], [j for _, j, _ in present]


def _utilization(names: list[str], has: np.ndarray, used: np.ndarray,
                 capacity: np.ndarray) -> tuple[list[ClassUsage], np.ndarray]:
    """Totals per class, and per node the fraction used of each class (NaN: the node has none of it)."""
    fractions = np.full(used.shape, np.nan, order="F")
    classes = []
    for k, rc in enumerate(names):
        held, taken, room = has[:, k], used[:, k], capacity[:, k]
        classes.append(ClassUsage(resource_class=rc, used=float(taken[held].sum()),
                                  capacity=float(room[held].sum()), hosts=int(np.count_nonzero(held))))
        with np.errstate(divide="ignore", invalid="ignore"):
            fraction = np.where(room > 0, taken / room, np.where(taken > 0, 1.0, 0.0))
        fractions[:, k] = np.where(held, fraction, np.nan)
    return classes, fractions


def _most_used(fractions: np.ndarray, limit: int) -> np.ndarray:
    """Rows of the ``limit`` nodes whose fullest class is fullest (every row when there are no more)."""
    n = fractions.shape[0]
    if n <= limit:
        return np.arange(n)
    fullest = np.full(n, -1.0)
    for k in range(fractions.shape[1]):  # column by column: a reduction across a short axis is slow in numpy
        np.fmax(fullest, fractions[:, k], out=fullest)
    return np.argpartition(-fullest, limit - 1)[:limit]
