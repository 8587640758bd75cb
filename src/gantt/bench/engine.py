"""In-process engine benchmark (design §4): decisions, dry runs, memory per host, ingestion, cold start.

``engine_benchmark(hosts, requests, seed)`` builds a synthetic cloud of ``hosts`` nodes — several host sizes,
multi-node bare-metal hosts, availability zones, tenant-isolation / flavor-affinity / ratio / extra-spec
aggregates — and returns a dict of figures (JSON-ready). ``bench/engine.py`` and ``gantt bench engine`` print it.

Timings are medians over ``rounds`` repetitions of each measurement: the machines this runs on are shared and
noisy, and a median is robust to a neighbour's burst where a mean or a single run is not.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import os
import platform
import random
import statistics
import sys
import time
import tracemalloc
from collections import deque
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from gantt.bench.profiling import Phases
from gantt.compute.engine import Engine
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable
from gantt.config import NOVA_DEFAULT_FILTERS, Config
from gantt.model import Aggregate, HostReport, HostStats, NoValidHost, RequestSpec, Selection

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
# The HTTP benchmarks' cloud (bench/http_api.py, mixed.py, ...): identical hosts, one small flavor.
FLAVOR = {"name": "m1.small", "vcpus": 1, "memory_mb": 512, "root_gb": 1}
HOST_VCPUS, HOST_RAM_MB, HOST_DISK_GB = 32, 131072, 2000


def host_stats(i: int, now: float | None = None) -> dict[str, Any]:
    """Host ``i``'s report in the HTTP benchmarks' cloud (``now`` unused: the report carries no time)."""
    return {"vcpus": HOST_VCPUS, "vcpus_used": 0, "memory_mb": HOST_RAM_MB, "memory_mb_used": 0,
            "local_gb": HOST_DISK_GB, "local_gb_used": 0, "hypervisor_type": "QEMU", "hypervisor_version": 8002000,
            "cpu_allocation_ratio": 1.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
            "supported_instances": [["x86_64", "kvm", "hvm"]], "num_instances": 0, "num_io_ops": 0,
            "host_ip": f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"}


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
    from gantt.compute import filters as filter_pkg
    wanted = [*NOVA_DEFAULT_FILTERS, *AGGREGATE_FILTERS]
    enabled = [f for f in wanted if f in filter_pkg.FILTERS]
    missing = [f for f in wanted if f not in filter_pkg.FILTERS]
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": enabled, "weight_classes": WEIGHERS},
                               "gantt": {"seed": seed}})
    return config, enabled, missing


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def _hold(engine: Engine, live: deque[str], answer: list[list[Selection]], limit: int) -> None:
    """Keep the consumers just placed, releasing the oldest beyond ``limit`` so the cloud fills and drains as a
    real one does (``limit`` 0: release every one)."""
    for selections in answer:
        live.append(selections[0].consumer_uuid or "")
    while len(live) > limit:
        engine.release(live.popleft())


def _load(reports: list[HostReport], aggs: list[Aggregate], now: float) -> HostTable:
    table = HostTable(clock=lambda: now, initial_rows=len(reports))
    table.load(reports, now=now)
    for agg in aggs:
        table.update_aggregate(agg)
    return table


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
        _hold(engine, live, answer, live_limit)
    _hold(engine, live, [], 0)
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
    engine = Engine(_load(reports, [], now), config)
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
            _hold(engine, live, answer, hold)
        p50s.append(_pct(times, 50) * 1e3)
        p99s.append(_pct(times, 99) * 1e3)
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

    # cold start: load every node and the aggregates, then make the first decision
    cold: list[float] = []
    cold_cpu: list[float] = []
    engine: Engine | None = None
    for _ in range(rounds):
        engine = None
        gc.collect()
        c0 = time.process_time()
        t0 = time.perf_counter()
        with phase("cold_start"):
            table = _load(reports, aggs, now)
            engine = Engine(table, config)
            engine.select_destinations(specs[0])
        cold.append(time.perf_counter() - t0)
        cold_cpu.append(time.process_time() - c0)
    assert engine is not None
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
    live_limit = max(10, min(hosts // 2, 20000))

    p50s, p99s, multi_p50s, multi_p99s, fails = [], [], [], [], 0
    cpu_p50s, cpu_p99s = [], []
    for _ in range(rounds):
        with phase("decisions"):
            single, multi, single_cpu, failures = _decisions(engine, specs, live_limit)
        p50s.append(_pct(single, 50) * 1e3)
        p99s.append(_pct(single, 99) * 1e3)
        cpu_p50s.append(_pct(single_cpu, 50) * 1e3)
        cpu_p99s.append(_pct(single_cpu, 99) * 1e3)
        multi_p50s.append(_pct(multi, 50) * 1e3)
        multi_p99s.append(_pct(multi, 99) * 1e3)
        fails += failures
    with phase("dry_runs"):
        dry = [_pct(_dry_runs(engine, specs[: max(50, requests // 4)], now), 50) * 1e3 for _ in range(rounds)]
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
        "decision_ms": {"p50": statistics.median(p50s), "p99": statistics.median(p99s),
                        "what": "select_destinations incl. claim, one-instance requests (the design's target)"},
        "decision_cpu_ms": {"p50": statistics.median(cpu_p50s), "p99": statistics.median(cpu_p99s),
                            "what": "the same decisions' CPU time (this thread's), which load does not inflate"},
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


# ------------------------------------------------------------------------------ the NUMA / PCI mix (issue 14)

PCI_ALIASES = ['{"name": "vf", "vendor_id": "8086", "product_id": "1520", "device_type": "type-VF"}',
               '{"name": "gpu", "vendor_id": "10de", "product_id": "1db4"}']
PCI_HOST_SHARE = 0.3
MIX_KINDS = ("pinned", "numa_nodes", "huge_pages", "mixed_policy", "pci", "sriov_nfv")


def numa_topology(rng: random.Random, vcpus: int, memory_mb: int) -> tuple[dict[str, Any], int, int]:
    """Two cells of SMT cores, half of each cell's CPUs dedicated (some already pinned), memory split in 4 KiB
    pages, a 2 MiB pool and on some hosts a few 1 GiB pages, partly used. Returns (topology, shared CPUs,
    dedicated CPUs)."""
    cells = []
    per_cell = vcpus // 2
    cell_mem = memory_mb // 2
    one_gb = rng.random() < 0.4
    shared_total = dedicated_total = 0
    for k in range(2):
        cpus = list(range(k * per_cell, (k + 1) * per_cell))
        siblings = [cpus[i:i + 2] for i in range(0, len(cpus), 2)]
        dedicated = cpus[per_cell // 2:]
        shared = cpus[: per_cell // 2]
        pinned = [c for core in siblings if set(core) <= set(dedicated) and rng.random() < 0.3 for c in core]
        huge_mb = cell_mem // 4
        gb_pages = rng.randrange(0, 9) if one_gb else 0
        small_mb = cell_mem - huge_mb - gb_pages * 1024
        pages = [{"size_kb": 4, "total": small_mb * 256, "used": rng.randrange(0, small_mb * 64 + 1)},
                 {"size_kb": 2048, "total": huge_mb // 2, "used": rng.randrange(0, huge_mb // 4 + 1)}]
        if one_gb:
            pages.append({"size_kb": 1048576, "total": gb_pages, "used": rng.randrange(0, gb_pages + 1)})
        cells.append({"id": k, "cpuset": shared, "pcpuset": dedicated, "memory": cell_mem,
                      "cpu_usage": rng.randrange(0, len(shared) + 1), "memory_usage": rng.randrange(0, cell_mem // 4),
                      "pinned_cpus": pinned, "siblings": siblings, "mempages": pages})
        shared_total += len(shared)
        dedicated_total += len(dedicated)
    return {"cells": cells}, shared_total, dedicated_total


def build_mix_reports(hosts: int, seed: int) -> list[HostReport]:
    """``build_reports``' cloud, every hypervisor with a NUMA topology (as libvirt reports one) and a PCPU
    inventory of its dedicated CPUs, a share with PCI device pools."""
    rng = random.Random(seed + 7)
    out = []
    for report in build_reports(hosts, seed):
        stats = report.stats
        if stats.hypervisor_type == "ironic":
            out.append(report)
            continue
        topology, shared, dedicated = numa_topology(rng, stats.vcpus or 32, stats.memory_mb or 131072)
        extra: dict[str, Any] = {
            "numa_topology": topology, "vcpus": shared, "vcpus_used": rng.randrange(0, shared // 2 + 1),
            "inventories": {"PCPU": {"total": dedicated}},
            "traits": [*(stats.traits or ()), "HW_CPU_HYPERTHREADING"],
        }
        if rng.random() < PCI_HOST_SHARE:
            extra["pci_stats"] = [
                {"vendor_id": "8086", "product_id": "1520", "numa_node": n, "count": rng.randrange(0, 9),
                 "dev_type": "type-VF", "physical_network": "physnet1"} for n in (0, 1)]
            if rng.random() < 0.3:
                extra["pci_stats"].append({"vendor_id": "10de", "product_id": "1db4", "numa_node": 0,
                                           "count": rng.randrange(0, 3), "dev_type": "type-PCI"})
        merged = {**msgspec.to_builtins(stats), **extra}
        out.append(HostReport(host=report.host, node=report.node, stats=msgspec.convert(merged, HostStats)))
    return out


def mix_request(rng: random.Random, kind: str) -> dict[str, Any]:
    """One NUMA/pinned/PCI request of ``kind``, its size drawn afresh (so guest shapes rarely repeat)."""
    vcpus = rng.choice([2, 4, 6, 8])
    memory = rng.randrange(4, 33) * 256
    specs: dict[str, str] = {}
    if kind == "pinned":
        specs["hw:cpu_policy"] = "dedicated"
        specs["hw:cpu_thread_policy"] = rng.choice(["prefer", "prefer", "require"])
    elif kind == "numa_nodes":
        specs["hw:numa_nodes"] = "2"
        specs["hw:cpu_policy"] = rng.choice(["shared", "dedicated"])
    elif kind == "huge_pages":
        specs["hw:mem_page_size"] = rng.choice(["2MB", "large", "1GB"])
        memory = rng.randrange(1, 9) * 1024
        if rng.random() < 0.5:
            specs["hw:cpu_policy"] = "dedicated"
    elif kind == "mixed_policy":
        specs["hw:cpu_policy"] = "mixed"
        specs["hw:cpu_dedicated_mask"] = "^0"
    elif kind == "sriov_nfv":  # the usual NFV flavor: pinned CPUs and a VF, the VF on the guest's cell or near it
        specs["hw:cpu_policy"] = "dedicated"
        specs["pci_passthrough:alias"] = "vf:1"
        specs["hw:pci_numa_affinity_policy"] = rng.choice(["required", "preferred", "legacy"])
    else:
        specs["pci_passthrough:alias"] = rng.choice(["vf:1", "vf:2", "vf:1,gpu:1"])
        vcpus = rng.choice([1, 2, 4])
    return {"flavor": {"name": f"nfv.{kind}", "vcpus": vcpus, "memory_mb": memory, "root_gb": 20,
                       "extra_specs": specs},
            "project_id": rng.choice(["proj-a", "proj-b", "proj-c"]), "user_id": "bench",
            "image": {"id": "img", "properties": {}}}


def build_mix_requests(count: int, seed: int, share: float) -> list[tuple[str, RequestSpec]]:
    """(kind, request): ``share`` of them NUMA/pinned/PCI (``MIX_KINDS``, equally often), the rest
    ``build_requests``' plain flavors."""
    rng = random.Random(seed + 11)
    plain = build_requests(count, seed)
    out: list[tuple[str, RequestSpec]] = []
    for spec in plain:
        if rng.random() < share:
            kind = rng.choice(MIX_KINDS)
            out.append((kind, msgspec.convert(mix_request(rng, kind), RequestSpec)))
        else:
            out.append(("plain", spec))
    return out


