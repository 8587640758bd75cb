"""The engine's concurrency proof: many threads, one Scheduler, random clouds and request streams.

After every run each node is audited:
- capacity: for every resource class, reported + in flight <= (total - reserved) * ratio;
- accounting: in flight equals the sum of the node's unconfirmed allocations (and so does the in-flight count);
- all or nothing: a request that failed left none of its consumers allocated (unless a twin request, the same
  instance_uuids asked from another thread, owns them);
- idempotency: the same instance_uuids asked twice from two threads are booked once, and both answers that
  succeed name the same node for each consumer.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gantt import GanttError, NotFound, Scheduler
from tests.conftest import make_scheduler

EPS = 1e-6

host_st = st.fixed_dictionaries({
    "vcpus": st.integers(2, 24),  # >= the most vcpus_used below: a report never starts overcommitted
    "memory_mb": st.sampled_from([1024, 2048, 4096, 8192, 16384]),
    "local_gb": st.integers(5, 200),
    "cpu_allocation_ratio": st.sampled_from([1.0, 2.0, 4.0]),
    "vcpus_used": st.integers(0, 2),
    "memory_mb_used": st.sampled_from([0, 512]),
})
flavor_st = st.fixed_dictionaries({
    "vcpus": st.integers(1, 8),
    "memory_mb": st.sampled_from([256, 512, 1024, 2048, 4096]),
    "root_gb": st.integers(0, 40),
})
# One operation of a thread's stream: place (with 1-3 instances, possibly duplicated into another thread) or
# release the k-th consumer this thread placed so far.
op_st = st.one_of(
    st.tuples(st.just("place"), flavor_st, st.integers(1, 3), st.booleans()),
    st.tuples(st.just("release"), st.integers(0, 50)),
)


@dataclass
class Outcome:
    uuids: list[str]
    hosts: dict[str, tuple[str, str]] | None = None  # consumer -> (host, node) when the request succeeded
    error: str | None = None


@dataclass
class Run:
    outcomes: list[Outcome] = field(default_factory=list)
    twins: dict[str, list[Outcome]] = field(default_factory=lambda: defaultdict(list))
    lock: threading.Lock = field(default_factory=threading.Lock)
    crashes: list[BaseException] = field(default_factory=list)
    released: set[str] = field(default_factory=set)


def _worker(sched: Scheduler, ops: list[tuple[Any, ...]], run: Run, barrier: threading.Barrier) -> None:
    mine: list[str] = []
    try:
        barrier.wait()
        for op in ops:
            if op[0] == "release":
                if mine:
                    consumer = mine.pop(op[1] % len(mine))
                    with run.lock:
                        run.released.add(consumer)
                    with contextlib.suppress(NotFound):  # cannot happen (twins are never released mid-run)
                        sched.release(consumer)
                continue
            _, flavor, count, uuids, twin_key = op
            outcome = Outcome(uuids=list(uuids))
            spec = {"flavor": {"name": "f", **flavor}, "num_instances": count, "instance_uuids": list(uuids),
                    "project_id": "p", "user_id": "u"}
            try:
                answer = sched.select_destinations(spec)
                outcome.hosts = {sel[0].consumer_uuid or "": (sel[0].host, sel[0].nodename) for sel in answer}
                assert set(outcome.hosts) == set(uuids)
                if twin_key is None:  # twins stay put during the run, so their two answers must agree
                    mine.extend(uuids)
            except GanttError as exc:
                outcome.error = type(exc).__name__
            with run.lock:
                run.outcomes.append(outcome)
                if twin_key is not None:
                    run.twins[twin_key].append(outcome)
    except BaseException as exc:  # surfaced by the test, not lost in the thread
        run.crashes.append(exc)


def audit(sched: Scheduler, run: Run) -> None:
    table = sched.table
    assert not run.crashes, run.crashes
    n = table.n
    unconfirmed: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    unconfirmed_count: dict[tuple[str, str], int] = defaultdict(int)
    for alloc in table.allocations():
        if not alloc.confirmed:
            key = (alloc.host, alloc.nodename)
            unconfirmed_count[key] += 1
            for rc, amount in alloc.resources.items():
                unconfirmed[key][rc] += amount
    for row in range(n):
        key = (table.host_names[row], table.node_names[row])
        for rc, j in table.rc_index.items():
            if not table.has_inventory[row, j]:
                assert table.rc["inflight"][row, j] == 0
                continue
            total, reserved, ratio = (table.rc[c][row, j] for c in ("total", "reserved", "ratio"))
            reported, inflight = table.rc["reported"][row, j], table.rc["inflight"][row, j]
            capacity = (total - reserved) * ratio
            assert reported + inflight <= capacity + EPS, (key, rc, reported, inflight, capacity)
            assert abs(inflight - unconfirmed[key].get(rc, 0.0)) < EPS, (key, rc, inflight, unconfirmed[key])
            assert abs(table.rc["free"][row, j] - (capacity - reported - inflight)) < EPS
        assert table.col("inflight_instances")[row] == unconfirmed_count[key], key
    # node allocation index agrees with the allocations
    nodes = {(alloc.host, alloc.nodename) for alloc in table.allocations()}
    for key in nodes:
        for consumer in table.node_allocations(key):
            alloc = table.allocation(consumer)
            assert alloc is not None and (alloc.host, alloc.nodename) == key
    assert sum(len(table.node_allocations(key)) for key in nodes) == len(table.allocations())
    twin_uuids = {u for outs in run.twins.values() for o in outs for u in o.uuids}
    for outcome in run.outcomes:
        if outcome.error is not None and not set(outcome.uuids) & twin_uuids:
            # all or nothing (a released consumer is gone too, so "none left" is the invariant either way)
            assert not any(table.allocation(u) is not None for u in outcome.uuids), outcome
    for outcome in run.outcomes:
        if outcome.hosts is None:
            continue
        # a request that returned success holds every consumer it answered with, where it said (until released)
        for consumer, key in outcome.hosts.items():
            if consumer in run.released:
                continue
            alloc = table.allocation(consumer)
            assert alloc is not None and (alloc.host, alloc.nodename) == key, (consumer, key, alloc)
    for outs in run.twins.values():
        succeeded = [o for o in outs if o.hosts is not None]
        if len(succeeded) == 2:
            assert succeeded[0].hosts == succeeded[1].hosts, succeeded


def run_streams(sched: Scheduler, streams: list[list[tuple[Any, ...]]]) -> Run:
    run = Run()
    barrier = threading.Barrier(len(streams))
    threads = [threading.Thread(target=_worker, args=(sched, ops, run, barrier)) for ops in streams]
    # A short GIL switch interval makes the threads interleave inside claims, not just between requests.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    finally:
        sys.setswitchinterval(interval)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    return run


def build_streams(raw: list[list[tuple[Any, ...]]], tag: str) -> list[list[tuple[Any, ...]]]:
    """Give each placement fresh consumer UUIDs; copy the ones marked twin into the next thread's stream."""
    streams: list[list[tuple[Any, ...]]] = [[] for _ in raw]
    serial = 0
    for t, ops in enumerate(raw):
        for op in ops:
            if op[0] == "release":
                streams[t].append(op)
                continue
            _, flavor, count, twin = op
            uuids = [f"{tag}-{serial}-{i}" for i in range(count)]
            serial += 1
            twin_key = uuids[0] if twin and len(raw) > 1 else None
            streams[t].append(("place", flavor, count, uuids, twin_key))
            if twin_key is not None:
                other = (t + 1) % len(raw)
                # at the same position in the other stream, so the twins really race
                streams[other].insert(min(len(streams[t]) - 1, len(streams[other])),
                                      ("place", flavor, count, uuids, twin_key))
    return streams


