"""A decision's candidate mask over many rows, kept: the AND of a request class's static mask and its filters'
usage masks, with its count of candidates per block of rows, patched on the rows the journal lists as changed.

At 1,000,000 rows a decision ANDed its static mask with each usage mask (liveness, resources, the aggregate
ratios), counted the candidates and marked the blocks holding one: eight passes of a megabyte each, a fifth of a
decision. The parts it is the AND of are the same arrays from one decision to the next (static masks until the
static revision moves, usage masks patched in place while no decision holds them: ``journal.PatchedMasks``), and
between two decisions they change only on the journaled rows; so does their AND.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gantt.compute import blocks
from gantt.compute.journal import RowJournal

MEMORY = 96 << 20  # bytes of kept masks (one byte per row each): 96 classes at 1,000,000 rows


@dataclass(slots=True, eq=False)
class _Kept:
    parts: tuple[weakref.ReferenceType[np.ndarray], ...]  # the arrays it is the AND of (by identity)
    static_revision: int
    n: int
    seq: int  # journal position up to which it is patched
    mask: np.ndarray
    per_block: np.ndarray  # candidates per block of ``blocks.BLOCK`` rows
    count: int


class KeptCandidates:
    """Candidate masks kept per tuple of parts (their identities), an LRU bounded by ``MEMORY``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[int, ...], _Kept] = OrderedDict()
        self.built = 0  # masks built, and masks patched on changed rows (for tests and profiles)
        self.patched = 0

    def get(self, parts: Sequence[np.ndarray], *, n: int, static_revision: int, journal: RowJournal,
            seq: int) -> tuple[np.ndarray, int, np.ndarray]:
        """(the AND of ``parts`` over ``n`` rows, its count, per block whether it holds a candidate).

        ``seq``: the journal's position taken before any part was read: every part is patched at least up to
        it, so the rows changed before it are patched here from the parts, and the rows changed after it are
        patched by a later call. The mask is shared and patched in place (as the kept weighted sums are): a
        decision reads it at once and never writes it; the count and the blocks are this call's."""
        key = tuple(id(part) for part in parts)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and (entry.static_revision != static_revision or entry.n != n
                                      or any(ref() is not part for ref, part in zip(entry.parts, parts, strict=True))
                                      or not self._catch_up(entry, parts, journal, seq)):
                entry = None
            if entry is None:
                self.built += 1
                entry = self._build(parts, n, static_revision, seq)
                self._entries[key] = entry
                while len(self._entries) > max(1, MEMORY // max(n, 1)):
                    self._entries.popitem(last=False)
            self._entries.move_to_end(key)
            return entry.mask, entry.count, entry.per_block > 0

    @staticmethod
    def _build(parts: Sequence[np.ndarray], n: int, static_revision: int, seq: int) -> _Kept:
        mask = np.logical_and(parts[0][:n], parts[1][:n]) if len(parts) > 1 else parts[0][:n].copy()
        for part in parts[2:]:
            np.logical_and(mask, part[:n], out=mask)
        full = n - n % blocks.BLOCK
        per_block = np.count_nonzero(mask[:full].reshape(-1, blocks.BLOCK), axis=1)
        if full < n:
            per_block = np.append(per_block, np.count_nonzero(mask[full:]))
        return _Kept(tuple(weakref.ref(part) for part in parts), static_revision, n, seq, mask,
                     per_block.astype(np.int64), int(per_block.sum()))

    def _catch_up(self, entry: _Kept, parts: Sequence[np.ndarray], journal: RowJournal, seq: int) -> bool:
        """Patch ``entry`` on the rows changed since its position; False when it is better rebuilt."""
        if seq <= entry.seq:
            return True
        changed = journal.since(entry.seq, seq)
        if changed is None or len(changed) * 16 > entry.n:
            return False
        if len(changed):
            self.patched += 1
            rows = np.unique(changed)
            now = parts[0][rows]
            for part in parts[1:]:
                now &= part[rows]
            moved = now != entry.mask[rows]
            if moved.any():
                flipped, up = rows[moved], now[moved]
                entry.mask[flipped] = up
                delta = np.where(up, 1, -1)
                np.add.at(entry.per_block, flipped // blocks.BLOCK, delta)
                entry.count += int(delta.sum())
        entry.seq = seq
        return True
