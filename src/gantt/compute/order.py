"""Nova's pick order over one ranking: a random one of the best ``host_subset_size``, then by weight.

The engine's claim path walks this order and claims the first node that still has room; the rest of the walk
gives the alternates. Only the few rows actually needed are extracted (repeated argmax, or by blocks over many
rows), never a sort of every candidate. ``[gantt] subset_slots`` gives each scheduler instance its share of the
subset; ``shuffle_best_same_weighed_hosts`` draws among the nodes tied for the best weight first.
"""

from __future__ import annotations

import random
import threading
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from gantt.compute.ranking import BlockPick, Ranking
from gantt.compute.state.table import HostTable
from gantt.compute.ties import TieHistory
from gantt.config import Config

BEST_BLOCK = 1024  # rows per block when finding the best few of a long score array


class PickOrder:
    """The order a decision picks from, and this scheduler instance's share of Nova's subset."""

    def __init__(self, table: HostTable, config: Config, rng: random.Random) -> None:
        self.table = table
        self.config = config
        self.rng = rng
        self._slots: tuple[int, np.ndarray] | None = None  # _slot_rows: (table layout, per row: of my slot)
        self._slots_lock = threading.Lock()

    def walk(self, ranking: Ranking, history: TieHistory | None = None, attempts: int | None = None
             ) -> Iterator[tuple[int, float]]:
        """(row, weight) in Nova's pick order: a random one of the best ``host_subset_size``, then by weight.

        With ``shuffle_best_same_weighed_hosts`` the nodes tied for the best weight are shuffled first. Consumes
        the ranking: each picked score is overwritten with -inf (a copy would cost a pass over every row); a
        shared score (the table's kept sum) is copied first, and only once a walk by weight needs the writes.
        A ranking with ``exact`` verdicts (filters that refine) skips the rows that fail them, so the subset and
        the alternates are those of the exact candidates, in the same order; only the rows walked are checked.
        Equal weights go the lowest row first, or, for a later instance of a multi-instance request
        (``history``), the order Nova's re-sorted list leaves them in (``gantt.compute.ties``).

        ``attempts``: the chosen node and the alternates the request asks for (``Claims.attempts``: its
        ``alternates`` + 1, else ``[scheduler] max_attempts`` as the Config holds it now); the walk finds the best
        rows, and shuffles the ties for the best weight, that many beyond the subset at a time.
        """
        fs = self.config.filter_scheduler
        batch = fs.host_subset_size + (self.config.scheduler.max_attempts if attempts is None else attempts)
        w = _Walk(ranking, history, batch)
        head: list[tuple[int, float]] = []  # (position in score, weight)
        if fs.shuffle_best_same_weighed_hosts and w.remaining:
            head = w.draw_ties(ranking.top, batch + 4, self.rng)
        while len(head) < fs.host_subset_size and w.remaining > 0:
            i = w.best()
            weight = float(w.score[i])
            w.score[i] = -np.inf
            w.remaining -= 1
            if w.passes(i):
                head.append((i, weight))
        if head:
            subset = head[: fs.host_subset_size]
            if self.config.gantt.subset_slots > 1:
                subset = self._my_share(subset, w.own(), w.rows, w.passes) or subset
            first = subset[self.rng.randrange(len(subset))]
            if first in head:
                head.remove(first)
            else:  # a tie of the subset's last weight from beyond it (_my_share)
                w.own()[first[0]] = -np.inf
                w.remaining -= 1
            yield w.emit(*first)
        for i, weight in head:
            yield w.emit(i, weight)
        while w.remaining > 0:
            i = w.best()
            weight = float(w.score[i])
            if weight == -np.inf:
                return
            w.score[i] = -np.inf
            w.remaining -= 1
            if w.passes(i):
                yield w.emit(i, weight)

    def _my_share(self, subset: list[tuple[int, float]], score: np.ndarray, rows: np.ndarray | None,
                  passes: Callable[[int], bool]) -> list[tuple[int, float]]:
        """This instance's share of Nova's subset (``[gantt] subset_slot``): its members whose host hashes to this
        slot, and in place of each member of another slot at the subset's last weight, a node of this slot tied
        with it from beyond the subset. Nova orders equal weights as its host manager lists the hosts, which is
        arbitrary: a subset holding those ties instead is one Nova could have formed. Empty: none of this slot."""
        mine = self._slot_rows()

        def is_mine(i: int) -> bool:
            row = int(rows[i]) if rows is not None else i
            return row < len(mine) and bool(mine[row])

        share = [(i, w) for i, w in subset if is_mine(i)]
        last = min(w for _, w in subset)
        wanted = sum(1 for i, w in subset if w == last and not is_mine(i))
        if not wanted:
            return share
        ties = np.flatnonzero(score == last)  # the subset's own members are -inf by now
        at = rows[ties] if rows is not None else ties
        ok = at < len(mine)
        ok[ok] = mine[at[ok]]
        for i in ties[ok].tolist():
            if passes(i):
                share.append((i, last))
                wanted -= 1
                if not wanted:
                    return share
        if share:
            return share
        # None of this slot left at these weights (this instance ran ahead of the others): the others' nodes, but
        # drawn from all the ties rather than the first rows, where the others' own picks are.
        drawn = [int(ties[j]) for j in self.rng.sample(range(len(ties)), min(len(ties), len(subset)))]
        return [(i, last) for i in drawn if passes(i)]

    def _slot_rows(self) -> np.ndarray:
        """Per row: does its host hash to this instance's slot. A hash of the name, not the row number, so that
        every instance agrees whatever order it loaded the hosts in; kept until rows are renumbered."""
        table = self.table
        slots, slot = self.config.gantt.subset_slots, self.config.gantt.subset_slot
        layout, names = table.layout, table.host_names
        cached = self._slots
        if cached is not None and cached[0] == layout and len(cached[1]) >= len(names):
            return cached[1]
        with self._slots_lock:  # one thread hashes the names; the first decisions of every thread would all do it
            cached = self._slots
            known = cached[1] if cached is not None and cached[0] == layout else np.zeros(0, dtype=bool)
            if len(known) < len(names):
                fresh = [zlib.crc32(name.encode()) % slots == slot for name in names[len(known):]]
                known = np.concatenate([known, np.array(fresh, dtype=bool)])
                self._slots = (layout, known)
            return known


