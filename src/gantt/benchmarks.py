"""In-process engine benchmark (design §4): decisions, dry runs, memory per host, ingestion, cold start.

``engine_benchmark(hosts, requests, seed)`` builds a synthetic cloud of ``hosts`` nodes — several host sizes,
multi-node bare-metal hosts, availability zones, tenant-isolation / flavor-affinity / ratio / extra-spec
aggregates — and returns a dict of figures (JSON-ready). ``bench/engine.py`` and ``gantt bench engine`` print it.

Timings are medians over ``rounds`` repetitions of each measurement: the machines this runs on are shared and
noisy, and a median is robust to a neighbour's burst where a mean or a single run is not.
"""

from __future__ import annotations

import gc
import os
import random
import statistics
import sys
import time
import tracemalloc
from collections import deque
from typing import Any

import msgspec
import numpy as np

from gantt.config import NOVA_DEFAULT_FILTERS, Config
from gantt.engine import Engine
from gantt.model import Aggregate, HostReport, HostStats, NoValidHost, RequestSpec
from gantt.request import RequestContext
from gantt.state import HostTable

AGGREGATE_FILTERS = [
    "AvailabilityZoneFilter",
    "AggregateInstanceExtraSpecsFilter",
    "AggregateMultiTenancyIsolation",
    "AggregateTypeAffinityFilter",
    "AggregateCoreFilter",
    "AggregateRamFilter",
    "AggregateDiskFilter",
]
WEIGHERS = ["RAMWeigher", "CPUWeigher", "DiskWeigher", "IoOpsWeigher"]

# (share of hosts, vcpus, memory_mb, local_gb): a mix of small, medium and large hypervisors
HOST_SIZES = [(0.5, 32, 131072, 1000), (0.35, 64, 262144, 2000), (0.15, 128, 524288, 4000)]
BAREMETAL_SHARE = 0.05  # of the nodes: ironic hosts with 8 nodes each
BAREMETAL_NODES = 8
ZONES = 4
FLAVORS = [
    {"name": "m1.small", "vcpus": 1, "memory_mb": 2048, "root_gb": 20},
    {"name": "m1.medium", "vcpus": 2, "memory_mb": 4096, "root_gb": 40},
    {"name": "m1.large", "vcpus": 4, "memory_mb": 8192, "root_gb": 80},
    {"name": "m1.xlarge", "vcpus": 8, "memory_mb": 16384, "root_gb": 160},
    {"name": "m1.large.ssd", "vcpus": 4, "memory_mb": 8192, "root_gb": 80,
     "extra_specs": {"aggregate_instance_extra_specs:ssd": "true"}},
    {"name": "bm.node", "vcpus": 16, "memory_mb": 65536, "root_gb": 400,
     "extra_specs": {"resources:CUSTOM_BAREMETAL": "1", "resources:VCPU": "0", "resources:MEMORY_MB": "0",
                     "resources:DISK_GB": "0"}},
]


