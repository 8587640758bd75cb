"""Derived per-row data kept up to date from a journal of changed rows, instead of recomputed per decision.

At 100,000 nodes a pass over one float column costs 10-60 µs (more when several replicas compete for the cache),
and a decision reads a dozen of them. Between two decisions only a handful of rows change (the claims and
releases in between, a few reports), so anything derived from usage columns can be patched on those rows:

- ``RowJournal``: every row whose usage or report time changed, in order. ``HostTable`` appends after each change
  (under its lock, after the columns are written); readers take a sequence number and later ask what changed
  since.
- ``PatchedMasks``: boolean masks over usage columns (does this flavor fit?), keyed by the caller, patched on
  the journaled rows.
- ``Liveness``: the "reported within service_down_time" mask, valid for a window of clock readings and patched
  on reports.
- (``gantt.compute.extreme_caches``: the lowest / highest value of a column over a set of candidate rows, from
  cached shortlists of the column's extreme rows or its bounds per block.)
- ``WeightedSums``: the weighers' ``sum(factor * column)`` per row, kept per set of factors.

Each is valid only for the rows and static state it was built on: it is keyed on ``static_revision`` and the
row count (both move when rows come or go or an inventory's shape changes). ``HostTable`` uses them from
``patch_min_rows`` rows on; below that a full pass is cheaper.
Readers never lock: a value built while a writer runs may miss that write, but the write's journal entry comes
after its columns are written and after the reader took its sequence number, so the next reader patches it.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

# the module, not its names: tests shrink blocks.BLOCK and blocks.EXTREME_BUDGET to reach every path
from gantt.compute import blocks

Rows = np.ndarray | slice
# One weigher's part of the per-row sum: (column, factor, lo, per-row multiplier or None); see ``weighted_sum``.
SumTerm = tuple[np.ndarray, float, float, "np.ndarray | None"]


class RowJournal:
    """Row numbers in the order they changed (repeats included); trimmed from the head, and a reader whose start
    was trimmed away rebuilds."""

    def __init__(self, keep: int = 1 << 13) -> None:
        self.keep = keep
        # [absolute index of buffer[0], buffer, entries used]: replaced as one object when trimmed, so a reader
        # never pairs one buffer's contents with another's base
        self._state: list[Any] = [0, np.empty(min(4 * keep, 1024), dtype=np.intp), 0]  # grows up to 4 * keep

    @property
    def seq(self) -> int:
        state = self._state
        return state[0] + state[2]  # type: ignore[no-any-return]  # the state list mixes ints and an array

    def append(self, row: int) -> None:
        state = self._state
        base, buffer, used = state
        if used == len(buffer):
            if len(buffer) < 4 * self.keep:  # grow: nothing is dropped yet
                fresh = np.empty(min(2 * len(buffer), 4 * self.keep), dtype=np.intp)
                fresh[:used] = buffer
                state = [base, fresh, used]
            else:  # keep the newest ``keep`` entries
                fresh = np.empty_like(buffer)
                fresh[: self.keep] = buffer[used - self.keep:]
                state = [base + used - self.keep, fresh, self.keep]
                used = self.keep
            buffer = fresh
            self._state = state
        buffer[used] = row
        state[2] = used + 1  # after the row is written: a reader never sees a slot before it is filled

    def extend(self, rows: np.ndarray) -> None:
        """``append`` each of ``rows``, in order, at once."""
        count = len(rows)
        if not count:
            return
        base, buffer, used = self._state
        if used + count <= len(buffer):
            buffer[used:used + count] = rows
            self._state[2] = used + count
            return
        total = used + count
        limit = 4 * self.keep
        if total <= limit:  # grow: nothing is dropped yet
            fresh = np.empty(min(max(total, 2 * len(buffer)), limit), dtype=np.intp)
            fresh[:used] = buffer[:used]
            fresh[used:total] = rows
            self._state = [base, fresh, total]
            return
        # keep the newest ``keep`` entries (a reader whose start is older rebuilds, as after appends)
        keep = self.keep
        fresh = np.empty(limit, dtype=np.intp)
        if count >= keep:
            fresh[:keep] = rows[count - keep:]
        else:
            fresh[: keep - count] = buffer[used - (keep - count):used]
            fresh[keep - count:keep] = rows
        self._state = [base + total - keep, fresh, keep]

    def since(self, seq: int, until: int) -> np.ndarray | None:
        """Rows changed in ``[seq, until)`` (a view; may repeat rows); None when that part is trimmed away."""
        base, buffer, used = self._state
        if seq < base or until > base + used:
            return None
        return buffer[seq - base:until - base]  # type: ignore[no-any-return]  # numpy slicing is typed Any


@dataclass(slots=True)
class _Patched:
    static_revision: int
    n: int
    seq: int
    mask: np.ndarray


class PatchedMasks:
    """A small LRU of usage masks, each patched on the rows changed since it was built."""

    def __init__(self, size: int = 32) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, _Patched] = OrderedDict()
        probe = _Patched(0, 0, 0, np.empty(0))  # what sys.getrefcount says of a mask its entry alone holds
        self.unshared = sys.getrefcount(probe.mask)

    def get(self, key: Hashable, *, n: int, static_revision: int, journal: RowJournal,
            compute: Callable[[Rows], np.ndarray]) -> np.ndarray:
        """The mask for ``key``; ``compute(rows)`` evaluates it on some rows (an index array or ``slice(0, n)``).

        A mask handed out never moves while its reader holds it: a patch copies it first, unless nothing but
        this cache holds it (a reader holds a reference, and hands are taken under the lock, so none can be
        taken while it is patched): then it is patched in place. At 1,000,000 rows the copy of each usage
        filter's mask was a tenth of a decision."""
        seq = journal.seq
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                if entry.static_revision == static_revision and entry.n == n and entry.seq == seq:
                    return entry.mask
        if entry is not None and entry.static_revision == static_revision and entry.n == n:
            base = entry.seq
            rows = journal.since(base, seq)
            if rows is not None and len(rows) * 16 <= n:
                values = compute(rows) if len(rows) else None
                with self._lock:
                    if (self._entries.get(key) is entry and entry.seq == base and values is not None
                            and sys.getrefcount(entry.mask) <= self.unshared):
                        entry.mask[rows] = values
                        entry.seq = seq
                        return entry.mask
                    mask = entry.mask.copy()  # copied: a decision may still read the old one
                if values is not None:
                    mask[rows] = values
                self._store(key, _Patched(static_revision, n, seq, mask))
                return mask
        mask = compute(slice(0, n))
        self._store(key, _Patched(static_revision, n, seq, mask))
        return mask

    def _store(self, key: Hashable, entry: _Patched) -> None:
        with self._lock:
            old = self._entries.get(key)
            if old is not None and old.seq > entry.seq:
                return  # a later build got there first
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


