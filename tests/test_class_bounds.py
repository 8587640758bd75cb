"""A decision by blocks bounds the kept weighted sum per aggregate set: a class of requests that aggregates restrict
(an extra spec's aggregate spread over every block) whose best rows lie below every block's maximum (held by the
hosts of a weight-multiplier aggregate it excludes) reads the blocks by the maxima of its own aggregate sets,
instead of running out of its budget and taking a pass over every row. The picks stay those of the full scan.

The block paths start at 262,144 rows; these tests lower that threshold and the block size.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from gantt import NoValidHost, Scheduler
from gantt.compute import blocks as blocks_mod
from gantt.compute import journal as journal_mod
from gantt.compute import ranking as ranking_mod
from gantt.compute.blocks import code_block_max, patch_code_blocks
from gantt.model import Aggregate, RequestSpec, decode
from tests.conftest import FakeClock, host_stats, request

HOSTS = 2400
SSD = {"aggregate_instance_extra_specs:ssd": "true"}


def test_code_block_maxima_follow_patches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per (code, block) maxima equal a reduction over each cell's rows, after patches of a few rows or many."""
    monkeypatch.setattr(blocks_mod, "BLOCK", 16)
    rng = np.random.default_rng(3)
    for _ in range(60):
        n = int(rng.integers(1, 500))
        ncodes = int(rng.integers(1, 9))
        codes = rng.integers(0, ncodes, n).astype(np.int32)
        values = rng.integers(0, 30, n).astype(float)
        maxima = code_block_max(values, codes, ncodes)
        changed = rng.integers(0, n, int(rng.integers(0, 40)))
        values[changed] = rng.integers(-10, 40, len(changed))
        patch_code_blocks(maxima, values, codes, changed)
        for code in range(ncodes):
            for block in range(maxima.shape[1]):
                cell = values[block * 16:(block + 1) * 16][codes[block * 16:(block + 1) * 16] == code]
                assert maxima[code, block] == (cell.max() if len(cell) else -np.inf)


