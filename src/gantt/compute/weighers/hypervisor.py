"""HypervisorVersionWeigher: prefer nodes running a newer hypervisor (negative multiplier: older ones)."""

from __future__ import annotations

from gantt.compute.weighers.base import Weigher, register


@register
class HypervisorVersionWeigher(Weigher):
    """Nova's integer ``hypervisor_version`` (8002000 for QEMU 8.2.0); a node that never reported one is 0."""

    name = "HypervisorVersionWeigher"
    multiplier_option = "hypervisor_version_weight_multiplier"
    # Written only with a report, which journals its row: the extremes come from a kept shortlist, not two
    # passes over every row per decision.
    usage_column = "hypervisor_version"
