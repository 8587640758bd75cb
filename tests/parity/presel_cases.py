"""Generated clouds and requests for the pre-selection parity suite (issue 31), and Gantt's answers.

Clouds: hosts with one to three nodes each, names in mixed case (Nova matches host names without regard to case
and node names exactly), some nodes full (a rebuild checks them anyway), some disabled or down, a few isolated,
aggregates carrying image properties. Requests: ``ignore_hosts``, ``force_hosts``, ``force_nodes`` and
``requested_destination`` naming existing or missing hosts and nodes in any case, with ``_nova_check_type``
absent, ``["rebuild"]`` or another value, images and extra specs that the rebuild filters and the others judge.

The same JSON goes to ``presel_driver.py`` (Nova's ``HostManager.get_filtered_hosts`` with Nova's filter classes)
and to Gantt (``Scheduler.candidates``; for a rebuild also ``select_destinations``, which must claim nothing).
"""

from __future__ import annotations

import random
from typing import Any

from gantt import NoValidHost, Scheduler
from gantt.config import Config
from gantt.model import GanttError

NOW = 1_000_000.0
FILTERS = ["ImagePropertiesFilter", "IsolatedHostsFilter", "AggregateImagePropertiesIsolation", "ComputeFilter",
           "NumInstancesFilter", "ComputeCapabilitiesFilter", "AggregateInstanceExtraSpecsFilter"]
ARCHES = ["x86_64", "aarch64"]
HOST_NAMES = ["cmp0", "CMP1", "Cmp2", "cmp3", "edge-A", "EDGE-b"]


def _recase(rng: random.Random, name: str) -> str:
    """``name`` as an operator might type it: as is, upper, lower or title case."""
    return rng.choice([name, name, name.upper(), name.lower(), name.title()])


