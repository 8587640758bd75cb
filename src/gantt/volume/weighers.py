"""Cinder's weighers: raw values per pool, normalized over the candidates as Cinder's BaseWeightHandler does.

Cinder's normalization: ``(x - min) / (max - min)`` over the candidates (all 0 when they are equal), times the
weigher's multiplier, summed; then sorted by weight, highest first, ties in the pools' order. CapacityWeigher
has its own rule for pools of 'infinite' or 'unknown' capacity: with a positive multiplier they weigh -1 (last),
with a negative one +inf, which is then replaced by a value beyond the largest finite one.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from gantt.base.registry import Registry
from gantt.config import VolumeOptions
from gantt.volume import capacity
from gantt.volume.filters import Request, function_results, with_function
from gantt.volume.table import PoolTable

OFFSET_MIN = 10000.0
OFFSET_MULT = 100.0


class VolumeWeigher:
    name: ClassVar[str] = ""
    option: ClassVar[str] = ""  # the VolumeOptions field holding the multiplier

    def __init__(self, options: VolumeOptions) -> None:
        self.multiplier = float(getattr(options, self.option))
        self.options = options

    def raw(self, table: PoolTable, req: Request, rows: np.ndarray) -> np.ndarray:
        """One value per candidate row (``rows``: their indices)."""
        raise NotImplementedError

    def normalized(self, table: PoolTable, req: Request, rows: np.ndarray) -> np.ndarray:
        return normalize(self.raw(table, req, rows))


def normalize(values: np.ndarray, minval: float | None = None, maxval: float | None = None) -> np.ndarray:
    if len(values) == 0:
        return values
    low = float(values.min()) if minval is None else minval
    high = float(values.max()) if maxval is None else maxval
    if low == high:
        return np.zeros(len(values))
    return (values - low) / (high - low)


WEIGHERS: Registry[VolumeWeigher] = Registry("volume weigher")
register = WEIGHERS.register


@register
class CapacityWeigher(VolumeWeigher):
    """Virtual free capacity (thin) or free capacity less the reserve (thick): spread by default."""

    name = "CapacityWeigher"
    option = "capacity_weight_multiplier"

    def raw(self, table: PoolTable, req: Request, rows: np.ndarray) -> np.ndarray:
        virtual_free, _ = capacity.factors(table, req.thin, rows)
        special = ~capacity.numeric(table, rows)
        return np.where(special, -1.0 if self.multiplier > 0 else math.inf, virtual_free)

    def normalized(self, table: PoolTable, req: Request, rows: np.ndarray) -> np.ndarray:
        values = self.raw(table, req, rows)
        if len(values) == 0:
            return values
        low, high = float(values.min()), float(values.max())
        if math.isinf(high):
            finite = values[~np.isinf(values)]
            if len(finite) == 0:
                # Cinder 29 raises here (max() of nothing): every candidate unbounded; Gantt weighs them equal
                return np.zeros(len(values))
            high = float(finite.max())
            offset = (high - low) * OFFSET_MULT
            high += OFFSET_MIN if offset == 0.0 else offset
            values = np.where(np.isinf(values), high, values)
        return normalize(values, low, high)


@register
class AllocatedCapacityWeigher(VolumeWeigher):
    """Allocated capacity: the least allocated pool first by default (multiplier -1)."""

    name = "AllocatedCapacityWeigher"
    option = "allocated_capacity_weight_multiplier"

    def raw(self, table: PoolTable, req: Request, rows: np.ndarray) -> np.ndarray:
        allocated: np.ndarray = table.allocated[rows]
        return allocated


@register
class VolumeNumberWeigher(VolumeWeigher):
    """Number of volumes on the pool (the table's claims): the emptiest first by default (multiplier -1)."""

    name = "VolumeNumberWeigher"
    option = "volume_number_multiplier"

    def raw(self, table: PoolTable, req: Request, rows: np.ndarray) -> np.ndarray:
        counts: np.ndarray = table.volume_count[rows].astype(np.float64)
        return counts


def _rating(result: object) -> float:
    if result is None or isinstance(result, Exception):
        return 0.0
    if type(result) is bool:
        return 100.0 if result else 0.0
    if isinstance(result, int | float):
        return 0.0 if (result < 0 or result > 100) else float(result)
    return 0.0


@register
class GoodnessWeigher(VolumeWeigher):
    """The pool's own ``goodness_function`` (0-100; true is 100; out of range or failing: 0)."""

    name = "GoodnessWeigher"
    option = "goodness_weight_multiplier"

    def raw(self, table: PoolTable, req: Request, rows: np.ndarray) -> np.ndarray:
        values = np.zeros(table.n)
        for row in np.intersect1d(with_function(table, "goodness_function"), rows).tolist():
            values[row] = max(_rating(r) for r in function_results(table, row, req, "goodness_function"))
        rated: np.ndarray = values[rows]
        return rated
