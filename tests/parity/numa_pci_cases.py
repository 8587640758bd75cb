"""Generated NUMA hosts with PCI pools on their cells, and guests asking for both, for the parity of
NUMATopologyFilter + PciPassthroughFilter (the devices' NUMA affinity inside the fit) and of what a claim takes.

Hosts: the NUMA hosts of ``numa_cases`` (some without a topology), their cells on one or two sockets (now and then
a cell whose socket is unknown), and small PCI pools (``pci_cases``) on a cell, on a node the host does not have,
or on no node. Requests: NUMA guests (pinned, huge pages, several nodes) from small and from ``numa_cases``' own
flavors, nearly all asking for devices through aliases whose ``numa_policy`` is each of Nova's four (or none),
often overridden by ``hw:pci_numa_affinity_policy`` or the image's ``hw_pci_numa_affinity_policy`` (agreeing,
conflicting, invalid).
"""

from __future__ import annotations

import dataclasses
import json
import random
from typing import Any

import numpy as np

from gantt import Scheduler
from gantt.compute.filters import FILTERS
from gantt.compute.pci import pool_key, remaining
from gantt.compute.request import RequestContext
from gantt.config import Config
from gantt.model import InvalidRequest, RequestSpec, decode
from tests.parity import numa_cases, pci_cases

NOW = numa_cases.NOW
FILTER_NAMES = ("NUMATopologyFilter", "PciPassthroughFilter")
POLICIES = ["legacy", "preferred", "required", "socket"]


def _sockets(rng: random.Random, topology: dict[str, Any]) -> None:
    cells = topology["cells"]
    per_socket = rng.choice([1, 2, len(cells)])
    for cell in cells:
        cell["socket"] = cell["id"] // max(1, per_socket)
    if rng.random() < 0.1:
        rng.choice(cells)["socket"] = None


def _pools(rng: random.Random, cells: int) -> list[dict[str, Any]]:
    out = []
    for _ in range(rng.randrange(0, 6)):
        pool = pci_cases._pool(rng)
        if rng.random() < 0.6:  # mostly the devices the aliases name, so that pools compete for the requests
            pool["vendor_id"], pool["product_id"] = rng.choice(pci_cases.DEVICES[:2])
        pool["numa_node"] = rng.choice([None, *range(cells), *range(cells), cells + 1])
        out.append(pool)
    return out