def bench_script(beside: str, name: str) -> Any:
    """The bench script ``name`` (``http_api``, ``mixed``) in the folder of ``beside`` (a script's ``__file__``),
    loaded as a module: bench/ is a folder of scripts, not a package, and some reuse another's client, report
    shapes or /proc readings."""
    path = Path(beside).resolve().parent / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"gantt_bench_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"no bench script at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def mix_benchmark(hosts: int, requests: int = 2000, seed: int = 1, *, share: float = 0.3,
                  rounds: int = 3) -> dict[str, Any]:
    """Decisions at ``hosts`` nodes with ``share`` of the requests NUMA/pinned/PCI: per round a fresh request
    stream (new seeds: guest shapes are not the previous round's), claims held up to half the hosts (the cloud
    fills, pinned CPUs and pages run short), medians over rounds of each round's p50 / p99."""
    from gantt.compute import filters as filter_pkg
    now = 1_000_000.0
    _, enabled, missing = make_config(seed)
    enabled = [*enabled, *(f for f in ("NUMATopologyFilter", "PciPassthroughFilter") if f in filter_pkg.FILTERS)]
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": enabled, "weight_classes": WEIGHERS},
                               "pci": {"alias": PCI_ALIASES}, "gantt": {"seed": seed}})
    reports = build_mix_reports(hosts, seed)
    table = _load(reports, build_aggregates(reports, seed), now)
    engine = Engine(table, config)
    gc.collect()
    gc.freeze()
    live_limit = max(10, min(hosts // 2, 20000))
    per_round: dict[str, dict[str, list[float]]] = {}
    failures: dict[str, int] = {}
    shapes: set[Any] = set()
    for r in range(rounds):
        stream = build_mix_requests(requests, seed + 100 * r, share)
        times: dict[str, list[float]] = {"all": [], "numa_pci": [], "plain": []}
        cpu: dict[str, list[float]] = {"all": [], "numa_pci": [], "plain": []}
        live: deque[str] = deque()
        perf, thread_time = time.perf_counter, time.thread_time
        for kind, spec in stream:
            if spec.num_instances != 1:
                continue  # the target is per decision (multi-instance requests: engine_benchmark)
            special = kind != "plain"
            if special and kind != "pci":
                shapes.add(RequestContext.build(spec, config, now).numa)
            c0, t0 = thread_time(), perf()
            try:
                answer = engine.select_destinations(spec)
            except NoValidHost:
                answer = []
                failures[kind] = failures.get(kind, 0) + 1
            elapsed, used = perf() - t0, thread_time() - c0
            for name in ("all", "numa_pci" if special else "plain", *((kind,) if special else ())):
                times.setdefault(name, []).append(elapsed)
                cpu.setdefault(name, []).append(used)
            _hold(engine, live, answer, live_limit)
        _hold(engine, live, [], 0)
        for name, values in times.items():
            stats = per_round.setdefault(name, {"p50": [], "p99": [], "cpu_p50": [], "cpu_p99": [], "n": []})
            stats["p50"].append(_pct(values, 50) * 1e3)
            stats["p99"].append(_pct(values, 99) * 1e3)
            stats["cpu_p50"].append(_pct(cpu[name], 50) * 1e3)
            stats["cpu_p99"].append(_pct(cpu[name], 99) * 1e3)
            stats["n"].append(len(values))
    decision_ms = {name: {key: round(statistics.median(values), 3) for key, values in s.items() if key != "n"}
                   | {"decisions_per_round": int(statistics.median(s["n"]))} for name, s in per_round.items()}
    return {
        "hosts": hosts, "numa_pci_share": share, "requests_per_round": requests, "rounds": rounds, "seed": seed,
        "filters": {"enabled": enabled, "missing_fell_back": missing}, "weighers": WEIGHERS,
        "decision_ms": decision_ms,
        "what": "select_destinations incl. claim, one-instance requests; 'all' is the mix, 'numa_pci' its "
                "NUMA/pinned/PCI part; medians over rounds of each round's percentile; p50/p99 wall clock, "
                "cpu_p50/cpu_p99 the deciding thread's CPU time (on a shared machine, waiting for a core inflates "
                "the wall clock, not the CPU time)",
        "distinct_guest_topologies": len(shapes), "no_valid_host": failures,
        "cpu": cpu_model(), "cores": os.cpu_count(), "load_average_1m": os.getloadavg()[0],
        "python": sys.version.split()[0], "numpy": np.__version__,
    }
