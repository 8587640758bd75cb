"""The options Nova's scheduler reads each time a filter, a weigher or its manager runs, not once at start; and
setting them in a running scheduler's Config.

Nova's functional tests set options with ``self.flags`` after the scheduler started, and an operator may change
them with oslo.config's mutate: Nova's next request decides with them. Gantt's Nova seam
(``gantt.nova.conf.RequestOptions``) reads these from nova.conf at each request and, when one changed, sets it with
``retune`` and gives its engine new filters and weighers (``Engine.retune``). What Nova reads when it builds its
HostManager (``enabled_filters``, ``available_filters``, ``weight_classes``, ``track_instance_changes``,
``[metrics] weight_setting``, ``image_props_weight_setting``) or its service is read once, at start, as in Nova.
``[pci] alias`` is here: Nova's API reads it for each request it turns into PCI requests (an alias defined after the
scheduler started is known to the next request). ``pci_in_placement`` is not: Nova's API and conductor read it, when
they make the request's groups, which the seam translates per request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from gantt.config.options import Config
from gantt.model import InvalidRequest

# By nova.conf's sections; each option is one Gantt implements, or one it refuses unless at Nova's default (then a
# change is refused at the next request, as at start).
PER_REQUEST: dict[str, tuple[str, ...]] = {
    # the manager's pick (manager._get_sorted_hosts); the filters (IoOps, NumInstances and their aggregate variants,
    # IsolatedHosts, AggregateImagePropertiesIsolation, ImageProperties) and the weighers' multipliers
    "filter_scheduler": (
        "host_subset_size", "shuffle_best_same_weighed_hosts", "max_io_ops_per_host", "max_instances_per_host",
        "isolated_hosts", "isolated_images", "restrict_isolated_hosts_to_isolated_images",
        "aggregate_image_properties_isolation_namespace", "aggregate_image_properties_isolation_separator",
        "image_properties_default_architecture", "ram_weight_multiplier", "cpu_weight_multiplier",
        "disk_weight_multiplier", "io_ops_weight_multiplier", "num_instances_weight_multiplier",
        "hypervisor_version_weight_multiplier", "soft_affinity_weight_multiplier",
        "soft_anti_affinity_weight_multiplier", "build_failure_weight_multiplier", "pci_weight_multiplier",
        "image_props_weight_multiplier"),
    # the manager's alternates, the request filters (nova.scheduler.request_filter), ResourceRequest's limit
    "scheduler": (
        "max_attempts", "limit_tenants_to_placement_aggregate", "placement_aggregate_required_for_tenants",
        "enable_isolated_aggregate_filtering", "query_placement_for_image_type_support", "image_metadata_prefilter",
        "query_placement_for_routed_network_aggregates", "max_placement_results"),
    # MetricsWeigher (its weight_setting is parsed when it is built)
    "metrics": ("weight_multiplier", "required", "weight_of_unavailable"),
    # hardware.numa_fit_instance_to_host; the manager's PCPU -> VCPU fallback query
    "compute": ("packing_host_numa_cells_allocation_strategy",),
    "workarounds": ("disable_fallback_pcpu_query",),
    # nova.pci.request.get_pci_requests_from_flavor (checked whole, as at load: a list that does not parse is refused)
    "pci": ("alias",),
}


def retune(config: Config, values: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Set ``values`` (``{section: {option: value}}``, by nova.conf's names) in ``config``, in place; returns
    ``section.option`` of each that changed. A section that changes is checked whole, as at load (Nova's bounds,
    the options Gantt refuses unless at Nova's default): a value refused raises ``InvalidRequest`` naming it, and
    nothing is set. The caller gives its engines new filters and weighers when anything changed: the ones built
    keep masks and memos made with the old values."""
    checked: list[tuple[str, msgspec.Struct, msgspec.Struct, list[str]]] = []
    for section, given in values.items():
        live = getattr(config, "default" if section == "DEFAULT" else section, None)
        if not isinstance(live, msgspec.Struct):
            raise InvalidRequest(f"[{section}] is not a section of Gantt's configuration", field=section)
        now = msgspec.structs.asdict(live)
        wanted = {name: list(v) if isinstance(v, list | tuple) else v for name, v in given.items()}
        unknown = sorted(wanted.keys() - now.keys())
        if unknown:
            raise InvalidRequest(f"[{section}] {unknown[0]} is not an option Gantt implements",
                                 field=f"{section}.{unknown[0]}")
        new = _checked(section, type(live), now, wanted)
        changed = [name for name in wanted if getattr(new, name) != now[name]]
        if changed:
            checked.append((section, live, new, changed))
    for _, live, new, changed in checked:
        for name in changed:
            setattr(live, name, getattr(new, name))
    return [f"{section}.{name}" for section, _, _, changed in checked for name in changed]


def _checked(section: str, kind: type[msgspec.Struct], now: dict[str, Any], wanted: dict[str, Any]
             ) -> msgspec.Struct:
    """The section with ``wanted`` set, checked as at load; refused naming the first option it refuses alone."""
    try:
        return msgspec.convert({**now, **wanted}, kind, strict=False)
    except msgspec.ValidationError as exc:
        for name, value in wanted.items():
            try:
                msgspec.convert({**now, name: value}, kind, strict=False)
            except msgspec.ValidationError as alone:
                text = str(alone)
                message = text if text.startswith(f"[{section}] {name} ") else f"[{section}] {name} = {value!r}: {text}"
                raise InvalidRequest(message, field=f"{section}.{name}") from None
        raise InvalidRequest(f"[{section}]: {exc}", field=section) from None
