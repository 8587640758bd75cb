"""PCI benchmark: ``python bench/pci.py --hosts 10000 --json``.

A cloud where a share of the hosts (``--pci-share``) report PCI pools (a few shapes, counts 0-8), a request stream
with ``--pci-requests`` of the requests asking for devices (one or two aliases), every request claimed and
released at once (so the cloud does not fill up). Figures: per-decision p50/p99 of select_destinations for
requests with and without PCI, and how many distinct pool sets the exact check met (interned values).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from typing import Any

from gantt import NoValidHost, Scheduler

ALIASES = [json.dumps({"name": "vf", "vendor_id": "8086", "product_id": "1520", "device_type": "type-VF"}),
           json.dumps({"name": "gpu", "vendor_id": "10de", "product_id": "1db4"})]


def _pools(rng: random.Random) -> list[dict[str, Any]]:
    out = [{"vendor_id": "8086", "product_id": "1520", "numa_node": n, "count": rng.randrange(0, 9),
            "dev_type": "type-VF", "physical_network": "physnet1"} for n in (0, 1)]
    if rng.random() < 0.3:
        out.append({"vendor_id": "10de", "product_id": "1db4", "numa_node": 0, "count": rng.randrange(0, 3),
                    "dev_type": "type-PCI"})
    return out


def run(hosts: int, requests: int, pci_share: float, pci_requests: float, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    sched = Scheduler({"filter_scheduler": {"enabled_filters": ["ComputeFilter", "PciPassthroughFilter"]},
                       "pci": {"alias": ALIASES}, "DEFAULT": {"service_down_time": 1e9}, "gantt": {"seed": seed}})
    for i in range(hosts):
        stats: dict[str, Any] = {"vcpus": 64, "memory_mb": 262144, "local_gb": 4000}
        if rng.random() < pci_share:
            stats["pci_stats"] = _pools(rng)
        sched.update_resource_stats(f"h{i}", stats)
    timings: dict[str, list[float]] = {"pci": [], "plain": []}
    failed = 0
    for k in range(requests):
        specs = {}
        kind = "plain"
        if rng.random() < pci_requests:
            kind = "pci"
            specs["pci_passthrough:alias"] = rng.choice(["vf:1", "vf:2", "vf:1,gpu:1"])
        spec = {"flavor": {"name": "f", "vcpus": 2, "memory_mb": 2048, "root_gb": 10, "extra_specs": specs},
                "instance_uuids": [f"vm-{k}"]}
        start = time.perf_counter()
        try:
            sched.select_destinations(spec)
        except NoValidHost:
            failed += 1
        timings[kind].append(time.perf_counter() - start)
        if sched.allocation(f"vm-{k}") is not None:
            sched.release(f"vm-{k}")

    def ms(values: list[float], q: float) -> float | None:
        if not values:
            return None
        ordered = sorted(values)
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 3)

    return {"hosts": hosts, "requests": requests, "pci_share": pci_share, "pci_requests": pci_requests,
            "p50_ms_pci": ms(timings["pci"], 0.5), "p99_ms_pci": ms(timings["pci"], 0.99),
            "p50_ms_plain": ms(timings["plain"], 0.5), "p99_ms_plain": ms(timings["plain"], 0.99),
            "no_valid_host": failed, "distinct_pool_sets": len(sched.table.factor("pci_pools").values),
            "cpu": platform.processor() or platform.machine(), "load": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/pci.py", description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10000)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--pci-share", type=float, default=0.3, help="share of hosts with PCI pools")
    parser.add_argument("--pci-requests", type=float, default=0.3, help="share of requests asking for devices")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print JSON only (default: JSON, indented)")
    args = parser.parse_args(argv)
    result = run(args.hosts, args.requests, args.pci_share, args.pci_requests, args.seed)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
