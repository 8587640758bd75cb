"""The filters a request runs through, in order: ``ALWAYS_ON`` (Placement's query and Nova's request filters),
then ``enabled_filters``; a rebuild runs ``RUN_ON_REBUILD`` only. Imports every family so all are registered."""

from gantt.compute.filters.base import FILTERS, Filter, resolve

# Import for registration side effects; each module holds one family of filters.
from gantt.compute.filters import (  # noqa: F401  isort: skip
    affinity, aggregate_specs, all_hosts, availability_zone, capabilities, compute, image_isolation, image_props,
    isolated, json_filter, load, metrics, numa_topology, pci, placement, prefilters, ratios, tenant,
    type_affinity,
)

# Every request meets these first, whatever enabled_filters says, in this order (which is also the order an
# explanation lists them in). Placement's query comes first, as Nova asks Placement before it filters: resources
# (one usage mask, patched from the journal), then traits and aggregate membership; then Nova's request filters.
# Each is cheap: a patched mask, or a static one cached per request class.
ALWAYS_ON = (
    "ResourceFilter", "TraitsFilter", "MemberOfFilter", "RequestGroupsFilter",
    "AvailabilityZoneRequestFilter", "require_tenant_aggregate", "isolate_aggregates", "require_image_type_support",
    "transform_image_metadata", "compute_status_filter",
)

# Nova's filters with RUN_ON_REBUILD: the only ones a rebuild runs (they judge the new image, not usage; nor does a
# rebuild ask Placement or run the request filters, so the always-on ones are skipped as well).
RUN_ON_REBUILD = frozenset({"ImagePropertiesFilter", "IsolatedHostsFilter", "AggregateImagePropertiesIsolation"})


def pipeline(enabled: list[str]) -> list[type[Filter]]:
    """The filters a request runs through: ``ALWAYS_ON``, then ``enabled`` in its order (each once), as Nova runs
    ``enabled_filters``."""
    return [*(FILTERS[name] for name in ALWAYS_ON), *dict.fromkeys(resolve(name) for name in enabled)]


def _check_always_on() -> None:
    # A filter that declares always_on but is missing from the list would silently never run.
    declared = {name for name, cls in FILTERS.items() if cls.always_on}
    if declared != set(ALWAYS_ON):
        raise TypeError(f"always-on filters {sorted(declared)} are not those ALWAYS_ON names: {sorted(ALWAYS_ON)}")


_check_always_on()
