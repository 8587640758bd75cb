"""Nova's scheduler options, in nova.conf's sections: ``[filter_scheduler]``, ``[scheduler]``, ``[metrics]``,
``[DEFAULT]`` and ``[compute]``."""

from __future__ import annotations

import logging

from msgspec import Struct, field

from gantt.config.checks import finite_floats, refuse_without_effect
from gantt.model.prepare import prepare_types
from gantt.model.request_spec import ARCHITECTURES

log = logging.getLogger(__name__)

NOVA_DEFAULT_FILTERS = [
    "ComputeFilter",
    "ComputeCapabilitiesFilter",
    "ImagePropertiesFilter",
    "ServerGroupAntiAffinityFilter",
    "ServerGroupAffinityFilter",
]

NOVA_ALL_WEIGHERS = ["nova.scheduler.weights.all_weighers"]


class FilterSchedulerSection(Struct, forbid_unknown_fields=True, kw_only=True):
    enabled_filters: list[str] = field(default_factory=lambda: list(NOVA_DEFAULT_FILTERS))
    available_filters: list[str] = field(default_factory=lambda: ["nova.scheduler.filters.all_filters"])
    weight_classes: list[str] = field(default_factory=lambda: list(NOVA_ALL_WEIGHERS))
    host_subset_size: int = 1
    shuffle_best_same_weighed_hosts: bool = False
    max_io_ops_per_host: int = 8
    max_instances_per_host: int = 50
    isolated_images: list[str] = field(default_factory=list)
    isolated_hosts: list[str] = field(default_factory=list)
    restrict_isolated_hosts_to_isolated_images: bool = True
    aggregate_image_properties_isolation_namespace: str | None = None
    aggregate_image_properties_isolation_separator: str = "."
    image_properties_default_architecture: str | None = None  # ImagePropertiesFilter: arch of images without one
    ram_weight_multiplier: float = 1.0
    cpu_weight_multiplier: float = 1.0
    disk_weight_multiplier: float = 1.0
    io_ops_weight_multiplier: float = -1.0
    num_instances_weight_multiplier: float = 0.0
    hypervisor_version_weight_multiplier: float = 1.0
    soft_affinity_weight_multiplier: float = 1.0
    soft_anti_affinity_weight_multiplier: float = 1.0
    build_failure_weight_multiplier: float = 1000000.0
    pci_weight_multiplier: float = 1.0
    # A claim holds the flavor's PCI devices on their Placement providers too (the pools' rp_uuid), as Nova's
    # allocation candidates do once its request groups carry them
    pci_in_placement: bool = False
    # Nova options Gantt does not implement: see _FILTER_SCHEDULER_WITHOUT_EFFECT.
    image_props_weight_multiplier: float = 0.0

    def __post_init__(self) -> None:
        refuse_without_effect("filter_scheduler", self, _FILTER_SCHEDULER_WITHOUT_EFFECT)
        finite_floats(self)
        available = [name.rsplit(".", 1)[-1] for name in self.available_filters]
        if "all_filters" not in available:
            missing = [n for n in self.enabled_filters if n.rsplit(".", 1)[-1] not in available]
            if missing:
                raise ValueError(f"enabled_filters names {', '.join(missing)}, which available_filters does not "
                                 "make available")
        arch = self.image_properties_default_architecture
        # Nova's option takes one of its architectures (oslo.config's choices)
        if arch is not None and arch not in ARCHITECTURES:
            raise ValueError(f"image_properties_default_architecture {arch!r} is not one of Nova's "
                             f"architectures ({', '.join(sorted(ARCHITECTURES))})")
        # Nova 34's own bounds on these options (oslo.config refuses a value outside them at start).
        for name, least in (("host_subset_size", 1), ("max_io_ops_per_host", 0), ("max_instances_per_host", 1),
                            ("soft_affinity_weight_multiplier", 0.0), ("soft_anti_affinity_weight_multiplier", 0.0),
                            ("pci_weight_multiplier", 0.0)):
            if getattr(self, name) < least:
                raise ValueError(f"{name} must be >= {least}")


