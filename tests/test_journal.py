"""Derived data patched from the row journal must equal the same data computed from scratch.

The patched paths only run on tables large enough to pay (a shortlist needs more than 2,048 rows), so these tests
use a few thousand nodes.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from gantt import NoValidHost, Scheduler
from gantt.compute.extreme_caches import ColumnBounds
from gantt.compute.journal import Liveness, PatchedMasks, RowJournal, WeightedSums
from gantt.model import Aggregate, RequestSpec, decode
from tests.conftest import FakeClock, churn_concurrently, host_stats, request

HOSTS = 3000


def test_journal_gives_rows_since_a_position_until_trimmed() -> None:
    journal = RowJournal(keep=4)
    start = journal.seq
    for row in range(40):
        journal.append(row)
    assert journal.seq == start + 40
    assert journal.since(start, start + 2) is None  # trimmed away: the reader must rebuild
    recent = journal.since(journal.seq - 4, journal.seq)
    assert recent is not None and recent.tolist() == [36, 37, 38, 39]
    assert journal.since(journal.seq, journal.seq + 1) is None  # not written yet


def test_journal_grows_before_it_trims() -> None:
    journal = RowJournal(keep=4096)
    for row in range(10_000):
        journal.append(row)
    everything = journal.since(0, 10_000)
    assert everything is not None and everything.tolist() == list(range(10_000))


def _counting_builds(bounds: ColumnBounds) -> list[int]:
    """``[n]``: how many shortlists ``bounds`` has built since (its queries that no kept list could answer)."""
    builds = [0]
    build = bounds._build

    def counting_build(*args: Any, **kwargs: Any) -> Any:
        builds[0] += 1
        return build(*args, **kwargs)

    bounds._build = counting_build  # type: ignore[method-assign]
    return builds


def test_column_bounds_follow_changes_and_joiners() -> None:
    rng = np.random.default_rng(3)
    n = 5000
    column = rng.integers(0, 50, n).astype(float)
    journal = RowJournal()
    bounds = ColumnBounds(size=64)
    builds = _counting_builds(bounds)
    answered = 0
    for _ in range(400):
        for row in rng.integers(0, n, int(rng.integers(0, 6))).tolist():
            column[row] = float(rng.integers(0, 80))  # some rise past any bound and must join the list
            journal.append(row)
        mask = rng.random(n) > rng.choice([0.01, 0.3, 0.9])
        if not mask.any():
            continue
        for highest in (True, False):
            got = bounds.get("c", column, mask, highest=highest, n=n, static_revision=0, journal=journal)
            assert got is not None
            answered += 1
            assert got == (column[mask].max() if highest else column[mask].min())
    assert builds[0] < answered / 4  # the shortlists answered most queries


def test_column_bounds_keep_a_list_past_many_rows_that_are_never_candidates() -> None:
    """A twentieth of the rows hold 0 free RAM and are never a VM's candidates (bare-metal nodes): each lies below
    every candidate. A list that holds them all still answers; without one, each query took a full pass."""
    rng = np.random.default_rng(5)
    n = 20_000
    column = rng.integers(1000, 64_000, n).astype(float)
    baremetal = np.zeros(n, dtype=np.bool_)
    baremetal[rng.choice(n, n // 20, replace=False)] = True
    column[baremetal] = 0.0
    journal = RowJournal()
    bounds = ColumnBounds(size=64)
    builds = _counting_builds(bounds)
    queries = 300
    for _ in range(queries):
        for row in rng.integers(0, n, 3).tolist():  # claims and reports move a few rows between decisions
            column[row] = 0.0 if baremetal[row] else float(rng.integers(0, 64_000))
            journal.append(row)
        mask = ~baremetal & (rng.random(n) > 0.01)
        got = bounds.get("free_ram_mb", column, mask, highest=False, n=n, static_revision=0, journal=journal)
        assert got == column[mask].min()
    assert builds[0] < queries / 10


def test_column_bounds_row_that_joins_and_changes_again_keeps_its_latest_value() -> None:
    n = 5000
    column = np.zeros(n)
    column[:64] = 10.0  # the shortlist: bound 0
    journal = RowJournal()
    bounds = ColumnBounds(size=64)
    everyone = np.ones(n, dtype=np.bool_)
    assert bounds.get("c", column, everyone, highest=True, n=n, static_revision=0, journal=journal) == 10.0
    column[:64] = 0.0
    for value in (50.0, 20.0):  # row 4000 rises past the bound, then falls back a little: one journal window
        column[4000] = value
        journal.append(4000)
    journal.append(3)
    assert bounds.get("c", column, everyone, highest=True, n=n, static_revision=0, journal=journal) == 20.0


def test_liveness_matches_the_column_through_reports_heartbeats_and_time() -> None:
    rng = np.random.default_rng(5)
    n = 4000
    updated = np.full(n, 100.0) + rng.random(n) * 60
    journal = RowJournal()
    live = Liveness()
    now = 160.0
    epoch = 0
    for _ in range(300):
        action = rng.integers(0, 3)
        if action == 0:
            for row in rng.integers(0, n, 5).tolist():
                updated[row] = now
                journal.append(row)
        elif action == 1:
            rows = rng.integers(0, n, 300)
            updated[rows] = now
            epoch += 1
        now += float(rng.random() * 2)
        cutoff = now - 60.0
        got = live.get(updated, cutoff, n=n, static_revision=0, epoch=epoch, journal=journal)
        assert np.array_equal(got, updated >= cutoff)


def test_patched_masks_rebuild_when_static_state_or_row_count_moves() -> None:
    journal = RowJournal()
    masks = PatchedMasks(size=2)
    values = np.arange(100.0)
    calls: list[Any] = []

    def compute(rows: Any) -> np.ndarray:
        calls.append(rows)
        return values[rows] > 50

    first = masks.get("k", n=100, static_revision=0, journal=journal, compute=compute)
    assert masks.get("k", n=100, static_revision=0, journal=journal, compute=compute) is first
    values[10] = 99
    journal.append(10)
    patched = masks.get("k", n=100, static_revision=0, journal=journal, compute=compute)
    assert patched[10] and not first[10]  # patched on a copy: an earlier reader's mask does not move
    assert isinstance(calls[-1], np.ndarray) and calls[-1].tolist() == [10]
    masks.get("k", n=100, static_revision=1, journal=journal, compute=compute)
    assert isinstance(calls[-1], slice)


def test_patched_masks_patch_in_place_only_what_no_reader_holds() -> None:
    """A mask nobody holds any more is patched in place (no copy of every row per patch); one a reader still
    holds, or a view of it, is copied first and never moves under its reader."""
    journal = RowJournal()
    masks = PatchedMasks()
    values = np.arange(1000.0)

    def compute(rows: Any) -> np.ndarray:
        return values[rows] > 500

    first = masks.get("k", n=1000, static_revision=0, journal=journal, compute=compute)
    first_id = id(first)
    del first
    for step, row in enumerate((3, 7, 900, 3)):
        values[row] = 999.0 if step % 2 == 0 else 0.0
        journal.append(row)
        mask = masks.get("k", n=1000, static_revision=0, journal=journal, compute=compute)
        assert id(mask) == first_id  # patched in place: the same array
        assert np.array_equal(mask, values > 500)
        del mask
    held = masks.get("k", n=1000, static_revision=0, journal=journal, compute=compute)
    view = held[:500]
    for row in (10, 20):
        values[row] = 999.0
        journal.append(row)
        mask = masks.get("k", n=1000, static_revision=0, journal=journal, compute=compute)
        assert mask is not held and np.array_equal(mask, values > 500)
        assert not held[row] and not view[row]  # the reader's mask did not move
        held = mask  # the reader lets go of the old one and takes the new (the view still holds the first)
        del mask
    values[30] = 999.0
    journal.append(30)
    assert masks.get("k", n=1000, static_revision=0, journal=journal, compute=compute) is not held


def _cloud(clock: FakeClock, seed: int, *, shuffle: bool = False) -> Scheduler:
    rng = random.Random(seed)
    config = {
        "filter_scheduler": {
            "enabled_filters": ["ComputeFilter", "AggregateCoreFilter", "AggregateRamFilter",
                                "AggregateMultiTenancyIsolation"],
            "weight_classes": ["RAMWeigher", "CPUWeigher", "DiskWeigher", "IoOpsWeigher", "NumInstancesWeigher",
                               "BuildFailureWeigher", "HypervisorVersionWeigher"],
            "io_ops_weight_multiplier": -1.0, "num_instances_weight_multiplier": -0.5,
            # negative: failed builds attract, so the node holding the most of them is in every answer
            "build_failure_weight_multiplier": -3.0, "hypervisor_version_weight_multiplier": 0.5,
            # the engine then draws among the ties of the kept weighted sum, which it must not write into
            "shuffle_best_same_weighed_hosts": shuffle,
        },
        "scheduler": {"max_attempts": 3},
        "gantt": {"seed": seed},
    }
    sched = Scheduler(config, clock=clock)
    sched.table.derived.patch_min_rows = 0  # patch at this size too (the default starts at 20,000 rows)
    for i in range(HOSTS):
        kind = rng.choice([(8, 16384, 200), (16, 65536, 1000), (64, 262144, 2000)])
        sched.update_resource_stats(f"h{i}", host_stats(vcpus=kind[0], memory_mb=kind[1], local_gb=kind[2],
                                                        cpu_allocation_ratio=rng.choice([1.0, 4.0])))
    sched.update_aggregate(Aggregate(id=1, name="tight", hosts=[f"h{i}" for i in range(0, HOSTS, 7)],
                                     metadata={"cpu_allocation_ratio": "0.5", "ram_allocation_ratio": "0.9"}))
    sched.update_aggregate(Aggregate(id=2, name="iso", hosts=[f"h{i}" for i in range(40)],
                                     metadata={"filter_tenant_id": "p-iso"}))
    # a per-row multiplier: RAMWeigher's part of the kept weighted sums is then per row
    sched.update_aggregate(Aggregate(id=3, name="spread", hosts=[f"h{i}" for i in range(3, HOSTS, 5)],
                                     metadata={"ram_weight_multiplier": "1.37"}))
    return sched


def _forget_derived(sched: Scheduler) -> None:
    """Make the next decision compute everything from the columns, as if nothing were memoized."""
    table = sched.table
    table.derived._liveness = Liveness()
    table.derived._usage_masks = PatchedMasks()
    table.derived._column_bounds = ColumnBounds()
    table.derived._weighted_sums = WeightedSums()


@pytest.mark.parametrize(("seed", "shuffle"), [(1, False), (2, False), (3, True)])
def test_decisions_with_patched_data_equal_decisions_from_scratch(seed: int, shuffle: bool) -> None:
    """Two identical clouds take the same random stream of claims, releases, reports, heartbeats and clock
    moves; one decides from patched derived data, the other from scratch every time: every answer matches."""
    clocks = (FakeClock(), FakeClock())
    patched, scratch = _cloud(clocks[0], seed, shuffle=shuffle), _cloud(clocks[1], seed, shuffle=shuffle)
    rng = random.Random(seed)
    consumers: list[str] = []
    decided = 0
    for step in range(250):
        op = rng.random()
        if op < 0.55:
            flavor = rng.choice([(1, 2048, 20), (4, 8192, 80), (16, 65536, 160), (48, 131072, 500)])
            count = rng.choice([1, 1, 1, 3])
            uuids = [f"c{step}-{k}" for k in range(count)]
            spec = request(*flavor, project_id=rng.choice(["p1", "p2", "p-iso"]), num_instances=count,
                           instance_uuids=uuids)
            if rng.random() < 0.3:
                spec["availability_zone"] = None
            answers = []
            for sched in (patched, scratch):
                if sched is scratch:
                    _forget_derived(sched)
                try:
                    answer = sched.select_destinations(spec)
                    answers.append([[(s.host, round(s.weight, 9)) for s in alts] for alts in answer])
                except NoValidHost as exc:
                    answers.append(str(exc))
            assert answers[0] == answers[1], f"step {step}"
            if not isinstance(answers[0], str):
                consumers.extend(uuids)
                decided += 1
        elif op < 0.75 and consumers:
            consumer = consumers.pop(rng.randrange(len(consumers)))
            for sched in (patched, scratch):
                sched.release(consumer)
        elif op < 0.85:
            host = f"h{rng.randrange(HOSTS)}"
            used = rng.randrange(0, 4)
            # the weighers' report-only columns move too: build failures come and go, and now and then a
            # hypervisor is upgraded (a change of the node's static capabilities)
            stats = {"vcpus_used": used, "memory_mb_used": used * 1024, "failed_builds": rng.randrange(100)}
            if rng.random() < 0.2:
                stats["hypervisor_version"] = rng.randrange(7_000_000, 9_000_000)
            for sched in (patched, scratch):
                sched.update_resource_stats(host, stats)
        elif op < 0.93:
            rows = np.array(sorted(rng.sample(range(HOSTS), 2600)))
            for sched, clock in zip((patched, scratch), clocks, strict=True):
                sched.table.heartbeat(rows, clock.now)
        else:
            seconds = rng.choice([1.0, 15.0, 45.0])
            for clock in clocks:
                clock.advance(seconds)
    assert decided > 80
    # the patched side really ran the patched paths
    assert patched.table.derived._column_bounds._entries
    bounds = patched.table.derived._column_bounds._entries
    assert {("failed_builds", True), ("hypervisor_version", False)} <= set(bounds)
    assert patched.table.derived._usage_masks._entries
    assert patched.table.derived._weighted_sums._entries


# with the tie shuffle, decisions read the kept sums and their block maxima in place while others patch them
@pytest.mark.parametrize("shuffle", [False, True])
def test_patched_data_stays_exact_under_concurrent_decisions(shuffle: bool) -> None:
    """Threads deciding and releasing on one table at once: no node overcommitted, and afterwards the patched
    data gives the same answer as data computed from scratch (a lost patch would show as a different pick)."""
    clock = FakeClock()
    sched = _cloud(clock, 5, shuffle=shuffle)
    churn_concurrently(sched)
    spec = request(4, 8192, 80, project_id="p2", instance_uuids=["after"])
    patched = [(s.host, round(s.weight, 9)) for s in sched.candidates(spec)[:5]]
    decided = sched.select_destinations(spec)[0][0].host
    sched.release("after")
    _forget_derived(sched)
    assert [(s.host, round(s.weight, 9)) for s in sched.candidates(spec)[:5]] == patched
    if not shuffle:  # a shuffle draws anew from the generator's next state
        assert sched.select_destinations(spec)[0][0].host == decided


def test_kept_weighted_sums_equal_the_per_weigher_loop_bitwise() -> None:
    """The weights a decision ranks by (kept sums, per-row multipliers included) are exactly those of the loop a
    dry run takes per weigher to show each one's part, before and after claims patch the kept sums."""
    from gantt.compute.request import RequestContext

    clock = FakeClock()
    sched = _cloud(clock, 3)
    # largest free RAM not a power of two, so 1 / (hi - lo) is inexact and the order of operations shows
    sched.update_resource_stats("h41", host_stats(vcpus=64, memory_mb=300001, local_gb=2000))
    ranker = sched.engine.ranker
    specs = [request(1, 2048, 20), request(4, 8192, 80, project_id="p-iso"), request(16, 65536, 160)]
    for round_ in range(3):
        for spec in specs:
            ctx = RequestContext.build(decode(spec, RequestSpec), sched.config, clock.now)
            fused = ranker.rank(ctx)
            parts: dict[str, np.ndarray] = {}
            looped = ranker.rank(ctx, parts)
            assert "RAMWeigher" in parts
            assert np.array_equal(fused.candidate_rows(), looped.candidate_rows())
            assert np.array_equal(fused.candidate_scores(), looped.candidate_scores()), f"round {round_}"
        for k in range(20):  # claims move usage: the kept sums are patched, not rebuilt
            sched.select_destinations(request(2, 4096, 40, instance_uuids=[f"r{round_}-{k}"]))
    assert sched.table.derived._weighted_sums._entries


