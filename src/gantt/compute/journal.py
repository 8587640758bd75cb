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
- ``ColumnBounds``: the lowest / highest value of a column over a set of candidate rows, from cached
  shortlists of the column's extreme rows.
- ``WeightedSums``: the weighers' ``sum(factor * column)`` per row, kept per set of factors.
- (``gantt.compute.blocks``: a column's bounds per block of rows, patched on the journaled rows.)

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
from dataclasses import dataclass, field
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


@dataclass(slots=True, eq=False)  # found in its list by identity: a field-wise == would compare arrays
class _Shortlist:
    static_revision: int
    n: int
    seq: int  # journal position up to which ``values`` is current
    # The listed rows and their current values: the first ``count`` slots of buffers of ``room`` slots, so that a
    # row joining is written in place (a third of the catch-ups between two decisions have one: a release frees
    # room on a node, a claim takes it) instead of concatenating both arrays anew.
    rows: np.ndarray
    values: np.ndarray
    count: int
    position: dict[int, int]  # row -> index in ``rows``
    bound: float  # no row outside ``rows`` is more extreme than this
    room: int  # how long ``rows`` may grow by joiners before the list is better rebuilt


class ColumnBounds:
    """Lowest or highest value of a usage column over the candidates, from shortlists of its extreme rows.

    A shortlist holds rows of a column with their values, and ``bound``: no unlisted row is more extreme. It is
    built for one request's candidates: their ``size`` most extreme rows, plus every row at all (candidate or not)
    beyond the ``size``-th, so the bound holds for any later candidate set. Each query first brings a list up to
    date with the rows changed since (a handful): a listed row gets its new value; an unlisted row that now beats
    ``bound`` joins. The candidates' extreme is then the best listed candidate, provided it reaches ``bound``
    (every unlisted row is no better). When no list can tell (a spreading weigher used it up, or these candidates
    are not on it: nodes that are down or isolated often hold the extremes) a new one is built for these
    candidates, which also answers the query. A few lists per column serve requests whose candidates differ.

    The rows beyond the candidates' ``size``-th may be many: bare-metal nodes hold no VCPU or RAM, so every one of
    them is below any VM request's candidates in those columns. A list holds them all, up to an eighth of the
    table: reading a few thousand listed rows costs a fraction of the full pass (a partition of every row) that
    each such request paid when no list was kept.
    """

    def __init__(self, size: int = 256, lists: int = 3) -> None:
        self.size = size
        self.lists = lists
        # one lock per (column, direction): concurrent decisions on one table wait only for the same list
        self._locks: dict[tuple[str, bool], threading.Lock] = {}
        self._entries: dict[tuple[str, bool], list[_Shortlist]] = {}

    def get(self, name: str, column: np.ndarray, mask: np.ndarray, *, highest: bool, n: int,
            static_revision: int, journal: RowJournal, everyone: bool = False) -> float | None:
        """The candidates' extreme of ``column`` (``mask`` marks candidates; ``everyone``: it marks every row, so
        a list's rows need not be looked up in it), or None for a small table or no candidates."""
        if n <= self.size * 8:
            return None  # a small table: a full pass costs as little
        key = (name, highest)
        with self._locks.setdefault(key, threading.Lock()):
            seq = journal.seq
            lists = self._entries.setdefault(key, [])
            for entry in list(lists):
                if (entry.static_revision != static_revision or entry.n != n
                        or not self._catch_up(entry, column, journal, seq, highest)):
                    lists.remove(entry)
                    continue
                best = self._best(entry, mask, highest, everyone)
                if best is not None and ((best >= entry.bound) if highest else (best <= entry.bound)):
                    if lists[0] is not entry:
                        lists.remove(entry)
                        lists.insert(0, entry)
                    return best
            built, extreme = self._build(column, mask, highest=highest, n=n, static_revision=static_revision,
                                         seq=seq)
            if built is not None:
                lists.insert(0, built)
                del lists[self.lists:]
            return extreme

    def _catch_up(self, entry: _Shortlist, column: np.ndarray, journal: RowJournal, seq: int,
                  highest: bool) -> bool:
        """Apply the rows changed since the entry's position; False when it is better rebuilt."""
        if entry.seq == seq:
            return True
        changed = journal.since(entry.seq, seq)
        if changed is None or len(changed) > self.size:
            return False
        # A handful of rows per decision: a Python loop beats a dozen numpy calls on tiny arrays.
        position = entry.position
        values = entry.values
        bound = entry.bound
        joiners: list[int] = []
        for row in changed.tolist():
            value = float(column[row])
            at = position.get(row)
            if at is not None:
                if at >= 0:
                    values[at] = value
            elif value > bound if highest else value < bound:
                position[row] = -1  # joins below; a row changed twice joins once, with its latest value
                joiners.append(row)
        if joiners:
            count = entry.count
            if count + len(joiners) > entry.room:
                return False
            rows = entry.rows
            for row in joiners:
                position[row] = count
                rows[count] = row
                values[count] = float(column[row])
                count += 1
            entry.count = count
        entry.seq = seq
        return True

    @staticmethod
    def _best(entry: _Shortlist, mask: np.ndarray, highest: bool, everyone: bool) -> float | None:
        """The listed candidates' extreme (None: no listed row is a candidate). The list's own extreme row is
        most often a candidate: then one scalar look-up answers, without gathering the mask over every listed
        row."""
        count = entry.count
        if not count:
            return None
        values = entry.values[:count]
        at = int(values.argmax() if highest else values.argmin())
        if everyone or mask[entry.rows[at]]:
            return float(values[at])
        values = values[mask[entry.rows[:count]]]
        if not len(values):
            return None
        return float(values.max() if highest else values.min())

    def _build(self, column: np.ndarray, mask: np.ndarray, *, highest: bool, n: int, static_revision: int,
               seq: int) -> tuple[_Shortlist | None, float | None]:
        """A shortlist for these candidates (None when too many other rows lie beyond them), and their extreme."""
        values = column[:n]
        candidates = mask[:n]
        count = int(np.count_nonzero(candidates))
        if count == 0:
            return None, None
        shadow = np.where(candidates, values, -np.inf if highest else np.inf)
        best = float(shadow.max() if highest else shadow.min())
        k = min(self.size, count)
        if highest:
            bound = float(np.partition(shadow, n - k)[n - k])
            beyond = np.flatnonzero(values > bound)
        else:
            bound = float(np.partition(shadow, k - 1)[k - 1])
            beyond = np.flatnonzero(values < bound)
        if len(beyond) > max(4 * self.size, n // 8):
            return None, best
        wanted = k - int(np.count_nonzero(candidates[beyond]))
        if wanted > 0:  # candidates tied at the bound complete the list
            ties = np.flatnonzero((values == bound) & candidates)[:wanted]
            rows = np.concatenate((beyond, ties))
        else:
            rows = beyond
        room = len(rows) + self.size
        listed = np.empty(room, dtype=np.intp)
        listed[:len(rows)] = rows
        current = np.empty(room, dtype=np.float64)
        current[:len(rows)] = values[rows]
        entry = _Shortlist(static_revision, n, seq, listed, current, len(rows),
                           {row: i for i, row in enumerate(rows.tolist())}, bound, room)
        return entry, best


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
                if len(changed) > 256:  # a burst of reports: one pass costs less than a cell at a time
                    entry.codemax = blocks.code_block_max(entry.total, entry.codes, entry.codemax.shape[0])
                else:
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


FIRST_BLOCKS = 4  # blocks a search by every row's bounds reads before a class restricted to some aggregate sets
# takes its own sets' bounds (BlockExtremes.get)


@dataclass(slots=True)
class _Blocks:
    static_revision: int
    n: int
    seq: int
    highest: np.ndarray
    lowest: np.ndarray
    # per (aggregate-set code, block): the highest and the lowest value (``blocks.code_block_max``), built on first
    # need, with the codes they were built on (they move only with the static revision, which drops the entry)
    cells: dict[bool, np.ndarray] = field(default_factory=dict)
    codes: np.ndarray | None = None


class BlockExtremes:
    """Per usage column, its highest and lowest value per block of ``BLOCK`` rows, patched on changed rows: the
    candidates' extreme of the column then reads only the blocks that can hold it (``masked_extreme``), where a
    gather of every candidate's value costs a pass over them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, _Blocks] = {}

    def get(self, name: str, column: np.ndarray, mask: np.ndarray, has: np.ndarray, *, highest: bool, n: int,
            static_revision: int, journal: RowJournal,
            allowed: tuple[np.ndarray, np.ndarray] | None = None) -> float | None:
        """The candidates' highest (lowest) value of ``column``; None when ``mask`` marks no row.

        ``allowed``: (per aggregate-set code, whether a candidate may have it; every row's code). The blocks are
        then bounded over the rows of those sets only: a class that aggregates restrict (an extra spec's aggregate,
        a zone) spread over every block has its extreme below most blocks' bounds, held by rows of other sets,
        and by those bounds the search read its whole budget of blocks and then a pass over every row."""
        entry = self._entry(name, column, n=n, static_revision=static_revision, journal=journal)
        bounds = entry.highest if highest else entry.lowest
        if allowed is not None and allowed[0].any():
            # Most classes find their extreme in the first blocks by every row's bounds: the per-set bounds (a
            # reduction over the allowed sets per block) only for those that do not
            done, value = blocks.search_extreme(column[:n], mask[:n], bounds, has, highest=highest,
                                                budget=FIRST_BLOCKS)
            if done:
                return value
            with self._lock:
                cells = entry.cells.get(highest)
                if cells is None or cells.shape[0] != len(allowed[0]):
                    entry.codes = allowed[1][:n]
                    cells = entry.cells[highest] = blocks.code_block_max(column[:n], entry.codes, len(allowed[0]),
                                                                         highest=highest)
                bounds = blocks.class_bounds(cells, allowed[0], highest=highest)
        return blocks.masked_extreme(column[:n], mask[:n], bounds, has, highest=highest)

    def beyond(self, name: str, column: np.ndarray, mask: np.ndarray, has: np.ndarray, limit: float, *,
               below: bool, n: int, static_revision: int, journal: RowJournal) -> bool:
        """Whether a candidate's value of ``column`` lies below (above) ``limit``: only the blocks whose bound
        lies beyond it are read (usually none: a weigher's fixed bound is rarely passed)."""
        entry = self._entry(name, column, n=n, static_revision=static_revision, journal=journal)
        values = column[:n]
        bounds = entry.lowest if below else entry.highest
        beyond = np.flatnonzero(has & ((bounds < limit) if below else (bounds > limit)))
        for start in range(0, min(len(beyond), blocks.EXTREME_BUDGET), 16):  # the first hit answers
            rows = blocks.rows_of(beyond[start:start + 16], n)
            picked = values.take(rows[mask.take(rows)])
            if np.any((picked < limit) if below else (picked > limit)):
                return True
        if len(beyond) > blocks.EXTREME_BUDGET:
            return bool(np.any(mask[:n] & ((values < limit) if below else (values > limit))))
        return False

    def _entry(self, name: str, column: np.ndarray, *, n: int, static_revision: int,
               journal: RowJournal) -> _Blocks:
        column = column[:n]
        with self._lock:
            seq = journal.seq
            entry = self._entries.get(name)
            if entry is not None and (entry.static_revision != static_revision or entry.n != n):
                entry = None
            if entry is not None and entry.seq != seq:
                changed = journal.since(entry.seq, seq)
                if changed is None or len(changed) * 16 > n:
                    entry = None
                elif len(changed):
                    blocks.patch_blocks(entry.highest, column, changed, highest=True)
                    blocks.patch_blocks(entry.lowest, column, changed, highest=False)
                    for highest, cells in list(entry.cells.items()):
                        assert entry.codes is not None
                        if len(changed) > 256:  # a burst of reports: one pass costs less than a cell at a time
                            entry.cells[highest] = blocks.code_block_max(column, entry.codes, cells.shape[0],
                                                                         highest=highest)
                        else:
                            blocks.patch_code_blocks(cells, column, entry.codes, changed, highest=highest)
                    entry.seq = seq
                else:
                    entry.seq = seq
            if entry is None:
                entry = _Blocks(static_revision, n, seq, blocks.block_reduce(column, highest=True),
                                blocks.block_reduce(column, highest=False))
                self._entries[name] = entry
            return entry