class SchedulerSection(Struct, forbid_unknown_fields=True, kw_only=True):
    max_attempts: int = 3
    query_placement_for_availability_zone: bool = True
    limit_tenants_to_placement_aggregate: bool = False
    placement_aggregate_required_for_tenants: bool = False
    enable_isolated_aggregate_filtering: bool = False
    query_placement_for_image_type_support: bool = False
    workers: int | None = None
    image_metadata_prefilter: bool = False
    # Nova options Gantt does not implement: see _SCHEDULER_WITHOUT_EFFECT.
    driver: str = "filter_scheduler"
    max_placement_results: int = 1000
    query_placement_for_routed_network_aggregates: bool = False

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if self.workers is not None and self.workers < 1:
            raise ValueError("workers must be >= 1")
        refuse_without_effect("scheduler", self, _SCHEDULER_WITHOUT_EFFECT)


# Nova options that would change a placement in Nova and that Gantt does not implement (see refuse_without_effect).
_FILTER_SCHEDULER_WITHOUT_EFFECT = {
    "image_props_weight_multiplier": "Gantt has no ImagePropertiesWeigher (it needs the images of the instances "
                                     "on each host, which hosts do not report)",
}
_SCHEDULER_WITHOUT_EFFECT = {
    "driver": "Gantt is the filter scheduler",
    "max_placement_results": "Gantt filters and weighs every host itself; there is no Placement query to cap",
    "query_placement_for_routed_network_aggregates": "Gantt has no routed-network prefilter (it does not know "
                                                     "the ports' segments)",
}


def parse_weight_setting(entries: list[str]) -> list[tuple[str, float]]:
    """``[metrics] weight_setting``: ``["cpu.percent=-1.0", …]`` → ``[("cpu.percent", -1.0), …]``.

    Read by MetricsFilter and MetricsWeigher alike, as in Nova (``utils.parse_options``): an entry that is not
    ``name=number`` is logged and skipped, not an error at start.
    """
    good: list[tuple[str, float]] = []
    bad: list[str] = []
    for entry in entries:
        name, sep, ratio = entry.partition("=")
        name = name.strip()
        try:
            value = float(ratio)
        except ValueError:
            bad.append(entry)
            continue
        if not name or not sep:
            bad.append(entry)
            continue
        good.append((name, value))
    if bad:
        log.warning("ignoring invalid [metrics] weight_setting entries: %s", ", ".join(bad))
    return good


class MetricsSection(Struct, forbid_unknown_fields=True, kw_only=True):
    weight_multiplier: float = 1.0
    weight_setting: list[str] = field(default_factory=list)
    required: bool = True
    weight_of_unavailable: float = -10000.0

    def __post_init__(self) -> None:
        finite_floats(self)


class DefaultSection(Struct, forbid_unknown_fields=False, kw_only=True):
    default_availability_zone: str = "nova"
    allow_resize_to_same_host: bool = False  # a move may land on the host it leaves (Nova's option, same default)
    service_down_time: float = 60.0
    cpu_allocation_ratio: float | None = None
    ram_allocation_ratio: float | None = None
    disk_allocation_ratio: float | None = None
    initial_cpu_allocation_ratio: float = 4.0
    initial_ram_allocation_ratio: float = 1.0
    initial_disk_allocation_ratio: float = 1.0


class ComputeSection(Struct, forbid_unknown_fields=False, kw_only=True):
    """nova.conf's ``[compute]``: most of it is nova-compute's own and ignored (as ``[DEFAULT]``'s is)."""

    # NUMATopologyFilter: when a guest needs fewer cells than the host has, try the fullest cells first (True)
    # or the emptiest (False, Nova's default).
    packing_host_numa_cells_allocation_strategy: bool = False


class WorkaroundsSection(Struct, forbid_unknown_fields=False, kw_only=True):
    """nova.conf's ``[workarounds]``: mostly nova-compute's and the conductor's (ignored), and this one of the
    scheduler's. A guest whose ``hw:cpu_policy`` is ``dedicated`` asks for PCPU; hosts still configured with
    ``vcpu_pin_set`` report their pinnable CPUs as VCPU only, so Nova's scheduler asks Placement a second time
    with VCPU in place of PCPU (and without the thread policy's trait) and weighs both answers together. True:
    the PCPU query alone."""

    disable_fallback_pcpu_query: bool = False


prepare_types(globals())  # build msgspec type info before any thread decodes (see gantt.model.prepare)
