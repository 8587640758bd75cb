"""Generated NUMA hosts and NUMA-shaped requests for the NUMATopologyFilter parity suite, and Gantt's answers.

Hosts: 1-4 cells, with or without SMT, CPUs shared, dedicated, both (legacy vcpu_pin_set: the same set) or split
between the two, some pinned, memory and CPU partly used, 4 KiB pages and sometimes 2 MiB and 1 GiB ones (some
used, some reserved), or no page list at all; CPU and RAM allocation ratios varied. Half the hosts report their
topology in Nova's versioned-object form. Requests: every hw: key and image property that shapes a guest
topology, valid and not, alone and in combination; some hosts' cells declare the physnets and tunnelled networks
their NICs serve, and some requests carry their networks' (NUMA affinity of networks).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from gantt import Scheduler
from gantt.compute.filters import FILTERS
from gantt.compute.request import RequestContext
from gantt.config import Config
from gantt.model import InvalidRequest, RequestSpec, decode

NOW = 1_000_000.0


def _cell(rng: random.Random, cell_id: int, first_cpu: int, threads: int, layout: str) -> tuple[dict[str, Any], int]:
    cores = rng.randrange(2, 7)
    cpus = list(range(first_cpu, first_cpu + cores * threads))
    core_sets = [cpus[i:i + threads] for i in range(0, len(cpus), threads)]
    if layout == "shared":
        shared, dedicated = cpus, []
    elif layout == "dedicated":
        shared, dedicated = [], cpus
    elif layout == "legacy":
        shared, dedicated = cpus, cpus
    else:
        split = rng.randrange(1, cores) * threads
        shared, dedicated = cpus[:split], cpus[split:]
    pinned: list[int] = []
    for core in core_sets:
        if not set(core) <= set(dedicated):
            continue
        roll = rng.random()
        if roll < 0.25:
            pinned += core
        elif roll < 0.4:
            pinned.append(core[0])
    memory = rng.choice([2048, 4096, 8192, 16384])
    cell: dict[str, Any] = {
        "id": cell_id, "cpuset": shared, "pcpuset": dedicated, "memory": memory,
        "cpu_usage": rng.randrange(0, 2 * len(shared) + 2), "memory_usage": rng.randrange(0, memory + memory // 4),
        "pinned_cpus": sorted(pinned), "siblings": core_sets if threads > 1 or rng.random() < 0.7 else
        [[c] for c in cpus],
    }
    if rng.random() < 0.85:
        small = memory * 256
        pages = [{"size_kb": 4, "total": small, "used": rng.randrange(0, small + 1)}]
        if rng.random() < 0.6:
            total = rng.randrange(0, 2049)
            pages.append({"size_kb": 2048, "total": total, "used": rng.randrange(0, total + 1),
                          "reserved": rng.choice([0, 0, 16])})
        if rng.random() < 0.4:
            total = rng.randrange(0, 9)
            pages.append({"size_kb": 1048576, "total": total, "used": rng.randrange(0, total + 1)})
        cell["mempages"] = pages
    return cell, cpus[-1] + 1


def _topology(rng: random.Random) -> dict[str, Any]:
    threads = rng.choice([1, 2, 2])
    layout = rng.choice(["shared", "dedicated", "dedicated", "legacy", "split", "split"])
    cells, first = [], 0
    for i in range(rng.randrange(1, 5)):
        cell, first = _cell(rng, i, first, threads, layout if rng.random() < 0.8 else "split")
        cells.append(cell)
    return {"cells": cells}


def _wrapped(plain: dict[str, Any]) -> dict[str, Any]:
    """The versioned-object primitive Nova stores, built by hand (the suite also checks Nova's own)."""

    def obj(name: str, data: dict[str, Any], version: str) -> dict[str, Any]:
        return {"nova_object.name": name, "nova_object.namespace": "nova", "nova_object.version": version,
                "nova_object.data": data, "nova_object.changes": sorted(data)}

    cells = [obj("NUMACell", {**c, "mempages": [obj("NUMAPagesTopology", p, "1.1") for p in c.get("mempages", [])],
                              "network_metadata": obj("NetworkMetadata", c.get("network_metadata") or
                                                      {"physnets": [], "tunneled": False}, "1.0")}, "1.5")
             for c in plain["cells"]]
    return obj("NUMATopology", {"cells": cells}, "1.2")


def _host(rng: random.Random, i: int) -> dict[str, Any]:
    topology = _topology(rng) if rng.random() < 0.9 else None
    vcpus = sum(len(set(c["cpuset"]) | set(c["pcpuset"])) for c in topology["cells"]) if topology else 8
    memory = sum(c["memory"] for c in topology["cells"]) if topology else 8192
    stats: dict[str, Any] = {
        "uuid": f"00000000-0000-0000-0000-{i:012d}", "vcpus": vcpus, "vcpus_used": 0, "memory_mb": memory,
        "memory_mb_used": 0, "local_gb": 100, "local_gb_used": 0,
        "cpu_allocation_ratio": rng.choice([1.0, 2.0, 4.0, 16.0]), "ram_allocation_ratio": rng.choice([1.0, 1.5]),
        "disk_allocation_ratio": 1.0, "hypervisor_type": "QEMU", "hypervisor_version": 8002000,
        "hypervisor_hostname": f"n{i}", "cpu_info": {}, "host_ip": f"10.0.0.{i + 1}",
        "service": {"disabled": False, "forced_down": False}, "instances": [],
        "numa_topology": topology,
    }
    return {"host": f"n{i}", "node": f"n{i}", "age": 1, "stats": stats, "aggregates": [],
            "wrapped": rng.random() < 0.5}


_FLAVOR_SPECS: list[tuple[str, list[str]]] = [
    ("hw:numa_nodes", ["1", "2", "2", "3", "4", "0", "x"]),
    ("hw:cpu_policy", ["dedicated", "dedicated", "shared", "mixed", "bogus"]),
    ("hw:cpu_thread_policy", ["prefer", "isolate", "require", "bogus"]),
    ("hw:mem_page_size", ["small", "large", "any", "2048", "1GB", "2MB", "4", "1048576", "bogus", "0"]),
    ("hw:emulator_threads_policy", ["share", "isolate", "isolate", "bogus"]),
    ("hw:cpu_dedicated_mask", ["^0", "0-1", "1", "0-63"]),
    ("hw:locked_memory", ["true", "false"]),
    ("trait:HW_CPU_HYPERTHREADING", ["required", "forbidden"]),
]
_IMAGE_PROPS: list[tuple[str, list[Any]]] = [
    ("hw_cpu_policy", ["dedicated", "shared", "mixed"]),
    ("hw_cpu_thread_policy", ["prefer", "isolate", "require"]),
    ("hw_mem_page_size", ["small", "large", "2048", "any"]),
    ("hw_numa_nodes", ["1", "2"]),
    ("hw_cpu_realtime_mask", ["^0"]),
    ("hw_locked_memory", ["true"]),
]


def _split(total: int, parts: int, rng: random.Random) -> list[int]:
    """``total`` in ``parts`` non-negative pieces (empty ones when there is not enough to go round)."""
    cuts = sorted(rng.choices(range(total + 1), k=parts - 1))
    bounds = [0, *cuts, total]
    return [bounds[k + 1] - bounds[k] for k in range(parts)]


def _request(rng: random.Random, k: int) -> dict[str, Any]:
    vcpus = rng.choice([1, 2, 2, 3, 4, 4, 6, 8])
    memory = rng.choice([512, 1024, 2048, 2048, 3072, 4096, 8192])
    specs: dict[str, str] = {}
    # Mostly coherent requests (the ones the filter decides), some with a random key or two thrown in (the ones
    # both must refuse alike).
    policy = rng.choice(["dedicated", "dedicated", "dedicated", "mixed", "shared", None])
    if policy:
        specs["hw:cpu_policy"] = policy
    if policy in ("dedicated", "mixed") and rng.random() < 0.5:
        specs["hw:cpu_thread_policy"] = rng.choice(["prefer", "isolate", "require"])
    if policy in ("dedicated", "mixed") and rng.random() < 0.25:
        specs["hw:emulator_threads_policy"] = rng.choice(["share", "isolate"])
    if policy == "mixed":
        if rng.random() < 0.8:
            specs["hw:cpu_dedicated_mask"] = rng.choice(["^0", f"1-{max(1, vcpus - 1)}", "0"])
        else:
            specs["hw:cpu_realtime"] = "yes"
            specs["hw:cpu_realtime_mask"] = rng.choice(["^0", "0"])
    if rng.random() < 0.45:
        specs["hw:mem_page_size"] = rng.choice(["small", "large", "any", "2048", "1GB", "2MB", "4", "1048576"])
    if rng.random() < 0.35:
        specs["hw:numa_nodes"] = rng.choice(["1", "2", "2", "3", "4"])
    if policy is None and rng.random() < 0.1:
        specs["resources:PCPU"] = str(vcpus)
    if rng.random() < 0.15:
        nodes = rng.choice([1, 2, 2, 3])
        specs["hw:numa_nodes"] = str(nodes)
        cpus = list(range(vcpus))
        rng.shuffle(cpus)
        counts = _split(vcpus, nodes, rng)
        mems = _split(memory, nodes, rng)
        start = 0
        for node in range(nodes):
            mine = sorted(cpus[start:start + counts[node]])
            start += counts[node]
            if rng.random() < 0.97:
                specs[f"hw:numa_cpus.{node}"] = ",".join(map(str, mine))
            specs[f"hw:numa_mem.{node}"] = str(mems[node] + (1 if rng.random() < 0.03 else 0))
    if rng.random() < 0.2:
        specs.update({key: rng.choice(values) for key, values in rng.sample(_FLAVOR_SPECS, rng.randrange(1, 3))})
    props = {key: rng.choice(values) for key, values in rng.sample(_IMAGE_PROPS, rng.randrange(0, 2))} \
        if rng.random() < 0.3 else {}
    return {"flavor": {"name": "f", "vcpus": vcpus, "memory_mb": memory, "root_gb": 1, "extra_specs": specs},
            "image": {"id": "img", "properties": props}, "project_id": "p", "user_id": "u",
            "instance_uuids": [f"req-{k}"], "scheduler_hints": {}}


PHYSNETS = ("foo", "bar", "baz")


def _networks(rng: random.Random, doc: dict[str, Any]) -> None:
    """NUMA affinity of networks, drawn apart (the other cases stay as they were): some hosts' cells declare the
    physnets (and tunnelled networks) their NICs serve, some requests carry the physnets of their ports and
    whether one is tunnelled (Nova's RequestSpec.network_metadata)."""
    for host in doc["hosts"]:
        topology = host["stats"]["numa_topology"]
        if topology is None or rng.random() < 0.3:
            continue
        for cell in topology["cells"]:
            if rng.random() < 0.7:
                cell["network_metadata"] = {"physnets": sorted(rng.sample(PHYSNETS, rng.randrange(0, 3))),
                                            "tunneled": rng.random() < 0.4}
    for spec in doc["requests"]:
        if rng.random() < 0.4:
            spec["network_metadata"] = {"physnets": sorted(rng.sample(PHYSNETS, rng.randrange(0, 3))),
                                        "tunneled": rng.random() < 0.5}


def cases(seed: int, hosts: int, requests: int) -> dict[str, Any]:
    rng = random.Random(seed)
    doc = {"hosts": [_host(rng, i) for i in range(hosts)],
           "requests": [_request(rng, k) for k in range(requests)],
           "options": {"compute": {"packing_host_numa_cells_allocation_strategy": rng.random() < 0.3}}}
    _networks(random.Random(f"networks-{seed}"), doc)
    return doc


def gantt_answers(doc: dict[str, Any]) -> list[Any]:
    """Per request: the nodes NUMATopologyFilter passes, or {"invalid": …} when Gantt refuses the request."""
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": ["NUMATopologyFilter"]},
                               "compute": doc["options"]["compute"], "gantt": {"seed": 1}})
    sched = Scheduler(config, clock=lambda: NOW)
    for host in doc["hosts"]:
        stats = {k: v for k, v in host["stats"].items() if v is not None}
        if "numa_topology" in stats and host["wrapped"]:
            stats["numa_topology"] = _wrapped(stats["numa_topology"])
        sched.report({"host": host["host"], "stats": stats, "reported_at": NOW - host["age"]})
    table = sched.table
    filt = FILTERS["NUMATopologyFilter"](config)
    out: list[Any] = []
    for spec in doc["requests"]:
        try:
            ctx = RequestContext.build(decode(spec, RequestSpec), config, NOW)
        except InvalidRequest as exc:
            out.append({"invalid": exc.message})
            continue
        mask = filt.mask(table, ctx)
        rows = range(table.n) if mask is None else np.flatnonzero(mask[:table.n]).tolist()
        out.append(sorted(table.node_names[r] for r in rows))
    return out
