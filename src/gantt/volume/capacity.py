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
    out = np.rint(scaled) / 100.0
    with np.errstate(invalid="ignore"):
        near = np.abs(np.abs(scaled - np.floor(scaled)) - 0.5) < 1e-6
    for index in np.flatnonzero(near):
        out[index] = round(float(values[index]), 2)
    return out


def numeric(table: PoolTable) -> np.ndarray:
    """Rows whose total and free capacities are both numbers (the factors are defined there only)."""
    n = table.n
    return (table.total_kind[:n] == NUMBER) & (table.free_kind[:n] == NUMBER)


def factors(table: PoolTable, thin: bool, ratio: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(virtual free capacity, total available capacity), both rounded as Cinder rounds them; NaN where a
    capacity is not a number. ``ratio``: the over-subscription ratio to use (default: the pools' own)."""
    n = table.n
    total = table.total[:n]
    reserved_capacity = np.floor(total * (table.reserved[:n] / 100.0))
    available = total - reserved_capacity
    use_thin = table.thin[:n] & thin
    mosr = table.ratio[:n] if ratio is None else ratio
    total_available = np.where(use_thin, available * mosr, available)
    calculated_free = total_available - table.provisioned[:n]
    virtual_free = np.where(use_thin, calculated_free, np.minimum(calculated_free, table.free[:n]))
    return round2(virtual_free), round2(total_available)
