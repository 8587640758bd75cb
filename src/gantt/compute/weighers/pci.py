"""PCIWeigher: keep hosts with free PCI devices for the requests that need them (Nova's).

Weight ``100 - min(free devices, 99)``: fewer free devices weigh more, so instances without PCI requests avoid
PCI hosts and those with them stack rather than fragment. Nova counts every device in the host's pools.
"""

from __future__ import annotations

import numpy as np

from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable
from gantt.compute.weighers.base import Weigher, register

MAX_DEVS = 100  # Nova's: beyond ~100 free devices there is no scarcity to weigh


@register
class PCIWeigher(Weigher):
    name = "PCIWeigher"
    multiplier_option = "pci_weight_multiplier"

    def raw(self, table: HostTable, ctx: RequestContext, mask: np.ndarray | None = None) -> np.ndarray | None:
        if not table.has_pci():  # no node ever reported a device: every node weighs the same
            return None
        free = table.col("pci_free")
        raw: np.ndarray = MAX_DEVS - np.minimum(free, MAX_DEVS - 1)
        return raw
