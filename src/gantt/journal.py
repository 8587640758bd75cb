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

Each is valid only for the rows and static state it was built on: it is keyed on ``static_revision`` and the
row count (both move when rows come or go or an inventory's shape changes). ``HostTable`` uses them from
``patch_min_rows`` rows on; below that a full pass is cheaper.
Readers never lock: a value built while a writer runs may miss that write, but the write's journal entry comes
after its columns are written and after the reader took its sequence number, so the next reader patches it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

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
        self._state: list = [0, np.empty(min(4 * keep, 1024), dtype=np.intp), 0]  # grows up to 4 * keep

    @property
    def seq(self) -> int:
        state = self._state
        return state[0] + state[2]  # type: ignore[no-any-return]

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
        return buffer[seq - base:until - base]  # type: ignore[no-any-return]


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

    def get(self, key: Hashable, *, n: int, static_revision: int, journal: RowJournal,
            compute: Callable[[Rows], np.ndarray]) -> np.ndarray:
        """The mask for ``key``; ``compute(rows)`` evaluates it on some rows (an index array or ``slice(0, n)``)."""
        seq = journal.seq
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is not None and entry.static_revision == static_revision and entry.n == n:
            if entry.seq == seq:
                return entry.mask
            rows = journal.since(entry.seq, seq)
            if rows is not None and len(rows) * 16 <= n:
                mask = entry.mask.copy()  # copied: a concurrent decision may still read the old one
                if len(rows):
                    mask[rows] = compute(rows)
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
                mask = entry.mask.copy()
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


@dataclass(frozen=True, slots=True, eq=False)
class Universe:
    """The rows a request class's derived lists are kept for, where the whole table's would not answer (a zone,
    a flavor that fits a minority of the nodes).

    ``mask`` is what a list is built from: the class's static mask and the request's resource fit. A row outside
    it may enter it later only by a change the journal records (a fit changes with usage or inventories), so a
    list catches up as the whole table's does: a changed row joins when it is more extreme than the list's bound
    and ``members`` (the static mask, fixed for the static revision; None: any row) holds it. ``since`` is the
    journal position before ``mask`` was read: a list built from it catches up from there, so a row that changed
    while the mask was read is looked at again."""

    key: Hashable
    mask: np.ndarray
    members: np.ndarray | None
    since: int


@dataclass(slots=True, eq=False)  # found in its list by identity: a field-wise == would compare arrays
class _Shortlist:
    static_revision: int
    n: int
    seq: int  # journal position up to which ``values`` is current
    rows: np.ndarray  # listed row numbers
    values: np.ndarray  # their current values
    position: dict[int, int]  # row -> index in ``rows``
    bound: float  # no row outside ``rows`` is more extreme than this


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
    """

    def __init__(self, size: int = 256, lists: int = 3, universes: int = 64) -> None:
        self.size = size
        self.lists = lists
        self.universes = universes
        # one lock per (column, direction, universe): concurrent decisions wait only for the same list
        self._locks: dict[tuple[str, bool, Hashable], threading.Lock] = {}
        self._entries: OrderedDict[tuple[str, bool, Hashable], list[_Shortlist]] = OrderedDict()
        self._lock = threading.Lock()
        # (static revision, rows, journal position) at which a universe's list could not be built (too many of
        # its rows lie beyond its candidates): not tried again until a number of rows changed
        self._failed: dict[tuple[str, bool, Hashable], tuple[int, int, int]] = {}

    def get(self, name: str, column: np.ndarray, mask: np.ndarray, *, highest: bool, n: int,
            static_revision: int, journal: RowJournal, universe: Universe | None = None) -> float | None:
        """The candidates' extreme of ``column`` (``mask`` marks candidates), or None for a small table or no
        candidates. With a ``universe`` holding the candidates, the whole table's lists are asked first, then
        lists of that universe alone."""
        if n <= SMALL_TABLE:
            return None  # a small table: a full pass costs as little
        if universe is not None:  # the whole table's lists often answer for a class too (they are not built here)
            best = self._lookup((name, highest, None), column, mask, highest, n, static_revision, journal, None,
                                build=False)
            if best is not None:
                return best
        return self._lookup((name, highest, universe.key if universe is not None else None), column, mask,
                            highest, n, static_revision, journal, universe)

    def _lookup(self, key: tuple[str, bool, Hashable], column: np.ndarray, mask: np.ndarray, highest: bool,
                n: int, static_revision: int, journal: RowJournal, universe: Universe | None, *,
                build: bool = True) -> float | None:
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
            lists = self._entries.setdefault(key, [])
            self._entries.move_to_end(key)
            while len(self._entries) > self.universes * 8:
                old, _ = self._entries.popitem(last=False)
                self._locks.pop(old, None)
                self._failed.pop(old, None)
        with lock:
            seq = journal.seq
            for entry in list(lists):
                if (entry.static_revision != static_revision or entry.n != n
                        or not self._catch_up(entry, column, journal, seq, highest,
                                              universe.members if universe is not None else None)):
                    lists.remove(entry)
                    continue
                values = entry.values[mask[entry.rows]]
                if len(values):
                    best = float(values.max() if highest else values.min())
                    if (best >= entry.bound) if highest else (best <= entry.bound):
                        if lists[0] is not entry:
                            lists.remove(entry)
                            lists.insert(0, entry)
                        return best
            if not build:
                return None
            failed = self._failed.get(key) if universe is not None else None
            if failed is not None and failed[:2] == (static_revision, n) and seq - failed[2] < 4 * self.size:
                return None  # no list could be built for this universe lately: the caller gathers the candidates
            built, best = self._build(column, mask, highest=highest, n=n, static_revision=static_revision,
                                      seq=min(seq, universe.since) if universe is not None else seq,
                                      inside=universe.mask if universe is not None else None)
            if built is not None:
                lists.insert(0, built)
                del lists[self.lists:]
            elif universe is not None:
                self._failed[key] = (static_revision, n, seq)
            return best

    def _catch_up(self, entry: _Shortlist, column: np.ndarray, journal: RowJournal, seq: int,
                  highest: bool, members: np.ndarray | None = None) -> bool:
        """Apply the rows changed since the entry's position; False when it is better rebuilt."""
        if entry.seq == seq:
            return True
        changed = journal.since(entry.seq, seq)
        if changed is None:
            return False
        position = entry.position
        values = entry.values
        bound = entry.bound
        joiners: list[tuple[int, float]] = []
        if len(changed) > LOOP_ROWS:
            at, found, rows, current = _split_changed(entry.rows, changed, column)
            values[at] = current[found]
            rows, current = rows[~found], current[~found]
            beyond = current > bound if highest else current < bound
            if members is not None:
                beyond &= members[rows]
            joiners = list(zip(rows[beyond].tolist(), current[beyond].tolist(), strict=True))
            changed = changed[:0]
        # A handful of rows per decision: a Python loop beats a dozen numpy calls on tiny arrays.
        for row in changed.tolist():
            value = float(column[row])
            at = position.get(row)
            if at is not None:
                if at >= 0:
                    values[at] = value
            elif (value > bound if highest else value < bound) and (members is None or members[row]):
                position[row] = -1  # joins below; a row changed twice joins once, with its latest value
                joiners.append((row, value))
        if joiners:
            if len(entry.rows) + len(joiners) > 2 * self.size:
                return False
            start = len(entry.rows)
            latest = {row: float(column[row]) for row, _ in joiners}
            entry.rows = np.concatenate((entry.rows, np.fromiter(latest, dtype=np.intp, count=len(latest))))
            entry.values = np.concatenate((values, np.fromiter(latest.values(), dtype=np.float64,
                                                               count=len(latest))))
            for k, row in enumerate(latest):
                position[row] = start + k
        entry.seq = seq
        return True

    def _build(self, column: np.ndarray, mask: np.ndarray, *, highest: bool, n: int, static_revision: int,
               seq: int, inside: np.ndarray | None = None) -> tuple[_Shortlist | None, float | None]:
        """A shortlist for these candidates (None when too many other rows lie beyond them), and their extreme;
        with ``inside``, only rows it marks are listed or counted beyond."""
        values = column[:n]
        candidates = mask[:n]
        count = int(np.count_nonzero(candidates))
        if count == 0:
            return None, None
        shadow = np.where(candidates, values, -np.inf if highest else np.inf)
        best = float(shadow.max() if highest else shadow.min())
        k = min(self.size, count)
        if highest:
            bound = kth_highest(shadow, k)
            outside = values > bound
        else:
            bound = -kth_highest(-shadow, k)
            outside = values < bound
        if inside is not None:
            outside &= inside[:n]
        beyond = np.flatnonzero(outside)
        if len(beyond) > 4 * self.size:
            return None, best
        wanted = k - int(np.count_nonzero(candidates[beyond]))
        if wanted > 0:  # candidates tied at the bound complete the list
            ties = np.flatnonzero((values == bound) & candidates)[:wanted]
            rows = np.concatenate((beyond, ties))
        else:
            rows = beyond
        entry = _Shortlist(static_revision, n, seq, rows, values[rows].copy(),
                           {row: i for i, row in enumerate(rows.tolist())}, bound)
        return entry, best


@dataclass(slots=True)
class _Sum:
    static_revision: int
    n: int
    seq: int
    total: np.ndarray


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
        return self.kept(key, terms, n=n, static_revision=static_revision, journal=journal, rows=rows,
                         copy=copy)[0]

    def kept(self, key: Hashable, terms: list[SumTerm], *, n: int, static_revision: int,
             journal: RowJournal, rows: np.ndarray | None = None, copy: bool = False) -> tuple[np.ndarray, int]:
        """``get``, with the journal position the sum is current to."""
        with self._lock:
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
            total = entry.total
            if rows is not None:
                return total.take(rows), entry.seq
            return (total.copy() if copy else total), entry.seq

    @staticmethod
    def _catch_up(entry: _Sum, terms: list[SumTerm], journal: RowJournal, seq: int) -> bool:
        if entry.seq == seq:
            return True
        changed = journal.since(entry.seq, seq)
        if changed is None or len(changed) * 16 > entry.n:
            return False
        if len(changed):
            entry.total[changed] = weighted_sum(terms, changed)
        entry.seq = seq
        return True


@dataclass(slots=True, eq=False)
class _Top:
    static_revision: int
    n: int
    seq: int  # journal position up to which ``values`` is current
    rows: np.ndarray  # listed rows
    values: np.ndarray  # their current sums
    position: dict[int, int]  # row -> index in ``rows``
    # No unlisted row of the universe ranks above (value, row): each has a lower value, or the same value and a
    # higher row number (the rank order: highest sum first, the lower row among equals, as repeated argmax).
    value: float
    row: int


class TopScores:
    """The best rows of a kept weighted sum within a universe (a request class's static mask), patched from the
    journal, so that a decision reads the few rows it may pick instead of passing over every row.

    A list holds the ``size`` best rows of the universe when built, with the boundary (value, row) of the last
    one. A changed listed row gets its new value; a changed unlisted row of the universe that now ranks above the
    boundary joins. The listed rows that still rank above the boundary are then in rank order ahead of every
    unlisted row: the best candidates among them are the best candidates of the universe. A claim moves its
    row's sum down (a spreading weigher), so rows fall below the boundary one by one; when fewer than a decision
    needs remain above it, the list is built again.
    """

    def __init__(self, size: int = 1024, keep: int = 32) -> None:
        self.size = size
        self.keep = keep
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, _Top] = OrderedDict()
        # (static revision, rows, journal position) at which a fresh list held too few candidates (a class whose
        # other filters remove most of its best rows): not built again until a number of rows changed
        self._failed: dict[Hashable, tuple[int, int, int]] = {}

    def get(self, key: Hashable, total: np.ndarray, seq: int, universe: Universe | None, mask: np.ndarray,
            need: int, *, n: int, static_revision: int,
            journal: RowJournal) -> tuple[np.ndarray, np.ndarray] | None:
        """(rows, sums) of the candidates (``mask``, within ``universe`` when given) that rank above every
        candidate not returned, rows ascending; at least ``need`` of them, else None. ``total`` is the kept sum
        ``key`` names, current to journal position ``seq``. The whole table's list is asked first."""
        with self._lock:
            found = self._lookup((key, None), total, seq, None, mask, need, n, static_revision, journal,
                                 build=universe is None)
            if found is not None or universe is None:
                return found
            return self._lookup((key, universe.key), total, seq, universe, mask, need, n, static_revision, journal)

    def _lookup(self, key: Hashable, total: np.ndarray, seq: int, universe: Universe | None, mask: np.ndarray,
                need: int, n: int, static_revision: int, journal: RowJournal, *,
                build: bool = True) -> tuple[np.ndarray, np.ndarray] | None:
        members = universe.members if universe is not None else None
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
            if (entry.static_revision != static_revision or entry.n != n
                    or not self._catch_up(entry, total, seq, members, journal)):
                entry = None
                del self._entries[key]
        found = self._query(entry, mask, need) if entry is not None else None
        if found is None and build:
            failed = self._failed.get(key)
            if failed is not None and failed[:2] == (static_revision, n) and seq - failed[2] < self.size:
                return None  # a list built lately held too few candidates: the caller ranks every row
            entry = self._build(total, universe.mask if universe is not None else None, n=n,
                                static_revision=static_revision,
                                seq=min(seq, universe.since) if universe is not None else seq)
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.keep:
                self._entries.popitem(last=False)
            found = self._query(entry, mask, need)
            if found is None:
                if len(self._failed) >= 4 * self.keep:
                    self._failed.clear()
                self._failed[key] = (static_revision, n, seq)
        return found

    @staticmethod
    def _query(entry: _Top, mask: np.ndarray, need: int) -> tuple[np.ndarray, np.ndarray] | None:
        rows = entry.rows
        values = entry.values
        ok = mask[rows] & ((values > entry.value) | ((values == entry.value) & (rows <= entry.row)))
        picked = np.flatnonzero(ok)
        if len(picked) < need:
            return None
        chosen = rows[picked]
        order = np.argsort(chosen, kind="stable")
        return chosen[order], values[picked[order]]

    def _catch_up(self, entry: _Top, total: np.ndarray, seq: int, members: np.ndarray | None,
                  journal: RowJournal) -> bool:
        if entry.seq == seq:
            return True
        if seq < entry.seq:
            return False  # the kept sum was rebuilt behind this list's position: rebuild the list too
        changed = journal.since(entry.seq, seq)
        if changed is None:
            return False
        position = entry.position
        values = entry.values
        joiners: dict[int, float] = {}
        if len(changed) > LOOP_ROWS:
            at, found, rows, current = _split_changed(entry.rows, changed, total)
            values[at] = current[found]
            rows, current = rows[~found], current[~found]
            beats = (current > entry.value) | ((current == entry.value) & (rows < entry.row))
            if members is not None:
                beats &= members[rows]
            joiners = dict(zip(rows[beats].tolist(), current[beats].tolist(), strict=True))
            changed = changed[:0]
        for row in changed.tolist():
            value = float(total[row])
            at = position.get(row)
            if at is not None:
                values[at] = value
            elif (members is None or members[row]) and (
                    value > entry.value or (value == entry.value and row < entry.row)):
                joiners[row] = value
        if joiners:
            if len(entry.rows) + len(joiners) > 2 * self.size:
                return False
            start = len(entry.rows)
            latest = {row: float(total[row]) for row in joiners}
            entry.rows = np.concatenate((entry.rows, np.fromiter(latest, dtype=np.intp, count=len(latest))))
            entry.values = np.concatenate((values, np.fromiter(latest.values(), dtype=np.float64,
                                                               count=len(latest))))
            for k, row in enumerate(latest):
                position[row] = start + k
        entry.seq = seq
        return True

    def _build(self, total: np.ndarray, universe: np.ndarray | None, *, n: int, static_revision: int,
               seq: int) -> _Top:
        values = total[:n]
        inside = universe[:n] if universe is not None else None
        count = n if inside is None else int(np.count_nonzero(inside))
        k = self.size
        if count <= k:  # the whole universe is listed: nothing ranks outside it
            rows = np.flatnonzero(inside) if inside is not None else np.arange(n, dtype=np.intp)
            listed = values[rows]
            return _Top(static_revision, n, seq, rows, listed.copy(), {r: i for i, r in enumerate(rows.tolist())},
                        -np.inf, -1)
        shadow = np.where(inside, values, -np.inf) if inside is not None else values
        kth = kth_highest(shadow, k)
        near = np.flatnonzero(shadow >= kth)
        near_values = shadow[near]
        above = near[near_values > kth]
        ties = near[near_values == kth][: k - len(above)]  # ascending: the lowest rows among equals
        rows = np.concatenate((above, ties))
        return _Top(static_revision, n, seq, rows, values[rows].copy(), {r: i for i, r in enumerate(rows.tolist())},
                    kth, int(ties[-1]))