@dataclass(slots=True)
class _Alive:
    static_revision: int
    n: int
    seq: int
    epoch: int
    threshold: float  # the cutoff it was built for: alive = updated_at >= threshold
    dead_max: float  # latest report among the dead rows: a cutoff at or below it revives one
    alive_min: float  # earliest report among the live rows: a cutoff above it kills one
    mask: np.ndarray


class Liveness:
    """``updated_at >= now - service_down_time`` without a pass over the column per decision.

    The mask built for cutoff ``c`` holds for any cutoff in ``(dead_max, alive_min]``: no row's report time lies
    between. A report moves one row (journaled: patched, and the window narrowed); a bulk heartbeat moves the
    ``epoch`` and the next reader rebuilds.
    """

    def __init__(self) -> None:
        self._entry: _Alive | None = None

    def get(self, updated_at: np.ndarray, cutoff: float, *, n: int, static_revision: int, epoch: int,
            journal: RowJournal) -> np.ndarray:
        seq = journal.seq
        entry = self._entry
        if (entry is not None and entry.static_revision == static_revision and entry.n == n
                and entry.epoch == epoch and entry.dead_max < cutoff <= entry.alive_min):
            if entry.seq == seq:
                return entry.mask
            rows = journal.since(entry.seq, seq)
            if rows is not None and len(rows) * 16 <= n:
                values = updated_at[rows]
                up = values >= entry.threshold
                if np.array_equal(entry.mask[rows], up):
                    # No row changed sides (a claim, a report of a live node): the same mask, not a copy, which
                    # also lets a reader keep what it derived from it (ComputeFilter's AND, by identity).
                    mask = entry.mask
                else:
                    mask = entry.mask.copy()  # copied: a concurrent decision may still read the old one
                    mask[rows] = up
                alive_min = min(entry.alive_min, float(values[up].min())) if up.any() else entry.alive_min
                dead_max = max(entry.dead_max, float(values[~up].max())) if not up.all() else entry.dead_max
                patched = _Alive(static_revision, n, seq, epoch, entry.threshold, dead_max, alive_min, mask)
                if dead_max < cutoff <= alive_min:
                    self._entry = patched
                    return mask
        column = updated_at[:n]
        mask = column >= cutoff
        # boolean indexing, not ``where=`` reductions: those run a slow generic loop on irregular masks
        up = column[mask]
        down = column[~mask]
        alive_min = float(up.min()) if len(up) else np.inf
        dead_max = float(down.max()) if len(down) else -np.inf
        self._entry = _Alive(static_revision, n, seq, epoch, cutoff, dead_max, alive_min, mask)
        return mask


