"""Nova's weighing over the candidates of one ranking: per weigher ``multiplier * (x - min) / (max - min)``,
summed, without per-row Python. Over usage columns with scalar multipliers the sum is the table's kept one
(``Derived.weighted_sum``), patched on changed rows rather than recomputed per decision."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from gantt.compute.extremes import Extremes, clamped
from gantt.compute.journal import SumTerm
from gantt.compute.request import RequestContext
from gantt.compute.state.table import HostTable
from gantt.compute.weighers.base import Weigher
from gantt.config import Config

# One weigher's part: (weigher, its usage column or None, its raw values per row, its multiplier (a float, or
# per row when an aggregate overrides it), the lowest and the highest value that normalize it)
Term = tuple[Weigher, str | None, np.ndarray, float | np.ndarray, float, float]
# (score, offset, shared, blockmax): see ``Weighing.weigh``
Weighed = tuple[np.ndarray, float, bool, np.ndarray | None]
# Per weigher seen: its raw column and the lowest and highest value over the candidates that normalize it
Bounds = list[tuple[np.ndarray, float | None, float | None]]


class Weighing:
    """Weighs one ranking's candidates; keeps the weighers' multipliers until static state moves."""

    def __init__(self, table: HostTable, config: Config) -> None:
        self.table = table
        # The tie shuffle draws among the rows at the best score: with every row a candidate, that score is the
        # kept sum's highest, read from its kept block maxima instead of a pass over every row.
        self._tops = config.filter_scheduler.shuffle_best_same_weighed_hosts
        self._multiplier_memo: tuple[tuple[Hashable, ...], list[float | np.ndarray]] | None = None

    def weigh(self, weighers: Sequence[Weigher], ctx: RequestContext, extremes: Extremes, rows: np.ndarray | None,
              contributions: dict[str, np.ndarray] | None, bounds_seen: Bounds | None = None,
              by_blocks: bool = False) -> Weighed:
        """Nova's weighing: per weigher ``multiplier * (x - min) / (max - min)`` over the candidates, summed.

        Returns ``(score, offset, shared, blockmax)``: the weight of a candidate is ``score + offset``. With a
        scalar multiplier a weigher contributes ``c * x - c * min``; the ``c * x`` terms are summed per row and the
        constants into ``offset``, which never changes the order and is added only to the weights reported. When
        every weigher reads a usage column with a scalar multiplier the per-row sum comes from the table's
        patched sums; else it is computed here. ``score`` covers every row, or ``rows`` (in that order) when
        given; it is the table's kept sum, not to be modified, when ``shared`` is true.
        With the kept sums, by blocks or for the tie shuffle over every row, ``blockmax`` is the kept sum's
        maxima per block (else None).
        ``bounds_seen`` receives, per weigher, its raw column and the lowest and highest value over the candidates
        that normalize it (None where a fixed ``minval``/``maxval`` does).
        """
        terms = self._terms(weighers, ctx, extremes, bounds_seen)
        if not terms:
            return np.zeros(len(rows) if rows is not None else self.table.n), 0.0, False, None
        if contributions is None and all(c for _, c, _, _, _, _ in terms):
            return self._kept(terms, extremes, rows, by_blocks)
        return self._summed(terms, extremes.mask, rows, contributions)

    def _terms(self, weighers: Sequence[Weigher], ctx: RequestContext, extremes: Extremes,
               bounds_seen: Bounds | None) -> list[Term]:
        """The weighers that tell the candidates apart, each with its values clamped and its bounds."""
        terms: list[Term] = []
        for weigher, multiplier in zip(weighers, self._multipliers(weighers), strict=True):
            if isinstance(multiplier, float) and multiplier == 0.0:
                continue
            raw = weigher.raw(self.table, ctx, extremes.mask)
            if raw is None:
                continue
            column = weigher.usage_column
            bounds = extremes.bounds(raw, weigher.minval, weigher.maxval, column)
            if bounds is None:
                continue  # Nova: every candidate equal -> every normalized weight 0
            if bounds_seen is not None:
                bounds_seen.append((raw, bounds[0] if weigher.minval is None else None,
                                    bounds[1] if weigher.maxval is None else None))
            raw, column = clamped(extremes, raw, column, weigher.minval, weigher.maxval, bounds)
            terms.append((weigher, column, raw, multiplier, *bounds))
        return terms

    def _kept(self, terms: list[Term], extremes: Extremes, rows: np.ndarray | None, by_blocks: bool) -> Weighed:
        """The same arithmetic as ``_summed``, kept per row across decisions (``Derived.weighted_sum``). A per-row
        multiplier only moves with static state, which the kept sums are tied to."""
        table = self.table
        offset = 0.0
        key: list[Hashable] = []
        sum_terms: list[SumTerm] = []
        for weigher, column, raw, multiplier, lo, hi in terms:
            if isinstance(multiplier, float):
                factor = multiplier / (hi - lo)
                key.append((column, factor))
                sum_terms.append((raw, factor, lo, None))
                offset -= lo * factor
            else:
                factor = 1.0 / (hi - lo)
                key.append((column, weigher.name, lo, factor))
                sum_terms.append((raw, factor, lo, multiplier))
        if by_blocks or (self._tops and rows is None and extremes.everyone):
            total, blockmax = table.derived.weighted_sum_blocks(tuple(key), sum_terms)
            return total, offset, True, blockmax
        return table.derived.weighted_sum(tuple(key), sum_terms, rows, copy=False), offset, rows is None, None

    def _summed(self, terms: list[Term], mask: np.ndarray, rows: np.ndarray | None,
                contributions: dict[str, np.ndarray] | None) -> Weighed:
        """The weighted sum computed here, with each weigher's part when ``contributions`` asks for them."""
        size = len(rows) if rows is not None else self.table.n
        offset = 0.0
        score = np.zeros(size)
        scratch = np.empty(size)
        for weigher, _, raw, multiplier, lo, hi in terms:
            if rows is not None:
                raw = raw[rows]
                if not isinstance(multiplier, float):
                    multiplier = multiplier[rows]
            if isinstance(multiplier, float):
                factor = multiplier / (hi - lo)
                np.multiply(raw, factor, out=scratch)
                score += scratch
                offset -= lo * factor
                if contributions is not None:
                    contributions[weigher.name] = _aligned(scratch - lo * factor, rows, mask)
            else:
                np.subtract(raw, lo, out=scratch)
                scratch *= 1.0 / (hi - lo)
                scratch *= multiplier
                score += scratch
                if contributions is not None:
                    contributions[weigher.name] = _aligned(scratch.copy(), rows, mask)
        return score, offset, False, None

    def _multipliers(self, weighers: Sequence[Weigher]) -> list[float | np.ndarray]:
        """Each weigher's ``multipliers``, kept until the static revision or the row count moves (they depend on
        the configuration and the aggregates only): one call per decision instead of one per weigher."""
        table = self.table
        key = (table.static_revision, table.n, tuple(weighers))  # (a copy of a ranker may be given other weighers)
        memo = self._multiplier_memo
        if memo is None or memo[0] != key:
            memo = (key, [weigher.multipliers(table) for weigher in weighers])
            self._multiplier_memo = memo
        return memo[1]


def _aligned(values: np.ndarray, rows: np.ndarray | None, mask: np.ndarray) -> np.ndarray:
    """Per-weigher contributions in candidate order (as ``Ranking.candidate_scores``), for dry runs."""
    return values if rows is not None else values[mask]
