"""The lowest and highest value of a weigher's raw column over the candidates, cheaply, and Nova's clamp of
values outside a weigher's fixed bounds: what normalizes each weigher's weights (``gantt.compute.weighing``)."""

from __future__ import annotations

import numpy as np

from gantt.compute.blocks import blocks_with
from gantt.compute.state.table import HostTable


class Extremes:
    """min / max of a raw column over the candidates, cheaply.

    numpy's ``where=`` reductions, ``np.where`` and gathers of most rows cost 50-100 µs per 100,000 rows; a plain
    reduction costs ~10. In order of preference:
    - over most of the cloud, a weigher that reads a usage column of the table asks the table's shortlist of that
      column's extreme rows (kept across decisions, patched on changed rows: a few µs);
    - with few candidates (``rows`` given), a gather of those rows and plain reductions;
    - the extreme over every row is also the candidates' extreme when the row holding it is a candidate, or when
      some candidate ties with it (common: many identical empty hosts); a column whose extremes agree over every
      row is constant over the candidates too;
    - otherwise the column is copied into a scratch buffer with the excluded rows set to a value that cannot win.
    """

    def __init__(self, table: HostTable, mask: np.ndarray, rows: np.ndarray | None, *,
                 by_blocks: bool = False, allowed: np.ndarray | None = None, has: np.ndarray | None = None) -> None:
        self.table = table
        self.mask = mask
        self.rows = rows
        # A decision over many rows: a usage column's extremes over the candidates come from its block bounds
        # (table.block_extreme), not from gathers (a zone's candidates) nor from shortlists of the column's
        # extreme rows, which the simulation's stream of reports and request classes kept rebuilding (a partition
        # of every row); and whether a candidate passes a weigher's fixed bound is asked of them directly
        # (table.block_beyond: the least free rows are rarely candidates).
        self.by_blocks = by_blocks
        # By blocks: per aggregate-set code, whether a candidate may have it (``MaskCache.allowed_codes``; None:
        # any), so that the block bounds of a class that aggregates restrict are its own sets' (table.block_extreme)
        self.allowed = allowed
        self._has: np.ndarray | None = has  # (given when the caller knows it)
        self._everyone: bool | None = None
        self._excluded: np.ndarray | None = None
        self._buffer: np.ndarray | None = None
        # (lo, hi) of a raw column over ``rows``, by the column's identity: a weigher's bounds and its clamp
        # check ask for the same column twice, and each gather of the candidates costs a pass over them.
        self._gathered: dict[int, tuple[np.ndarray, float, float]] = {}

    @property
    def everyone(self) -> bool:
        """Every row is a candidate (so plain reductions are exact)."""
        if self._everyone is None:
            self._everyone = self.rows is None and len(self.mask) > 0 and bool(self.mask.all())
        return self._everyone

    @property
    def has(self) -> np.ndarray:
        """Per block of rows, whether it holds a candidate (computed once per ranking, on first need)."""
        if self._has is None:
            self._has = blocks_with(self.mask)
        return self._has

    @property
    def excluded(self) -> np.ndarray:
        """Row numbers of the non-candidates (computed once per ranking, on first need)."""
        if self._excluded is None:
            self._excluded = np.flatnonzero(~self.mask)
        return self._excluded

    def bounds(self, raw: np.ndarray, minval: float | None, maxval: float | None,
               column: str | None = None) -> tuple[float, float] | None:
        """(lo, hi) of ``raw`` (every row) over the candidates, for normalization, or None when every candidate
        weighs the same (``hi <= lo``)."""
        lo, hi = minval, maxval
        if column is not None and self.rows is None and self.by_blocks:
            if lo is None:
                lo = self.table.derived.block_extreme(column, raw, self.mask, self.has, highest=False,
                                                      allowed=self.allowed)
            if hi is None:
                hi = self.table.derived.block_extreme(column, raw, self.mask, self.has, highest=True,
                                                      allowed=self.allowed)
        elif column is not None and self.rows is None:  # a shortlist rarely holds a small candidate set's extreme
            if lo is None:
                lo = self.table.derived.candidate_extreme(column, raw, self.mask, highest=False, everyone=self.everyone)
            if hi is None:
                hi = self.table.derived.candidate_extreme(column, raw, self.mask, highest=True, everyone=self.everyone)
        if lo is None or hi is None:
            if self.rows is not None:
                low, high = self._over_rows(raw)
                lo = low if lo is None else lo
                hi = high if hi is None else hi
            elif self.everyone:
                lo = float(raw.min()) if lo is None else lo
                hi = float(raw.max()) if hi is None else hi
            elif lo is None and hi is None:
                lo_row = int(raw.argmin())
                hi_row = int(raw.argmax())
                if raw[lo_row] == raw[hi_row]:
                    return None  # constant over every row, so over the candidates
                lo = self._extreme(raw, lo_row, highest=False)
                hi = self._extreme(raw, hi_row, highest=True)
            elif lo is None:
                lo = self._extreme(raw, int(raw.argmin()), highest=False)
            else:
                hi = self._extreme(raw, int(raw.argmax()), highest=True)
        assert lo is not None and hi is not None
        return (lo, hi) if hi > lo else None

    def beyond(self, raw: np.ndarray, column: str | None, limit: float, bounds: tuple[float, float], *,
               below: bool) -> bool:
        """Whether a candidate's value of ``raw`` lies below (above) ``limit``; ``bounds`` the (lo, hi) found
        for the weigher, whose other end the full question reuses."""
        if self.by_blocks and column is not None and self.rows is None:
            found = self.table.derived.block_beyond(column, raw, self.mask, self.has, limit, below=below)
            if found is not None:
                return found
        actual = self.bounds(raw, None, bounds[1], column) if below else self.bounds(raw, bounds[0], None, column)
        return actual is not None and (actual[0] < limit if below else actual[1] > limit)

    def _over_rows(self, raw: np.ndarray) -> tuple[float, float]:
        """min and max of ``raw`` over ``rows``, gathered once per column (the entry keeps ``raw`` alive, so its
        identity cannot be reused by another array meanwhile)."""
        seen = self._gathered.get(id(raw))
        if seen is None or seen[0] is not raw:
            assert self.rows is not None
            values = raw.take(self.rows)
            seen = (raw, float(values.min()), float(values.max()))
            self._gathered[id(raw)] = seen
        return seen[1], seen[2]

    def _extreme(self, raw: np.ndarray, row: int, *, highest: bool) -> float:
        value = raw[row]
        if self.mask[row]:
            return float(value)
        excluded = self.excluded
        if len(excluded) * 8 < len(raw):
            # Does a candidate tie with the overall extreme? Count the ties everywhere and among the excluded.
            ties = int(np.count_nonzero(raw == value))
            if ties > int(np.count_nonzero(raw.take(excluded) == value)):
                return float(value)
        if self._buffer is None:
            self._buffer = np.empty(len(raw))
        buffer = self._buffer
        np.copyto(buffer, raw)
        buffer[excluded] = -np.inf if highest else np.inf
        return float(buffer.max() if highest else buffer.min())


def clamped(extremes: Extremes, raw: np.ndarray, column: str | None, minval: float | None, maxval: float | None,
             bounds: tuple[float, float]) -> tuple[np.ndarray, str | None]:
    """Nova's weigh_objects: a weight below ``minval`` (above ``maxval``) counts as ``minval`` (``maxval``).

    Only when a candidate lies outside the bounds is a clamped copy made (it is then no longer the usage
    column, so the patched weighted sums do not apply to it); e.g. RAMWeigher's ``minval = 0`` clamps the
    negative free RAM of an overcommitted node.
    """
    if minval is not None and extremes.beyond(raw, column, minval, bounds, below=True):
        raw, column = np.maximum(raw, minval), None
    if maxval is not None and extremes.beyond(raw, column, maxval, bounds, below=False):
        raw, column = np.minimum(raw, maxval), None
    return raw, column
