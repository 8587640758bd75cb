"""The NUMA / PCI mix benchmark (issue 14): the engine benchmark's cloud with every hypervisor reporting a NUMA
topology and dedicated CPUs, a share with PCI device pools, and a request stream of which a share is pinned, NUMA,
huge-page or PCI; per-kind decision times, medians over rounds."""

from __future__ import annotations

import gc
import os
import random
import statistics
import sys
import time
from collections import deque
from typing import Any

import msgspec
import numpy as np

from gantt.bench.cloud import (
    WEIGHERS,
    build_aggregates,
    build_reports,
    build_requests,
    hold_claims,
    load_table,
    make_config,
    pct,
)
from gantt.bench.scripts import cpu_model
from gantt.compute.engine import Engine
from gantt.compute.request import RequestContext
from gantt.config import Config
from gantt.model import HostReport, HostStats, NoValidHost, RequestSpec

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
    table = load_table(reports, build_aggregates(reports, seed), now)
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
            hold_claims(engine, live, answer, live_limit)
        hold_claims(engine, live, [], 0)
        for name, values in times.items():
            stats = per_round.setdefault(name, {"p50": [], "p99": [], "cpu_p50": [], "cpu_p99": [], "n": []})
            stats["p50"].append(pct(values, 50) * 1e3)
            stats["p99"].append(pct(values, 99) * 1e3)
            stats["cpu_p50"].append(pct(cpu[name], 50) * 1e3)
            stats["cpu_p99"].append(pct(cpu[name], 99) * 1e3)
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
