"""Cinder's capacity factors (sched_utils.calculate_capacity_factors), vectorized over a PoolTable's rows.

Shared by CapacityFilter and CapacityWeigher, which must agree to the last rounding: Cinder rounds the virtual
free capacity and the total available capacity to two decimals with Python's ``round``. numpy's ``round``
(``rint(x * 100) / 100``) differs from it only where ``x * 100`` lies next to a half; those few values are
redone with Python's ``round``, so every figure is Cinder's.
"""

from __future__ import annotations

import numpy as np

from gantt.volume.table import NUMBER, PoolTable


def round2(values: np.ndarray) -> np.ndarray:
    """Python's ``round(x, 2)`` for every element (NaN and inf pass through)."""
    scaled = values * 100.0
    rounded = np.rint(scaled)
    np.subtract(scaled, rounded, out=scaled)
    np.abs(scaled, out=scaled)
    with np.errstate(invalid="ignore"):
        near = np.flatnonzero(scaled > 0.5 - 1e-6)
    rounded /= 100.0
    for index in near:
        rounded[index] = round(float(values[index]), 2)
    return rounded


def numeric(table: PoolTable, rows: np.ndarray | None = None) -> np.ndarray:
    """Rows whose total and free capacities are both numbers (the factors are defined there only)."""
    n = table.n
    total_kind = table.total_kind[:n] if rows is None else table.total_kind[rows]
    free_kind = table.free_kind[:n] if rows is None else table.free_kind[rows]
    both: np.ndarray = (total_kind == NUMBER) & (free_kind == NUMBER)
    return both


def factors(table: PoolTable, thin: bool, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(virtual free capacity, total available capacity) of every row (or of ``rows``, an index array), both
    rounded as Cinder rounds them; NaN where a capacity is not a number."""
    def col(column: np.ndarray) -> np.ndarray:
        return column[:table.n] if rows is None else column[rows]

    total = col(table.total)
    reserved_capacity = np.floor(total * (col(table.reserved) / 100.0))
    available = total - reserved_capacity
    use_thin = col(table.thin) & thin
    total_available = np.where(use_thin, available * col(table.ratio), available)
    calculated_free = total_available - col(table.provisioned)
    virtual_free = np.where(use_thin, calculated_free, np.minimum(calculated_free, col(table.free)))
    return round2(virtual_free), round2(total_available)
