"""The simulated cloud: hosts laid out by zone and rack, their reports, and the aggregates over them.

Row ``i`` of every HostTable the simulator builds is host ``i`` here: tables are populated in this order and hosts
are never removed (a lost rack stays in the table, it just stops reporting), so a heartbeat can name rows.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from gantt.compute.state import HostTable
from gantt.model import Aggregate, HostReport, HostStats, decode
from gantt.sim.scenario import Cloud, HostKind


@dataclass
class CloudLayout:
    names: list[str]
    az: np.ndarray  # host -> zone index
    rack: np.ndarray  # host -> rack index
    kind: np.ndarray  # host -> host kind index
    zones: list[str]
    racks: list[str]
    reports: list[HostReport]
    aggregates: list[Aggregate]

    @property
    def n(self) -> int:
        return len(self.names)

    def rack_hosts(self, rack: str) -> np.ndarray:
        return np.flatnonzero(self.rack == self.racks.index(rack))

    def populate(self, table: HostTable) -> None:
        """Load every host and aggregate; the same order on every table keeps rows aligned."""
        for report in self.reports:
            table.update(report)
        for aggregate in self.aggregates:
            table.update_aggregate(aggregate)
        if table.host_names[: self.n] != self.names:  # pragma: no cover - a HostTable change broke alignment
            raise RuntimeError("HostTable rows do not follow insertion order; the simulator relies on it")


def rack_names(cloud: Cloud) -> list[str]:
    width = len(str(cloud.racks_per_az - 1))
    return [f"{az}-r{r:0{width}d}" for az in cloud.azs for r in range(cloud.racks_per_az)]


def numa_topology(kind: HostKind) -> tuple[dict[str, Any], int, int]:
    """The kind's NUMA topology (Nova's shape), its shared CPU count and its dedicated CPU count."""
    layout = kind.numa
    assert layout is not None
    per_cell = kind.vcpus // layout.cells
    cell_memory = kind.memory_mb // layout.cells
    cores = per_cell // layout.threads
    dedicated_cores = round(cores * layout.dedicated)
    cells = []
    shared = dedicated = 0
    for c in range(layout.cells):
        cpus = list(range(c * per_cell, (c + 1) * per_cell))
        siblings = [cpus[i:i + layout.threads] for i in range(0, per_cell, layout.threads)]
        split = (cores - dedicated_cores) * layout.threads
        small_mb = cell_memory - layout.page_2m_mb - layout.pages_1g * 1024
        pages = [{"size_kb": 4, "total": small_mb * 256}]
        if layout.page_2m_mb:
            pages.append({"size_kb": 2048, "total": layout.page_2m_mb // 2})
        if layout.pages_1g:
            pages.append({"size_kb": 1048576, "total": layout.pages_1g})
        cells.append({"id": c, "cpuset": cpus[:split], "pcpuset": cpus[split:], "memory": cell_memory,
                      "siblings": siblings, "mempages": pages})
        shared += split
        dedicated += per_cell - split
    return {"cells": cells}, shared, dedicated


def host_stats(kind: HostKind) -> HostStats:
    """What every host of ``kind`` reports (shared by their reports: HostTable.update only reads them)."""
    stats: dict[str, Any] = {
        "vcpus": kind.vcpus, "vcpus_used": 0, "memory_mb": kind.memory_mb, "memory_mb_used": 0,
        "local_gb": kind.local_gb, "local_gb_used": 0, "cpu_allocation_ratio": kind.cpu_allocation_ratio,
        "ram_allocation_ratio": kind.ram_allocation_ratio, "disk_allocation_ratio": kind.disk_allocation_ratio,
        "hypervisor_type": kind.hypervisor_type, "hypervisor_version": kind.hypervisor_version,
        "supported_instances": [["x86_64", kind.hypervisor_type.lower(), "hvm"]],
        "traits": list(kind.traits) or None,
    }
    if kind.numa is not None:
        topology, shared, dedicated = numa_topology(kind)
        # As nova-compute with [compute] cpu_shared_set / cpu_dedicated_set: VCPU from the shared CPUs, PCPU from
        # the dedicated ones, and the trait Nova's pinning requests are matched on.
        stats["numa_topology"] = topology
        stats["vcpus"] = shared
        if dedicated:
            stats["inventories"] = {"PCPU": {"total": dedicated}}
        if kind.numa.threads > 1:
            stats["traits"] = sorted({*kind.traits, "HW_CPU_HYPERTHREADING"})
    if kind.pci:
        stats["pci_stats"] = kind.pci
    return decode(stats, HostStats, path="$")


def build_cloud(cloud: Cloud, seed: int) -> CloudLayout:
    rng = random.Random(seed)
    racks = rack_names(cloud)
    weights = [k.weight for k in cloud.host_kinds]
    rack_kind = rng.choices(range(len(cloud.host_kinds)), weights=weights, k=len(racks))
    width = len(str(cloud.hosts_per_rack - 1))
    names: list[str] = []
    az: list[int] = []
    rack: list[int] = []
    kind: list[int] = []
    reports: list[HostReport] = []
    stats_of = [host_stats(k) for k in cloud.host_kinds]
    for r, rack_name in enumerate(racks):
        z = r // cloud.racks_per_az
        for h in range(cloud.hosts_per_rack):
            name = f"{rack_name}-h{h:0{width}d}"
            names.append(name)
            az.append(z)
            rack.append(r)
            kind.append(rack_kind[r])
            # Stats are shared between reports: HostTable.update only reads them.
            reports.append(HostReport(host=name, stats=stats_of[rack_kind[r]]))
    layout = CloudLayout(names=names, az=np.array(az, dtype=np.int32), rack=np.array(rack, dtype=np.int32),
                         kind=np.array(kind, dtype=np.int32), zones=list(cloud.azs), racks=racks,
                         reports=reports, aggregates=[])
    aggregates: list[Aggregate] = []
    for z, zone in enumerate(cloud.azs):
        hosts = [names[i] for i in np.flatnonzero(layout.az == z).tolist()]
        aggregates.append(Aggregate(id=f"az-{zone}", name=zone, hosts=hosts,
                                    metadata={"availability_zone": zone}))
    kind_names = [k.name for k in cloud.host_kinds]
    for i, spec in enumerate(cloud.aggregates):
        mask = np.ones(layout.n, dtype=np.bool_)
        if spec.racks is not None:
            mask &= np.isin(layout.rack, [racks.index(r) for r in spec.racks])
        if spec.azs is not None:
            mask &= np.isin(layout.az, [cloud.azs.index(z) for z in spec.azs])
        if spec.host_kinds is not None:
            mask &= np.isin(layout.kind, [kind_names.index(k) for k in spec.host_kinds])
        rows = np.flatnonzero(mask).tolist()
        if spec.fraction < 1:
            rows = sorted(rng.sample(rows, round(len(rows) * spec.fraction)))
        aggregates.append(Aggregate(id=f"agg-{i}", name=spec.name, hosts=[names[r] for r in rows],
                                    metadata=dict(spec.metadata)))
    layout.aggregates = aggregates
    return layout
