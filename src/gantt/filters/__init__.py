"""Filters, one module per family; importing this package registers them all (see ``base.register``)."""

from gantt.filters import base
from gantt.filters.base import FILTERS, Filter, register, resolve

# Import for registration side effects; each module holds one family of filters.
from gantt.filters import compute, placement  # noqa: F401  isort: skip
from gantt.filters import (  # noqa: F401  isort: skip
    affinity, aggregate_specs, all_hosts, availability_zone, capabilities, image_isolation, image_props, io_ops,
    isolated, json_filter, metrics, num_instances, prefilters, ratios, tenant, type_affinity,
)

__all__ = ["FILTERS", "Filter", "base", "register", "resolve"]
