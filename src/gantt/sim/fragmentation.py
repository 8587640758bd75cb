"""NUMA fragmentation: capacity a host has in total that no cell can give a NUMA-shaped guest.

A pinned guest needs its dedicated CPUs (and its memory, or its huge pages) inside one cell per guest NUMA node;
a host whose free PCPU and memory counts would take the flavor may still have them scattered over cells, or on
cores whose siblings are taken. Placement's counts cannot see that; NUMATopologyFilter can. Per NUMA-shaped
flavor of the workload, over the hosts up: how many have room by the counts, how many the flavor really fits,
and the free dedicated CPUs stranded on the difference. Read from the truth (what hosts really have).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gantt.compute.filters import FILTERS
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable
from gantt.config import Config
from gantt.model import Flavor, InvalidRequest, RequestSpec


def numa_fragmentation(table: HostTable, config: Config, flavors: list[Flavor], up: np.ndarray,
                       now: float) -> dict[str, Any]:
    """Per NUMA-shaped flavor (see the module's docstring); flavors without a guest topology are left out."""
    n = table.n
    numa_filter = FILTERS["NUMATopologyFilter"](config)
    free_pcpus = table.rc_col("free", "PCPU")
    with_cells = table.col("numa_cells")[:n] > 0
    out: dict[str, Any] = {}
    for flavor in flavors:
        assert flavor.name is not None  # the scenario names every flavor
        try:
            ctx = RequestContext.build(RequestSpec(flavor=flavor), config, now)
        except InvalidRequest:
            continue
        if ctx.numa is None:
            continue
        room = up[:n] & with_cells
        for rc, amount in ctx.resources.items():
            free = table.rc_col("free", rc)
            if amount > 0:
                room &= free >= amount if free is not None else False
        fits = numa_filter.mask(table, ctx)
        assert fits is not None
        stranded = room & ~fits[:n]
        out[flavor.name] = {
            "hosts_with_room": int(np.count_nonzero(room)),
            "hosts_it_fits": int(np.count_nonzero(room & fits[:n])),
            "stranded_hosts": int(np.count_nonzero(stranded)),
            "stranded_free_pcpus": float(free_pcpus[stranded].sum()) if free_pcpus is not None else 0.0,
        }
    return out
