"""The discrete-event simulator: the real Scheduler/Engine/HostTable driven on a virtual clock.

One event heap orders everything in virtual time: arrivals, decisions finishing, builds on compute hosts,
instance departures, heartbeat ticks, failures and metric samples. A decision runs the real engine *at* its start
time (the clock reads that time) and keeps its scheduler busy for the engine's measured wall time (or a fixed
``decision_time``), so bursts queue up at the schedulers as they would in a cloud.

Policies
- ``gantt``: the scheduler decides from its replica and claims with a compare-and-set on the truth inside the
  decision (``ClaimThroughTable``); a conflict moves to the next candidate. The compute host builds at
  ``+build_time``; a dead host fails the build, the claim is released and the next alternate is claimed on the
  truth (the conductor's retry), up to ``max_attempts`` hosts.
- ``nova-classic``: the scheduler decides from its replica and only consumes from its own view. The compute host
  claims on the truth when the build starts and rejects when it does not fit; the conductor then tries the
  alternates, one build round-trip each, up to ``max_attempts`` hosts, then the instance fails.

The simulator here is the event loop and the control plane it drives (schedulers, decisions, builds, the
conductor's retries, heartbeats); the workload (gantt.sim.workload), the world's failures (gantt.sim.failures)
and the measurements (gantt.sim.metrics) are objects and functions it holds.
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

import numpy as np

from gantt.compute.scheduler import Scheduler
from gantt.compute.state import ClaimRejected, HostTable
from gantt.config import Config
from gantt.model import Allocation, NoValidHost, Selection
from gantt.sim.clock import EPOCH, VirtualClock
from gantt.sim.cloud import CloudLayout, build_cloud
from gantt.sim.failures import HostFailures
from gantt.sim.fragmentation import numa_fragmentation
from gantt.sim.metrics import Overcommit, capacity_sample, final_figures, invariants, timeline, wall_clock
from gantt.sim.replica import ClaimThroughTable, Feed, SchedulerInstance, heartbeat, load_snapshot, replay
from gantt.sim.scenario import Failure, Scenario
from gantt.sim.volumes import VolumeSide
from gantt.sim.workload import Request, Workload

HEARTBEAT_SLOTS = 20  # heartbeats are sent in this many batches per report period

# event kinds (ints: the heap compares them when times tie, and they are cheap)
ARRIVE, DONE, BUILD, DEPART, TICK, SAMPLE, CALL = range(7)


class Simulation:
    def __init__(self, scenario: Scenario, *, progress: Callable[[float, float], None] | None = None,
                 max_requests: int | None = None) -> None:
        built_wall, built_cpu = time.perf_counter(), time.process_time()
        self.s = scenario
        self.config: Config = scenario.config()
        self.progress = progress
        self.policy = scenario.policy.kind
        wl = scenario.workload
        self.max_requests = wl.requests if max_requests is None else max_requests
        self.end_arrivals = EPOCH + wl.duration if wl.duration is not None else math.inf
        self.clock = VirtualClock()
        self.layout: CloudLayout = build_cloud(scenario.cloud, scenario.seed)
        n = self.layout.n
        cp = scenario.control_plane
        self.truth = HostTable(service_down_time=cp.service_down_time, claim_timeout=self.config.gantt.claim_timeout,
                               clock=self.clock, initial_rows=n + 16)
        self.layout.populate(self.truth)
        # the resource classes some host has an inventory of: the utilization summary covers each
        self.classes = [rc for rc in self.truth.rc_index if bool(self.truth.has_rc(rc).any())]
        self.feed = Feed(self.truth, self.clock)
        self.failures = HostFailures(self.layout, self.truth, self.feed, lambda t, fn: self._push(t, CALL, fn),
                                     seed=scenario.seed, service_down_time=cp.service_down_time,
                                     max_lag=max(cp.lag(i) for i in range(cp.schedulers)))
        self.overcommit = Overcommit(self.truth)
        self.truth.subscribe(self._watch_truth)
        self.schedulers = [self._new_scheduler(i) for i in range(cp.schedulers)]
        self.rr = 0
        self.waiting: deque[Request] = deque()  # arrivals while every scheduler is down
        self.workload = Workload(wl, self.layout.zones, random.Random(scenario.seed), EPOCH)
        # heartbeats: each host reports at a fixed phase of the report period
        phase = np.random.default_rng(scenario.seed).integers(0, HEARTBEAT_SLOTS, size=n)
        self.hb_slots = [np.flatnonzero(phase == k) for k in range(HEARTBEAT_SLOTS)]
        self.hb_interval = cp.report_period / HEARTBEAT_SLOTS
        self.hb_next = 0
        # event heap
        self.heap: list[tuple[float, int, int, Any]] = []
        self.seq = 0
        # metrics
        self.c: Counter[str] = Counter()
        self.nvh: Counter[str] = Counter()
        self.fail_reasons: Counter[str] = Counter()
        self.engine_ms: list[float] = []
        self.latency_ms: list[float] = []  # arrival -> decision done (queueing + decision), virtual
        self.active_ms: list[float] = []  # arrival -> instance built, virtual
        self.samples: list[dict[str, Any]] = []
        self.inflight_requests = 0
        self.arrived = 0
        self.max_attempts = self.config.scheduler.max_attempts
        duration = wl.duration if wl.duration is not None else (self.max_requests or 0) / wl.rate
        if self.max_requests is not None:
            duration = min(duration, self.max_requests / wl.rate)
        self.expected_duration = duration
        self.sample_interval = scenario.sample_interval or max(duration / 200.0, 1e-3)
        self.wall = 0.0
        self.cpu = 0.0  # the machine may be shared: CPU time says what the run itself cost
        self.engine_wall = 0.0
        self.deciding = False
        self.numa_fragmentation: dict[str, Any] = {}
        self.volumes = None if scenario.volumes is None else VolumeSide(scenario.volumes, scenario.seed,
                                                                        self.layout.zones)
        self.vm_volumes: dict[str, int] = {}  # consumer -> how many volumes it boots with
        self.engine_cpu = 0.0  # running sum of engine_ms, in seconds (a progress log reads it mid-run)
        # building the cloud and loading its tables is most of a short run at 1,000,000 hosts: said apart
        self.build_wall = time.perf_counter() - built_wall
        self.build_cpu = time.process_time() - built_cpu

    # ------------------------------------------------------------------------------------------ plumbing

    def _push(self, t: float, kind: int, payload: Any) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, payload))

    def _new_scheduler(self, index: int) -> SchedulerInstance:
        cp = self.s.control_plane
        kwargs: dict[str, Any] = {"service_down_time": cp.service_down_time,
                                  "claim_timeout": self.config.gantt.claim_timeout, "clock": self.clock,
                                  "initial_rows": self.layout.n + 16}
        table = ClaimThroughTable(self.truth, **kwargs) if self.policy == "gantt" else HostTable(**kwargs)
        load_snapshot(table, self.truth, self.layout, self.failures.fenced_reports)
        config = self.config.with_overrides(gantt={"seed": self.s.seed * 1000 + index})
        sched = Scheduler(config, table=table)
        return SchedulerInstance(index=index, lag=cp.lag(index), scheduler=sched, table=table,
                                 cursor=self.feed.end)

    def _watch_truth(self, kind: str, obj: Any) -> None:
        """Invariant bookkeeping on every claim (and host report) that reaches the truth."""
        if kind == "host":
            row = self.truth.row_of(obj)
            if row is not None:
                self.overcommit.check(row)
            return
        if kind != "allocation":
            return
        row = self.truth.row_of((obj.host, obj.nodename))
        if row is None:
            return
        self.overcommit.check(row)
        now = self.clock.now
        failures = self.failures
        if now >= failures.lost_at[row]:
            self.c["claims_on_lost_hosts"] += 1
            record = failures.records[failures.failure_of[row]]
            record.claims_on_dead_hosts += 1
            # Only the schedulers' own decisions must avoid a host known down; a conductor retry claims the
            # alternates it was given earlier, blind to liveness, as Nova's does (that build then fails).
            if self.deciding and now > failures.detect_by[row]:
                self.c["claims_after_detection"] += 1
                record.claims_after_detection += 1

    # --------------------------------------------------------------------------------------------- run

    def run(self) -> dict[str, Any]:
        start = time.perf_counter()
        cpu_start = time.process_time()
        self._prefill()
        self.clock.now = EPOCH
        for sched in self.schedulers:
            sched.cursor = replay(sched.table, self.feed, sched.cursor, EPOCH)
        first = self.workload.arrivals.next(EPOCH)
        if first < self.end_arrivals and self.max_requests != 0:
            self._push(first, ARRIVE, None)
        else:
            self.c["arrival_stopped"] = 1
        self._push(EPOCH, TICK, None)
        self._push(EPOCH, SAMPLE, None)
        for i, failure in enumerate(self.s.failures):
            self._push(EPOCH + failure.at, CALL, self._failure_starter(i, failure))
        if self.volumes is not None:
            self.volumes.schedule(lambda t, fn: self._push(t, CALL, fn), EPOCH)
        heap = self.heap
        pop = heapq.heappop
        while heap:
            t, _, kind, payload = pop(heap)
            self.clock.now = t
            if kind == ARRIVE:
                self._arrive(t)
            elif kind == DONE:
                self._done(payload)
            elif kind == BUILD:
                self._build(t, *payload)
            elif kind == DEPART:
                if self.truth.allocation(payload) is not None:
                    self.truth.release(payload)
                    self.c["departed"] += 1
                    if self.volumes is not None:
                        self.volumes.release(payload)
            elif kind == TICK:
                self._tick(t)
            elif kind == SAMPLE:
                self._sample(t)
                self._push(t + self.sample_interval, SAMPLE, None)
            else:
                payload(t)
            if self._finished():
                break  # departures, heartbeats and failures after the last answer change nothing measured
        self.clock.now = max(self.clock.now, EPOCH)
        self.overcommit.audit()
        self._sample(self.clock.now)
        self.numa_fragmentation = numa_fragmentation(self.truth, self.config, self.workload.flavors,
                                                     ~self.failures.dead, self.clock.now)
        self.wall = time.perf_counter() - start
        self.cpu = time.process_time() - cpu_start
        return self.results()

    def _finished(self) -> bool:
        return self.arrivals_done and self.inflight_requests == 0

    @property
    def arrivals_done(self) -> bool:
        return self.c["arrival_stopped"] > 0

    # ------------------------------------------------------------------------------------------ workload

    def _prefill(self) -> None:
        prefilled = self.workload.prefill(self.truth, self.layout.names, self.s.seed,
                                          lambda life, consumer: self._push(EPOCH + life, DEPART, consumer))
        if prefilled:
            self.c["prefilled"] += prefilled

    def _arrive(self, t: float) -> None:
        request = self.workload.request(self.arrived, t)
        if self.volumes is not None:
            for consumer in request.consumers:
                self.vm_volumes[consumer] = self.volumes.wants()
        self.arrived += 1
        self.c["requests"] += 1
        self.c["instances_requested"] += len(request.consumers)
        self.inflight_requests += 1
        nxt = self.workload.arrivals.next(t)
        if nxt < self.end_arrivals and (self.max_requests is None or self.arrived < self.max_requests):
            self._push(nxt, ARRIVE, None)
        else:
            self.c["arrival_stopped"] = 1
        self._dispatch(request, t)
        if self.progress is not None and self.arrived % 1000 == 0:
            self.progress(t - EPOCH, self.arrived)

    def _dispatch(self, request: Request, t: float) -> None:
        """Round-robin over live instances, as a message queue with several consumers does."""
        count = len(self.schedulers)
        for step in range(count):
            sched = self.schedulers[(self.rr + step) % count]
            if sched.alive:
                self.rr = (sched.index + 1) % count
                if sched.busy:
                    sched.queue.append(request)
                else:
                    self._decide(sched, request, t)
                return
        self.waiting.append(request)

    # ----------------------------------------------------------------------------------------- decisions

    def _decide(self, sched: SchedulerInstance, request: Request, t: float) -> None:
        sched.busy = True
        sched.decisions += 1
        request.scheduler = sched.index
        sched.cursor = replay(sched.table, self.feed, sched.cursor, t - sched.lag)
        before = sched.table.conflicts if isinstance(sched.table, ClaimThroughTable) else 0
        answer: list[list[Selection]] | None = None
        self.deciding = True
        began_cpu = time.thread_time()
        began = time.perf_counter()
        try:
            answer = sched.scheduler.select_destinations(request.spec)
        except NoValidHost as exc:
            reason = exc.explanation.reason if exc.explanation is not None else ""
            self.nvh[reason or "unknown"] += len(request.consumers)  # instances, as every failure count
        finally:
            self.deciding = False
        wall = time.perf_counter() - began
        # CPU time of this thread: on a shared machine the wall clock also counts other processes' turns.
        took = time.thread_time() - began_cpu
        self.engine_ms.append(took * 1000.0)
        self.engine_cpu += took
        self.engine_wall += wall
        if isinstance(sched.table, ClaimThroughTable):
            self.c["claim_conflicts"] += sched.table.conflicts - before
        decision_time = self.s.control_plane.decision_time
        done = t + (took if decision_time == "measured" else float(decision_time))
        self.latency_ms.append((done - request.arrival) * 1000.0)
        self._push(done, DONE, sched.index)
        if answer is None:
            self._fail_request(request, "NoValidHost")
            return
        build_at = done + self.s.control_plane.build_time
        for k, selections in enumerate(answer):
            self._push(build_at, BUILD, (request, k, selections, 0))

    def _done(self, index: int) -> None:
        sched = self.schedulers[index]
        sched.busy = False
        if not sched.alive:
            return
        if sched.queue:
            self._decide(sched, sched.queue.popleft(), self.clock.now)

    # -------------------------------------------------------------------------------------------- builds

    def _build(self, t: float, request: Request, k: int, selections: list[Selection], attempt: int) -> None:
        sel = selections[attempt]
        key = (sel.host, sel.nodename)
        row = self.truth.row(*key)
        consumer = request.consumers[k]
        dead = bool(self.failures.dead[row])
        if self.policy == "gantt":
            if not dead:
                self._active(request, k, row, t)
                return
            self._build_failed_on_dead(row, consumer)
            self.truth.release(consumer)
        else:
            if not dead:
                try:
                    self.truth.claim(key, Allocation(consumer_uuid=consumer, host=key[0], nodename=key[1],
                                                     resources=dict(request.resources),
                                                     project_id=request.spec.project_id))
                    self._active(request, k, row, t)
                    return
                except ClaimRejected:
                    self.c["build_rejections"] += 1
            else:
                self._build_failed_on_dead(row, consumer)
        self._retry(t, request, k, selections, attempt + 1)

    def _group_allows(self, request: Request, k: int, host: str) -> bool:
        """Whether ``host`` keeps the request's server-group policy, given where its other members are held."""
        if request.policy not in ("affinity", "anti-affinity"):
            return True
        others = {a.host for c in request.consumers if c != request.consumers[k]
                  for a in [self.truth.allocation(c)] if a is not None}
        if request.policy == "anti-affinity":
            return host not in others
        return not others or host in others

    def _build_failed_on_dead(self, row: int, consumer: str) -> None:
        self.c["build_failures_dead_host"] += 1
        record = self.failures.of_row(row)
        if record is not None:
            record.build_failures += 1

    def _retry(self, t: float, request: Request, k: int, selections: list[Selection], attempt: int) -> None:
        """The conductor's reschedule to the alternates (at most ``max_attempts`` hosts in all)."""
        consumer = request.consumers[k]
        while attempt < len(selections) and attempt < self.max_attempts:
            self.c["retries"] += 1
            if self.policy == "nova-classic":
                self._push(t + self.s.control_plane.build_time, BUILD, (request, k, selections, attempt))
                return
            sel = selections[attempt]
            if not self._group_allows(request, k, sel.host):
                # Nova's compute host re-checks the group policy before it builds (and reschedules); the
                # gantt policy checks it before claiming the alternate.
                self.c["alternate_conflicts"] += 1
                attempt += 1
                continue
            try:
                self.truth.claim((sel.host, sel.nodename),
                                 Allocation(consumer_uuid=consumer, host=sel.host, nodename=sel.nodename,
                                            resources=dict(request.resources), project_id=request.spec.project_id))
            except ClaimRejected:
                self.c["claim_conflicts"] += 1
                self.c["alternate_conflicts"] += 1
                attempt += 1
                continue
            self._push(t + self.s.control_plane.build_time, BUILD, (request, k, selections, attempt))
            return
        self.c["instances_failed"] += 1
        self.fail_reasons["MaxRetriesExceeded"] += 1
        request.failed += 1
        self._forget_local_claim(request, consumer)
        self._resolve(request)

    def _forget_local_claim(self, request: Request, consumer: str) -> None:
        """Nova's scheduler view drops a consumer that never got built (its next refresh would)."""
        if self.policy != "nova-classic" or request.scheduler < 0:
            return
        table = self.schedulers[request.scheduler].table
        if table.allocation(consumer) is not None and self.truth.allocation(consumer) is None:
            HostTable.release(table, consumer)

    def _active(self, request: Request, k: int, row: int, t: float) -> None:
        if self.volumes is not None and self.vm_volumes.get(request.consumers[k]):
            consumer = request.consumers[k]
            failed = self.volumes.attach(consumer, self.vm_volumes.pop(consumer),
                                         self.layout.zones[int(self.layout.az[row])], request.spec.project_id,
                                         t - EPOCH)
            if failed is not None:  # Nova aborts the build (no reschedule) and frees the host
                self.truth.release(consumer)
                self._forget_local_claim(request, consumer)
                self.c["instances_failed"] += 1
                self.fail_reasons[failed] += 1
                request.failed += 1
                self._resolve(request)
                return
        self.c["instances_placed"] += 1
        self.c["active"] += 1
        if t >= self.failures.lost_at[row]:
            self.c["builds_on_lost_hosts"] += 1
        self.active_ms.append((t - request.arrival) * 1000.0)
        request.hosts.append(row)
        life = self.workload.lifetime()
        if life is not None:
            self._push(t + life, DEPART, request.consumers[k])
        self._resolve(request)

    def _resolve(self, request: Request) -> None:
        request.pending -= 1
        if request.pending:
            return
        self.inflight_requests -= 1
        if request.failed:
            self.c["requests_failed" if not request.hosts else "requests_partial"] += 1
        else:
            self.c["requests_placed"] += 1
        if request.policy is not None and len(request.hosts) > 1:
            distinct = len(set(request.hosts))
            if (request.policy == "anti-affinity" and distinct < len(request.hosts)) or \
                    (request.policy == "affinity" and distinct > 1):
                self.c["server_group_violations"] += 1

    def _fail_request(self, request: Request, reason: str) -> None:
        self.fail_reasons[reason] += len(request.consumers)  # instances: the unit of every failure count
        self.c["instances_failed"] += len(request.consumers)
        request.failed = len(request.consumers)
        request.pending = 1
        self._resolve(request)

    # -------------------------------------------------------------------------------------- heartbeats

    def _tick(self, t: float) -> None:
        rows = self.hb_slots[self.hb_next]
        self.hb_next = (self.hb_next + 1) % HEARTBEAT_SLOTS
        rows = rows[~self.failures.dead[rows]]
        heartbeat(self.truth, rows, t)
        self.feed.heartbeat(rows)
        self._push(t + self.hb_interval, TICK, None)

    # ----------------------------------------------------------------------------------------- failures

    def _failure_starter(self, index: int, failure: Failure) -> Callable[[float], None]:
        def start(t: float) -> None:
            if failure.kind == "rack_lost":
                self.failures.rack_lost(t, failure)
            elif failure.kind == "host_flap":
                self.failures.flap(t, failure)
            else:
                self._crash(t, failure)
        return start

    def _crash(self, t: float, failure: Failure) -> None:
        sched = self.schedulers[failure.scheduler]
        record = self.failures.record(t, "scheduler_crash", f"scheduler {failure.scheduler}")
        record.until = record.at + failure.down_for
        if not sched.alive:
            return
        sched.alive = False
        orphans = list(sched.queue)
        sched.queue.clear()
        self.c["redelivered"] += len(orphans)
        for request in orphans:  # unacknowledged messages go back to the queue for the other consumers
            self._dispatch(request, t)

        def restart(now: float) -> None:
            fresh = self._new_scheduler(failure.scheduler)
            self.schedulers[failure.scheduler] = fresh
            fresh.busy = sched.busy  # a decision that was running when it crashed still ends at its time
            while self.waiting:
                self._dispatch(self.waiting.popleft(), now)
            if not fresh.busy and fresh.queue:
                self._decide(fresh, fresh.queue.popleft(), now)

        self._push(t + failure.down_for, CALL, restart)

    # ------------------------------------------------------------------------------------------ metrics

    def _sample(self, t: float) -> None:
        truth = self.truth
        n = self.layout.n
        up = ~self.failures.dead
        room = capacity_sample(truth, self.layout, up, self.classes, self.workload.min_flavor,
                               self.workload.big_flavor[1])
        over = len(self.overcommit.rows)  # kept per claim and report (Overcommit.check), not a pass per sample
        self.samples.append({
            "t": t - EPOCH,
            "utilization": room["utilization"],
            "utilization_all": room["utilization_all"],
            "stranded": room["stranded"],
            "hosts_up": int(up.sum()),
            "hosts_seen_up": int(np.count_nonzero(truth.alive(t)[:n] & ~truth.col("forced_down")[:n])),
            "placed": self.c["instances_placed"], "failed": self.c["instances_failed"],
            "retries": self.c["retries"], "conflicts": self.c["claim_conflicts"] + self.c["build_rejections"],
            "no_valid_host": sum(self.nvh.values()), "requests": self.c["requests"],
            "active": len(truth.allocations()),
            "queued": sum(len(s.queue) for s in self.schedulers) + len(self.waiting),
            "schedulers_up": sum(1 for s in self.schedulers if s.alive),
            "fragmentation": room["fragmentation"],
            "overcommitted_nodes": over,
        })
        if self.volumes is not None:
            self.volumes.sample(t - EPOCH)
        live = [s.cursor for s in self.schedulers if s.alive]
        self.feed.trim(min(live) if live else self.feed.end)
        if self.progress is not None:
            self.progress(t - EPOCH, self.arrived)

    def results(self) -> dict[str, Any]:
        """The metrics, JSON-ready. Everything outside ``wall_clock`` is a function of the scenario and its seed
        (unless ``decision_time = "measured"``, which puts the engine's real time on the virtual clock)."""
        c = self.c
        lat = np.asarray(self.latency_ms) if self.latency_ms else np.zeros(1)
        act = np.asarray(self.active_ms) if self.active_ms else np.zeros(1)
        requested = c["instances_requested"]
        zones = self.layout.zones
        decision_time = self.s.control_plane.decision_time
        return {
            "scenario": self.s.name,
            "seed": self.s.seed,
            "policy": self.policy,
            "hosts": self.layout.n,
            "schedulers": len(self.schedulers),
            "filters": list(self.config.filter_scheduler.enabled_filters),
            "decision_time": decision_time,
            "reproducible": decision_time != "measured",
            "virtual_seconds": round(self.clock.now - EPOCH, 3),
            "requests": {"total": c["requests"], "placed": c["requests_placed"], "failed": c["requests_failed"],
                         "partial": c["requests_partial"]},
            "instances": {"requested": requested, "placed": c["instances_placed"],
                          "failed": c["instances_failed"], "prefilled": c["prefilled"],
                          "departed": c["departed"]},
            "decisions": len(self.engine_ms),
            "decision_latency": {"p50_ms": round(float(np.percentile(lat, 50)), 3),
                                 "p99_ms": round(float(np.percentile(lat, 99)), 3),
                                 "max_ms": round(float(lat.max()), 3),
                                 "note": "virtual: arrival to decision done (queueing + decision)"},
            "time_to_active": {"p50_ms": round(float(np.percentile(act, 50)), 3),
                               "p99_ms": round(float(np.percentile(act, 99)), 3)},
            "conflicts": {"claim_conflicts": c["claim_conflicts"], "alternate_conflicts": c["alternate_conflicts"],
                          "build_rejections": c["build_rejections"]},
            "retries": c["retries"],
            "build_failures_dead_host": c["build_failures_dead_host"],
            "redelivered": c["redelivered"],
            # One unit for every failure count: instances (a request for 3 that gets NoValidHost counts 3), so
            # failed_instances.by_reason sums to instances.failed.
            "failed_instances": {
                "unit": "instances",
                "total": c["instances_failed"],
                "by_reason": dict(sorted(self.fail_reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
                "no_valid_host_by_filter": dict(sorted(self.nvh.items(), key=lambda kv: (-kv[1], kv[0]))),
            },
            "failures": [vars(r) | {"at": round(r.at, 3)} for r in self.failures.records],
            "final": {**final_figures(self.samples, zones, self.classes),
                      "fragmentation_flavor": self.workload.big_flavor[0],
                      "numa_fragmentation": self.numa_fragmentation,
                      "active_allocations": len(self.truth.allocations())},
            "invariants": {**invariants(self.truth, c, len(self.overcommit.rows)),
                           **({} if self.volumes is None else self.volumes.invariants())},
            **({} if self.volumes is None else {"volumes": self.volumes.results()}),
            "timeline": timeline(self.samples, zones, self.classes),
            "wall_clock": wall_clock(wall=self.wall, cpu=self.cpu, build_wall=self.build_wall,
                                     build_cpu=self.build_cpu, engine_ms=self.engine_ms,
                                     engine_wall=self.engine_wall),
        }


def run_scenario(scenario: Scenario, *, progress: Callable[[float, float], None] | None = None,
                 max_requests: int | None = None) -> dict[str, Any]:
    """Run one scenario to completion and return its metrics (JSON-ready)."""
    return Simulation(scenario, progress=progress, max_requests=max_requests).run()


__all__ = ["Simulation", "run_scenario"]
