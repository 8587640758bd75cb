"""In-process engine benchmark (design §4): decisions, dry runs, memory per host, ingestion, cold start.

``engine_benchmark(hosts, requests, seed)`` builds a synthetic cloud of ``hosts`` nodes (gantt.bench.cloud) and
returns a dict of figures (JSON-ready); ``uniform_benchmark`` decides in the HTTP benchmarks' uniform cloud.
``bench/engine.py`` and ``gantt bench engine`` print them (the NUMA / PCI mix: gantt.bench.mix).

Timings are medians over ``rounds`` repetitions of each measurement: the machines this runs on are shared and
noisy, and a median is robust to a neighbour's burst where a mean or a single run is not.
"""

from __future__ import annotations

import contextlib
import gc
import os
import random
import statistics
import sys
import time
import tracemalloc
from collections import deque
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np

from gantt.bench.cloud import (
    FLAVOR,
    WEIGHERS,
    build_aggregates,
    build_reports,
    build_requests,
    hold_claims,
    host_stats,
    load_table,
    make_config,
    pct,
)
from gantt.bench.profiling import Phases
from gantt.bench.scripts import cpu_model
from gantt.compute.engine import Engine
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable
from gantt.config import Config
from gantt.model import Aggregate, HostReport, NoValidHost, RequestSpec


def _cold_start(reports: list[HostReport], aggs: list[Aggregate], first: RequestSpec, config: Config, now: float,
                rounds: int, phase: Callable[[str], contextlib.AbstractContextManager[None]],
                ) -> tuple[Engine, list[float], list[float]]:
    """Load every node and the aggregates into a fresh table, then make the first decision, ``rounds`` times:
    the last round's engine, and each round's wall and CPU seconds."""
    cold: list[float] = []
    cold_cpu: list[float] = []
    engine: Engine | None = None
    for _ in range(rounds):
        engine = None
        gc.collect()
        c0 = time.process_time()
        t0 = time.perf_counter()
        with phase("cold_start"):
            table = load_table(reports, aggs, now)
            engine = Engine(table, config)
            engine.select_destinations(first)
        cold.append(time.perf_counter() - t0)
        cold_cpu.append(time.process_time() - c0)
    assert engine is not None
    return engine, cold, cold_cpu


def _decision_figures(engine: Engine, specs: list[RequestSpec], rounds: int, live_limit: int,
                      phase: Callable[[str], contextlib.AbstractContextManager[None]]) -> dict[str, Any]:
    """Every request decided ``rounds`` times: medians over rounds of each round's p50 and p99."""
    p50s, p99s, multi_p50s, multi_p99s, fails = [], [], [], [], 0
    cpu_p50s, cpu_p99s = [], []
    for _ in range(rounds):
        with phase("decisions"):
            single, multi, single_cpu, failures = _decisions(engine, specs, live_limit)
        p50s.append(pct(single, 50) * 1e3)
        p99s.append(pct(single, 99) * 1e3)
        cpu_p50s.append(pct(single_cpu, 50) * 1e3)
        cpu_p99s.append(pct(single_cpu, 99) * 1e3)
        multi_p50s.append(pct(multi, 50) * 1e3)
        multi_p99s.append(pct(multi, 99) * 1e3)
        fails += failures
    return {
        "decision_ms": {"p50": statistics.median(p50s), "p99": statistics.median(p99s),
                        "what": "select_destinations incl. claim, one-instance requests (the design's target)"},
        "decision_cpu_ms": {"p50": statistics.median(cpu_p50s), "p99": statistics.median(cpu_p99s),
                            "what": "the same decisions' CPU time (this thread's), which load does not inflate"},
        "multi_instance_request_ms": {"p50": statistics.median(multi_p50s), "p99": statistics.median(multi_p99s),
                                      "what": "select_destinations for 2-3 instances (one decision each)"},
        "no_valid_host": fails,
    }


def _decisions(engine: Engine, specs: list[RequestSpec],
               live_limit: int) -> tuple[list[float], list[float], list[float], int]:
    """Time every select_destinations (decision + claim); release the oldest consumers beyond ``live_limit``.

    Returns (single-instance request times, multi-instance request times, single-instance CPU times,
    failures): the design's target is per decision for one instance; a request for k instances makes k
    decisions and is reported apart. CPU time (this thread's) is what a loaded machine does not inflate.
    """
    single: list[float] = []
    multi: list[float] = []
    single_cpu: list[float] = []
    live: deque[str] = deque()
    failures = 0
    perf = time.perf_counter
    cpu = time.thread_time
    for spec in specs:
        times = single if spec.num_instances == 1 else multi
        c0 = cpu()
        t0 = perf()
        try:
            answer = engine.select_destinations(spec)
        except NoValidHost:
            times.append(perf() - t0)
            failures += 1
            continue
        times.append(perf() - t0)
        if spec.num_instances == 1:
            single_cpu.append(cpu() - c0)
        hold_claims(engine, live, answer, live_limit)
    hold_claims(engine, live, [], 0)
    return single, multi, single_cpu, failures


