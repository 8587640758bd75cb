"""HypervisorVersionWeigher: prefer nodes running a newer hypervisor (negative multiplier: older ones)."""

from __future__ import annotations

import numpy as np

from gantt.request import RequestContext
from gantt.state import HostTable
from gantt.weighers.base import Weigher, register


@register
class HypervisorVersionWeigher(Weigher):
    """Nova's integer ``hypervisor_version`` (8002000 for QEMU 8.2.0); a node that never reported one is 0."""

    name = "HypervisorVersionWeigher"
    multiplier_option = "hypervisor_version_weight_multiplier"

    def raw(self, table: HostTable, ctx: RequestContext, mask: np.ndarray | None = None) -> np.ndarray | None:
        return table.col("hypervisor_version")
