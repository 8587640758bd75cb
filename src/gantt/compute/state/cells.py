"""Per-cell NUMA figures as columns: what NUMATopologyFilter's vectorized prefilter reads instead of the cells.

One 2-D array per figure, rows x cells (the most cells any node reported; a node with fewer leaves the rest
empty: ``exists`` 0), and one per page size (free MiB in pages of that size, -1 where a cell has none).
A cloud whose nodes report no NUMA topology has no cell columns and pays nothing.

Kept current by ``Columns.count_numa_claims``, which every report of cells and every claim or release that
counts NUMA parts goes through, so the figures are those of the cells a fit reads (reported, less what
unconfirmed claims hold). Arrays are swapped, never resized in place: a reader without the lock keeps a
consistent (if slightly old) array.
"""

from __future__ import annotations

import numpy as np

from gantt.compute.numa import HostNUMA

# per cell: CPUs (cpuset), dedicated CPUs (pcpuset), free dedicated CPUs, shared CPUs in use, memory (MiB) and
# memory in use, the smallest page size's total and free memory (MiB), whether the cell reports pages at all,
# the most threads of one core, and the largest free memory (MiB) in pages other than the smallest / in any pages
# the most a guest cell may ask here with no page size: pinned (free small pages, or free memory without a page
# list) and not pinned (every small page, or all memory: unpinned guests may overcommit small pages)
FIELDS = ("exists", "cpus", "pcpus", "free_pcpus", "cpu_usage", "memory", "memory_usage", "small_total_mb",
          "small_free_mb", "has_pages", "threads", "large_free_mb", "any_free_mb", "memory_pinned",
          "memory_unpinned")


class CellArrays:
    """Every per-cell array of one shape (rows x ``width``), swapped as one object when the shape changes, so a
    reader that took it once never mixes arrays of two widths."""

    __slots__ = ("fields", "pages", "width")

    def __init__(self, fields: dict[str, np.ndarray], pages: dict[float, np.ndarray], width: int) -> None:
        self.fields = fields
        self.pages = pages  # page size (KiB) -> free MiB in pages of that size; a size seen first adds a key
        self.width = width


class CellColumns:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.arrays = CellArrays({f: np.zeros((capacity, 0)) for f in FIELDS}, {}, 0)

    # ------------------------------------------------------------------------------------------ shape

    def _reshaped(self, capacity: int, width: int) -> None:
        old = self.arrays
        rows = min(self.capacity, capacity)

        def copy(arr: np.ndarray, fill: float) -> np.ndarray:
            grown = np.full((capacity, width), fill)
            grown[:rows, : old.width] = arr[:rows]
            return grown

        self.arrays = CellArrays({name: copy(arr, 0.0) for name, arr in old.fields.items()},
                                 {size: copy(arr, -1.0) for size, arr in old.pages.items()}, width)
        self.capacity = capacity

    def _page_column(self, size: float) -> np.ndarray:
        arrays = self.arrays
        arr = arrays.pages.get(size)
        if arr is None:
            arr = arrays.pages[size] = np.full((self.capacity, arrays.width), -1.0)
        return arr

    def grow(self, capacity: int) -> None:
        self._reshaped(capacity, self.arrays.width)

    def move(self, row: int, last: int) -> None:
        arrays = self.arrays
        for arr in (*arrays.fields.values(), *arrays.pages.values()):
            arr[row] = arr[last]

    def reset(self, row: int) -> None:
        arrays = self.arrays
        for arr in arrays.fields.values():
            arr[row] = 0.0
        for arr in arrays.pages.values():
            arr[row] = -1.0

    # ------------------------------------------------------------------------------------------ values

    def set(self, row: int, numa: HostNUMA | None) -> None:
        """The row's figures from its cells as a fit reads them (None: no NUMA topology)."""
        cells = numa.cells if numa is not None else ()
        if len(cells) > self.arrays.width:
            self._reshaped(self.capacity, len(cells))
        self.reset(row)
        f = self.arrays.fields
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
