"""The volume namespace's decision benchmark (``bench/engine.py --namespace volume``).

N pools (four per backend, thin and thick, some of 'infinite' or 'unknown' capacity, three zones, vendor
capabilities), volume requests of mixed sizes whose types carry extra specs (backend name alternatives, thin
support, a vendor tier), decided by VolumeScheduler with Cinder's default filters (AvailabilityZone, Capacity,
Capabilities) and two weigher sets: Cinder's default (CapacityWeigher) and every column weigher (Capacity,
AllocatedCapacity, VolumeNumber), the latter also with one backend's report (four pools) applied before every
decision, as pools report while volumes are placed. A decision is ``select`` + ``PoolTable.claim``; the oldest
volumes are released beyond a steady population, so the pools neither fill nor empty.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
import uuid
from collections import deque
from typing import Any

import numpy as np

from gantt.config import VolumeOptions
from gantt.model import NoValidHost
from gantt.volume.model import BackendReport, PoolService, VolumeProperties, VolumeRequest, VolumeType
from gantt.volume.scheduler import VolumeScheduler
from gantt.volume.table import PoolTable

ZONES = ("az1", "az2", "az3")
TIERS = ("gold", "silver", "bronze")


def build_backends(pools: int, seed: int) -> list[BackendReport]:
    rng = random.Random(seed)
    out = []
    for b in range((pools + 3) // 4):
        count = min(4, pools - 4 * b)
        caps = {"volume_backend_name": f"be{b % 50}", "vendor_name": rng.choice(["Acme", "Open Source"]),
                "driver_version": "3.0", "storage_protocol": rng.choice(["iSCSI", "FC", "ceph"])}
        pool_list = []
        for p in range(count):
            total: Any = rng.choice([1000, 2000, 5000, 10000])
            free: Any = rng.uniform(0.1, 1.0) * total
            if rng.random() < 0.02:
                total = free = rng.choice(["infinite", "unknown"])
            thin = rng.random() < 0.6
            pool_list.append({"pool_name": f"pool{p}", "total_capacity_gb": total, "free_capacity_gb": free,
                              "allocated_capacity_gb": rng.randint(0, 1000), "reserved_percentage":
                                  rng.choice([0, 5, 10]), "thin_provisioning_support": thin,
                              "thick_provisioning_support": not thin, "max_over_subscription_ratio":
                                  rng.choice([1.0, 2.0, 20.0]), "multiattach": rng.random() < 0.5,
                              "tier": rng.choice(TIERS), "iops": rng.choice([1000, 5000, 20000])})
        out.append(BackendReport(host=f"node{b}@be{b % 50}", capabilities=caps, pools=pool_list,
                                 service=PoolService(availability_zone=ZONES[b % len(ZONES)])))
    return out


def build_requests(count: int, seed: int) -> list[VolumeRequest]:
    rng = random.Random(seed + 1)
    out = []
    for _ in range(count):
        specs: dict[str, str] = {}
        if rng.random() < 0.5:
            specs["volume_backend_name"] = f"<or> be{rng.randrange(50)} <or> be{rng.randrange(50)}"
        if rng.random() < 0.3:
            specs["capabilities:thin_provisioning_support"] = "<is> True"
        if rng.random() < 0.3:
            specs["tier"] = rng.choice(TIERS)
        if rng.random() < 0.2:
            specs["provisioning:type"] = "thick"
        zone = rng.choice([None, *ZONES])
        out.append(VolumeRequest(volume_properties=VolumeProperties(size=rng.choice([1, 10, 50, 100, 500]),
                                                                    availability_zone=zone),
                                 volume_type=VolumeType(name="t", extra_specs=specs)))
    return out


def _decide(scheduler: VolumeScheduler, table: PoolTable, requests: list[VolumeRequest], steady: int,
            reports: list[BackendReport] | None = None) -> tuple[list[float], list[float], int]:
    wall: list[float] = []
    cpu: list[float] = []
    live: deque[str] = deque()
    failures = 0
    rng = random.Random(7)
    for request in requests:
        if reports:
            table.apply_backend(rng.choice(reports))  # not timed: what the decision pays for it is
        c0, t0 = time.thread_time(), time.perf_counter()
        try:
            pick = scheduler.select(table, request)[0]
        except NoValidHost:
            failures += 1
            continue
        volume = str(uuid.uuid4())
        row = table.row(pick.host, pick.pool)
        assert row is not None
        table.claim(row, volume, request.size)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
        live.append(volume)
        while len(live) > steady:
            table.release(live.popleft())
    while live:
        table.release(live.popleft())
    return wall, cpu, failures


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values) * 1000.0, q)) if values else float("nan")


def volume_benchmark(pools: int, requests: int = 2000, seed: int = 1, *, rounds: int = 3) -> dict[str, Any]:
    from gantt.bench.scripts import cpu_model

    backends = build_backends(pools, seed)
    t0 = time.perf_counter()
    table = PoolTable()
    for backend in backends:
        table.apply_backend(backend)
    load_s = time.perf_counter() - t0
    specs = build_requests(requests, seed)
    figures: dict[str, Any] = {}
    column_weighers = ["CapacityWeigher", "AllocatedCapacityWeigher", "VolumeNumberWeigher"]
    for label, weighers, reporting in (("cinder_defaults", ["CapacityWeigher"], None),
                                       ("column_weighers", column_weighers, None),
                                       ("column_weighers_with_reports", column_weighers, backends)):
        scheduler = VolumeScheduler(VolumeOptions(scheduler_default_weighers=weighers))
        p50, p99, cpu50, cpu99, fails = [], [], [], [], 0
        for _ in range(rounds):
            wall, cpu, failures = _decide(scheduler, table, specs, min(1000, pools), reporting)
            p50.append(_pct(wall, 50))
            p99.append(_pct(wall, 99))
            cpu50.append(_pct(cpu, 50))
            cpu99.append(_pct(cpu, 99))
            fails += failures
        figures[label] = {
            "filters": scheduler.options.scheduler_default_filters, "weighers": weighers,
            "backend_report_before_each_decision": reporting is not None,
            "decision_ms": {"p50": statistics.median(p50), "p99": statistics.median(p99),
                            "what": "VolumeScheduler.select + PoolTable.claim, one volume"},
            "decision_cpu_ms": {"p50": statistics.median(cpu50), "p99": statistics.median(cpu99),
                                "what": "the same decisions' CPU time (this thread's)"},
            "no_valid_host": fails,
        }
    return {
        "namespace": "volume", "pools": table.n, "backends": len(backends), "requests_per_round": requests,
        "rounds": rounds, "seed": seed, "load_pools_s": load_s, **figures,
        "load_average_1m": os.getloadavg()[0], "cpu": cpu_model(), "cores": os.cpu_count(),
        "python": sys.version.split()[0], "numpy": np.__version__,
    }