def _cloud(seed: int, *, blocks: bool) -> Scheduler:
    rng = random.Random(seed)
    config = {
        "filter_scheduler": {
            "enabled_filters": ["AvailabilityZoneFilter", "ComputeFilter", "AggregateInstanceExtraSpecsFilter",
                                "AggregateMultiTenancyIsolation"],
            "weight_classes": ["RAMWeigher", "CPUWeigher", "DiskWeigher"],
        },
        "scheduler": {"max_attempts": 3},
        "gantt": {"seed": seed},
    }
    sched = Scheduler(config, clock=FakeClock())
    sched.table.derived.patch_min_rows = 0
    sched.engine.ranker.block_min_rows = 0 if blocks else 1 << 62
    for i in range(HOSTS):
        kind = rng.choice([(8, 16384, 200), (16, 65536, 1000), (64, 262144, 2000)])
        sched.update_resource_stats(f"h{i:05d}", host_stats(vcpus=kind[0], memory_mb=kind[1], local_gb=kind[2],
                                                            memory_mb_used=rng.randrange(0, kind[1] // 4, 512)))
    names = [f"h{i:05d}" for i in range(HOSTS)]
    sample = rng.sample(names, HOSTS)
    # the extra spec's aggregate and the weight multiplier's are disjoint, both spread over every block: the
    # multiplier's hosts hold every block's maximum, and none of them is an ssd host
    sched.update_aggregate(Aggregate(id=1, name="ssd", hosts=sample[:360], metadata={"ssd": "true"}))
    sched.update_aggregate(Aggregate(id=2, name="spread", hosts=sample[360:840],
                                     metadata={"ram_weight_multiplier": "3.0"}))
    sched.update_aggregate(Aggregate(id=3, name="iso", hosts=sample[840:900], metadata={"filter_tenant_id": "p-iso"}))
    for z in range(3):
        sched.update_aggregate(Aggregate(id=10 + z, name=f"az{z}", hosts=names[z::3], availability_zone=f"az{z}"))
    return sched


@pytest.mark.parametrize("seed", [1, 2])
def test_a_class_its_aggregates_restrict_picks_by_its_own_bounds(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ssd class's decisions by blocks equal the full scan's (hosts, alternates, weights) under claims,
    releases and reports, and none of them needed the pass over every row that loose bounds end in: neither the
    pick's nor the weighers' extremes' (each bounded per aggregate set)."""
    monkeypatch.setattr(blocks_mod, "BLOCK", 16)  # 150 blocks of rows
    monkeypatch.setattr(blocks_mod, "EXTREME_BUDGET", 12)
    monkeypatch.setattr(ranking_mod, "PICK_BUDGET", 12)
    fast, plain = _cloud(seed, blocks=True), _cloud(seed, blocks=False)
    tightened = 0
    passes = 0
    block_reduce = ranking_mod.block_reduce
    extreme_by_pass = blocks_mod.extreme_by_pass

    def counted(values: np.ndarray, *, highest: bool) -> np.ndarray:
        nonlocal tightened
        tightened += 1
        return block_reduce(values, highest=highest)

    def counted_pass(values: np.ndarray, mask: np.ndarray, *, highest: bool) -> float | None:
        nonlocal passes
        passes += 1
        return extreme_by_pass(values, mask, highest=highest)

    monkeypatch.setattr(ranking_mod, "block_reduce", counted)
    monkeypatch.setattr(blocks_mod, "extreme_by_pass", counted_pass)
    rng = random.Random(seed)
    consumers: list[str] = []
    ssd_decided = 0
    for step in range(240):
        op = rng.random()
        if op < 0.6:
            ssd = rng.random() < 0.6
            spec = request(*rng.choice([(1, 2048, 20), (4, 8192, 80)]), instance_uuids=[f"c{step}"],
                           project_id=rng.choice(["p1", "p-iso"]), extra_specs=SSD if ssd else {},
                           availability_zone=rng.choice([None, None, "az1"]))
            answers = []
            for sched in (fast, plain):
                try:
                    answers.append([(s.host, s.weight) for s in sched.select_destinations(spec)[0]])
                except NoValidHost as exc:
                    answers.append(str(exc))
            assert answers[0] == answers[1], f"step {step}"
            if not isinstance(answers[0], str):
                consumers.append(f"c{step}")
                ssd_decided += ssd
        elif op < 0.8 and consumers:
            consumer = consumers.pop(rng.randrange(len(consumers)))
            for sched in (fast, plain):
                sched.release(consumer)
        else:
            for _ in range(rng.randrange(1, 6)):
                host = f"h{rng.randrange(HOSTS):05d}"
                stats = {"memory_mb_used": rng.randrange(0, 8192, 512), "vcpus_used": rng.randrange(0, 4)}
                for sched in (fast, plain):
                    sched.update_resource_stats(host, stats)
    assert ssd_decided > 50
    assert tightened == 0
    assert passes == 0
    kept = fast.table.derived._weighted_sums._entries.values()
    assert any(e.codemax is not None for e in kept)  # the kept sums' per-set maxima were read
    assert any(e.cells for e in fast.table.derived._block_extremes._entries.values())  # and the columns'


def test_code_block_minima_follow_patches(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lowest per (code, block), as the highest: a reduction over each cell's rows, after patches."""
    monkeypatch.setattr(blocks_mod, "BLOCK", 16)
    rng = np.random.default_rng(4)
    for _ in range(60):
        n = int(rng.integers(1, 500))
        ncodes = int(rng.integers(1, 9))
        codes = rng.integers(0, ncodes, n).astype(np.int32)
        values = rng.integers(0, 30, n).astype(float)
        minima = code_block_max(values, codes, ncodes, highest=False)
        changed = rng.integers(0, n, int(rng.integers(0, 40)))
        values[changed] = rng.integers(-10, 40, len(changed))
        patch_code_blocks(minima, values, codes, changed, highest=False)
        for code in range(ncodes):
            for block in range(minima.shape[1]):
                cell = values[block * 16:(block + 1) * 16][codes[block * 16:(block + 1) * 16] == code]
                assert minima[code, block] == (cell.min() if len(cell) else np.inf)


def test_allowed_codes_is_a_superset_of_the_candidates_codes() -> None:
    """Every candidate's aggregate set is allowed; sets no static mask keeps are not; nothing to gain (every set
    allowed) answers None."""
    sched = _cloud(1, blocks=True)
    masks = sched.engine.ranker.masks
    codes = sched.table.col("aggset_code")
    for spec in (request(extra_specs=SSD), request(availability_zone="az2"), request(project_id="p-iso"),
                 request(extra_specs=SSD, availability_zone="az0", project_id="p-iso")):
        ranking = sched.engine.ranker.rank(sched.engine._dry_context(decode(spec, RequestSpec, path="$")))
        static = [m for f, m in ranking.steps if m is not None and any(
            flt.name == f and flt.static for flt in sched.engine.ranker.filters)]
        allowed = masks.allowed_codes(static, sched.table.n)
        assert allowed is not None
        assert allowed[codes[ranking.mask]].all()
        kept = np.zeros(len(allowed), dtype=bool)
        for m in static:
            present = np.zeros(len(allowed), dtype=bool)
            present[codes[m]] = True
            kept = present if not kept.any() else kept & present
        assert not allowed[~kept].any()
    assert masks.allowed_codes([None], sched.table.n) is None
    assert journal_mod.WeightedSums().code_blocks(np.zeros(3), np.zeros(3, dtype=np.int32), 1) is None
