"""Gantt: a standalone cloud scheduler with Nova-compatible decisions and claims that cannot double-book."""

from gantt.config import Config, load_config
from gantt.engine import ClaimConflict, Engine
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
from gantt.scheduler import Scheduler
from gantt.state import HostTable

__version__ = "0.1.0"

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
    "load_config",
]
