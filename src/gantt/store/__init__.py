"""Stores: one narrow interface (``base.Store``), interchangeable backends (memory, sqlite, etcd), opened by URL
(``urls.open_store``)."""

from gantt.store.base import (
    Batch,
    Change,
    CommitResult,
    Compacted,
    ConsumerHeld,
    Expect,
    Snapshot,
    Store,
    StoreConflict,
)
from gantt.store.urls import open_store

__all__ = ["Batch", "Change", "CommitResult", "Compacted", "ConsumerHeld", "Expect", "Snapshot", "Store",
           "StoreConflict", "open_store"]
