"""RAMWeigher, CPUWeigher, DiskWeigher: prefer (multiplier > 0) or avoid (< 0) free capacity, as in Nova."""

from __future__ import annotations

from gantt.compute.weighers.base import Weigher, register


class _FreeCapacityWeigher(Weigher):
    minval = 0.0  # as Nova: normalized from 0 (not the least free candidate); below 0 counts as 0


@register
class RAMWeigher(_FreeCapacityWeigher):
    """Free RAM in MB (physical: total - reserved - used, in-flight claims included)."""

    name = "RAMWeigher"
    multiplier_option = "ram_weight_multiplier"
    usage_column = "free_ram_mb"


@register
class CPUWeigher(_FreeCapacityWeigher):
    """Free vCPUs: ``vcpus * cpu_allocation_ratio - vcpus_used``, as Nova's HostState has them (a VCPU inventory's
    ``reserved`` is not taken off: see the ``free_vcpus`` column)."""

    name = "CPUWeigher"
    multiplier_option = "cpu_weight_multiplier"
    usage_column = "free_vcpus"


@register
class DiskWeigher(_FreeCapacityWeigher):
    """Free disk in MB (the hypervisor's ``disk_available_least`` when it reports one)."""

    name = "DiskWeigher"
    multiplier_option = "disk_weight_multiplier"
    usage_column = "free_disk_mb"