SMALL_TABLE = 2048  # rows up to which ColumnBounds keeps no lists (a full pass costs as little)
LOOP_ROWS = 64  # changed rows up to which a list catches up in a Python loop (beyond: vectorized)


def _split_changed(listed: np.ndarray, changed: np.ndarray,
                   column: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For a list's rows and the journal's changed rows: (positions in the list of the changed rows it holds,
    which of the distinct changed rows it holds, the distinct changed rows, their current values)."""
    rows = np.unique(changed)
    current = column[rows]
    if not len(listed):
        return np.zeros(0, dtype=np.intp), np.zeros(len(rows), dtype=np.bool_), rows, current
    order = np.argsort(listed, kind="stable")
    ranked = listed[order]
    where = np.minimum(np.searchsorted(ranked, rows), len(ranked) - 1)
    found = ranked[where] == rows
    return order[where[found]], found, rows, current


KTH_BLOCK = 256  # rows per block when the k-th highest value is narrowed down with block maxima


def kth_highest(values: np.ndarray, k: int) -> float:
    """The k-th highest of the values above -inf (at least k of them; -inf marks rows left out).

    ``np.partition`` of a whole column costs 30 ms at 1,000,000 rows, and 200 ms when most of it is -inf. The
    k-th highest of the blocks' maxima is a floor: k rows reach it, so the k-th highest value does too; only the
    rows at or above it are partitioned."""
    n = len(values)
    full = n - n % KTH_BLOCK
    if full >= k * KTH_BLOCK:
        maxima = values[:full].reshape(-1, KTH_BLOCK).max(axis=1)
        floor = float(np.partition(maxima, len(maxima) - k)[len(maxima) - k])
        if floor > -np.inf:
            near = values[values >= floor]
            return float(np.partition(near, len(near) - k)[len(near) - k])
    finite = values[values > -np.inf]
    return float(np.partition(finite, len(finite) - k)[len(finite) - k])


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
