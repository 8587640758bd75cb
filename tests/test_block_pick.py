"""A decision over many rows reads the kept weighted sum and the weighers' columns by blocks of rows (block
maxima patched from the row journal) instead of scanning every row: it must pick exactly what the full scan picks.

The block paths start at 262,144 rows; these tests lower that threshold and the block size so a few thousand
nodes span many blocks.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from gantt import NoValidHost, Scheduler
from gantt.compute import blocks as blocks_mod
from gantt.compute import journal as journal_mod
from gantt.compute.blocks import block_reduce, blocks_with, masked_best, masked_extreme, patch_blocks
from gantt.compute.extreme_caches import BlockExtremes
from gantt.model import Aggregate
from tests.conftest import FakeClock, churn_concurrently, host_stats, request

HOSTS = 3000


def _argmax_order(values: np.ndarray, mask: np.ndarray, k: int, taken: set[int]) -> list[int]:
    score = np.where(mask, values, -np.inf)
    score[list(taken)] = -np.inf
    out: list[int] = []
    for _ in range(k):
        i = int(score.argmax())
        if score[i] == -np.inf:
            break
        out.append(i)
        score[i] = -np.inf
    return out


@pytest.mark.parametrize("seed", range(4))
def test_masked_best_and_extreme_equal_the_full_scan(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random columns full of ties, random masks, rows already taken, bounds patched after changes, budgets
    that run out (then tightened bounds): the same rows in the same order as repeated argmax, and the same
    extremes as a reduction over the candidates."""
    rng = np.random.default_rng(seed)
    for _ in range(300):
        monkeypatch.setattr(blocks_mod, "BLOCK", int(rng.choice([8, 16, 64])))
        monkeypatch.setattr(blocks_mod, "EXTREME_BUDGET", int(rng.choice([1, 4, 84])))
        n = int(rng.integers(1, 4000))
        values = rng.integers(0, int(rng.integers(1, 20)), n).astype(float)
        mask = rng.random(n) < rng.random()
        blockmax = block_reduce(values, highest=True)
        lowest = block_reduce(values, highest=False)
        changed = rng.integers(0, n, 6)
        values[changed] = rng.integers(0, 30, 6)
        patch_blocks(blockmax, values, changed, highest=True)
        patch_blocks(lowest, values, changed, highest=False)
        has = blocks_with(mask)
        k = int(rng.integers(1, 8))
        taken = set(rng.choice(n, size=min(n, 3), replace=False).tolist()) if rng.random() < 0.5 else set()
        got = masked_best(values, mask, blockmax, has, k, taken, budget=int(rng.choice([1, 4, 1000])))
        if got is None:
            tight = block_reduce(np.where(mask, values, -np.inf), highest=True)
            got = masked_best(values, mask, tight, has, k, taken)
        assert got == _argmax_order(values, mask, k, taken)
        for highest, bounds in ((True, blockmax), (False, lowest)):
            expected = (float(values[mask].max() if highest else values[mask].min())) if mask.any() else None
            assert masked_extreme(values, mask, bounds, has, highest=highest) == expected


def _cloud(clock: FakeClock, seed: int, *, blocks: bool) -> Scheduler:
    rng = random.Random(seed)
    config = {
        "filter_scheduler": {
            "enabled_filters": ["AvailabilityZoneFilter", "ComputeFilter", "AggregateCoreFilter",
                                "AggregateRamFilter", "AggregateMultiTenancyIsolation"],
            "weight_classes": ["RAMWeigher", "CPUWeigher", "DiskWeigher", "IoOpsWeigher", "NumInstancesWeigher"],
            "io_ops_weight_multiplier": -1.0, "num_instances_weight_multiplier": -0.5,
        },
        "scheduler": {"max_attempts": 3},
        "gantt": {"seed": seed},
    }
    sched = Scheduler(config, clock=clock)
    sched.table.derived.patch_min_rows = 0
    sched.engine.ranker.block_min_rows = 0 if blocks else 1 << 62
    for i in range(HOSTS):
        kind = rng.choice([(8, 16384, 200), (16, 65536, 1000), (64, 262144, 2000)])
        sched.update_resource_stats(f"h{i}", host_stats(vcpus=kind[0], memory_mb=kind[1], local_gb=kind[2],
                                                        cpu_allocation_ratio=rng.choice([1.0, 4.0]),
                                                        ram_allocation_ratio=rng.choice([1.0, 1.5])))
    # zones: one a contiguous run of rows, one spread over every block
    sched.update_aggregate(Aggregate(id=1, name="az-run", hosts=[f"h{i}" for i in range(600, 1500)],
                                     availability_zone="az-run"))
    sched.update_aggregate(Aggregate(id=2, name="az-spread", hosts=[f"h{i}" for i in range(1, HOSTS, 3)],
                                     availability_zone="az-spread"))
    sched.update_aggregate(Aggregate(id=3, name="tight", hosts=[f"h{i}" for i in range(0, HOSTS, 7)],
                                     metadata={"cpu_allocation_ratio": "0.5", "ram_allocation_ratio": "0.9"}))
    sched.update_aggregate(Aggregate(id=4, name="iso", hosts=[f"h{i}" for i in range(5, HOSTS, 61)],
                                     metadata={"filter_tenant_id": "p-iso"}))
    sched.update_aggregate(Aggregate(id=5, name="spread", hosts=[f"h{i}" for i in range(3, HOSTS, 5)],
                                     metadata={"ram_weight_multiplier": "1.37"}))
    return sched


