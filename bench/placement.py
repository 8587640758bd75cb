"""Gantt's Placement face beside Placement 16.0.0 itself, on the same machine, with the same providers.

    python bench/placement.py --providers 1000,10000 --json

For each server (real Placement: PyPI's openstack-placement 16.0.0 under gunicorn on SQLite, built once into
~/.cache by tests/placement/real_placement.py; Gantt: ``gantt serve`` on a SQLite file):
1. registers providers the way nova-compute does (``POST /resource_providers``, then ``PUT .../inventories``
   with VCPU, MEMORY_MB and DISK_GB, then ``PUT .../traits``) from ``--concurrency`` clients (Placement:
   ``--placement-concurrency``, 1 by default, as SQLite takes one writer): providers/s;
2. at each size in ``--providers``, ``GET /allocation_candidates`` as Nova's scheduler asks it
   (``resources=VCPU:1,MEMORY_MB:2048,DISK_GB:20&limit=1000``) ``--queries`` times: p50/p99 latency and how many
   candidates came back.
Sizes grow: the second size adds providers to the first. Figures are medians over the queries; the machine's
CPU model and load are printed with them.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, bench/ comes first on sys.path, where bench/http.py would shadow the stdlib's ``http``.
if sys.path and sys.path[0] and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.placement.real_placement import RealPlacement

from gantt.service.process import ServerProcess

HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement 1.36", "accept": "application/json"}
QUERY = {"resources": "VCPU:1,MEMORY_MB:2048,DISK_GB:20", "limit": "1000"}
TRAITS = ["HW_CPU_X86_AVX2", "HW_CPU_X86_SSE42", "COMPUTE_STATUS_DISABLED"]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def register(url: str, start: int, count: int, concurrency: int) -> float:
    """Register providers ``start .. start+count`` as nova-compute would; providers/s."""

    def one(client: httpx.Client, i: int) -> None:
        rp = str(uuid.UUID(int=i + 1))
        created = client.post("/resource_providers", json={"name": f"cn{i:06d}", "uuid": rp})
        created.raise_for_status()
        generation = created.json()["generation"]
        inventories = {"VCPU": {"total": 64, "allocation_ratio": 4.0, "max_unit": 64},
                       "MEMORY_MB": {"total": 262144, "reserved": 512, "max_unit": 262144},
                       "DISK_GB": {"total": 2000, "max_unit": 2000}}
        put = client.put(f"/resource_providers/{rp}/inventories",
                         json={"resource_provider_generation": generation, "inventories": inventories})
        put.raise_for_status()
        generation = put.json()["resource_provider_generation"]
        traits = client.put(f"/resource_providers/{rp}/traits",
                            json={"resource_provider_generation": generation, "traits": TRAITS[:2]})
        traits.raise_for_status()

    def worker(k: int) -> None:
        with httpx.Client(base_url=url, headers=HEADERS, timeout=120) as client:
            for i in range(start + k, start + count, concurrency):
                one(client, i)

    began = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(worker, range(concurrency)))
    return count / (time.perf_counter() - began)


def candidates(url: str, queries: int) -> dict[str, Any]:
    times = []
    found = 0
    with httpx.Client(base_url=url, headers=HEADERS, timeout=300) as client:
        client.get("/allocation_candidates", params=QUERY).raise_for_status()  # warm caches
        for _ in range(queries):
            began = time.perf_counter()
            answer = client.get("/allocation_candidates", params=QUERY)
            times.append(time.perf_counter() - began)
            answer.raise_for_status()
            found = len(answer.json()["allocation_requests"])
    times.sort()
    return {"p50_ms": round(statistics.median(times) * 1000, 2),
            "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))] * 1000, 2),
            "candidates": found, "queries": queries}


def measure(name: str, url: str, sizes: list[int], concurrency: int, queries: int) -> dict[str, Any]:
    out: dict[str, Any] = {"server": name, "sizes": {}}
    have = 0
    rates = []
    for size in sizes:
        rate = register(url, have, size - have, concurrency)
        rates.append((size - have, rate))
        have = size
        out["sizes"][str(size)] = candidates(url, queries if size <= 2000 else max(5, queries // 5))
        print(f"{name}: {size} providers, registered at {rate:.0f}/s, candidates {out['sizes'][str(size)]}",
              file=sys.stderr)
    total = sum(n for n, _ in rates)
    out["providers_per_s"] = round(total / sum(n / r for n, r in rates), 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--providers", default="1000,10000", help="sizes, ascending (default 1000,10000)")
    parser.add_argument("--concurrency", type=int, default=8, help="clients registering in Gantt (default 8)")
    parser.add_argument("--placement-concurrency", type=int, default=1,
                        help="clients registering in Placement (default 1: on SQLite, concurrent writers make "
                             "Placement answer 500 for a locked database)")
    parser.add_argument("--queries", type=int, default=50, help="candidate queries per size (default 50)")
    parser.add_argument("--gantt-workers", type=int, default=2, help="gantt serve --workers (default 2)")
    parser.add_argument("--only", choices=["gantt", "placement"], help="measure one server only")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.providers.split(","))
    results: dict[str, Any] = {"cpu": cpu_model(), "cores": os.cpu_count(), "load_before": os.getloadavg()[0],
                               "query": QUERY, "servers": []}
    if args.only != "gantt":
        with RealPlacement(gunicorn=True, workers=1, threads=8) as real:
            results["servers"].append(measure("placement-16.0.0", real.url, sizes, args.placement_concurrency,
                                              args.queries))
    if args.only != "placement":
        with tempfile.TemporaryDirectory(prefix="gantt-bench-") as tmp, \
                ServerProcess(f"sqlite:///{tmp}/gantt.sqlite", workdir=tmp, workers=args.gantt_workers,
                              config={"DEFAULT": {"service_down_time": 86400}}) as gantt:
            results["servers"].append(measure("gantt", gantt.url + "/placement", sizes, args.concurrency,
                                              args.queries))
    results["load_after"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for server in results["servers"]:
            print(f"{server['server']}: {server['providers_per_s']} providers/s; "
                  + "; ".join(f"{size}: p50 {r['p50_ms']} ms p99 {r['p99_ms']} ms ({r['candidates']} candidates)"
                              for size, r in server["sizes"].items()))


if __name__ == "__main__":
    main()