class _Walk:
    """One walk down a ranking (``PickOrder.walk``): the scores it consumes, what it has taken, what is left."""

    __slots__ = ("batch", "exact", "history", "offset", "pick", "remaining", "rows", "score", "shared", "taken",
                 "tied", "walk")

    def __init__(self, ranking: Ranking, history: TieHistory | None, batch: int) -> None:
        self.pick = ranking.pick
        # By blocks (a decision over many rows): the kept scores are read, never written; a pick is remembered.
        # Either way ``score[i]`` reads a weight and ``score[i] = -inf`` takes a position.
        self.score: Any = ranking.score if self.pick is None else self.pick
        self.shared = ranking.shared  # the table's kept sum: copied before the first write
        self.taken: list[int] = []  # positions picked but not yet set to -inf in ``score``
        self.rows = ranking.rows
        self.remaining = ranking.count
        self.exact = ranking.exact
        self.offset = ranking.offset
        self.history = history
        self.batch = batch
        self.walk: Iterator[int] | None = None
        self.tied: list[int] = []  # positions tied with the last one ``best`` gave, in Nova's order, reversed

    def passes(self, i: int) -> bool:
        exact = self.exact
        return exact is None or exact(int(self.rows[i]) if self.rows is not None else i)

    def own(self) -> Any:
        """``score`` to write in: a copy of a shared one, with every position taken so far at -inf."""
        if self.shared:
            self.score, self.shared = self.score.copy(), False
        score = self.score
        for i in self.taken:
            score[i] = -np.inf
        self.taken.clear()
        return score

    def emit(self, i: int, score: float) -> tuple[int, float]:
        return (int(self.rows[i]) if self.rows is not None else i), score + self.offset

    def draw_ties(self, top: float | None, take: int, rng: random.Random) -> list[tuple[int, float]]:
        """Nova's shuffle of the nodes tied for the best weight: up to ``take`` of them that pass, in a random
        order (taken from the scores, which are written only once the walk needs its own copy)."""
        head: list[tuple[int, float]] = []
        ties = Ties(self.score, top)
        drawn = ties.sample(take, rng) if self.exact is None else ties.shuffled(rng)
        for i in drawn:
            weight = float(self.score[i])
            self.taken.append(i)
            self.remaining -= 1
            if self.passes(i):
                head.append((i, weight))
            if len(head) >= take:
                break
        return head

    def best(self) -> int:
        """The next position by weight (set it to -inf before asking again)."""
        if self.walk is None:
            # Made only when the ties drawn do not fill the head: then, and only then, a shared score is copied
            # (a pass over every row).
            score = self.own()
            self.walk = best_first(score, self.batch) if self.pick is None else self.pick.best_first(self.batch)
        if self.history is None:
            return next(self.walk)
        score, tied = self.score, self.tied
        while tied:
            i = tied.pop()
            if score[i] != -np.inf:
                return i
        while True:
            i = next(self.walk)
            if i < 0 or score[i] != -np.inf:  # the walk may offer a tie given already
                break
        if i < 0:
            return i
        group = _tied(score, i, self.pick)
        if len(group) > 1:
            at = self.rows[group] if self.rows is not None else group
            by_row = dict(zip(at.tolist(), group.tolist(), strict=True))
            tied.extend(by_row[r] for r in reversed(self.history.order(at).tolist()))
            i = tied.pop()
        return i


