"""The audit: a table rebuilt from a snapshot exactly as a replica loads one, and what the service's write rules
cannot have let into it (``gantt audit``, the tests' check after every race)."""

from __future__ import annotations

import numpy as np

from gantt.compute.state import HostTable
from gantt.config import Config
from gantt.resources import providers
from gantt.store.base import Snapshot


def load_snapshot(table: HostTable, snap: Snapshot) -> None:
    """Fill an empty table from ``snap`` (what ``Replica.load`` swaps in, and what the audit judges)."""
    with table.lock:
        for aggregate in snap.aggregates:
            table.update_aggregate(aggregate)
        table.load(snap.hosts, whole=True)
        for allocation in snap.allocations:
            table.put_allocation(allocation)
        for info in snap.instances:
            if table.rows_of_host(info.host):
                table.set_instances(info.host, info.instances, replace=True)


def audit_table(snapshot: Snapshot, config: Config | None = None) -> HostTable:
    """The table a replica of this config builds from ``snapshot``: the audit's accounting is the service's, its
    claims as old as they were made (a replica that has run since they were made counts them so)."""
    table = HostTable.from_config(config or Config())
    table.age_claims_by_creation()
    load_snapshot(table, snap=snapshot)
    return table


def audit(snapshot: Snapshot, config: Config | None = None) -> list[str]:
    """Rebuild a table from a snapshot exactly as a replica loads one (``load_snapshot``, the config's
    ``claim_timeout``: a claim its node's reports have settled counts no more) and list what the service's write
    rules cannot have let in. A node and class is over capacity when both ways the service counts it exceed its
    capacity: the scheduler's (reported + in flight: a /v1 claim needs room there) and Placement's (the sum of the
    allocations: a Placement write needs room there, and ignores what the node reports), the latter beyond what
    the node held when a write lowered its capacity under it (``HostReport.held_over``: allowed, as Placement
    allows it). An inventory that reserves more than its total (refused on write) is listed too."""
    table = audit_table(snapshot, config)
    records = {(r.host, r.nodename): r for r in snapshot.hosts}
    problems: list[str] = []
    n = table.n
    for rc, j in table.rc_index.items():
        capacity = table.rc["capacity"][:n, j]
        for row in np.flatnonzero(table.has_inventory[:n, j] & (capacity < 0)).tolist():
            problems.append(f"{table.host_names[row]}/{table.node_names[row]} {rc}: reserved "
                            f"{table.rc['reserved'][row, j]:g} > total {table.rc['total'][row, j]:g}")
        used = table.rc["reported"][:n, j] + table.rc["inflight"][:n, j]
        for row in np.flatnonzero(used > capacity + 1e-9).tolist():
            key = (table.host_names[row], table.node_names[row])
            held = [a for c in table.node_allocations(key) if (a := table.allocation(c)) is not None]
            booked = providers.used(held, key).get(rc, 0)
            record = records.get(key)
            allowed = max(float(capacity[row]), (record.held_over or {}).get(rc, 0) if record is not None else 0)
            if booked <= allowed + 1e-9:
                continue
            problems.append(f"{key[0]}/{key[1]} {rc}: used {used[row]:g} > capacity {capacity[row]:g} "
                            f"({booked:g} allocated)")
    for row in np.flatnonzero(table.col("numa_overbooked")).tolist():
        problems.append(f"{table.host_names[row]}/{table.node_names[row]}: NUMA claims pin a CPU twice (or one "
                        "the node does not have free) or take more huge pages than are free")
    for row in range(n):
        for pool, taken, count in table.pci_overbooked(row):
            described = ", ".join(f"{k}={v}" for k, v in pool if v is not None)
            problems.append(f"{table.host_names[row]}/{table.node_names[row]} PCI pool {described}: {taken} devices "
                            f"held > {count}")
    for alloc in snapshot.allocations:
        for host, node in alloc.nodes():
            if (host, node) not in table:
                problems.append(f"allocation {alloc.consumer_uuid} on unknown node {host}/{node}")
    return problems
