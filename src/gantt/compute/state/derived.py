"""Figures derived from the usage columns and kept across decisions, patched on the rows the journal lists as
changed rather than recomputed per decision (``gantt.compute.journal``): liveness, usage masks and verdicts,
a column's extremes over the candidates, the weighers' kept sums."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np

from gantt.compute.candidates import KeptCandidates
from gantt.compute.extreme_caches import BlockExtremes, ColumnBounds
from gantt.compute.journal import (
    Liveness,
    PatchedMasks,
    Rows,
    SumTerm,
    WeightedSums,
    weighted_sum,
)
from gantt.compute.state.changes import Changes
from gantt.compute.state.columns import Columns


class Derived:
    """The table's derived figures (``HostTable.derived``); every one is read without the table's lock."""

    def __init__(self, columns: Columns, changes: Changes, clock: Callable[[], float],
                 service_down_time: float) -> None:
        self._columns = columns
        self._changes = changes
        self._clock = clock
        self.service_down_time = service_down_time
        self._liveness = Liveness()
        self._usage_masks = PatchedMasks()
        self._usage_verdicts = PatchedMasks()
        self._column_bounds = ColumnBounds()
        self._weighted_sums = WeightedSums()
        self._block_extremes = BlockExtremes()
        self._candidates = KeptCandidates()
        # Below this many rows a full pass over a column costs less than the bookkeeping of a patched value.
        self.patch_min_rows = 20_000

    def alive(self, now: float | None = None) -> np.ndarray:
        """Nodes whose last report is within ``service_down_time`` (do not modify the result: it is shared)."""
        now = self._clock() if now is None else now
        n = self._columns.n
        if n < self.patch_min_rows:
            return self._columns.col("updated_at") >= now - self.service_down_time
        return self._liveness.get(self._columns.cols["updated_at"], now - self.service_down_time, n=n,
                                  static_revision=self._changes.static_revision, epoch=self._changes.heartbeat_epoch,
                                  journal=self._changes.journal)

    def usage_mask(self, key: Hashable, compute: Callable[[Rows], np.ndarray], *, costly: bool = False) -> np.ndarray:
        """A boolean mask over usage columns, memoized under ``key`` and patched on the rows changed since
        (``compute(rows)`` evaluates it for an index array or ``slice(0, n)``). Do not modify the result.

        ``costly``: ``compute`` does per-row work (NUMA fits), so the mask is memoized at any table size; a
        vectorized one is cheaper recomputed than patched below ``patch_min_rows``."""
        n = self._columns.n
        if n < self.patch_min_rows and not costly:
            return compute(slice(0, n))
        changes = self._changes
        return self._usage_masks.get(key, n=n, static_revision=changes.static_revision, journal=changes.journal,
                                     compute=compute)

    def usage_verdicts(self, key: Hashable) -> np.ndarray:
        """Per row, a verdict kept under ``key`` (int8: 0 unknown, 1 passes, 2 fails), reset to unknown on the rows
        changed since. Unlike a mask the caller fills it in place, row by row, as it learns verdicts: a verdict
        written from a row's state is reset by the next reader if the row changed after this array was taken
        (its journal entry comes later), so a stale verdict never outlives one decision."""
        n = self._columns.n

        def unknown(rows: Rows) -> np.ndarray:
            return np.zeros(n if isinstance(rows, slice) else len(rows), dtype=np.int8)

        changes = self._changes
        return self._usage_verdicts.get(key, n=n, static_revision=changes.static_revision, journal=changes.journal,
                                        compute=unknown)

    def candidate_extreme(self, name: str, column: np.ndarray, mask: np.ndarray, *, highest: bool,
                          everyone: bool = False) -> float | None:
        """max (or min) of the usage column ``name`` (``column`` its live rows) over the rows ``mask`` marks
        (``everyone``: every row), when a shortlist of the column's extreme rows can tell; None means: take a
        full pass."""
        n = self._columns.n
        if n < self.patch_min_rows:
            return None
        return self._column_bounds.get(name, column, mask, highest=highest, n=n,
                                       static_revision=self._changes.static_revision, journal=self._changes.journal,
                                       everyone=everyone)

    def block_extreme(self, name: str, column: np.ndarray, mask: np.ndarray, has: np.ndarray, *,
                      highest: bool, allowed: np.ndarray | None = None) -> float | None:
        """max (or min) of the usage column ``name`` (``column`` its live rows) over the rows ``mask`` marks
        (``has``: ``blocks.blocks_with(mask)``), reading only the blocks of rows that can hold it; None for no
        candidate, or below ``patch_min_rows`` (take a full pass). ``allowed``: per aggregate-set code, whether a
        candidate may have it (the blocks are then bounded over those sets' rows only)."""
        n = self._columns.n
        if n < self.patch_min_rows:
            return None
        return self._block_extremes.get(
            name, column, mask, has, highest=highest, n=n, static_revision=self._changes.static_revision,
            journal=self._changes.journal,
            allowed=(allowed, self._columns.cols["aggset_code"]) if allowed is not None else None)

    def block_beyond(self, name: str, column: np.ndarray, mask: np.ndarray, has: np.ndarray, limit: float, *,
                     below: bool) -> bool | None:
        """Whether a row ``mask`` marks holds a value of the usage column ``name`` below (above) ``limit``, from the
        block bounds of ``block_extreme``; None below ``patch_min_rows`` (take a full pass)."""
        n = self._columns.n
        if n < self.patch_min_rows:
            return None
        return self._block_extremes.beyond(name, column, mask, has, limit, below=below, n=n,
                                           static_revision=self._changes.static_revision, journal=self._changes.journal)

    def journal_seq(self) -> int:
        """The journal's position now: what a reader takes before it reads the figures it patches to it."""
        return self._changes.journal.seq

    def candidate_mask(self, parts: Sequence[np.ndarray], seq: int) -> tuple[np.ndarray, int, np.ndarray]:
        """The AND of ``parts`` (static and usage masks, each patched at least to the journal position ``seq``),
        kept and patched on the changed rows (``candidates.KeptCandidates``; never modify it), its count, and per
        block of ``blocks.BLOCK`` rows whether it holds a candidate."""
        changes = self._changes
        return self._candidates.get(parts, n=self._columns.n, static_revision=changes.static_revision,
                                    journal=changes.journal, seq=seq)

    def weighted_sum_blocks(self, key: Hashable, terms: list[SumTerm]) -> tuple[np.ndarray, np.ndarray]:
        """``weighted_sum`` over every row, kept (never modify it; a later call patches it in place), with its
        maxima per block of ``blocks.BLOCK`` rows."""
        changes = self._changes
        return self._weighted_sums.get_blocks(key, terms, n=self._columns.n, static_revision=changes.static_revision,
                                              journal=changes.journal)

    def weighted_sum_code_blocks(self, total: np.ndarray, codes: np.ndarray, ncodes: int) -> np.ndarray | None:
        """The maxima per (aggregate-set code, block) of a kept sum ``weighted_sum_blocks`` gave (``codes`` the
        live rows' codes, ``ncodes`` how many there are), patched with it; None when it is no longer kept."""
        return self._weighted_sums.code_blocks(total, codes, ncodes)

    def weighted_sum(self, key: Hashable, terms: list[SumTerm], rows: np.ndarray | None = None, *,
                     copy: bool = True) -> np.ndarray:
        """The weighers' per-row sum (``journal.weighted_sum``) for ``terms`` of usage columns (live rows), over
        every row or over ``rows``; memoized under ``key`` (naming the columns, factors and any per-row multiplier)
        and patched on the rows changed since. A new array, the caller's to modify; without ``copy`` (over every
        row) possibly the kept one, to read at once and never modify."""
        n = self._columns.n
        if n < self.patch_min_rows:
            total = weighted_sum(terms, slice(0, n))
            return total.take(rows) if rows is not None else total
        return self._weighted_sums.get(key, terms, n=n, static_revision=self._changes.static_revision,
                                       journal=self._changes.journal, rows=rows, copy=copy)