def test_column_bounds_answer_from_a_list_that_is_not_first() -> None:
    # The list that answers is moved to the front, found by identity: comparing lists field by field compared
    # their arrays and raised. A list built for a few high rows cannot answer for the low ones; one built for
    # the low rows can (it also lists every higher row): put them in that order and ask for the low rows.
    n = 5000
    column = np.arange(n, dtype=float)
    column[:100] += 10_000
    journal = RowJournal()
    bounds = ColumnBounds(size=64)
    high = np.zeros(n, dtype=np.bool_)
    high[:100] = True
    lists = []
    for mask in (high, ~high):
        built, _ = bounds._build(column, mask, highest=True, n=n, static_revision=0, seq=journal.seq)
        assert built is not None
        lists.append(built)
    bounds._entries[("c", True)] = list(lists)
    got = bounds.get("c", column, ~high, highest=True, n=n, static_revision=0, journal=journal)
    assert got == column[~high].max()
    assert bounds._entries[("c", True)][0] is lists[1]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_best_first_is_the_order_of_repeated_argmax(seed: int) -> None:
    from gantt.compute.order import BEST_BLOCK, best_first

    rng = np.random.default_rng(seed)
    n = 300 * BEST_BLOCK + int(rng.integers(0, BEST_BLOCK))  # long enough for blocks, and a partial last one
    score = rng.integers(0, 5, n).astype(float)  # many ties: equals must come lowest position first
    score[rng.integers(0, n, n // 3)] = -np.inf
    score[rng.integers(0, n, 3)] = 7.0  # a few best, in any block
    expected_score = score.copy()
    expected = []
    for _ in range(40):
        i = int(expected_score.argmax())
        expected.append(i)
        expected_score[i] = -np.inf
    got = []
    best = best_first(score, 6)  # several batches
    for _ in range(40):
        i = next(best)
        got.append(i)
        score[i] = -np.inf
    assert got == expected
