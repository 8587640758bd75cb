"""The in-memory state of every host: ``HostTable`` and its parts (see ``gantt.state.table``)."""

from gantt.state.cells import CellArrays
from gantt.state.columns import Factor, HostCaps
from gantt.state.ledger import ClaimRejected, SourceMoved
from gantt.state.table import HostTable

__all__ = ["CellArrays", "ClaimRejected", "Factor", "HostCaps", "HostTable", "SourceMoved"]
