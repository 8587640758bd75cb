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
instances of a multi-instance request pay for it; a single instance never builds one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

KEY = ("gantt.ties",)  # the request context's scratch entry holding a request's TieHistory
# The scratch entry holding the nodes with room for the request's first instance (ResourceFilter): Nova's
# Placement candidates, fetched once per request; the later instances weigh those and their claims refuse a full one.
FIRST_CANDIDATES = ("gantt.first_candidates",)


@dataclass(slots=True)
class _Step:
    values: np.ndarray  # scores by position (a copy, or the kept sum read-only)
    rows: np.ndarray | None  # position -> row when the scores span the candidates only
    mask: np.ndarray | None  # candidate rows, where ``values`` spans every row without -inf off the mask
    chosen: int  # the row this instance was placed on

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
    steps: list[_Step] = field(default_factory=list)

    def snapshot(self, ranking: Any) -> _Step | None:
        """This instance's weights, taken before the pick writes into them; completed by ``record``."""
        pick = ranking.pick
        if pick is not None:  # the kept sum, never written by the pick
            return _Step(pick.total, None, pick.mask, -1)
        if ranking.shared:  # the kept sum; the pick writes into a copy of its own
            return _Step(ranking.score, None, None, -1)
        return _Step(ranking.score.copy(), ranking.rows, None, -1)

    def record(self, step: _Step | None, chosen: int) -> None:
        if step is not None:
            step.chosen = chosen
            self.steps.append(step)

    def order(self, rows: np.ndarray) -> np.ndarray:
        """``rows`` (tied for this instance) in the order Nova's list holds them."""
        keys: list[np.ndarray] = [rows]
        for step in self.steps:  # np.lexsort: the last key is the first compared, so the latest instance last
            keys.append(-step.weights(rows))
            keys.append(rows != step.chosen)
        return rows[np.lexsort(keys)]