def _tied(score: Any, i: int, pick: BlockPick | None) -> np.ndarray:
    """The positions not taken yet whose score equals position ``i``'s (a pass over the scores)."""
    if pick is None:
        return np.flatnonzero(score == score[i])
    group = np.flatnonzero((pick.total == pick.total[i]) & pick.mask)
    if pick.taken:
        group = group[~np.isin(group, np.fromiter(pick.taken, dtype=np.intp, count=len(pick.taken)))]
    return group


def best_first(score: np.ndarray, batch: int) -> Iterator[int]:
    """Positions of ``score`` in the order repeated ``argmax`` (each pick then set to -inf by the caller) gives:
    highest first, the lowest position among equals. The caller sets each yielded position to -inf before
    asking for the next.

    At 1,000,000 rows an argmax is a pass of ~0.5 ms and a decision takes several (the pick, the alternates).
    Here one pass takes each block's maximum; the best ``batch`` positions then lie in the ``batch`` blocks with
    the highest maxima (the lower block first among equal maxima): each of those holds a position that beats
    any position outside them. Only those blocks are searched. A further batch is found the same way if asked.
    """
    n = len(score)
    if n < 256 * BEST_BLOCK:  # below ~250,000 rows a few argmax passes cost less
        while True:
            yield int(score.argmax())
    full = n - n % BEST_BLOCK
    while True:
        maxima = score[:full].reshape(-1, BEST_BLOCK).max(axis=1)
        if full < n:
            maxima = np.append(maxima, score[full:].max())
        blocks = np.sort(np.lexsort((np.arange(len(maxima)), -maxima))[:batch])
        positions = np.concatenate([np.arange(b * BEST_BLOCK, min((b + 1) * BEST_BLOCK, n)) for b in blocks])
        values = score[positions]
        k = min(batch, len(values))
        threshold = np.partition(values, len(values) - k)[len(values) - k]  # the k-th highest
        above = np.flatnonzero(values > threshold)
        above = above[np.lexsort((above, -values[above]))]
        ties = np.flatnonzero(values == threshold)[: k - len(above)]  # positions ascend: lowest first
        yield from positions[np.concatenate((above, ties))].tolist()


def _shuffled_range(count: int, rng: random.Random) -> Iterator[int]:
    """``range(count)`` in a random order, drawn one at a time (a partial Fisher-Yates, the draws of shuffling a
    list of it in place): a caller that stops after a few pays for a few, where ``rng.sample`` of every tie, or a
    list of them, would pay for all. The swaps are kept in a dict, so no list of ``count`` items is built."""
    swapped: dict[int, int] = {}
    for k in range(count):
        j = rng.randrange(k, count)
        at_j = swapped.get(j, j)
        swapped[j] = swapped.get(k, k)
        yield at_j


class Ties:
    """The positions of ``score`` tied at its highest value ``top`` (found by a pass when not given).

    Drawn by rejection first: a uniform position, kept if it ties and was not drawn before, gives each tie the
    same chance ``rng.sample`` of a list of them would, and where ties are common (an idle cloud of identical
    nodes: every row) a few tries find them, where counting or listing 100,000 ties was a third of a decision.
    When tries keep missing (ties are few, or fewer than wanted), the ties are listed and sampled: a draw either
    way is uniform, so the two together are.
    """

    __slots__ = ("_score", "top")

    _TRIES = 8  # per tie wanted, at most
    _FIRST = 16  # tries without any tie: the ties are sparse, list them

    def __init__(self, score: np.ndarray, top: float | None = None) -> None:
        self._score = score
        self.top = float(score.max()) if top is None else top

    def sample(self, want: int, rng: random.Random) -> list[int]:
        """Up to ``want`` distinct tied positions (fewer only when fewer tie), in a uniformly random order."""
        score, top, n = self._score, self.top, len(self._score)
        drawn: dict[int, None] = {}  # ordered: the order drawn
        for tries in range(1, self._TRIES * want + 1):
            i = rng.randrange(n)
            if score[i] == top and i not in drawn:
                drawn[i] = None
                if len(drawn) == want:
                    return list(drawn)
            elif not drawn and tries >= self._FIRST:
                break
        ties = self._listed()
        return [int(ties[j]) for j in rng.sample(range(len(ties)), min(want, len(ties)))]

    def shuffled(self, rng: random.Random) -> Iterator[int]:
        """Every tied position in a uniformly random order, drawn as the caller asks (for a caller that may need
        many: those that fail an exact check are skipped)."""
        ties = self._listed()
        for j in _shuffled_range(len(ties), rng):
            yield int(ties[j])

    def _listed(self) -> np.ndarray:
        return np.flatnonzero(self._score == self.top)
