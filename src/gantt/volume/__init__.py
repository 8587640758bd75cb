"""The volume namespace's domain: Cinder's pools, requests, filters and weighers (no HTTP, no store).

See ``model`` (PoolReport, BackendReport, VolumeRequest, Pick), ``table`` (PoolTable),
``scheduler`` (VolumeScheduler), ``filters`` / ``weighers`` (Cinder's, vectorized), ``expression`` (the
filter_function / goodness_function language) and ``specs`` (Cinder's extra-spec operators).
"""

from gantt.volume.model import (
    BackendReport,
    Pick,
    PoolReport,
    PoolService,
    SchedulerHints,
    VolumeProperties,
    VolumeRequest,
    VolumeType,
)
from gantt.volume.scheduler import VolumeScheduler
from gantt.volume.table import PoolTable

__all__ = ["BackendReport", "Pick", "PoolReport", "PoolService", "PoolTable", "SchedulerHints",
           "VolumeProperties", "VolumeRequest", "VolumeScheduler", "VolumeType"]