def _host(rng: random.Random, host: str, node: str, i: int) -> dict[str, Any]:
    vcpus = rng.choice([8, 16])
    full = rng.random() < 0.25
    arch = rng.choice(ARCHES)
    stats: dict[str, Any] = {
        "uuid": f"00000000-0000-0000-0001-{i:012d}",
        "vcpus": vcpus, "vcpus_used": vcpus if full else rng.randrange(0, vcpus // 2),
        "memory_mb": 16384, "memory_mb_used": rng.randrange(0, 8192), "local_gb": 500,
        "local_gb_used": rng.randrange(0, 200), "cpu_allocation_ratio": 1.0, "ram_allocation_ratio": 1.0,
        "disk_allocation_ratio": 1.0, "hypervisor_type": "QEMU", "hypervisor_version": 8002000,
        "hypervisor_hostname": node, "cpu_info": {"arch": arch}, "host_ip": f"10.1.0.{i + 1}",
        "supported_instances": [[arch, "qemu", "hvm"]], "num_instances": rng.randrange(0, 30),
        "num_io_ops": 0, "failed_builds": 0, "metrics": [], "stats": {"rack": f"r{rng.randrange(2)}"},
        "instances": [], "service": {"disabled": rng.random() < 0.15, "forced_down": False}, "traits": [],
    }
    return {"host": host, "node": node, "age": rng.choice([1, 5, 5, 5, 300]), "stats": stats, "aggregates": []}


def cloud(seed: int, requests: int) -> dict[str, Any]:
    rng = random.Random(seed)
    hosts: list[dict[str, Any]] = []
    for name in rng.sample(HOST_NAMES, rng.randrange(3, 6)):
        count = rng.choice([1, 1, 2, 3])
        for k in range(count):
            node = name if count == 1 else rng.choice([f"{name}-n{k}", f"{name.upper()}-N{k}", f"Node-{name}{k}"])
            hosts.append(_host(rng, name, node, len(hosts)))
    aggregates = []
    for agg_id in range(1, rng.randrange(2, 4)):
        members = rng.sample(hosts, rng.randrange(1, max(2, len(hosts) // 2)))
        metadata = rng.choice([{"hw_architecture": rng.choice(ARCHES)}, {"ssd": "true"}, {"ssd": "false"}])
        for member in members:
            member["aggregates"].append(agg_id)
        aggregates.append({"id": agg_id, "uuid": f"aaaaaaaa-0000-0000-0001-{agg_id:012d}", "name": f"agg{agg_id}",
                           "hosts": sorted({m["host"] for m in members}), "metadata": metadata})
    # Nova's aggregates are per host: every node of a member host is in it.
    for agg in aggregates:
        for h in hosts:
            if h["host"] in agg["hosts"] and agg["id"] not in h["aggregates"]:
                h["aggregates"].append(agg["id"])
    names = sorted({h["host"] for h in hosts})
    options = {"filter_scheduler": {"isolated_hosts": rng.sample(names, rng.randrange(0, 2)),
                                    "isolated_images": ["img-iso"],
                                    "restrict_isolated_hosts_to_isolated_images": rng.random() < 0.5,
                                    "max_instances_per_host": 20, "enabled_filters": FILTERS},
               "DEFAULT": {"service_down_time": 60}}
    return {"seed": seed, "hosts": hosts, "aggregates": aggregates, "options": options,
            "requests": [_request(rng, hosts, k) for k in range(requests)]}


def _request(rng: random.Random, hosts: list[dict[str, Any]], k: int) -> dict[str, Any]:
    host_names = sorted({h["host"] for h in hosts})
    node_names = [h["node"] for h in hosts]
    extra: dict[str, str] = {}
    if rng.random() < 0.3:
        extra["capabilities:cpu_info:arch"] = rng.choice(ARCHES)
    if rng.random() < 0.3:
        extra["aggregate_instance_extra_specs:ssd"] = rng.choice(["true", "false"])
    props: dict[str, str] = {}
    if rng.random() < 0.4:
        props["hw_architecture"] = rng.choice(ARCHES)
    spec: dict[str, Any] = {
        "flavor": {"name": "m1", "vcpus": rng.choice([1, 2]), "memory_mb": 512, "root_gb": 1, "extra_specs": extra},
        "image": {"id": "img-iso" if rng.random() < 0.15 else "img-1", "properties": props},
        "project_id": "p1", "user_id": "u1", "instance_uuids": [f"vm-{k}"], "scheduler_hints": {},
    }

    def some(names: list[str], missing: str) -> list[str]:
        picked = [_recase(rng, n) for n in rng.sample(names, rng.randrange(1, min(3, len(names)) + 1))]
        return picked + ([missing] if rng.random() < 0.15 else [])

    if rng.random() < 0.3:
        spec["ignore_hosts"] = some(host_names, "nowhere")
    if rng.random() < 0.3:
        spec["force_hosts"] = some(host_names, "nowhere")
    if rng.random() < 0.25:
        forced = [h["node"] for h in hosts if h["host"].lower() in {f.lower() for f in spec.get("force_hosts", [])}]
        spec["force_nodes"] = some(forced if forced and rng.random() < 0.7 else node_names, "no-node")
    if rng.random() < 0.2:
        target = rng.choice(hosts)
        dest: dict[str, Any] = {"host": target["host"] if rng.random() < 0.8 else _recase(rng, target["host"])}
        if rng.random() < 0.5:
            dest["node"] = target["node"] if rng.random() < 0.8 else _recase(rng, target["node"])
        spec["requested_destination"] = dest
    check = rng.random()
    if check < 0.35:
        # As Nova's API asks for a rebuild with a new image: the instance's own host and node forced.
        spec["scheduler_hints"]["_nova_check_type"] = ["rebuild"]
        if rng.random() < 0.8:
            target = rng.choice(hosts)
            spec["force_hosts"], spec["force_nodes"] = [target["host"]], [target["node"]]
    elif check < 0.45:
        spec["scheduler_hints"]["_nova_check_type"] = [rng.choice(["resize", "other"])]
    return spec


# ------------------------------------------------------------------------------------------------ gantt side


def scheduler(c: dict[str, Any]) -> Scheduler:
    fs = {k: v for k, v in c["options"]["filter_scheduler"].items() if v is not None}
    config = Config.from_dict({"filter_scheduler": fs, "DEFAULT": c["options"]["DEFAULT"], "gantt": {"seed": 1}})
    sched = Scheduler(config, clock=lambda: NOW)
    for host in c["hosts"]:
        stats = {k: v for k, v in host["stats"].items() if v is not None}
        sched.report({"host": host["host"], "node": host["node"], "stats": stats, "reported_at": NOW - host["age"]})
    for agg in c["aggregates"]:
        sched.update_aggregate(agg)
    return sched


def gantt_answers(c: dict[str, Any]) -> list[dict[str, Any]]:
    """Per request: the nodes Gantt's ranking keeps (sorted), and for a rebuild the node
    ``select_destinations`` answers with (None: NoValidHost) and whether it wrote an allocation."""
    sched = scheduler(c)
    out: list[dict[str, Any]] = []
    for spec in c["requests"]:
        answer: dict[str, Any] = {"nodes": sorted(cand.nodename for cand in sched.candidates(spec))}
        if spec["scheduler_hints"].get("_nova_check_type") == ["rebuild"]:
            before = sched.table.allocation(spec["instance_uuids"][0])
            try:
                [[chosen, *alternates]] = sched.select_destinations(spec)
                answer["chosen"] = chosen.nodename
                answer["booked"] = bool(chosen.allocation) or bool(alternates)
            except NoValidHost:
                answer["chosen"] = None
            except GanttError as exc:  # pragma: no cover - shown in the comparison
                answer["chosen"] = f"error: {exc}"
            answer["booked"] = answer.get("booked", False) or \
                sched.table.allocation(spec["instance_uuids"][0]) is not before
        out.append(answer)
    return out