def _dry_runs(engine: Engine, specs: list[RequestSpec], now: float) -> list[float]:
    """Filter + rank every node for a request (the work of a ``candidates`` call, without building objects)."""
    times: list[float] = []
    perf = time.perf_counter
    for spec in specs:
        t0 = perf()
        ctx = RequestContext.build(spec, engine.config, now)
        ranking = engine.ranker.rank(ctx)
        if ranking.count:
            int(ranking.score.argmax())
        times.append(perf() - t0)
    return times


def _memory_per_host(reports: list[HostReport], aggs: list[Aggregate], now: float, config: Config,
                     specs: list[RequestSpec]) -> float:
    """Bytes the replica holds per node: tracemalloc's net growth while loading, then deciding, / node count.

    The reports are built (and kept alive) before tracing starts, so only what the table itself keeps is
    counted: numpy columns (including the slack of row capacity), names, indexes, interned attributes, instance
    sets, and the derived data decisions keep on the table (patched masks, weighted sums, shortlists, the row
    journal), filled by deciding every request once; each claim is released again, so allocations (which grow
    with instances, not nodes) are not counted. The benchmark's reports carry no free-form ``stats``.
    """
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    table = load_table(reports, aggs, now)
    engine = Engine(table, config)
    for spec in specs:
        try:
            for selections in engine.select_destinations(spec):
                engine.release(selections[0].consumer_uuid or "")
        except NoValidHost:
            pass
    del engine
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del table
    return (after - before) / len(reports)


def _ingestion(table: HostTable, reports: list[HostReport], seed: int, count: int,
               now: float) -> tuple[float, float, float]:
    """Reports/s applied to a loaded table: (decoded HostReport structs, JSON bytes through msgspec decode,
    structs per second of this process's CPU time)."""
    rng = random.Random(seed + 3)
    updates: list[HostReport] = []
    for _ in range(count):
        base = reports[rng.randrange(len(reports))]
        stats = msgspec.structs.replace(base.stats, vcpus_used=rng.randrange(0, 8),
                                        memory_mb_used=rng.randrange(0, 32768, 512),
                                        num_io_ops=rng.randrange(0, 4))
        updates.append(HostReport(host=base.host, node=base.node, stats=stats))
    encoded = [msgspec.json.encode(u) for u in updates]
    decoder = msgspec.json.Decoder(HostReport)
    perf = time.perf_counter
    c0 = time.process_time()
    t0 = perf()
    for u in updates:
        table.update(u, now=now)
    structs = count / (perf() - t0)
    structs_cpu = count / (time.process_time() - c0)
    t0 = perf()
    for raw in encoded:
        table.update(decoder.decode(raw), now=now)
    from_json = count / (perf() - t0)
    return structs, from_json, structs_cpu


def uniform_benchmark(hosts: int, requests: int = 2000, seed: int = 1, *, rounds: int = 3,
                      hold: int = 5000) -> dict[str, Any]:
    """Decisions in the HTTP benchmarks' cloud (``host_stats``, ``FLAVOR``, Nova's default filters and weighers,
    ``shuffle_best_same_weighed_hosts`` as bench/mixed.py's server has it), in one table: each placement releases
    the oldest once ``hold`` are held. The figure behind mixed.py's CPU per placement, below HTTP and the store."""
    load_before = os.getloadavg()[0]
    config = Config.from_dict({"filter_scheduler": {"shuffle_best_same_weighed_hosts": True},
                               "scheduler": {"max_attempts": 1}, "gantt": {"seed": seed}})
    now = 1_000_000.0
    reports = [HostReport.of([f"host-{i:06d}", f"host-{i:06d}.example.org"], host_stats(i)) for i in range(hosts)]
    engine = Engine(load_table(reports, [], now), config)
    spec = msgspec.convert({"flavor": FLAVOR, "project_id": "bench", "user_id": "bench"}, RequestSpec)
    gc.collect()
    gc.freeze()
    live: deque[str] = deque()
    p50s, p99s, means = [], [], []
    for _ in range(rounds):
        times: list[float] = []
        for _ in range(requests):
            c0 = time.thread_time()
            answer = engine.select_destinations(spec)
            times.append(time.thread_time() - c0)
            hold_claims(engine, live, answer, hold)
        p50s.append(pct(times, 50) * 1e3)
        p99s.append(pct(times, 99) * 1e3)
        means.append(statistics.fmean(times) * 1e3)
    return {"hosts": hosts, "requests_per_round": requests, "rounds": rounds, "hold": hold, "seed": seed,
            "decision_cpu_ms": {"p50": statistics.median(p50s), "p99": statistics.median(p99s),
                                "mean": statistics.median(means),
                                "what": "select_destinations incl. claim, this thread's CPU (release apart)"},
            "load_average_1m_before": load_before, "load_average_1m": os.getloadavg()[0], "cpu": cpu_model(),
            "python": sys.version.split()[0], "numpy": np.__version__}


