"""The weigher contract, and the registry that finds weighers by Nova's class name.

A weigher returns raw values for all rows; the engine normalizes them over the candidates exactly as Nova does
(``(x - min) / (max - min)``, all zeros when every candidate has the same value), multiplies by the weigher's
multiplier (per node, when an aggregate overrides it: the lowest value across the node's aggregates wins), and
sums. Weighers never import each other.

What a weigher must have:
- ``name``: Nova's class name, the key ``weight_classes`` uses; ``@register`` puts the class in ``WEIGHERS``.
- ``raw(table, ctx, mask)``: one float per row (a column, never a loop over hosts), or None when the request
  gives every node the same weight; a weigher whose ``usage_column`` is a column of the table may leave ``raw``
  to the base, which reads that column.
- its multiplier: ``multiplier_option``, the ``[filter_scheduler]`` option holding it (aggregates override it by
  a metadata key of the same name); a weigher whose option lives elsewhere overrides ``multiplier()`` too.

What a weigher may declare (class attributes with defaults): ``minval``/``maxval`` (Nova's fixed normalization
bounds), ``multiplier_sign`` (negates the multiplier after the aggregate override), ``usage_column`` (``raw`` is
exactly that journaled usage column, so the candidates' extremes come from a shortlist kept across decisions).

Order: ``weight_classes``' order; ``all_weighers`` stands for ``gantt.compute.weighers.pipeline.ALL_WEIGHERS``, in
its order.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from gantt.base.registry import Registry
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable
from gantt.config import Config, FilterSchedulerSection


class Weigher:
    """Base class: see the module's docstring for the contract."""

    name: ClassVar[str] = ""
    # The [filter_scheduler] option holding the multiplier; aggregates override it by a metadata key of this
    # name.
    multiplier_option: ClassVar[str] = ""
    # Fixed normalization bounds (Nova's minval/maxval); None: taken from the candidates.
    minval: ClassVar[float | None] = None
    maxval: ClassVar[float | None] = None
    # Nova's BuildFailureWeigher negates its multiplier *after* the aggregate override is resolved; a sign
    # here keeps that exact (negating the raw values instead would shift per-node scores when overrides
    # differ).
    multiplier_sign: ClassVar[float] = 1.0
    # When ``raw`` is exactly a usage column of the table (a name the table journals changes of), the engine
    # finds its extremes over the candidates from a shortlist kept across decisions instead of a full pass.
    usage_column: ClassVar[str | None] = None

    def __init__(self, config: Config) -> None:
        self.config = config

    def multiplier(self) -> float:
        """The configured multiplier (before any aggregate override and before ``multiplier_sign``)."""
        return float(getattr(self.config.filter_scheduler, self.multiplier_option))

    def multipliers(self, table: HostTable) -> float | np.ndarray:
        """The effective multiplier: a float when no aggregate overrides it, else one value per live row.

        Nova's get_weight_multiplier: the lowest value of the option's metadata key across the node's
        aggregates, the configured value where none sets it. The per-row array only changes with static
        state, so it is memoized in the table's aggregate cache (one build per aggregate change, not per
        decision).
        """
        base = self.multiplier()
        sign = self.multiplier_sign
        if not self.multiplier_option:
            return sign * base
        option = self.multiplier_option

        def build() -> np.ndarray | None:
            override = table.metadata_min(option)
            if override is None:
                return None
            per_row = np.where(np.isnan(override), base, override)
            per_row *= sign
            return per_row

        per_row = table.static_cache(("weight_multiplier", option, base, sign), build)
        return sign * base if per_row is None else per_row

    def raw(self, table: HostTable, ctx: RequestContext, mask: np.ndarray | None = None) -> np.ndarray | None:
        """Raw per-row values (length ``table.n``), or None when the request gives every node the same weight.

        ``mask`` marks the candidates (the rows that passed the filters); most weighers ignore it, but a
        weigher that must fail on a candidate (MetricsWeigher with ``required``) looks only at those rows.
        By default the table's column named ``usage_column``: a weigher that declares one and reads it this way
        cannot read another column than the one whose shortlist gives the engine its extremes.
        """
        if self.usage_column is None:
            raise NotImplementedError
        return table.col(self.usage_column)


WEIGHERS: Registry[Weigher] = Registry("weigher")


def register(cls: type[Weigher]) -> type[Weigher]:
    """``WEIGHERS.register``, refusing at import a weigher that would fail at its first decision instead."""
    if cls.multiplier is Weigher.multiplier and cls.multiplier_option not in FilterSchedulerSection.__struct_fields__:
        raise TypeError(f"weigher {cls.name or cls.__qualname__}: multiplier_option {cls.multiplier_option!r} is "
                        "not a [filter_scheduler] option; name one, or override multiplier()")
    if cls.raw is Weigher.raw and cls.usage_column is None:
        raise TypeError(f"weigher {cls.name or cls.__qualname__}: neither raw() nor a usage_column")
    return WEIGHERS.register(cls)
