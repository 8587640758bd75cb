"""What breaks in the simulated world, apart from any table's belief: which hosts are really down, since when, by
when every scheduler's table must see them down, and a record of each failure (a rack lost, hosts flapping, a
scheduler crashed) with what it cost."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gantt.compute.state import HostTable
from gantt.model import HostReport, HostStats, ServiceInfo
from gantt.sim.clock import EPOCH
from gantt.sim.cloud import CloudLayout
from gantt.sim.replica import Feed, heartbeat
from gantt.sim.scenario import Failure


@dataclass
class FailureRecord:
    at: float
    kind: str
    target: str
    until: float | None = None  # when the effect ends (None: never)
    hosts: int = 0
    instances_on_hosts: int = 0
    build_failures: int = 0
    claims_after_detection: int = 0
    claims_on_dead_hosts: int = 0


class HostFailures:
    """The hosts' real state, row by row (row ``i`` is host ``i`` of the layout), and the failures' records.

    ``call(t, fn)`` runs ``fn(t)`` at virtual time ``t`` (the simulator's event heap)."""

    def __init__(self, layout: CloudLayout, truth: HostTable, feed: Feed, call: Callable[[float, Callable[[float],
                 None]], None], *, seed: int, service_down_time: float, max_lag: float) -> None:
        self.layout = layout
        self.truth = truth
        self.feed = feed
        self.call = call
        self.seed = seed
        self.service_down_time = service_down_time
        self.max_lag = max_lag
        n = layout.n
        self.dead = np.zeros(n, dtype=np.bool_)  # the world: host really down (not what any table believes)
        self.lost_at = np.full(n, math.inf)
        self.detect_by = np.full(n, math.inf)  # by then no table may let a claim land there
        self.failure_of = np.full(n, -1, dtype=np.int32)
        self.records: list[FailureRecord] = []
        self.fenced_reports: list[HostReport] = []  # what a (re)starting scheduler's snapshot already holds

    def record(self, t: float, kind: str, target: str, rows: np.ndarray | None = None) -> FailureRecord:
        record = FailureRecord(at=t - EPOCH, kind=kind, target=target)
        if rows is not None:
            record.hosts = len(rows)
            names = self.layout.names
            record.instances_on_hosts = sum(len(self.truth.node_allocations((names[r], names[r])))
                                            for r in rows.tolist())
        self.records.append(record)
        return record

    def of_row(self, row: int) -> FailureRecord | None:
        """The failure that took host ``row`` down, if one did."""
        index = int(self.failure_of[row])
        return self.records[index] if index >= 0 else None

    def rack_lost(self, t: float, failure: Failure) -> None:
        assert failure.rack is not None
        rows = self.layout.rack_hosts(failure.rack)
        self.record(t, "rack_lost", failure.rack, rows)
        self.dead[rows] = True
        self.lost_at[rows] = np.minimum(self.lost_at[rows], t)
        self.failure_of[rows] = len(self.records) - 1
        # Unfenced: the last heartbeat was at most now, so every table sees the host down by now + down time.
        # Fenced: the forced_down report reaches each replica after its lag.
        delay = self.max_lag if failure.fenced else self.service_down_time
        self.detect_by[rows] = np.minimum(self.detect_by[rows], t + delay)
        if failure.fenced:
            for r in rows.tolist():
                report = HostReport(host=self.layout.names[r],
                                    stats=HostStats(service=ServiceInfo(forced_down=True,
                                                                        disabled_reason="rack lost")))
                self.truth.update(report)
                self.feed.report(report)
                self.fenced_reports.append(report)

    def flap(self, t: float, failure: Failure) -> None:
        if failure.rack is not None:
            rows = self.layout.rack_hosts(failure.rack)
        else:
            pick = random.Random(self.seed + int(failure.at * 1000))
            rows = np.array(sorted(pick.sample(range(self.layout.n), failure.hosts)), dtype=np.int64)
        target = failure.rack or f"{len(rows)} hosts"
        record = self.record(t, "host_flap", target, rows)
        record.until = record.at + failure.cycles * (failure.down_for + failure.up_for) - failure.up_for
        index = len(self.records) - 1
        period = failure.down_for + failure.up_for

        def down(now: float) -> None:
            self.dead[rows] = True
            self.failure_of[rows] = index

        def up(now: float) -> None:
            self.dead[rows] = np.isfinite(self.lost_at[rows])  # a host lost for good stays dead
            alive = rows[~self.dead[rows]]
            heartbeat(self.truth, alive, now)  # nova-compute reports as soon as it is back
            self.feed.heartbeat(alive)

        for cycle in range(failure.cycles):
            self.call(t + cycle * period, down)
            self.call(t + cycle * period + failure.down_for, up)
