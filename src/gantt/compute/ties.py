"""Equal weights within a multi-instance request, ordered as Nova's scheduler leaves them.

Nova places a request's instances one at a time (``nova.scheduler.manager._schedule``): each instance filters
and weighs the list of hosts the previous instance left, sorts it by weight with Python's stable sort, moves the
host it picks to the front, consumes that host and hands the list on. Hosts of equal weight therefore keep the
order they had for the previous instance: the host picked last first, then by the previous weights, and so on
back to the first instance, whose ties go the order the host manager listed the hosts in (a set's order in Nova,
which means nothing; Gantt's first instance takes the lowest row, one order Nova could have). On a uniform cloud
this decides most picks: two equal hosts and three instances go [h0, h1, h1] in Nova, not [h0, h1, h0].

Equivalently, for instance ``k`` a host's place among equals is the key ``(not chosen for k-1, -weight for k-1,
not chosen for k-2, -weight for k-2, …, row)``. ``TieHistory`` keeps, per earlier instance, that instance's
weights (the ranking's scores, by reference where they are the table's kept sum: that sum is patched in place
only on rows claimed since, and the weight of a row claimed at or after an instance is never read for it, its
"chosen" flag decides first) and the row it chose, and orders a group of tied rows by the key. Only later
instances of a multi-instance request pay for it; a single instance never builds one. The key reaches back
``DEPTH`` instances (then row order), so a request of hundreds of instances costs a bounded amount per instance.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from functools import cmp_to_key
from typing import Any

import numpy as np

# Earlier instances kept: equal weights that none of the last DEPTH instances tells apart go by row. Enough
# that every tie the parity suite and a uniform cloud's round-robin meet is decided as in Nova, few enough that a
# request of hundreds of instances keeps a bounded number of score arrays and sorts on a bounded number of keys.
DEPTH = 16
FEW = 32  # tied rows sorted one by one in Python (below, numpy's per-call cost dominates)
KEY = ("gantt.compute.ties",)  # the request context's scratch entry holding a request's TieHistory
# The scratch entry holding the nodes with room for the request's first instance (ResourceFilter): Nova's
# Placement candidates, fetched once per request; the later instances weigh those and their claims refuse a full one.
FIRST_CANDIDATES = ("gantt.first_candidates",)


@dataclass(slots=True)
class Step:
    """One earlier instance's weights and the row it was placed on."""

    values: np.ndarray  # scores by position (a copy, or the kept sum read-only)
    rows: np.ndarray | None  # position -> row when the scores span the candidates only
    mask: np.ndarray | None  # candidate rows, where ``values`` spans every row without -inf off the mask
    chosen: int  # the row this instance was placed on

    def weight_of(self, row: int) -> float:
        """``weights`` of one row (a few rows are cheaper one by one than as arrays)."""
        if self.rows is not None:
            at = int(np.searchsorted(self.rows, row))
            return float(self.values[at]) if at < len(self.rows) and self.rows[at] == row else -np.inf
        if row >= len(self.values) or (self.mask is not None and not self.mask[row]):
            return -np.inf
        return float(self.values[row])

    def weights(self, rows: np.ndarray) -> np.ndarray:
        """The weights of ``rows`` for this instance; -inf for a row that was no candidate then."""
        out = np.full(len(rows), -np.inf)
        if self.rows is not None:
            at = np.searchsorted(self.rows, rows)
            ok = at < len(self.rows)
            ok[ok] = self.rows[at[ok]] == rows[ok]
            out[ok] = self.values[at[ok]]
            return out
        ok = rows < len(self.values)
        if self.mask is not None:
            ok[ok] = self.mask[rows[ok]]
        out[ok] = self.values[rows[ok]]
        return out


@dataclass(slots=True)
class TieHistory:
    """The earlier instances of one request, for the order of equal weights of the next (see the module)."""

    layout: int  # the table's row layout the rows refer to; when rows are renumbered the history is dropped
    instances: int  # in the request
    steps: deque[Step] = field(default_factory=lambda: deque(maxlen=DEPTH))

    def snapshot(self, ranking: Any) -> Step | None:
        """This instance's weights, taken before the pick writes into them; completed by ``record``."""
        pick = ranking.pick
        if pick is not None:  # the kept sum, never written by the pick
            return Step(pick.total, None, pick.mask, -1)
        if ranking.shared:  # the kept sum; the pick writes into a copy of its own
            return Step(ranking.score, None, None, -1)
        return Step(ranking.score.copy(), ranking.rows, None, -1)

    def record(self, step: Step | None, chosen: int) -> None:
        if step is not None:
            step.chosen = chosen
            self.steps.append(step)

    def order(self, rows: np.ndarray) -> np.ndarray:
        """``rows`` (ascending, tied for this instance) in the order Nova's list holds them.

        Rows no earlier instance picked that tie now have reported the same figures (nothing else makes
        weights tie), so they tie for every earlier instance too and keep their row order, after the lowest of
        them: only the picked rows and that one are sorted by the history. Checked on the oldest and the newest
        instance kept; where they differ there, every tied row is sorted."""
        steps = self.steps
        if len(rows) <= FEW:
            newest = list(reversed(steps))

            def before(a: int, b: int) -> int:
                """Negative when Nova's list holds ``a`` ahead of ``b``: compared from the latest instance back,
                stopping at the first that tells them apart (most often the latest)."""
                for step in newest:
                    if a == step.chosen or b == step.chosen:
                        return -1 if a == step.chosen else 1
                    wa, wb = step.weight_of(a), step.weight_of(b)
                    if wa != wb:
                        return -1 if wa > wb else 1
                return a - b

            return np.array(sorted(rows.tolist(), key=cmp_to_key(before)), dtype=rows.dtype)
        picked = np.fromiter({step.chosen for step in steps}, dtype=np.intp)
        fresh = ~np.isin(rows, picked)
        unpicked = rows[fresh]
        if len(unpicked) < 2:
            return _by_history(rows, steps)
        for step in (steps[0], steps[-1]):
            w = step.weights(unpicked)
            if not (w == w[0]).all():
                return _by_history(rows, steps)
        ordered = _by_history(np.concatenate((rows[~fresh], unpicked[:1])), steps)
        at = int(np.flatnonzero(ordered == unpicked[0])[0]) + 1
        return np.concatenate((ordered[:at], unpicked[1:], ordered[at:]))


def _by_history(rows: np.ndarray, steps: deque[Step]) -> np.ndarray:
    keys: list[np.ndarray] = [rows]
    for step in steps:  # np.lexsort: the last key is the first compared, so the latest instance last
        keys.append(-step.weights(rows))
        keys.append(rows != step.chosen)
    return rows[np.lexsort(keys)]
