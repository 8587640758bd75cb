"""The in-memory state of every host: ``HostTable`` and its parts (see ``gantt.compute.state.table``)."""

from gantt.compute.state.cells import CellArrays
from gantt.compute.state.columns import Factor, HostCaps
from gantt.compute.state.rejected import ClaimRejected, SourceMoved
from gantt.compute.state.table import HostTable

__all__ = ["CellArrays", "ClaimRejected", "Factor", "HostCaps", "HostTable", "SourceMoved"]
