"""Per-cell NUMA figures as columns: what NUMATopologyFilter's vectorized prefilter reads instead of the cells.

One 2-D array per figure, rows x cells (``K``, the most cells any node reported; a node with fewer leaves the
rest empty: ``exists`` 0), and one per huge-page size (free MiB in pages of that size, -1 where a cell has none).
A cloud whose nodes report no NUMA topology has ``K = 0`` and pays nothing.

Kept current by ``Columns.count_numa_claims``, which every report of cells and every claim or release that
counts NUMA parts goes through, so the figures are those of the cells a fit reads (reported, less what
unconfirmed claims hold). Arrays are swapped, never resized in place: a reader without the lock keeps a
consistent (if slightly old) array.
"""

from __future__ import annotations

import numpy as np

from gantt.numa import HostNUMA

# per cell: CPUs (cpuset), dedicated CPUs (pcpuset), free dedicated CPUs, shared CPUs in use, memory (MiB) and
# memory in use, the smallest page size's total and free memory (MiB), whether the cell reports pages at all,
# the most threads of one core, and the largest free memory (MiB) in pages other than the smallest / in any pages
# the most a guest cell may ask here with no page size: pinned (free small pages, or free memory without a page
# list) and not pinned (every small page, or all memory: unpinned guests may overcommit small pages)
FIELDS = ("exists", "cpus", "pcpus", "free_pcpus", "cpu_usage", "memory", "memory_usage", "small_total_mb",
          "small_free_mb", "has_pages", "threads", "large_free_mb", "any_free_mb", "memory_pinned",
          "memory_unpinned")


class CellColumns:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.width = 0  # K
        self.fields: dict[str, np.ndarray] = {f: np.zeros((capacity, 0)) for f in FIELDS}
        self.pages: dict[float, np.ndarray] = {}  # page size (KiB) -> free MiB in pages of that size

    # ------------------------------------------------------------------------------------------ shape

    def _widen(self, width: int) -> None:
        for name, arr in list(self.fields.items()):
            grown = np.zeros((self.capacity, width))
            grown[:, : self.width] = arr
            self.fields[name] = grown
        for size, arr in list(self.pages.items()):
            grown = np.full((self.capacity, width), -1.0)
            grown[:, : self.width] = arr
            self.pages[size] = grown
        self.width = width

    def _page_column(self, size: float) -> np.ndarray:
        arr = self.pages.get(size)
        if arr is None:
            arr = self.pages[size] = np.full((self.capacity, self.width), -1.0)
        return arr

    def grow(self, capacity: int) -> None:
        for name, arr in list(self.fields.items()):
            grown = np.zeros((capacity, self.width))
            grown[: self.capacity] = arr
            self.fields[name] = grown
        for size, arr in list(self.pages.items()):
            grown = np.full((capacity, self.width), -1.0)
            grown[: self.capacity] = arr
            self.pages[size] = grown
        self.capacity = capacity

    def move(self, row: int, last: int) -> None:
        for arr in self.fields.values():
            arr[row] = arr[last]
        for arr in self.pages.values():
            arr[row] = arr[last]

    def reset(self, row: int) -> None:
        for arr in self.fields.values():
            arr[row] = 0.0
        for arr in self.pages.values():
            arr[row] = -1.0

    # ------------------------------------------------------------------------------------------ values

    def set(self, row: int, numa: HostNUMA | None) -> None:
        """The row's figures from its cells as a fit reads them (None: no NUMA topology)."""
        cells = numa.cells if numa is not None else ()
        if len(cells) > self.width:
            self._widen(len(cells))
        self.reset(row)
        f = self.fields
        for k, cell in enumerate(cells):
            f["exists"][row, k] = 1.0
            f["cpus"][row, k] = len(cell.cpuset)
            f["pcpus"][row, k] = len(cell.pcpuset)
            f["free_pcpus"][row, k] = len(cell.free_pcpus)
            f["cpu_usage"][row, k] = cell.cpu_usage
            f["memory"][row, k] = cell.memory
            f["memory_usage"][row, k] = cell.memory_usage
            f["threads"][row, k] = max((len(s) for s in cell.siblings), default=0) or 1
            f["memory_pinned"][row, k] = cell.memory - cell.memory_usage
            f["memory_unpinned"][row, k] = cell.memory
            if not cell.pages:
                continue
            f["has_pages"][row, k] = 1.0
            smallest = min(size for size, _, _ in cell.pages)
            large = -1.0
            every = -1.0
            seen: set[float] = set()
            for size, total, free in cell.pages:
                if size in seen:
                    continue  # a fit reads the first entry of a size
                seen.add(size)
                free_mb = free * size / 1024
                self._page_column(float(size))[row, k] = free_mb
                every = max(every, free_mb)
                if size == smallest:
                    f["small_total_mb"][row, k] = total * size / 1024
                    f["small_free_mb"][row, k] = free_mb
                else:
                    large = max(large, free_mb)
            f["large_free_mb"][row, k] = large
            f["any_free_mb"][row, k] = every
            f["memory_pinned"][row, k] = f["small_free_mb"][row, k]
            f["memory_unpinned"][row, k] = f["small_total_mb"][row, k]
