"""The simulated cloud: hosts laid out by zone and rack, their reports, and the aggregates over them.

Row ``i`` of every HostTable the simulator builds is host ``i`` here: tables are populated in this order and hosts
are never removed (a lost rack stays in the table, it just stops reporting), so a heartbeat can name rows.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from gantt.model import Aggregate, HostReport, HostStats
from gantt.sim.scenario import Cloud, rack_names
from gantt.state import HostTable


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
    stats_of = [HostStats(vcpus=k.vcpus, vcpus_used=0, memory_mb=k.memory_mb, memory_mb_used=0,
                          local_gb=k.local_gb, local_gb_used=0, cpu_allocation_ratio=k.cpu_allocation_ratio,
                          ram_allocation_ratio=k.ram_allocation_ratio, disk_allocation_ratio=k.disk_allocation_ratio,
                          hypervisor_type=k.hypervisor_type, hypervisor_version=k.hypervisor_version,
                          supported_instances=[["x86_64", k.hypervisor_type.lower(), "hvm"]],
                          traits=list(k.traits) or None)
                for k in cloud.host_kinds]
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
