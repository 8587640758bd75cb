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

Why one ~800-line module: every handler below is a step of one event loop over one shared state (heap, clock,
truth, schedulers, counters); split across modules they would pass that state around or reach into each other.
The banners are the seams: workload, decisions, builds, heartbeats, failures, metrics.
"""

from __future__ import annotations

import heapq
import math
import random
import resource
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gantt.compute.scheduler import Scheduler
from gantt.compute.state import ClaimRejected, HostTable
from gantt.config import Config
from gantt.model import (
    Allocation,
    Flavor,
    HostReport,
    HostStats,
    InstanceGroup,
    NoValidHost,
    RequestSpec,
    Selection,
    ServiceInfo,
)
from gantt.sim.cloud import CloudLayout, build_cloud
from gantt.sim.fragmentation import numa_fragmentation
from gantt.sim.replica import ClaimThroughTable, Feed, heartbeat, replay
from gantt.sim.scenario import Failure, FlavorSpec, Lifetime, Scenario
from gantt.sim.volumes import VolumeSide

EPOCH = 1_000_000.0  # virtual time 0; non-zero because HostTable treats created_at == 0 as "unset"
HEARTBEAT_SLOTS = 20  # heartbeats are sent in this many batches per report period

# event kinds (ints: the heap compares them when times tie, and they are cheap)
ARRIVE, DONE, BUILD, DEPART, TICK, SAMPLE, CALL = range(7)


class VirtualClock:
    def __init__(self, now: float = EPOCH) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass(slots=True)
class Request:
    index: int
    arrival: float
    spec: RequestSpec
    consumers: list[str]
    resources: dict[str, int]
    policy: str | None  # server group policy
    scheduler: int = -1
    pending: int = 0  # instances not yet resolved
    hosts: list[int] = field(default_factory=list)  # rows of the placed instances
    failed: int = 0


@dataclass(slots=True)
class SchedulerInstance:
    index: int
    lag: float
    scheduler: Scheduler
    table: HostTable
    cursor: int = 0
    alive: bool = True
    busy: bool = False
    queue: deque[Request] = field(default_factory=deque)
    decisions: int = 0


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


class Arrivals:
    """A Poisson process whose rate is piecewise constant: the base rate, replaced during bursts."""

    def __init__(self, base: float, bursts: list[tuple[float, float, float]], rng: random.Random) -> None:
        self.rng = rng
        points = sorted({0.0, *(b[0] for b in bursts), *(b[0] + b[1] for b in bursts)})
        self.segments: list[tuple[float, float]] = []  # (start, rate) from each breakpoint on
        for start in points:
            rates = [rate for at, dur, rate in bursts if at <= start < at + dur]
            self.segments.append((start, max(rates) if rates else base))

    def next(self, t: float) -> float:
        need = self.rng.expovariate(1.0)
        segs = self.segments
        i = 0
        while i + 1 < len(segs) and segs[i + 1][0] <= t:
            i += 1
        while True:
            rate = segs[i][1]
            end = segs[i + 1][0] if i + 1 < len(segs) else math.inf
            if rate > 0 and rate * (end - t) >= need:
                return t + need / rate
            if end == math.inf:
                return math.inf
            need -= rate * (end - t)
            t = end
            i += 1


def lifetime_sampler(spec: Lifetime, rng: random.Random) -> Callable[[], float | None]:
    if spec.distribution == "forever":
        return lambda: None
    if spec.distribution == "fixed":
        return lambda: spec.mean
    if spec.distribution == "uniform":
        return lambda: rng.uniform(spec.min, spec.max)
    if spec.distribution == "lognormal":
        mu = math.log(spec.mean) - spec.sigma ** 2 / 2  # so that the mean is ``mean``
        return lambda: rng.lognormvariate(mu, spec.sigma)
    rate = 1.0 / spec.mean
    return lambda: rng.expovariate(rate)


class Simulation:
    def __init__(self, scenario: Scenario, *, progress: Callable[[float, float], None] | None = None,
                 max_requests: int | None = None) -> None:
        built_wall, built_cpu = time.perf_counter(), time.process_time()
        self.s = scenario
        self.config: Config = scenario.config()
        self.progress = progress
        self.policy = scenario.policy.kind
        self.rng = random.Random(scenario.seed)
        wl = scenario.workload
        self.max_requests = wl.requests if max_requests is None else max_requests
        self.end_arrivals = EPOCH + wl.duration if wl.duration is not None else math.inf
        self.clock = VirtualClock()
        self.layout: CloudLayout = build_cloud(scenario.cloud, scenario.seed)
        n = self.layout.n
        self.dead = np.zeros(n, dtype=np.bool_)  # the world: host really down (not what any table believes)
        self.lost_at = np.full(n, math.inf)
        self.detect_by = np.full(n, math.inf)  # by then no table may let a claim land there
        self.failure_of = np.full(n, -1, dtype=np.int32)
        self.fenced_reports: list[HostReport] = []
        cp = scenario.control_plane
        self.max_lag = max(cp.lag(i) for i in range(cp.schedulers))
        self.truth = HostTable(service_down_time=cp.service_down_time, claim_timeout=self.config.gantt.claim_timeout,
                               clock=self.clock, initial_rows=n + 16)
        self.layout.populate(self.truth)
        # the resource classes some host has an inventory of: the utilization summary covers each
        self.classes = [rc for rc in self.truth.rc_index if bool(self.truth.has_rc(rc).any())]
        self.feed = Feed(self.truth, self.clock)
        self.overcommitted: set[int] = set()  # rows ever seen past a capacity (see _check_room)
        self.truth.subscribe(self._watch_truth)
        self.schedulers = [self._new_scheduler(i) for i in range(cp.schedulers)]
        self.rr = 0
        self.waiting: deque[Request] = deque()  # arrivals while every scheduler is down
        # workload
        self.flavors = [Flavor(name=f.name, vcpus=f.vcpus, memory_mb=f.memory_mb, root_gb=f.root_gb,
                               ephemeral_gb=f.ephemeral_gb, extra_specs=dict(f.extra_specs)) for f in wl.flavors]
        self.flavor_weights = list(np.cumsum([f.weight for f in wl.flavors]))
        self.arrivals = Arrivals(wl.rate, [(EPOCH + b.at, b.duration, b.rate) for b in wl.bursts], self.rng)
        self.lifetime = lifetime_sampler(wl.lifetime, self.rng)
        self.projects = [f"project-{i}" for i in range(wl.projects)]
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
        self.failure_records: list[FailureRecord] = []
        self.samples: list[dict[str, Any]] = []
        self.inflight_requests = 0
        self.arrived = 0
        self.max_attempts = self.config.scheduler.max_attempts
        duration = wl.duration if wl.duration is not None else (self.max_requests or 0) / wl.rate
        if self.max_requests is not None:
            duration = min(duration, self.max_requests / wl.rate)
        self.expected_duration = duration
        self.sample_interval = scenario.sample_interval or max(duration / 200.0, 1e-3)
        flv = wl.flavors

        def needs(f: FlavorSpec) -> dict[str, int]:
            return {"VCPU": f.vcpus, "MEMORY_MB": f.memory_mb, "DISK_GB": f.root_gb + f.ephemeral_gb}

        self.min_flavor = {rc: min(needs(f)[rc] for f in flv) for rc in ("VCPU", "MEMORY_MB", "DISK_GB")}
        big = max(flv, key=lambda f: (f.vcpus, f.memory_mb))
        self.big_flavor = (big.name, needs(big))
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
        self.layout.populate(table)
        # A (re)starting instance loads a snapshot of the store, then follows the feed from its current end.
        for allocation in self.truth.allocations():
            HostTable.put_allocation(table, allocation)
        for report in self.fenced_reports:
            table.update(report)
        live = self.truth.col("updated_at")
        for value in np.unique(live):
            heartbeat(table, np.flatnonzero(live == value), float(value))
        config = self.config.with_overrides(gantt={"seed": self.s.seed * 1000 + index})
        sched = Scheduler(config, table=table)
        return SchedulerInstance(index=index, lag=cp.lag(index), scheduler=sched, table=table,
                                 cursor=self.feed.end)

    def _watch_truth(self, kind: str, obj: Any) -> None:
        """Invariant bookkeeping on every claim (and host report) that reaches the truth."""
        if kind == "host":
            row = self.truth.row_of(obj)
            if row is not None:
                self._check_room(row)
            return
        if kind != "allocation":
            return
        row = self.truth.row_of((obj.host, obj.nodename))
        if row is None:
            return
        self._check_room(row)
        now = self.clock.now
        if now >= self.lost_at[row]:
            self.c["claims_on_lost_hosts"] += 1
            record = self.failure_records[self.failure_of[row]]
            record.claims_on_dead_hosts += 1
            # Only the schedulers' own decisions must avoid a host known down; a conductor retry claims the
            # alternates it was given earlier, blind to liveness, as Nova's does (that build then fails).
            if self.deciding and now > self.detect_by[row]:
                self.c["claims_after_detection"] += 1
                record.claims_after_detection += 1

    def _check_room(self, row: int) -> None:
        """The overcommit invariant, incrementally: only a claim or a report can push a node past its capacity,
        so the node it touched is checked at that moment (every class at once: one short row of each column).
        A node found over stays counted even if a release later brings it back; the run's end adds a full
        audit of every node (``_audit_room``)."""
        truth = self.truth
        rc = truth.rc
        k = len(truth.rc_index)
        used = rc["reported"][row, :k] + rc["inflight"][row, :k]
        if bool((used > rc["capacity"][row, :k] + 1e-6).any()):
            self.overcommitted.add(row)

    def _audit_room(self) -> None:
        """Every node against its capacity, every class (the full pass the incremental check stands in for)."""
        truth = self.truth
        for rc in truth.rc_index:
            cap = truth.rc_col("capacity", rc)
            if cap is not None:
                self.overcommitted.update(np.flatnonzero(truth.used(rc) > cap + 1e-6).tolist())

    # --------------------------------------------------------------------------------------------- run

    def run(self) -> dict[str, Any]:
        start = time.perf_counter()
        cpu_start = time.process_time()
        self._prefill()
        self.clock.now = EPOCH
        for sched in self.schedulers:
            sched.cursor = replay(sched.table, self.feed, sched.cursor, EPOCH)
        first = self.arrivals.next(EPOCH)
        if first < self.end_arrivals and self.max_requests != 0:
            self._push(first, ARRIVE, None)
        else:
            self.c["arrival_stopped"] = 1
        self._push(EPOCH, TICK, None)
        self._push(EPOCH, SAMPLE, None)
        for i, failure in enumerate(self.s.failures):
            self._push(EPOCH + failure.at, CALL, self._failure_starter(i, failure))
        if self.volumes is not None:
            self._schedule_volume_events(self.volumes)
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
        self._audit_room()
        self._sample(self.clock.now)
        self.numa_fragmentation = numa_fragmentation(self.truth, self.config, self.flavors, ~self.dead,
                                                     self.clock.now)
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
        pf = self.s.workload.prefill
        if pf.vcpu_fraction <= 0:
            return
        cap = self.truth.rc_col("capacity", "VCPU")
        target = float(cap.sum()) * pf.vcpu_fraction if cap is not None else 0.0
        names = [f.name for f in self.flavors]
        rows = np.random.default_rng(self.s.seed + 1).integers(0, self.layout.n, size=64)
        used = 0.0
        i = 0
        misses = 0
        while used < target and misses < 200:
            if i % 64 == 0:
                rows = np.random.default_rng(self.s.seed + 1 + i).integers(0, self.layout.n, size=64)
            row = int(rows[i % 64])
            flavor = self.flavors[names.index(pf.flavor)] if pf.flavor else self._pick_flavor()
            resources = {"VCPU": flavor.vcpus, "MEMORY_MB": flavor.memory_mb,
                         "DISK_GB": flavor.root_gb + flavor.ephemeral_gb}
            key = (self.layout.names[row], self.layout.names[row])
            consumer = f"pre-{i}"
            i += 1
            try:
                self.truth.claim(key, Allocation(consumer_uuid=consumer, host=key[0], nodename=key[1],
                                                 resources=resources, project_id="prefill"))
            except ClaimRejected:
                misses += 1
                continue
            misses = 0
            used += flavor.vcpus
            self.c["prefilled"] += 1
            life = self.lifetime()
            if life is not None:
                self._push(EPOCH + life, DEPART, consumer)

    def _pick_flavor(self) -> Flavor:
        x = self.rng.random() * self.flavor_weights[-1]
        for i, w in enumerate(self.flavor_weights):
            if x < w:
                return self.flavors[i]
        return self.flavors[-1]

    def _make_request(self, t: float) -> Request:
        wl = self.s.workload
        rng = self.rng
        index = self.arrived
        flavor = self._pick_flavor()
        count = 1
        group: InstanceGroup | None = None
        policy = None
        if wl.server_groups.probability and rng.random() < wl.server_groups.probability:
            sg = wl.server_groups
            count = rng.randint(sg.min, sg.max)
            policy = "anti-affinity" if rng.random() < sg.anti_affinity else "affinity"
            group = InstanceGroup(uuid=f"group-{index}", policy=policy)  # type: ignore[arg-type]
        elif wl.multi_instance.probability and rng.random() < wl.multi_instance.probability:
            count = rng.randint(wl.multi_instance.min, wl.multi_instance.max)
        zone = None
        if wl.az_fraction and rng.random() < wl.az_fraction:
            zone = self.layout.zones[rng.randrange(len(self.layout.zones))]
        consumers = [f"r{index}-{k}" for k in range(count)]
        if self.volumes is not None:
            for consumer in consumers:
                self.vm_volumes[consumer] = self.volumes.wants()
        project = self.projects[rng.randrange(len(self.projects))]
        spec = RequestSpec(flavor=flavor, project_id=project, user_id="sim", availability_zone=zone,
                           num_instances=count, instance_uuids=consumers, instance_group=group,
                           request_id=f"req-{index}")
        resources = {"VCPU": flavor.vcpus, "MEMORY_MB": flavor.memory_mb,
                     "DISK_GB": flavor.root_gb + flavor.ephemeral_gb}
        return Request(index=index, arrival=t, spec=spec, consumers=consumers, resources=resources,
                       policy=policy, pending=count)

    def _arrive(self, t: float) -> None:
        request = self._make_request(t)
        self.arrived += 1
        self.c["requests"] += 1
        self.c["instances_requested"] += len(request.consumers)
        self.inflight_requests += 1
        nxt = self.arrivals.next(t)
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
        dead = bool(self.dead[row])
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
        if self.failure_of[row] >= 0:
            self.failure_records[self.failure_of[row]].build_failures += 1

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
        if t >= self.lost_at[row]:
            self.c["builds_on_lost_hosts"] += 1
        self.active_ms.append((t - request.arrival) * 1000.0)
        request.hosts.append(row)
        life = self.lifetime()
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
        rows = rows[~self.dead[rows]]
        heartbeat(self.truth, rows, t)
        self.feed.heartbeat(rows)
        self._push(t + self.hb_interval, TICK, None)

    # ----------------------------------------------------------------------------------------- failures

    def _failure_starter(self, index: int, failure: Failure) -> Callable[[float], None]:
        def start(t: float) -> None:
            if failure.kind == "rack_lost":
                self._rack_lost(t, failure)
            elif failure.kind == "host_flap":
                self._flap(t, failure)
            else:
                self._crash(t, failure)
        return start

    def _record(self, t: float, kind: str, target: str, rows: np.ndarray | None = None) -> FailureRecord:
        record = FailureRecord(at=t - EPOCH, kind=kind, target=target)
        if rows is not None:
            record.hosts = len(rows)
            names = self.layout.names
            record.instances_on_hosts = sum(len(self.truth.node_allocations((names[r], names[r])))
                                            for r in rows.tolist())
        self.failure_records.append(record)
        return record

    def _rack_lost(self, t: float, failure: Failure) -> None:
        assert failure.rack is not None
        rows = self.layout.rack_hosts(failure.rack)
        self._record(t, "rack_lost", failure.rack, rows)
        self.dead[rows] = True
        self.lost_at[rows] = np.minimum(self.lost_at[rows], t)
        self.failure_of[rows] = len(self.failure_records) - 1
        # Unfenced: the last heartbeat was at most now, so every table sees the host down by now + down time.
        # Fenced: the forced_down report reaches each replica after its lag.
        delay = self.max_lag if failure.fenced else self.s.control_plane.service_down_time
        self.detect_by[rows] = np.minimum(self.detect_by[rows], t + delay)
        if failure.fenced:
            for r in rows.tolist():
                report = HostReport(host=self.layout.names[r],
                                    stats=HostStats(service=ServiceInfo(forced_down=True,
                                                                        disabled_reason="rack lost")))
                self.truth.update(report)
                self.feed.report(report)
                self.fenced_reports.append(report)

    def _flap(self, t: float, failure: Failure) -> None:
        if failure.rack is not None:
            rows = self.layout.rack_hosts(failure.rack)
        else:
            pick = random.Random(self.s.seed + int(failure.at * 1000))
            rows = np.array(sorted(pick.sample(range(self.layout.n), failure.hosts)), dtype=np.int64)
        target = failure.rack or f"{len(rows)} hosts"
        record = self._record(t, "host_flap", target, rows)
        record.until = record.at + failure.cycles * (failure.down_for + failure.up_for) - failure.up_for
        index = len(self.failure_records) - 1
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
            self._push(t + cycle * period, CALL, down)
            self._push(t + cycle * period + failure.down_for, CALL, up)

    def _crash(self, t: float, failure: Failure) -> None:
        sched = self.schedulers[failure.scheduler]
        record = self._record(t, "scheduler_crash", f"scheduler {failure.scheduler}")
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

    def _schedule_volume_events(self, side: VolumeSide) -> None:
        """The backends' periodic reports, and the scenario's pool events (see sim/volumes.py)."""
        period = side.spec.report_period

        def report(now: float) -> None:
            side.report_all(now - EPOCH)
            self._push(now + period, CALL, report)

        self._push(EPOCH + period, CALL, report)
        for event in side.spec.events:
            self._push(EPOCH + event.at, CALL, lambda now, e=event: side.event(e, now - EPOCH))
            if event.kind == "backend_lost":
                down = event.at + side.spec.service_down_time
                self._push(EPOCH + down, CALL, lambda now, h=event.backend: side.service_down(h, now - EPOCH))

    # ------------------------------------------------------------------------------------------ metrics

    def _sample(self, t: float) -> None:
        truth = self.truth
        n = self.layout.n
        up = ~self.dead
        zones = len(self.layout.zones)
        az = self.layout.az
        # Every class some host has an inventory of (VCPU, MEMORY_MB, DISK_GB and any other), of hosts really up.
        utilization: dict[str, list[float]] = {}
        utilization_all: dict[str, float] = {}
        free: dict[str, np.ndarray] = {}
        for rc in self.classes:
            cap = truth.rc_col("capacity", rc)
            assert cap is not None
            used = truth.used(rc)
            held = up & truth.has_rc(rc)
            zone_used = np.bincount(az, weights=np.where(held, used, 0.0), minlength=zones)
            zone_cap = np.bincount(az, weights=np.where(held, cap, 0.0), minlength=zones)
            utilization[rc] = (zone_used / np.maximum(zone_cap, 1e-9)).tolist()
            utilization_all[rc] = float(zone_used.sum() / max(zone_cap.sum(), 1e-9))
            free[rc] = np.where(held, np.maximum(cap - used, 0.0), 0.0)
        # Stranded: free capacity of one class on hosts where another class cannot fit even the smallest flavor.
        short = {rc: free[rc] < self.min_flavor.get(rc, 0) for rc in free}
        stranded: dict[str, float] = {}
        for rc, values in free.items():
            others = np.zeros(n, dtype=np.bool_)
            for other, mask in short.items():
                if other != rc:
                    others |= mask
            total = float(values.sum())
            stranded[rc] = float(values[others].sum()) / total if total else 0.0
        free_v = free["VCPU"]
        total_free_v = float(free_v.sum())
        big = self.big_flavor[1]
        fits = np.full(n, np.inf)
        for rc, amount in big.items():
            if amount > 0 and rc in free:
                fits = np.minimum(fits, floor_divide(free[rc], amount))
        fits[~np.isfinite(fits)] = 0
        frag = 1.0 - float(fits.sum()) * big["VCPU"] / total_free_v if total_free_v and big["VCPU"] else 0.0
        over = len(self.overcommitted)  # kept per claim and report (_check_room), not a pass per sample
        self.samples.append({
            "t": t - EPOCH,
            "utilization": utilization,
            "utilization_all": utilization_all,
            "stranded": stranded,
            "hosts_up": int(up.sum()),
            "hosts_seen_up": int(np.count_nonzero(truth.alive(t)[:n] & ~truth.col("forced_down")[:n])),
            "placed": self.c["instances_placed"], "failed": self.c["instances_failed"],
            "retries": self.c["retries"], "conflicts": self.c["claim_conflicts"] + self.c["build_rejections"],
            "no_valid_host": sum(self.nvh.values()), "requests": self.c["requests"],
            "active": len(truth.allocations()),
            "queued": sum(len(s.queue) for s in self.schedulers) + len(self.waiting),
            "schedulers_up": sum(1 for s in self.schedulers if s.alive),
            "fragmentation": max(frag, 0.0),
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
        eng = np.asarray(self.engine_ms) if self.engine_ms else np.zeros(1)
        lat = np.asarray(self.latency_ms) if self.latency_ms else np.zeros(1)
        act = np.asarray(self.active_ms) if self.active_ms else np.zeros(1)
        engine_seconds = float(eng.sum()) / 1000.0
        final = self.samples[-1] if self.samples else {}
        requested = c["instances_requested"]
        zones = self.layout.zones
        samples = self.samples
        timeline: dict[str, Any] = {"t": [s["t"] for s in samples]}
        timeline["utilization"] = {rc: {z: [s["utilization"][rc][i] for s in samples] for i, z in enumerate(zones)}
                                   for rc in self.classes}
        timeline["utilization_all"] = {rc: [s["utilization_all"][rc] for s in samples] for rc in self.classes}
        timeline["stranded"] = {rc: [s["stranded"][rc] for s in samples] for rc in self.classes}
        for key in ("hosts_up", "hosts_seen_up", "placed", "failed", "retries", "conflicts", "no_valid_host",
                    "requests", "active", "queued", "schedulers_up", "fragmentation"):
            timeline[key] = [s[key] for s in samples]
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
            "failures": [vars(r) | {"at": round(r.at, 3)} for r in self.failure_records],
            "final": {"utilization": {rc: dict(zip(zones, final["utilization"][rc], strict=True))
                                      for rc in self.classes} if final else {},
                      "utilization_all": dict(final.get("utilization_all", {})),
                      "stranded": dict(final.get("stranded", {})),
                      "fragmentation": final.get("fragmentation", 0.0),
                      "fragmentation_flavor": self.big_flavor[0],
                      "numa_fragmentation": self.numa_fragmentation,
                      "active_allocations": len(self.truth.allocations())},
            "invariants": {
                "overcommitted_nodes": len(self.overcommitted),
                "conservation": requested == c["instances_placed"] + c["instances_failed"],
                "claims_on_lost_hosts": c["claims_on_lost_hosts"],
                "claims_after_detection": c["claims_after_detection"],
                "builds_on_lost_hosts": c["builds_on_lost_hosts"],
                "server_group_violations": c["server_group_violations"],
                # a CPU pinned twice or huge pages over-used by the claims on a node; a PCI pool held over count
                "numa_overbooked_nodes": int(np.count_nonzero(self.truth.col("numa_overbooked"))),
                "pci_overbooked_nodes": sum(1 for row in range(self.truth.n) if self.truth.pci_overbooked(row))
                if self.truth.has_pci() else 0,  # no node with a PCI device: no pool to overbook (1M calls saved)
                **({} if self.volumes is None else self.volumes.invariants()),
            },
            **({} if self.volumes is None else {"volumes": self.volumes.results()}),
            "timeline": timeline,
            # Real time on this machine: differs from run to run, so it is kept apart from the results above.
            "wall_clock": {
                "note": "real time of this run on this machine; differs between runs (everything else does not, "
                        "unless decision_time is 'measured')",
                "wall_seconds": round(self.wall, 3),
                "cpu_seconds": round(self.cpu, 3),
                "simulator_overhead_cpu_seconds": round(max(self.cpu - engine_seconds, 0.0), 3),
                "build_wall_seconds": round(self.build_wall, 3),
                "build_cpu_seconds": round(self.build_cpu, 3),
                "peak_rss_mb": peak_rss_mb(),
                "engine": {"engine_seconds": round(engine_seconds, 3),
                           "engine_wall_seconds": round(self.engine_wall, 3),
                           "note": "engine CPU time per decision (thread time): immune to other processes' load",
                           "decisions_per_second": round(len(self.engine_ms) / engine_seconds, 1)
                           if engine_seconds else 0.0,
                           "p50_ms": round(float(np.percentile(eng, 50)), 4),
                           "p99_ms": round(float(np.percentile(eng, 99)), 4),
                           "mean_ms": round(float(eng.mean()), 4)},
            },
        }


def floor_divide(values: np.ndarray, by: int) -> np.ndarray:
    """``values // by`` for finite ``values`` and a whole ``by`` > 0 (a flavor's amount), bit for bit, at a
    fraction of its cost: numpy's float ``//`` goes through fmod (~20-28 ms per 1,000,000 values, three classes
    per timeline sample). A correctly rounded ``values / by`` could only err by rounding up onto the next integer
    (no such value was found for whole divisors: tests/sim); the check for it costs one pass, and is exact
    (``quotient * by`` is a product of whole numbers)."""
    quotient = np.floor(values / by)
    quotient -= quotient * by > values
    return quotient


def peak_rss_mb() -> float:
    """This process's peak resident set so far (everything it ran, not this simulation alone), in MiB."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)  # kB on Linux


def run_scenario(scenario: Scenario, *, progress: Callable[[float, float], None] | None = None,
                 max_requests: int | None = None) -> dict[str, Any]:
    """Run one scenario to completion and return its metrics (JSON-ready)."""
    return Simulation(scenario, progress=progress, max_requests=max_requests).run()


__all__ = ["Simulation", "run_scenario"]
