"""PciPassthroughFilter: keep the nodes whose PCI device pools can serve the flavor's ``pci_passthrough:alias``.

Nova's decision (``gantt.compute.pci.supports``: PciDeviceStats.support_requests without NUMA cells), taken in two steps
so that the common case costs no Python per node: a request that asks for no device passes every node at once;
otherwise each request's device count is checked against the node's devices of the (vendor, product) pairs its
specs name (one column sum), which already removes the nodes without such devices; the exact pool-by-pool check
then runs once per distinct pool set among the nodes left (pools are interned, so equal hosts share one check,
and a verdict is kept for the next decisions with the same requests). Requests whose devices are Placement's
(``pci_in_placement``) are checked node by node with the node's providers (``HostTable.pci_rooms``).
NUMA affinity of the devices is NUMATopologyFilter's, as in Nova.
"""

from __future__ import annotations

import numpy as np

from gantt.compute.filters.base import CapacityUnknown, Filter, register
from gantt.compute.pci import PciRequest, Pool, supports
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable


@register
class PciPassthroughFilter(Filter):
    name = "PciPassthroughFilter"

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        requests = ctx.pci_requests
        if not requests:
            return None
        pools, epoch = table.pci_pools()
        out: np.ndarray = pools.codes != 0  # a node without pools serves nothing (not even a request of zero devices)
        for request in requests:
            pairs = request.pairs()
            if pairs is None:  # no (vendor, product) to count devices by: the pool-by-pool check decides
                continue
            columns = [c for c in (table.pci_devices(pair) for pair in pairs) if c is not None]
            if not columns:
                return np.zeros(table.n, dtype=np.bool_)
            held = columns[0] if len(columns) == 1 else np.sum(columns, axis=0)
            out &= held >= request.count
        rows = np.flatnonzero(out)
        if len(rows) and any(r.in_placement for r in requests):
            # the devices' providers decide too, and their usage moves apart from the node's pools: node by node
            out[rows] = [supports(table.node_pci_pools(row), requests, rooms=table.pci_rooms(row))
                         for row in rows.tolist()]
        elif len(rows):
            codes, where = np.unique(pools.codes[rows], return_inverse=True)
            # An interned pool set never changes, so its verdict is kept across decisions (until static state
            # moves and the table's static cache is dropped): only pool sets not met before are checked.
            known: dict[int, bool] = table.static_cache(("pci_supports", epoch, tuple(r.key for r in requests)), dict)
            verdict = np.fromiter((self._verdict(known, pools.values, c, requests) for c in codes.tolist()),
                                  dtype=np.bool_, count=len(codes))
            out[rows] = verdict[where.reshape(-1)]
        return out

    @staticmethod
    def _verdict(known: dict[int, bool], values: list[tuple[Pool, ...]], code: int,
                 requests: tuple[PciRequest, ...]) -> bool:
        found = known.get(code)
        if found is None:
            found = known[code] = supports(values[code], requests)
        return found

    def headroom(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        if not ctx.pci_requests:
            return None
        raise CapacityUnknown(self.name, "takes devices from pools greedily, which it cannot count in advance "
                                         "(pci_passthrough:alias)")
