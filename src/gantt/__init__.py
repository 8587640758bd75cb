"""Gantt: a standalone cloud scheduler with Nova-compatible decisions and claims that cannot double-book."""

from typing import TYPE_CHECKING, Any

from gantt.config import Config, load_config
from gantt.model import (
    Aggregate,
    Allocation,
    Candidate,
    Explanation,
    Flavor,
    GanttError,
    HostReport,
    HostStats,
    Image,
    InstanceGroup,
    InvalidRequest,
    Inventory,
    NotFound,
    NoValidHost,
    RequestSpec,
    Selection,
    StoreUnavailable,
)

if TYPE_CHECKING:
    from gantt.compute.commit import ClaimConflict
    from gantt.compute.engine import Engine
    from gantt.compute.scheduler import Scheduler
    from gantt.compute.state import HostTable

from gantt.base.version import __version__

# The scheduler itself (numpy, the engine, the table) loads on first use, so that ``gantt.client`` and the wire
# types it imports do not pull the server side into a client process.
_LAZY = {"ClaimConflict": "gantt.compute.commit", "Engine": "gantt.compute.engine",
         "Scheduler": "gantt.compute.scheduler", "HostTable": "gantt.compute.state"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gantt' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

__all__ = [
    "Aggregate",
    "Allocation",
    "Candidate",
    "ClaimConflict",
    "Config",
    "Engine",
    "Explanation",
    "Flavor",
    "GanttError",
    "HostReport",
    "HostStats",
    "HostTable",
    "Image",
    "InstanceGroup",
    "InvalidRequest",
    "Inventory",
    "NoValidHost",
    "NotFound",
    "RequestSpec",
    "Scheduler",
    "Selection",
    "StoreUnavailable",
    "__version__",
    "load_config",
]