def _lighten(rng: random.Random, cell: dict[str, Any]) -> None:
    """Half the cells made roomy, so that where a guest fits turns on its devices more often than on its size."""
    cell["memory_usage"] = rng.randrange(0, cell["memory"] // 2 + 1)
    cell["cpu_usage"] = 0
    cell["pinned_cpus"] = cell["pinned_cpus"][: rng.randrange(0, 2)]
    for pages in cell.get("mempages", []):
        pages["used"] = pages["used"] // 4


def _host(rng: random.Random, i: int) -> dict[str, Any]:
    host = numa_cases._host(rng, i)
    topology = host["stats"]["numa_topology"]
    if topology is not None:
        _sockets(rng, topology)
        for cell in topology["cells"]:
            if rng.random() < 0.5:
                _lighten(rng, cell)
    pools = _pools(rng, len(topology["cells"]) if topology else 2)
    if pools or rng.random() < 0.5:
        host["stats"]["pci_stats"] = pci_cases._primitive(pools) if rng.random() < 0.5 else pools
    return host


def _aliases(rng: random.Random) -> list[str]:
    out = []
    for k, policy in enumerate([None, *POLICIES]):
        dev_type = rng.choice(["type-PCI", "type-VF"])
        for vendor, product in rng.sample(pci_cases.DEVICES[:2] if rng.random() < 0.7 else pci_cases.DEVICES,
                                          rng.choice([1, 1, 2])):
            entry: dict[str, Any] = {"name": f"a{k}", "vendor_id": vendor, "product_id": product,
                                     "device_type": dev_type}
            if policy:
                entry["numa_policy"] = policy
            out.append(json.dumps(entry))
    return out


def _guest(rng: random.Random, k: int) -> dict[str, Any]:
    if rng.random() < 0.3:
        return numa_cases._request(rng, k)
    vcpus = rng.choice([1, 2, 2, 4])
    specs: dict[str, str] = {}
    roll = rng.random()
    if roll < 0.5:
        specs["hw:cpu_policy"] = "dedicated"
    if roll > 0.3:
        specs["hw:numa_nodes"] = rng.choice(["1", "1", "2"])
    if rng.random() < 0.2:
        specs["hw:mem_page_size"] = rng.choice(["small", "large", "any"])
    if not specs:
        specs["hw:numa_nodes"] = "1"
    return {"flavor": {"name": "f", "vcpus": vcpus, "memory_mb": rng.choice([512, 1024, 2048]), "root_gb": 1,
                       "extra_specs": specs},
            "image": {"id": "img", "properties": {}}, "project_id": "p", "user_id": "u",
            "instance_uuids": [f"req-{k}"], "scheduler_hints": {}}


def _request(rng: random.Random, k: int) -> dict[str, Any]:
    spec = _guest(rng, k)
    specs, props = spec["flavor"]["extra_specs"], spec["image"]["properties"]
    if rng.random() < 0.9:
        parts = [f"a{rng.choice([0, 1, 2, 2, 3, 3, 4, 4])}:{rng.choice([0, 1, 1, 2, 2, 3])}"
                 for _ in range(rng.choice([1, 1, 2]))]
        specs["pci_passthrough:alias"] = ",".join(parts)
    if rng.random() < 0.4:
        specs["hw:pci_numa_affinity_policy"] = rng.choice(["bogus"] if rng.random() < 0.04 else
                                                          ["required", "required", *POLICIES])
    if rng.random() < 0.12:
        props["hw_pci_numa_affinity_policy"] = rng.choice([*POLICIES, "bogus"])
    return spec


def _ports(rng: random.Random, doc: dict[str, Any]) -> None:
    """SR-IOV ports' PCI requests (``pci_cases.port_requests``, some with a NUMA policy of their own) on some
    requests, in place; from a stream of its own, so that the rest of each case is what it was without them."""
    for spec in doc["requests"]:
        if rng.random() < 0.5 and (ports := pci_cases.port_requests(rng)):
            spec["pci_requests"] = ports


def cases(seed: int, hosts: int, requests: int) -> dict[str, Any]:
    rng = random.Random(f"numa-pci-{seed}")
    doc = {"hosts": [_host(rng, i) for i in range(hosts)],
           "requests": [_request(rng, k) for k in range(requests)],
           "options": {"compute": {"packing_host_numa_cells_allocation_strategy": rng.random() < 0.3},
                       "pci": {"alias": _aliases(rng)}}}
    _ports(random.Random(f"numa-pci-ports-{seed}"), doc)
    return doc


def _claimable(stats: dict[str, Any]) -> dict[str, Any]:
    """The host with inventories large enough that no claim fails for VCPU, PCPU or memory (Nova's HostState
    consumes without checking them), at the host's own allocation ratios (the NUMA fit's limits)."""
    big = 1 << 20
    return {**stats, "inventories": {
        "VCPU": {"total": big, "allocation_ratio": stats["cpu_allocation_ratio"]},
        "PCPU": {"total": big},
        "MEMORY_MB": {"total": big, "allocation_ratio": stats["ram_allocation_ratio"]},
        "DISK_GB": {"total": big}}}


def gantt_answers(doc: dict[str, Any]) -> list[Any]:
    """Per request: the nodes each filter passes, and for every node both pass, what a claim there takes (the
    host cells, in guest cell order, and the pools left), or {"invalid": …} when Gantt refuses the request."""
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": list(FILTER_NAMES)},
                               "compute": doc["options"]["compute"], "pci": doc["options"]["pci"],
                               "gantt": {"seed": 1}})
    sched = Scheduler(config, clock=lambda: NOW)
    reported = {}
    hosts = {host["node"]: host for host in doc["hosts"]}
    for host in doc["hosts"]:
        stats = _claimable({k: v for k, v in host["stats"].items() if v is not None})
        sched.report({"host": host["host"], "stats": stats, "reported_at": NOW - host["age"]})
        row = sched.table.row_of((host["host"], host["node"]))
        assert row is not None
        pools = sched.table.pci_pools()[0]
        reported[host["node"]] = pools.values[pools.codes[row]]
    table = sched.table
    out: list[Any] = []
    for k, spec in enumerate(doc["requests"]):
        try:
            ctx = RequestContext.build(decode(spec, RequestSpec), config, NOW)
        except InvalidRequest as exc:
            out.append({"invalid": exc.message})
            continue
        answer: dict[str, Any] = {"filters": {}, "claims": {}, "required_traits": sorted(ctx.required_traits)}
        for name in FILTER_NAMES:
            answer["filters"][name] = _passing(FILTERS[name](config), table, ctx)
        alone = _passing(FILTERS[FILTER_NAMES[0]](config), table, dataclasses.replace(ctx, pci_requests=()))
        answer["gantt_only"] = {"numa_alone": alone,
                                "reported": {node: pools_json(pools) for node, pools in reported.items()}}
        both = set(answer["filters"][FILTER_NAMES[0]]) & set(answer["filters"][FILTER_NAMES[1]])
        for node in sorted(both):
            if ctx.required_traits or ctx.forbidden_traits:  # Placement's part, not compared here: let it pass
                host = hosts[node]
                stats = _claimable({k: v for k, v in host["stats"].items() if v is not None})
                sched.report({"host": node, "stats": {**stats, "traits": sorted(ctx.required_traits)},
                              "reported_at": NOW - host["age"]})
            answer["claims"][node] = _claim(sched, spec, node, f"claim-{k}-{node}", reported[node])
        out.append(answer)
    return out


def _passing(filt: Any, table: Any, ctx: RequestContext) -> list[str]:
    mask = filt.mask(table, ctx)
    rows = range(table.n) if mask is None else np.flatnonzero(mask[:table.n]).tolist()
    return sorted(table.node_names[r] for r in rows)


def _claim(sched: Scheduler, spec: dict[str, Any], node: str, consumer: str, reported: Any) -> dict[str, Any]:
    sched.select_destinations({**spec, "instance_uuids": [consumer],
                               "requested_destination": {"host": node, "node": node}})
    held = sched.table.allocation(consumer)
    assert held is not None
    sched.release(consumer)
    taken: dict[Any, int] = {}
    for part in held.pci:
        key = pool_key(tuple(sorted(part.pool.items())))
        taken[key] = taken.get(key, 0) + part.count
    return {"cells": [c.cell for c in held.numa or ()], "pools": pools_json(remaining(reported, taken))}


def pools_json(pools: Any) -> list[list[Any]]:
    """Pools in the form the Nova side gives them, in their order. Pools without devices are left out: a request
    of zero devices removes one from Nova's HostState, which a claim taking no device cannot say."""
    out = []
    for pool in pools:
        items = dict(pool)
        if items["count"]:
            out.append(sorted([k, v] for k, v in items.items()))
    return out

