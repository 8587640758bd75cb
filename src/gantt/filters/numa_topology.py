"""NUMATopologyFilter: the guest NUMA topology the flavor and image ask for fits the node's NUMA cells.

Nova's semantics (``gantt.numa.fit``: cells, pinned CPUs and thread siblings, page sizes, the node's CPU and RAM
allocation ratios as per-cell limits, and the flavor's PCI devices taken with the NUMA affinity their policy asks
for). A request that asks for no NUMA topology passes every node; one that does
fails every node that reports none. Nova's own pre-check is kept: a flavor or image that says ``dedicated`` and a
``require`` thread policy needs a node with SMT siblings somewhere.

Fast path: a vectorized prefilter on the NUMA summary columns (enough cells; some cell large enough for the
least demanding guest cell's CPUs, free pinned CPUs and memory) leaves few nodes, and only those get the exact
fit. The mask is memoized per guest topology and patched on the nodes whose reports or claims changed since.
"""

from __future__ import annotations

import numpy as np

from gantt.filters.base import Filter, register
from gantt.journal import Rows
from gantt.model import NUMATopologyLimits
from gantt.numa import DEDICATED, MIXED, REQUIRE, SHARED, GuestTopology, fit
from gantt.pci import PciRequest
from gantt.request import RequestContext
from gantt.state import HostTable


def _needs_smt(ctx: RequestContext) -> bool:
    # Read from the raw flavor and image values, as Nova's filter does (the resolved policy may differ).
    policies = (ctx.extra_specs.get("hw:cpu_policy"), ctx.image_props.get("hw_cpu_policy"))
    threads = (ctx.extra_specs.get("hw:cpu_thread_policy"), ctx.image_props.get("hw_cpu_thread_policy"))
    return DEDICATED in policies and REQUIRE in threads


@register
class NUMATopologyFilter(Filter):
    name = "NUMATopologyFilter"

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        guest = ctx.numa
        if guest is None:
            return None
        pack = self.config.compute.packing_host_numa_cells_allocation_strategy
        needs_smt = _needs_smt(ctx)
        requests = ctx.pci_requests

        def fits(rows: Rows) -> np.ndarray:
            return self._fits(table, guest, rows, pack, needs_smt, requests)

        key = (self.name, guest, pack, needs_smt, tuple(r.key for r in requests))
        return table.usage_mask(key, fits, costly=True)

    def selection_limits(self, table: HostTable, ctx: RequestContext, row: int) -> dict[str, NUMATopologyLimits]:
        # Nova's filter leaves the ratios it fitted under in host_state.limits, and the Selection carries them
        if ctx.numa is None or table.node_numa(row) is None:
            return {}
        return {"numa_topology": table.numa_limits(row)}

    @staticmethod
    def _fits(table: HostTable, guest: GuestTopology, rows: Rows, pack: bool, needs_smt: bool,
              requests: tuple[PciRequest, ...]) -> np.ndarray:
        # Necessary conditions only. Nova's search memoizes cell pairs under ids it mutates, so a guest cell can be
        # taken as fitting without being checked; but every memo entry comes from some guest cell that was
        # checked and fitted some host cell, so the least demanding guest cell must fit the host's largest cell.
        ok = table.col("numa_cells")[rows] >= len(guest.cells)
        ok &= table.col("numa_max_memory")[rows] >= min(c.memory for c in guest.cells)
        if guest.cpu_policy in (SHARED, MIXED, None):
            ok &= table.col("numa_max_cpus")[rows] >= min(len(c.cpuset) for c in guest.cells)
        if guest.pinned:
            ok &= table.col("numa_max_free_pcpus")[rows] >= min(len(c.pcpuset) for c in guest.cells)
        candidates = np.flatnonzero(ok)
        if not candidates.size:
            return ok
        row_numbers = np.arange(table.n)[rows]
        cpu_ratio = table.rc_col("ratio", "VCPU")
        ram_ratio = table.rc_col("ratio", "MEMORY_MB")
        for pos in candidates.tolist():
            row = int(row_numbers[pos])
            host = table.node_numa(row)
            if host is None or (needs_smt and not host.has_threads):
                ok[pos] = False
                continue
            ok[pos] = fit(host, guest, cpu_ratio=float(cpu_ratio[row]) if cpu_ratio is not None else 0.0,
                          ram_ratio=float(ram_ratio[row]) if ram_ratio is not None else 0.0, pack=pack,
                          pools=table.node_pci_pools(row), pci_requests=requests) is not None
        return ok