@dataclass(slots=True)
class _Sum:
    static_revision: int
    n: int
    seq: int
    total: np.ndarray
    blockmax: np.ndarray | None = None  # per block of ``BLOCK`` rows, the highest total; built on first need
    # per (aggregate-set code, block), the highest total (``blocks.code_block_max``) and the codes it was built
    # on (they move only with the static revision, which drops the entry); built on first need
    codemax: np.ndarray | None = None
    codes: np.ndarray | None = None


class WeightedSums:
    """``sum(factor * column)`` over every row, kept per set of (column, factor) and patched on changed rows.

    Weighing is ``sum(multiplier * (x - lo) / (hi - lo))`` over a few usage columns; ``lo`` and ``hi`` over the
    candidates rarely move between decisions (many nodes share the extreme values), so neither do the factors
    ``multiplier / (hi - lo)``. The per-row sum then only changes on the rows that changed, and a decision costs
    a copy instead of two passes per weigher. Patched rows are computed in the same order as a full build, so the
    values are bitwise the same either way.
    """

    def __init__(self, size: int = 6) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, _Sum] = OrderedDict()

    def get(self, key: Hashable, terms: list[SumTerm], *, n: int, static_revision: int,
            journal: RowJournal, rows: np.ndarray | None, copy: bool = True) -> np.ndarray:
        """A new array: the sum over every live row, or over ``rows`` only (in that order) when given. Without
        ``copy`` (and ``rows``), the kept sum itself, to read at once: a later call patches it in place."""
        with self._lock:
            total = self._entry(key, terms, n=n, static_revision=static_revision, journal=journal).total
            if rows is not None:
                return total.take(rows)
            return total.copy() if copy else total

    def get_blocks(self, key: Hashable, terms: list[SumTerm], *, n: int, static_revision: int,
                   journal: RowJournal) -> tuple[np.ndarray, np.ndarray]:
        """The kept sum over every row (not to be modified) and its maxima per block of ``BLOCK`` rows, both
        patched on the changed rows from here on."""
        with self._lock:
            entry = self._entry(key, terms, n=n, static_revision=static_revision, journal=journal)
            if entry.blockmax is None:
                entry.blockmax = blocks.block_reduce(entry.total, highest=True)
            return entry.total, entry.blockmax

    def code_blocks(self, total: np.ndarray, codes: np.ndarray, ncodes: int) -> np.ndarray | None:
        """The maxima of the kept sum ``total`` (as ``get_blocks`` gave it) per (code, block), patched with it
        from here on; None when ``total`` is no longer kept (rebuilt or dropped since)."""
        with self._lock:
            entry = next((e for e in self._entries.values() if e.total is total), None)
            if entry is None:
                return None
            if entry.codemax is None or entry.codemax.shape[0] != ncodes:
                entry.codemax = blocks.code_block_max(entry.total, codes, ncodes)
                entry.codes = codes
            return entry.codemax

    def _entry(self, key: Hashable, terms: list[SumTerm], *, n: int, static_revision: int,
               journal: RowJournal) -> _Sum:
        seq = journal.seq
        entry = self._entries.get(key)
        if entry is not None and (entry.static_revision != static_revision or entry.n != n
                                  or not self._catch_up(entry, terms, journal, seq)):
            entry = None
        if entry is None:
            entry = _Sum(static_revision, n, seq, weighted_sum(terms, slice(0, n)))
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return entry

    @staticmethod
    def _catch_up(entry: _Sum, terms: list[SumTerm], journal: RowJournal, seq: int) -> bool:
        if entry.seq == seq:
            return True
        changed = journal.since(entry.seq, seq)
        if changed is None or len(changed) * 16 > entry.n:
            return False
        if len(changed):
            entry.total[changed] = weighted_sum(terms, changed)
            if entry.blockmax is not None:
                blocks.patch_blocks(entry.blockmax, entry.total, changed, highest=True)
            if entry.codemax is not None and entry.codes is not None:
                blocks.patch_code_blocks(entry.codemax, entry.total, entry.codes, changed)
        entry.seq = seq
        return True


def weighted_sum(terms: list[SumTerm], rows: Rows) -> np.ndarray:
    """The weighers' per-row sum over ``rows``, summed in the terms' order. A term ``(column, factor, lo, None)``
    adds ``factor * column``; ``(column, factor, lo, multiplier)`` adds ``(column - lo) * factor * multiplier``
    (a per-row multiplier an aggregate overrides), computed in the order the engine's unfused path does."""
    total: np.ndarray | None = None
    scratch: np.ndarray | None = None
    for column, factor, lo, multiplier in terms:
        if total is None:
            out = None
        else:
            if scratch is None:
                scratch = np.empty_like(total)
            out = scratch
        if multiplier is None:
            part = np.multiply(column[rows], factor, out=out)
        else:
            part = np.subtract(column[rows], lo, out=out)
            part *= factor
            part *= multiplier[rows]
        if total is None:
            total = part
        else:
            total += part
    assert total is not None
    return total
