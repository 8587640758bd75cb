"""The candidates' lowest or highest value of a usage column (a weigher's extremes), kept from the journal of
changed rows (``gantt.compute.journal``) instead of a pass over every candidate per decision:

- ``ColumnBounds``: from cached shortlists of the column's extreme rows (the 100,000-row path);
- ``BlockExtremes``: from the column's bounds per block of rows (``gantt.compute.blocks``), read only where a block
  can hold the extreme (the path by blocks, from a few hundred thousand rows on).

Keyed, valid and lock-free for readers as the journal's other derived data (see ``gantt.compute.journal``);
``gantt.compute.extremes`` asks them through the table.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

# the module, not its names: tests shrink blocks.BLOCK and blocks.EXTREME_BUDGET to reach every path
from gantt.compute import blocks
from gantt.compute.journal import RowJournal


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
                    for highest, cells in entry.cells.items():
                        assert entry.codes is not None
                        blocks.patch_code_blocks(cells, column, entry.codes, changed, highest=highest)
                    entry.seq = seq
                else:
                    entry.seq = seq
            if entry is None:
                entry = _Blocks(static_revision, n, seq, blocks.block_reduce(column, highest=True),
                                blocks.block_reduce(column, highest=False))
                self._entries[name] = entry
            return entry