def _stats(rng: random.Random, vcpus: int, memory_mb: int, local_gb: int, baremetal: bool) -> HostStats:
    inventories = None
    if baremetal:
        inventories = {"CUSTOM_BAREMETAL": {"total": 1, "max_unit": 1}}
    return msgspec.convert({
        "uuid": f"{rng.getrandbits(128):032x}",
        "vcpus": vcpus, "vcpus_used": 0 if baremetal else rng.randrange(0, vcpus // 4 + 1),
        "memory_mb": memory_mb, "memory_mb_used": 0 if baremetal else rng.randrange(0, memory_mb // 4, 512),
        "local_gb": local_gb, "local_gb_used": 0 if baremetal else rng.randrange(0, local_gb // 4),
        "cpu_allocation_ratio": 1.0 if baremetal else 4.0, "ram_allocation_ratio": 1.0 if baremetal else 1.5,
        "disk_allocation_ratio": 1.0,
        "hypervisor_type": "ironic" if baremetal else "QEMU",
        "hypervisor_version": 1 if baremetal else rng.choice([6002000, 8002000, 9000000]),
        "cpu_info": {"arch": "x86_64", "vendor": "Intel", "model": "Cascadelake-Server"},
        "supported_instances": [["x86_64", "baremetal" if baremetal else "kvm", "hvm"]],
        "host_ip": f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}",
        "num_io_ops": rng.randrange(0, 4), "num_instances": rng.randrange(0, 20),
        "service": {"disabled": False}, "inventories": inventories,
        "traits": ["HW_CPU_X86_AVX2", "COMPUTE_STATUS_ENABLED"] if not baremetal else ["CUSTOM_BM"],
    }, HostStats)


def build_reports(hosts: int, seed: int) -> list[HostReport]:
    """``hosts`` node reports: VM hypervisors of three sizes, and bare-metal hosts of several nodes each."""
    rng = random.Random(seed)
    reports: list[HostReport] = []
    n_bm_nodes = int(hosts * BAREMETAL_SHARE) // BAREMETAL_NODES * BAREMETAL_NODES
    for b in range(n_bm_nodes // BAREMETAL_NODES):
        for k in range(BAREMETAL_NODES):
            reports.append(HostReport(host=f"ironic-{b}", node=f"bm-{b}-{k}",
                                      stats=_stats(rng, 32, 131072, 480, baremetal=True)))
    weights = [s[0] for s in HOST_SIZES]
    for i in range(hosts - n_bm_nodes):
        _, vcpus, mem, disk = rng.choices(HOST_SIZES, weights)[0]
        reports.append(HostReport(host=f"cmp-{i:06d}", stats=_stats(rng, vcpus, mem, disk, baremetal=False)))
    return reports


def build_aggregates(reports: list[HostReport], seed: int) -> list[Aggregate]:
    """Zones over every host, plus isolation, flavor-affinity, ratio and extra-spec aggregates on slices."""
    rng = random.Random(seed + 1)
    names = sorted({r.host for r in reports})
    aggs: list[Aggregate] = []
    for z in range(ZONES):
        aggs.append(Aggregate(id=f"az{z}", name=f"az{z}", hosts=names[z::ZONES],
                              metadata={"availability_zone": f"az{z}"}))
    vm_hosts = [h for h in names if h.startswith("cmp-")]
    sample = rng.sample(vm_hosts, len(vm_hosts))
    slice_ = max(1, len(vm_hosts) // 20)
    aggs.append(Aggregate(id="tenant-a", hosts=sample[:slice_], metadata={"filter_tenant_id": "proj-a"}))
    aggs.append(Aggregate(id="large-only", hosts=sample[slice_: 2 * slice_],
                          metadata={"instance_type": "m1.large,m1.xlarge"}))
    aggs.append(Aggregate(id="dense", hosts=sample[2 * slice_: 4 * slice_],
                          metadata={"cpu_allocation_ratio": "2.0", "ram_allocation_ratio": "1.0",
                                    "disk_allocation_ratio": "1.0"}))
    aggs.append(Aggregate(id="ssd", hosts=sample[4 * slice_: 7 * slice_], metadata={"ssd": "true"}))
    aggs.append(Aggregate(id="spread", hosts=sample[7 * slice_: 9 * slice_],
                          metadata={"ram_weight_multiplier": "2.0"}))
    return aggs


def build_requests(count: int, seed: int) -> list[RequestSpec]:
    """A mixed stream: several flavors, a third pinned to a zone, one in ten multi-instance, some tenants."""
    rng = random.Random(seed + 2)
    specs: list[RequestSpec] = []
    for _ in range(count):
        flavor = rng.choices(FLAVORS, [30, 30, 15, 8, 10, 2])[0]
        body: dict[str, Any] = {"flavor": flavor, "project_id": rng.choice(["proj-a", "proj-b", "proj-c"]),
                                "user_id": "bench", "image": {"id": "img", "properties": {}}}
        if rng.random() < 0.33:
            body["availability_zone"] = f"az{rng.randrange(ZONES)}"
        if rng.random() < 0.1:
            body["num_instances"] = rng.randint(2, 3)
        specs.append(msgspec.convert(body, RequestSpec))
    return specs


def make_config(seed: int) -> tuple[Config, list[str], list[str]]:
    """Nova's default filters plus the aggregate filters that are registered; the four load weighers."""
    from gantt import filters as filter_pkg

    wanted = [*NOVA_DEFAULT_FILTERS, *AGGREGATE_FILTERS]
    enabled = [f for f in wanted if f in filter_pkg.FILTERS]
    missing = [f for f in wanted if f not in filter_pkg.FILTERS]
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": enabled, "weight_classes": WEIGHERS},
                               "gantt": {"seed": seed}})
    return config, enabled, missing


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def _load(reports: list[HostReport], aggs: list[Aggregate], now: float) -> HostTable:
    table = HostTable(clock=lambda: now, initial_rows=len(reports))
    for report in reports:
        table.update(report, now=now)
    for agg in aggs:
        table.update_aggregate(agg)
    return table


def _decisions(engine: Engine, specs: list[RequestSpec],
               live_limit: int) -> tuple[list[float], list[float], int]:
    """Time every select_destinations (decision + claim); release the oldest consumers beyond ``live_limit``.

    Returns (single-instance request times, multi-instance request times, failures): the design's target is
    per decision for one instance; a request for k instances makes k decisions and is reported apart.
    """
    single: list[float] = []
    multi: list[float] = []
    live: deque[str] = deque()
    failures = 0
    perf = time.perf_counter
    for spec in specs:
        times = single if spec.num_instances == 1 else multi
        t0 = perf()
        try:
            answer = engine.select_destinations(spec)
        except NoValidHost:
            times.append(perf() - t0)
            failures += 1
            continue
        times.append(perf() - t0)
        for selections in answer:
            live.append(selections[0].consumer_uuid or "")
        while len(live) > live_limit:
            engine.release(live.popleft())
    for consumer in live:
        engine.release(consumer)
    return single, multi, failures


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
    table = _load(reports, aggs, now)
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
               now: float) -> tuple[float, float]:
    """Reports/s applied to a loaded table: (decoded HostReport structs, JSON bytes through msgspec decode)."""
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
    t0 = perf()
    for u in updates:
        table.update(u, now=now)
    structs = count / (perf() - t0)
    t0 = perf()
    for raw in encoded:
        table.update(decoder.decode(raw), now=now)
    from_json = count / (perf() - t0)
    return structs, from_json


def engine_benchmark(hosts: int, requests: int = 2000, seed: int = 1, *, rounds: int = 3,
                     ingest: int = 20000) -> dict[str, Any]:
    """Run every figure at ``hosts`` nodes; timings are medians over ``rounds``. Returns a JSON-ready dict."""
    now = 1_000_000.0
    config, enabled, missing = make_config(seed)
    reports = build_reports(hosts, seed)
    aggs = build_aggregates(reports, seed)
    specs = build_requests(requests, seed)

    # cold start: load every node and the aggregates, then make the first decision
    cold: list[float] = []
    engine: Engine | None = None
    for _ in range(rounds):
        engine = None
        gc.collect()
        t0 = time.perf_counter()
        table = _load(reports, aggs, now)
        engine = Engine(table, config)
        engine.select_destinations(specs[0])
        cold.append(time.perf_counter() - t0)
    assert engine is not None
    # As the service does after loading its replica (gantt.replica.Replica.load): move the long-lived rows out
    # of the cyclic collector's generations, so a collection does not walk 100,000 rows mid-decision.
    gc.collect()
    gc.freeze()
    table = engine.table
    live_limit = max(10, min(hosts // 2, 20000))

    p50s, p99s, multi_p50s, multi_p99s, fails = [], [], [], [], 0
    for _ in range(rounds):
        single, multi, failures = _decisions(engine, specs, live_limit)
        p50s.append(_pct(single, 50) * 1e3)
        p99s.append(_pct(single, 99) * 1e3)
        multi_p50s.append(_pct(multi, 50) * 1e3)
        multi_p99s.append(_pct(multi, 99) * 1e3)
        fails += failures
    dry = [_pct(_dry_runs(engine, specs[: max(50, requests // 4)], now), 50) * 1e3 for _ in range(rounds)]
    stats = engine.stats
    lookups = stats.mask_cache_hits + stats.mask_cache_misses
    ingest_structs, ingest_json = zip(*(_ingestion(table, reports, seed + r, ingest, now) for r in range(rounds)),
                                      strict=True)
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
        "decision_ms": {"p50": statistics.median(p50s), "p99": statistics.median(p99s),
                        "what": "select_destinations incl. claim, one-instance requests (the design's target)"},
        "multi_instance_request_ms": {"p50": statistics.median(multi_p50s), "p99": statistics.median(multi_p99s),
                                      "what": "select_destinations for 2-3 instances (one decision each)"},
        "no_valid_host": fails,
        "dry_run_filter_rank_ms": {"p50": statistics.median(dry),
                                   "what": "RequestContext + every filter + every weigher over all nodes"},
        "memory_bytes_per_host": round(memory, 1),
        "load_average_1m": os.getloadavg()[0],
        "memory_method": "tracemalloc net growth while loading all reports and aggregates into a fresh "
                         "HostTable and deciding 200 requests (each claim released; the table's decision caches "
                         "kept; reports allocated before tracing; no free-form stats), / node count",
        "ingestion_reports_per_s": {"structs": statistics.median(ingest_structs),
                                    "json": statistics.median(ingest_json), "reports_per_round": ingest},
        "cold_start_s": statistics.median(cold),
        "mask_cache": {"hits": stats.mask_cache_hits, "misses": stats.mask_cache_misses,
                       "hit_rate": (stats.mask_cache_hits / lookups) if lookups else None},
        "python": sys.version.split()[0],
        "numpy": np.__version__,
    }
