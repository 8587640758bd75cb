"""The cloud at a glance (``GET /v1/overview``, the ``/ui`` page): what the scheduler decided lately, what it
refused and why, and the shape of the overview that carries them with the hosts' state and utilization.

The recent decisions and refusals are kept in memory, per process, in two small rings: recording one is a tuple
appended to a deque on the decision's own thread, and it is turned into its wire form only when someone looks.
A service running several worker processes has one ring per process; the overview names the process (``pid``).

This module is imported by the wire types (``gantt.service.schemas``), which the client loads: no numpy here.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from msgspec import Struct, field

from gantt.model.answers import Explanation, Selection
from gantt.model.errors import NoValidHost
from gantt.model.prepare import prepare_types
from gantt.model.request_spec import RequestSpec

# How many decisions and refusals each process remembers (and the overview shows).
DECISIONS = 20
REFUSALS = 20
# Trends: per minute, the instances placed and refused and (sampled when the overview is read, at most once a
# minute) each class's share in use, for the last hour.
TREND_MINUTES = 60
# A request of many instances is shown by its first ones.
INSTANCES_SHOWN = 8
# Candidates shown per instance: the claimed node and the alternates the answer carries ([scheduler]
# max_attempts - 1 of them: 2 by default), best first.
CANDIDATES_SHOWN = 3


def instant(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


# ---------------------------------------------------------------------------------------- wire records


class Pick(Struct):
    """A node a decision ranked, with its weight then."""

    host: str
    nodename: str
    weight: float | None = None


class Placed(Struct):
    """One instance of a decision: the consumer, the node claimed for it, and its top candidates."""

    consumer_uuid: str | None
    host: str
    nodename: str
    candidates: list[Pick]


class Decision(Struct):
    """A request that was placed."""

    at: datetime
    request_id: str | None
    instances: int
    placements: list[Placed]


class Refusal(Struct):
    """A request answered with NoValidHost, and why."""

    at: datetime
    request_id: str | None
    instances: int
    message: str
    reason: str
    explanation: Explanation | None = None


class ZoneHosts(Struct):
    """Nodes of one availability zone by state. ``down``: no report within service_down_time, or forced down;
    ``disabled``: reporting but disabled by an operator; ``up``: the rest (schedulable)."""

    zone: str
    up: int = 0
    down: int = 0
    disabled: int = 0


class ClassUsage(Struct):
    """One resource class over every node that has it: used (reported + in flight) against capacity."""

    resource_class: str
    used: float
    capacity: float
    hosts: int


class HostUsage(Struct):
    """One node's row of the heat map: the fraction of each class's capacity in use, in the order of
    ``Overview.resource_classes`` (null where the node has none of that class)."""

    host: str
    nodename: str
    zone: str
    state: str
    usage: list[float | None]


class RecentAllocation(Struct):
    consumer_uuid: str
    host: str
    nodename: str
    resources: dict[str, int]
    created_at: datetime | None = None
    project_id: str | None = None


class TrendPoint(Struct):
    """One minute of this process: instances placed and refused in it, and each class's share in use when the
    overview was first read in it (absent: nobody looked that minute)."""

    at: datetime  # the minute's start
    placed: int = 0
    refused: int = 0
    utilization: dict[str, float] = field(default_factory=dict)


class Overview(Struct):
    """``GET /v1/overview``."""

    at: datetime
    pid: int
    revision: int
    hosts: int
    zones: list[ZoneHosts]
    classes: list[ClassUsage]
    resource_classes: list[str]
    utilization: list[HostUsage]
    utilization_omitted: int
    allocations: int
    recent_allocations: list[RecentAllocation]
    decisions: list[Decision]
    refusals: list[Refusal]
    counters: dict[str, int] = field(default_factory=dict)
    trend: list[TrendPoint] = field(default_factory=list)  # the last hour, oldest first, one point per minute


# ------------------------------------------------------------------------------------------------ ring


class Activity:
    """The last ``DECISIONS`` decisions and ``REFUSALS`` refusals of this process, newest first when read."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._decisions: deque[tuple[float, str | None, list[list[Selection]]]] = deque(maxlen=DECISIONS)
        self._refusals: deque[tuple[float, str | None, RequestSpec, NoValidHost]] = deque(maxlen=REFUSALS)
        # minute (epoch // 60) -> [placed, refused, {class: share} or None]
        self._minutes: dict[int, list[Any]] = {}

    def _minute(self, at: float) -> list[Any]:
        minute = int(at // 60)
        bucket = self._minutes.get(minute)
        if bucket is None:
            bucket = self._minutes[minute] = [0, 0, None]
            for old in [m for m in self._minutes if m <= minute - TREND_MINUTES]:
                del self._minutes[old]
        return bucket

    def decided(self, answer: list[list[Selection]], request_id: str | None = None) -> None:
        at = self._clock()
        with self._lock:
            self._decisions.append((at, request_id, answer))
            self._minute(at)[0] += len(answer)

    def refused(self, spec: RequestSpec, error: NoValidHost, request_id: str | None = None) -> None:
        at = self._clock()
        with self._lock:
            self._refusals.append((at, request_id, spec, error))
            self._minute(at)[1] += spec.num_instances

    def sample(self, classes: list[ClassUsage]) -> None:
        """Each class's share in use now, kept for this minute unless it has one already."""
        with self._lock:
            bucket = self._minute(self._clock())
            if bucket[2] is None:
                bucket[2] = {c.resource_class: (c.used / c.capacity if c.capacity > 0 else 0.0) for c in classes}

    def trend(self) -> list[TrendPoint]:
        """The last ``TREND_MINUTES`` minutes, oldest first, a point for every minute (zeros where nothing
        happened)."""
        with self._lock:
            now = int(self._clock() // 60)
            minutes = {m: (b[0], b[1], dict(b[2] or {})) for m, b in self._minutes.items()}
        out = []
        for minute in range(now - TREND_MINUTES + 1, now + 1):
            placed, refused, shares = minutes.get(minute, (0, 0, {}))
            out.append(TrendPoint(at=instant(minute * 60.0), placed=placed, refused=refused, utilization=shares))
        return out

    def decisions(self) -> list[Decision]:
        with self._lock:
            recorded = list(self._decisions)
        return [_decision(at, request_id, answer) for at, request_id, answer in reversed(recorded)]

    def refusals(self) -> list[Refusal]:
        with self._lock:
            recorded = list(self._refusals)
        return [Refusal(at=instant(at), request_id=request_id, instances=spec.num_instances,
                        message=error.message, reason=(error.explanation.reason if error.explanation else ""),
                        explanation=error.explanation)
                for at, request_id, spec, error in reversed(recorded)]


def _decision(at: float, request_id: str | None, answer: list[list[Selection]]) -> Decision:
    placements = []
    for selections in answer[:INSTANCES_SHOWN]:
        if not selections:
            continue
        first = selections[0]
        ranked = sorted(selections[:CANDIDATES_SHOWN], key=lambda s: -(s.weight or 0.0))
        placements.append(Placed(consumer_uuid=first.consumer_uuid, host=first.host, nodename=first.nodename,
                                    candidates=[Pick(s.host, s.nodename, s.weight) for s in ranked]))
    return Decision(at=instant(at), request_id=request_id, instances=len(answer), placements=placements)


prepare_types(globals())  # build msgspec type info before any thread encodes (see model.prepare_types)
