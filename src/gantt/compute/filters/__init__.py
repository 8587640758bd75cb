"""Filters, one module per family; importing this package registers them all. ``base`` states the contract;
``pipeline`` hands the engine its filters in the order they run."""

from gantt.compute.filters import base
from gantt.compute.filters.base import FILTERS, Filter, register, resolve
from gantt.compute.filters.pipeline import ALWAYS_ON, RUN_ON_REBUILD, pipeline

__all__ = ["ALWAYS_ON", "FILTERS", "RUN_ON_REBUILD", "Filter", "base", "pipeline", "register", "resolve"]