def engine_benchmark(hosts: int, requests: int = 2000, seed: int = 1, *, rounds: int = 3,
                     ingest: int = 20000, cold_only: bool = False, phases: Phases | None = None) -> dict[str, Any]:
    """Run every figure at ``hosts`` nodes; timings are medians over ``rounds``. Returns a JSON-ready dict.

    ``cold_only``: the cold start alone (each round's CPU and wall seconds, the load average before and after).
    ``phases``: each phase (cold start, decisions, dry runs, ingestion) runs under its cProfile, whose summary the
    result then carries as ``profile`` (and whose overhead its timings then include)."""

    def phase(name: str) -> contextlib.AbstractContextManager[None]:
        return phases.phase(name) if phases is not None else contextlib.nullcontext()

    load_before = os.getloadavg()[0]
    now = 1_000_000.0
    config, enabled, missing = make_config(seed)
    reports = build_reports(hosts, seed)
    aggs = build_aggregates(reports, seed)
    specs = build_requests(requests, seed)
    engine, cold, cold_cpu = _cold_start(reports, aggs, specs[0], config, now, rounds, phase)
    if cold_only:
        return {"hosts": hosts, "rounds": rounds, "seed": seed, "cold_start_s": statistics.median(cold),
                "cold_start_cpu_s": statistics.median(cold_cpu), "cold_start_cpu_s_rounds": cold_cpu,
                "cold_start_s_rounds": cold, "load_average_1m_before": load_before,
                "load_average_1m": os.getloadavg()[0], "cpu": cpu_model(), "python": sys.version.split()[0],
                "numpy": np.__version__,
                "what": "load every node's report and the aggregates into a fresh table, then one decision"}
    # As the service does after loading its replica (gantt.replication.replica.Replica.load): move the long-lived rows
    # out of the cyclic collector's generations, so a collection does not walk 100,000 rows mid-decision.
    gc.collect()
    gc.freeze()
    table = engine.table
    decisions = _decision_figures(engine, specs, rounds, max(10, min(hosts // 2, 20000)), phase)
    with phase("dry_runs"):
        dry = [pct(_dry_runs(engine, specs[: max(50, requests // 4)], now), 50) * 1e3 for _ in range(rounds)]
    stats = engine.stats
    lookups = stats.mask_cache_hits + stats.mask_cache_misses
    with phase("ingestion"):
        ingest_structs, ingest_json, ingest_cpu = zip(
            *(_ingestion(table, reports, seed + r, ingest, now) for r in range(rounds)), strict=True)
    memory = _memory_per_host(reports, aggs, now, config, specs[:200])
    return {
        "hosts": hosts,
        "nodes_baremetal": sum(1 for r in reports if r.node is not None),
        "aggregates": len(aggs),
        "requests_per_round": requests,
        "rounds": rounds,
        "seed": seed,
        "filters": {"enabled": enabled, "missing_fell_back": missing},
        "weighers": WEIGHERS,
        **decisions,
        "dry_run_filter_rank_ms": {"p50": statistics.median(dry),
                                   "what": "RequestContext + every filter + every weigher over all nodes"},
        "memory_bytes_per_host": round(memory, 1),
        "load_average_1m": os.getloadavg()[0],
        "memory_method": "tracemalloc net growth while loading all reports and aggregates into a fresh "
                         "HostTable and deciding 200 requests (each claim released; the table's decision caches "
                         "kept; reports allocated before tracing; no free-form stats), / node count",
        "ingestion_reports_per_s": {"structs": statistics.median(ingest_structs),
                                    "json": statistics.median(ingest_json), "reports_per_round": ingest,
                                    "structs_per_cpu_s": statistics.median(ingest_cpu)},
        "cold_start_s": statistics.median(cold),
        "cold_start_cpu_s": statistics.median(cold_cpu),
        "cpu": cpu_model(),
        "mask_cache": {"hits": stats.mask_cache_hits, "misses": stats.mask_cache_misses,
                       "hit_rate": (stats.mask_cache_hits / lookups) if lookups else None},
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        **({"profile": phases.summary(), "profiled": "timings include cProfile's overhead: read the profile for "
                                                      "proportions, run again without --profile for figures"}
           if phases is not None else {}),
    }