_counter = iter(range(10**9))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(hosts=st.lists(host_st, min_size=1, max_size=6),
       raw=st.lists(st.lists(op_st, min_size=1, max_size=12), min_size=2, max_size=6),
       subset=st.integers(1, 3))
def test_concurrent_claims_never_overbook_and_account_exactly(hosts: list[dict[str, Any]],
                                                              raw: list[list[tuple[Any, ...]]],
                                                              subset: int) -> None:
    sched = make_scheduler({f"h{i}": h for i, h in enumerate(hosts)}, filters=["ComputeFilter"],
                           weighers=["RAMWeigher", "CPUWeigher", "IoOpsWeigher"],
                           filter_scheduler={"host_subset_size": subset})
    tag = f"r{next(_counter)}"
    run = run_streams(sched, build_streams(raw, tag))
    audit(sched, run)
    # Release everything left: the cloud must return to exactly its reported usage.
    for consumer in [a.consumer_uuid for a in sched.table.allocations()]:
        sched.release(consumer)
    table = sched.table
    assert not table.rc["inflight"][: table.n].any()
    assert not table.col("inflight_instances").any()


def test_twin_requests_book_once_under_heavy_contention() -> None:
    """Deterministic stress: 8 threads ask for the same 3 consumers on a cloud with room for all of them."""
    for attempt in range(20):
        sched = make_scheduler(4, filters=["ComputeFilter"], weighers=["RAMWeigher"],
                               filter_scheduler={"host_subset_size": 3})
        uuids = [f"t{attempt}-{i}" for i in range(3)]
        flavor = {"vcpus": 4, "memory_mb": 1024, "root_gb": 1}
        streams = [[("place", flavor, 3, uuids, "twin")] for _ in range(8)]
        run = run_streams(sched, streams)
        assert not run.crashes, run.crashes
        assert sorted(a.consumer_uuid for a in sched.table.allocations()) == sorted(uuids)
        answers = [o.hosts for o in run.outcomes]
        assert all(a == answers[0] for a in answers), answers
        audit(sched, run)


def test_twin_requests_that_cannot_all_fit_leave_nothing_behind() -> None:
    """Room for 2 of 3 consumers: every twin fails, and no borrowed or owned claim survives any of them."""
    for attempt in range(20):
        sched = make_scheduler(2, filters=["ComputeFilter"], weighers=["RAMWeigher"])
        uuids = [f"x{attempt}-{i}" for i in range(3)]
        flavor = {"vcpus": 16, "memory_mb": 1024, "root_gb": 1}
        run = run_streams(sched, [[("place", flavor, 3, uuids, "twin")] for _ in range(6)])
        assert not run.crashes, run.crashes
        assert all(o.error == "NoValidHost" for o in run.outcomes), run.outcomes
        assert not sched.table.allocations()
        audit(sched, run)
