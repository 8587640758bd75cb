"""NUMATopologyFilter: the guest NUMA topology the flavor and image ask for fits the node's NUMA cells.

Nova's semantics (``gantt.compute.numa.fit``: cells, pinned CPUs and thread siblings, page sizes, the node's CPU and RAM
allocation ratios as per-cell limits, and the flavor's PCI devices taken with the NUMA affinity their policy asks
for). A request that asks for no NUMA topology passes every node; one that does
fails every node that reports none. Nova's own pre-check is kept: a flavor or image that says ``dedicated`` and a
``require`` thread policy needs a node with SMT siblings somewhere.

The exact fit is Python per node, so a decision does not run it on every node:
- ``prefilter``: a necessary condition, vectorized over the per-cell columns (``HostTable.numa_cell_arrays``). Nova's
  search memoizes cell pairs under guest-cell ids it mutates, so a guest cell can be accepted on a host cell
  without being checked there; but each memo entry comes from some guest cell that *was* checked and fitted that
  same host cell. So a node can fit only if at least as many of its cells as the guest has cells pass, for some
  guest cell, every check of Nova's ``_numa_fit_instance_cell`` the columns can tell (memory or pages of the
  size asked, dedicated CPUs free, shared CPUs and memory under the allocation ratios, SMT for ``require``).
  A page size ``small``/``large``/``any`` becomes a concrete size once a cell fits (Nova keeps it for the next
  cells), so for those only "some page size has room" is necessary.
- ``exact``: the fit for one row, its verdict kept per guest topology until the row changes; the ranker and
  the engine call it on the few rows that decide the pick (``filters.base``: ``refines``).
- ``mask`` (dry runs, explanations): the prefilter, then the fit on every node left, memoized per guest
  topology and patched on the nodes whose reports or claims changed since.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from gantt.compute.filters.base import CapacityUnknown, Filter, register
from gantt.compute.journal import Rows
from gantt.compute.numa import DEDICATED, MIXED, REQUIRE, SHARED, GuestCell, GuestTopology, Networks, fit
from gantt.compute.pci import PciRequest
from gantt.compute.request import RequestContext
from gantt.compute.state import CellArrays, HostTable
from gantt.model import NUMATopologyLimits


def _needs_smt(ctx: RequestContext) -> bool:
    # Read from the raw flavor and image values, as Nova's filter does (the resolved policy may differ).
    policies = (ctx.extra_specs.get("hw:cpu_policy"), ctx.image_props.get("hw_cpu_policy"))
    threads = (ctx.extra_specs.get("hw:cpu_thread_policy"), ctx.image_props.get("hw_cpu_thread_policy"))
    return DEDICATED in policies and REQUIRE in threads


class _Ask(NamedTuple):
    """What one request asks of a node's cells: the guest topology, Nova's packing option, SMT siblings (for
    ``require``), the PCI devices the fit must place with their NUMA affinity and the networks its cells serve."""

    guest: GuestTopology
    pack: bool
    needs_smt: bool
    requests: tuple[PciRequest, ...]
    networks: Networks | None

    # the table's revision when the devices are Placement's (pci_in_placement): their providers' usage moves
    # apart from the node's row, so a verdict kept for the row would outlive what it was made of
    revision: int | None = None

    def key(self, name: str) -> tuple[object, ...]:
        return (name, self.guest, self.pack, self.needs_smt, tuple(r.key for r in self.requests), self.networks,
                self.revision)


@register
class NUMATopologyFilter(Filter):
    name = "NUMATopologyFilter"
    refines = True

    def _ask(self, table: HostTable, ctx: RequestContext) -> _Ask | None:
        if ctx.numa is None:
            return None
        placed = any(r.in_placement for r in ctx.pci_requests)
        return _Ask(ctx.numa, self.config.compute.packing_host_numa_cells_allocation_strategy, _needs_smt(ctx),
                    ctx.pci_requests, ctx.networks, table.revision if placed else None)

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        ask = self._ask(table, ctx)
        if ask is None:
            return None

        def fits(rows: Rows) -> np.ndarray:
            ok = _necessary(table, ask.guest, rows, ask.needs_smt)
            row_numbers = np.arange(table.n)[rows]
            for pos in np.flatnonzero(ok).tolist():
                ok[pos] = _fits(table, ask, int(row_numbers[pos]))
            return ok

        return table.derived.usage_mask(ask.key(self.name), fits, costly=True)

    def selection_limits(self, table: HostTable, ctx: RequestContext, row: int) -> dict[str, NUMATopologyLimits]:
        # Nova's filter leaves the ratios it fitted under in host_state.limits, and the Selection carries them
        if ctx.numa is None or table.node_numa(row) is None:
            return {}
        return {"numa_topology": table.numa_limits(row)}

    def prefilter(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        guest = ctx.numa
        if guest is None:
            return None
        needs_smt = _needs_smt(ctx)
        return table.derived.usage_mask((self.name, "necessary", guest, needs_smt),
                                lambda rows: _necessary(table, guest, rows, needs_smt))

    def exact(self, table: HostTable, ctx: RequestContext) -> Callable[[int], bool] | None:
        ask = self._ask(table, ctx)
        if ask is None:
            return None
        verdicts = table.derived.usage_verdicts(ask.key(self.name))
        known = len(verdicts)

        def check(row: int) -> bool:
            if row < known:
                verdict = verdicts[row]
                if verdict:
                    return bool(verdict == 1)
            ok = _fits(table, ask, row)
            if row < known:
                verdicts[row] = 1 if ok else 2
            return ok

        return check

    def headroom(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        if ctx.numa is None:
            return None
        raise CapacityUnknown(self.name, "fits each guest to the cells the claims before it left, which it cannot "
                                         "count in advance (a NUMA-shaped flavor)")


def _fits(table: HostTable, ask: _Ask, row: int) -> bool:
    host = table.node_numa(row)
    if host is None or (ask.needs_smt and not host.has_threads):
        return False
    limits = table.numa_limits(row)
    return fit(host, ask.guest, cpu_ratio=limits.cpu_allocation_ratio, ram_ratio=limits.ram_allocation_ratio,
               pack=ask.pack, pools=table.node_pci_pools(row), pci_requests=ask.requests,
               networks=ask.networks, rooms=table.pci_rooms(row) if ask.revision is not None else None) is not None


def _necessary(table: HostTable, guest: GuestTopology, rows: Rows, needs_smt: bool) -> np.ndarray:
    """Nodes that may fit ``guest`` (see the module's docstring): per-node summaries, then per cell. Over every
    row the cell columns are read as views (gathering the survivors of the summaries costs more than it saves);
    over a few patched rows they are gathered."""
    ok = table.col("numa_cells")[rows] >= len(guest.cells)
    ok &= table.col("numa_max_memory")[rows] >= min(c.memory for c in guest.cells)
    if guest.cpu_policy in (SHARED, MIXED, None):
        ok &= table.col("numa_max_cpus")[rows] >= min(len(c.cpuset) for c in guest.cells)
    if guest.pinned:
        ok &= table.col("numa_max_free_pcpus")[rows] >= min(len(c.pcpuset) for c in guest.cells)
    if needs_smt:
        ok &= table.col("numa_threads")[rows]
    if not ok.any():
        return ok
    arrays = table.numa_cell_arrays()
    n = len(ok) if isinstance(rows, slice) else table.n
    shapes = {(len(c.cpuset), len(c.pcpuset), c.memory, c.pagesize): c for c in guest.cells}
    usable: np.ndarray | None = None
    for gcell in shapes.values():
        fits = _cell_may_fit(table, arrays, n, rows, guest, gcell)
        usable = fits if usable is None else usable | fits
    assert usable is not None
    usable &= arrays.fields["exists"][:n][rows] > 0
    ok &= usable.sum(axis=1) >= len(guest.cells)
    return ok


def _cell_may_fit(table: HostTable, arrays: CellArrays, n: int, rows: Rows, guest: GuestTopology,
                  gcell: GuestCell) -> np.ndarray:
    """Rows x cells: the checks of Nova's ``_numa_fit_instance_cell`` for ``gcell`` the columns can tell
    (each one necessary for the cell to fit)."""
    def cell(field: str) -> np.ndarray:
        return arrays.fields[field][:n][rows]

    pinned = guest.pinned
    memory = gcell.memory
    if gcell.pagesize:
        if gcell.pagesize > 0:  # an exact size: kept as it is through the search
            pages = arrays.pages.get(float(gcell.pagesize))
            if pages is None:
                return np.zeros_like(cell("exists"), dtype=np.bool_)
            ok = pages[:n][rows] >= memory
        else:
            ok = cell("any_free_mb") >= memory
    else:
        ok = cell("memory_pinned" if pinned else "memory_unpinned") >= memory
    if pinned:
        need = len(gcell.pcpuset)
        ok &= cell("free_pcpus") >= need  # free dedicated CPUs are never more than the cell has
        if guest.cpu_thread_policy == REQUIRE:
            ok &= cell("threads") > 1
    if guest.cpu_policy in (SHARED, MIXED, None):
        shared = len(gcell.cpuset)
        cpu_ratio = table.rc_col("ratio", "VCPU")
        ram_ratio = table.rc_col("ratio", "MEMORY_MB")
        cpus = cell("cpus")
        ok &= cpus >= shared
        limit = cpus * (cpu_ratio[:n][rows][:, None] if cpu_ratio is not None else 0.0)
        ok &= cell("cpu_usage") + shared <= limit
        limit = cell("memory") * (ram_ratio[:n][rows][:, None] if ram_ratio is not None else 0.0)
        ok &= cell("memory_usage") + memory <= limit
    return ok