def _check_kept_candidates(sched: Scheduler) -> int:
    """Every kept candidate mask whose parts are alive equals the AND of its parts on every row not changed since
    its journal position (those it patches when next asked), and its count and blocks are its own; returns how
    many were checked. (Asking for a mask here would move its position past what its parts were patched to.)"""
    derived = sched.table.derived
    journal = derived._changes.journal
    checked = 0
    for entry in list(derived._candidates._entries.values()):
        parts = [ref() for ref in entry.parts]
        if entry.n != sched.table.n or any(part is None for part in parts):
            continue
        expected = np.logical_and.reduce([part[: entry.n] for part in parts if part is not None])
        since = journal.since(entry.seq, journal.seq)
        assert since is not None
        settled = np.ones(entry.n, dtype=bool)
        settled[since] = False
        assert np.array_equal(entry.mask[settled], expected[settled])
        assert entry.count == int(entry.mask.sum())
        assert np.array_equal(entry.per_block > 0, blocks_with(entry.mask))
        checked += 1
    return checked


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_decisions_by_blocks_equal_the_full_scan_under_churn(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two identical clouds take the same stream of requests (zones, an isolated tenant's few nodes, every
    flavor), claims, releases, reports (some overcommitted), heartbeats and clock moves; one decides by blocks,
    the other by full scans: every answer (hosts, alternates, weights) is the same."""
    monkeypatch.setattr(blocks_mod, "BLOCK", 8)  # 375 blocks of rows
    clocks = (FakeClock(), FakeClock())
    fast, plain = _cloud(clocks[0], seed, blocks=True), _cloud(clocks[1], seed, blocks=False)
    rng = random.Random(seed)
    consumers: list[str] = []
    decided = 0
    checked = 0
    for step in range(300):
        op = rng.random()
        if op < 0.55:
            flavor = rng.choice([(1, 2048, 20), (4, 8192, 80), (16, 65536, 160), (48, 131072, 500)])
            count = rng.choice([1, 1, 1, 3])
            uuids = [f"c{step}-{k}" for k in range(count)]
            spec = request(*flavor, project_id=rng.choice(["p1", "p2", "p-iso"]), num_instances=count,
                           instance_uuids=uuids)
            spec["availability_zone"] = rng.choice([None, None, "az-run", "az-spread"])
            answers = []
            for sched in (fast, plain):
                try:
                    answer = sched.select_destinations(spec)
                    answers.append([[(s.host, s.weight) for s in alts] for alts in answer])
                except NoValidHost as exc:
                    answers.append(str(exc))
            assert answers[0] == answers[1], f"step {step}"
            if not isinstance(answers[0], str):
                consumers.extend(uuids)
                decided += 1
            if step % 10 == 0:
                checked += _check_kept_candidates(fast)
        elif op < 0.72 and consumers:
            consumer = consumers.pop(rng.randrange(len(consumers)))
            for sched in (fast, plain):
                sched.release(consumer)
        elif op < 0.88:
            for _ in range(rng.randrange(1, 30)):  # a stream of reports between two decisions
                host = f"h{rng.randrange(HOSTS)}"
                used = rng.randrange(0, 6)
                stats = {"vcpus_used": used, "memory_mb_used": used * 3072, "local_gb_used": used * 50,
                         "current_workload": rng.randrange(0, 3)}
                if rng.random() < 0.15:  # beyond a small node's RAM: negative free RAM, which RAMWeigher clamps at 0
                    stats.update(memory_mb_used=19660)
                for sched in (fast, plain):
                    sched.update_resource_stats(host, stats)
        elif op < 0.94:
            rows = np.array(sorted(rng.sample(range(HOSTS), 2600)))
            for sched, clock in zip((fast, plain), clocks, strict=True):
                sched.table.heartbeat(rows, clock.now)
        else:
            seconds = rng.choice([1.0, 15.0, 45.0])
            for clock in clocks:
                clock.advance(seconds)
    assert decided > 100
    # the fast side really decided by blocks (kept block maxima, block extremes for the zones' minorities), and
    # kept its candidate masks, patched on changed rows (rebuilt for each new class, clock move or heartbeat)
    kept = fast.table.derived._candidates
    assert kept.patched >= 10 and kept.built > 0 and checked > 10
    assert not plain.table.derived._candidates.built
    assert any(e.blockmax is not None for e in fast.table.derived._weighted_sums._entries.values())
    assert fast.table.derived._block_extremes._entries
    assert all(e.blockmax is None for e in plain.table.derived._weighted_sums._entries.values())
    assert not plain.table.derived._block_extremes._entries


def test_block_extremes_follow_the_journal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept block bounds of a column are patched from the row journal (rows rising above and falling below
    their block's bounds), rebuilt when the static revision or row count moves: every extreme equals a reduction
    over the candidates, and every "does a candidate pass this limit" a full comparison."""
    monkeypatch.setattr(blocks_mod, "BLOCK", 16)
    rng = np.random.default_rng(7)
    n = 2000
    column = rng.integers(0, 100, n).astype(float)
    journal = journal_mod.RowJournal()
    extremes = BlockExtremes()
    revision = 0
    for step in range(400):
        changed = rng.integers(0, n, int(rng.integers(0, 12)))
        column[changed] = rng.integers(-50, 150, len(changed))
        for row in changed.tolist():
            journal.append(row)
        if step % 97 == 0:
            revision += 1
        mask = rng.random(n) < rng.choice([0.02, 0.3, 0.9])
        has = blocks_with(mask)
        for highest in (True, False):
            got = extremes.get("c", column, mask, has, highest=highest, n=n, static_revision=revision,
                               journal=journal)
            assert got == float(column[mask].max() if highest else column[mask].min())
            # whether a candidate passes a weigher's fixed bound (then Nova clamps it)
            limit = float(rng.integers(-60, 160))
            beyond = extremes.beyond("c", column, mask, has, limit, below=not highest, n=n,
                                     static_revision=revision, journal=journal)
            assert beyond == bool(np.any(mask & ((column < limit) if not highest else (column > limit))))


def test_projects_no_aggregate_names_share_one_combined_static_mask() -> None:
    """The AND of a request class's static masks is kept per set of masks, not per cache key: requests of many
    projects that no aggregate isolates share one (the tenant filter keys its masks by project); an isolated
    project gets its own, and an aggregate change (a new static revision) is seen at once."""
    config = {"filter_scheduler": {"enabled_filters": ["AvailabilityZoneFilter", "ComputeFilter",
                                                       "AggregateMultiTenancyIsolation"]}}
    sched = Scheduler(config, clock=FakeClock())
    for i in range(20):
        sched.update_resource_stats(f"h{i}", host_stats())
    sched.update_aggregate(Aggregate(id=1, name="iso", hosts=["h0", "h1"], metadata={"filter_tenant_id": "p-iso"}))
    sched.update_aggregate(Aggregate(id=2, name="az", hosts=["h2", "h3"], availability_zone="az-x"))
    ranker = sched.engine.ranker
    for k in range(40):
        sched.candidates(request(project_id=f"p{k}"))
    assert len(ranker.masks._combined) == 1
    hosts = {c.host for c in sched.candidates(request(project_id="p-iso"))}
    assert {"h0", "h1"} <= hosts and len(ranker.masks._combined) == 2
    assert {c.host for c in sched.candidates(request(project_id="p7", availability_zone="az-x"))} == {"h2", "h3"}
    sched.update_aggregate(Aggregate(id=1, name="iso", hosts=["h4"], metadata={"filter_tenant_id": "p-iso"}))
    hosts = {c.host for c in sched.candidates(request(project_id="p8"))}
    assert "h4" not in hosts and {"h0", "h1"} <= hosts


def test_block_bounds_stay_exact_under_concurrent_decisions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads deciding by blocks, releasing and reporting on one table at once: no node overcommitted, and
    afterwards a decision by the kept block bounds equals one by full scans (a lost patch of a block bound would
    show as a different pick)."""
    monkeypatch.setattr(blocks_mod, "BLOCK", 8)
    sched = _cloud(FakeClock(), 4, blocks=True)
    churn_concurrently(sched, zones=(None, "az-run"), report_hosts=HOSTS)
    for zone in (None, "az-run"):
        spec = request(4, 8192, 80, project_id="p2", instance_uuids=[f"after-{zone}"], availability_zone=zone)
        by_blocks = [(s.host, s.weight) for s in sched.select_destinations(spec)[0]]
        sched.release(f"after-{zone}")
        sched.engine.ranker.block_min_rows = 1 << 62
        full = [(s.host, s.weight) for s in sched.select_destinations(spec)[0]]
        sched.release(f"after-{zone}")
        sched.engine.ranker.block_min_rows = 0
        assert by_blocks == full
