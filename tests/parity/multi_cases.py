"""Generated multi-instance requests for the parity suite, and Gantt's answers to them.

Clouds of a few hosts cut from one to three templates (a uniform cloud has many equal hosts, so equal weights are
the rule: what ``test_multi_parity`` is about), with the filters and weighers whose verdicts move as the request's
instances are consumed (ComputeFilter, NumInstancesFilter, IoOpsFilter, the server-group filters; RAM, CPU, disk,
instances, I/O and the soft-affinity weighers) and flavors that fill a host after a few instances. The same JSON
goes to ``multi_driver.py`` (Nova's own ``_schedule``) and to Gantt's ``select_destinations``.
"""

from __future__ import annotations

import random
from typing import Any

from gantt import Scheduler
from gantt.config import Config
from gantt.model import NoValidHost

NOW = 1_000_000.0
FILTERS = ["ComputeFilter", "NumInstancesFilter", "IoOpsFilter", "ServerGroupAffinityFilter",
           "ServerGroupAntiAffinityFilter"]
WEIGHERS = {
    "ram": "nova.scheduler.weights.ram.RAMWeigher",
    "cpu": "nova.scheduler.weights.cpu.CPUWeigher",
    "disk": "nova.scheduler.weights.disk.DiskWeigher",
    "num_instances": "nova.scheduler.weights.num_instances.NumInstancesWeigher",
    "io_ops": "nova.scheduler.weights.io_ops.IoOpsWeigher",
    "soft_affinity": "nova.scheduler.weights.affinity.ServerGroupSoftAffinityWeigher",
    "soft_anti_affinity": "nova.scheduler.weights.affinity.ServerGroupSoftAntiAffinityWeigher",
}


def _template(rng: random.Random) -> dict[str, Any]:
    vcpus = rng.choice([4, 8, 16])
    memory = rng.choice([4096, 8192, 16384])
    disk = rng.choice([20, 40, 100])
    return {"vcpus": vcpus, "vcpus_used": rng.choice([0, 0, 2]), "memory_mb": memory,
            "memory_mb_used": rng.choice([0, 0, 1024]), "local_gb": disk, "local_gb_used": rng.choice([0, 0, 5]),
            "cpu_allocation_ratio": rng.choice([1.0, 2.0]), "ram_allocation_ratio": 1.0,
            "disk_allocation_ratio": 1.0, "num_instances": rng.choice([0, 0, 3]), "num_io_ops": rng.choice([0, 1])}


def _host(i: int, template: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    stats: dict[str, Any] = {
        **template,
        "uuid": f"00000000-0000-0000-0000-{i:012d}", "hypervisor_type": "QEMU", "hypervisor_version": 8002000,
        "hypervisor_hostname": f"h{i}", "cpu_info": {"arch": "x86_64"}, "supported_instances": [],
        "host_ip": f"10.0.0.{i + 1}", "failed_builds": 0, "metrics": [], "stats": {}, "instances": [],
        "service": {"disabled": rng.random() < 0.05, "forced_down": False}, "traits": [],
    }
    return {"host": f"h{i}", "node": f"h{i}", "age": 1, "stats": stats, "aggregates": []}


def cloud(seed: int, requests: int, *, subset: bool = False) -> dict[str, Any]:
    """One cloud and its requests. ``subset``: ``host_subset_size`` of 2-4 (Nova's random pick among the best);
    else 1, where Nova's choice is deterministic."""
    rng = random.Random(seed * 7919 + (1 if subset else 0))
    # One cloud in five is a uniform one of more than ``ties.FEW`` equal hosts, taking requests of up to 50
    # instances (host_subset_size 1): ties then span many rows and come back after every round of the hosts.
    uniform = seed % 5 == 4
    templates = [_template(rng) for _ in range(1 if uniform else rng.randrange(1, 4))]
    if uniform:
        templates[0].update(vcpus=64, memory_mb=65536, local_gb=1000, cpu_allocation_ratio=4.0)
    hosts = [_host(i, rng.choice(templates), rng) for i in range(rng.randrange(33, 41) if uniform
                                                                else rng.randrange(2, 9))]
    weighers = rng.sample(sorted(WEIGHERS), rng.randrange(1, 4))
    fs: dict[str, Any] = {
        "enabled_filters": rng.sample(FILTERS, rng.randrange(0, 4)),
        "weight_classes": [WEIGHERS[w] for w in weighers],
        "host_subset_size": rng.randrange(2, 5) if subset else 1,
        "shuffle_best_same_weighed_hosts": False,
        "max_instances_per_host": rng.choice([4, 6, 50]),
        "max_io_ops_per_host": rng.choice([3, 8]),
    }
    for name in weighers:
        fs[f"{name}_weight_multiplier"] = rng.choice([1.0, 2.0] if name.startswith("soft") else [1.0, -1.0, 2.0])
    options = {"filter_scheduler": fs, "scheduler": {"max_attempts": rng.choice([1, 3])},
               "DEFAULT": {"service_down_time": 60}}
    out = {"seed": seed, "hosts": hosts, "aggregates": [], "options": options, "requests": []}
    for k in range(requests):
        # (the subset family tries every pick of every instance: its requests stay small)
        count = rng.randrange(30, 51) if uniform and not subset and rng.random() < 0.5 else rng.randrange(2, 7)
        spec: dict[str, Any] = {
            "flavor": {"name": "f", "vcpus": rng.choice([1, 2, 4]), "memory_mb": rng.choice([512, 1024, 4096]),
                       "root_gb": rng.choice([1, 5, 10]), "extra_specs": {}},
            "image": {"id": "img-1", "properties": {}},
            "project_id": "p1", "user_id": "u1", "num_instances": count,
            "instance_uuids": [f"r{seed}-{k}-{i}" for i in range(count)], "scheduler_hints": {},
        }
        if rng.random() < 0.3:
            policy = rng.choice(["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"])
            # As Nova's API hands it to the scheduler: the request's instances are members already.
            spec["instance_group"] = {"uuid": f"g{k}", "policy": policy, "members": list(spec["instance_uuids"]),
                                      "hosts": []}
            spec["scheduler_hints"]["group"] = f"g{k}"
        out["requests"].append({"spec": spec})
    return out


# ------------------------------------------------------------------------------------------------ gantt side


class ScriptedRandom(random.Random):
    """The engine's RNG with its picks among the best ``host_subset_size`` given: ``randrange(n)`` answers the
    script's next index (0 once it runs out); ``calls`` notes each ``n`` asked."""

    def __init__(self, script: list[int]) -> None:
        super().__init__(0)
        self.script = list(script)
        self.calls: list[int] = []

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:  # type: ignore[override]
        assert stop is None and step == 1, "the pick draws an index below the subset's size"
        self.calls.append(start)
        at = len(self.calls) - 1
        return self.script[at] if at < len(self.script) and self.script[at] < start else 0


def _scheduler(c: dict[str, Any]) -> Scheduler:
    o = c["options"]
    config = Config.from_dict({"filter_scheduler": dict(o["filter_scheduler"]), "scheduler": o["scheduler"],
                               "DEFAULT": o["DEFAULT"], "gantt": {"seed": 1}})
    sched = Scheduler(config, clock=lambda: NOW)
    for host in c["hosts"]:  # rows in this order: the order Nova is given the hosts in
        stats = {k: v for k, v in host["stats"].items() if v is not None}
        sched.report({"host": host["host"], "stats": stats, "reported_at": NOW - host["age"]})
    return sched


def answer(c: dict[str, Any], spec: dict[str, Any], script: list[int] | None = None) -> dict[str, Any]:
    """Gantt's chosen node per instance and alternates (``chosen`` None: NoValidHost), on a fresh scheduler;
    ``script``: the picks among the best ``host_subset_size`` (see ``ScriptedRandom``)."""
    sched = _scheduler(c)
    rng = ScriptedRandom(script or [])
    sched.engine.order.rng = rng
    try:
        found = sched.select_destinations(spec)
    except NoValidHost:
        return {"chosen": None, "calls": rng.calls}
    return {"chosen": [sel[0].nodename for sel in found], "alternates": [[s.nodename for s in sel[1:]]
                                                                          for sel in found], "calls": rng.calls}


def subsets(c: dict[str, Any], spec: dict[str, Any], script: list[int]) -> list[list[str]]:
    """Per instance, the nodes Gantt's pick could take after the picks ``script`` made for the earlier ones:
    every index the pick may draw, tried."""
    out: list[list[str]] = []
    base = answer(c, spec, script)
    # one pick per instance, then (several instances) one more for the alternates, weighed as Nova's are
    for k, size in enumerate(base["calls"][:len(spec["instance_uuids"])]):
        picks = set()
        first = {**spec, "num_instances": k + 1, "instance_uuids": spec["instance_uuids"][:k + 1]}
        for j in range(size):  # the later instances cannot change this one's pick (nor refuse the request)
            tried = answer(c, first, [*script[:k], j])
            if tried["chosen"] is not None and len(tried["chosen"]) > k:
                picks.add(tried["chosen"][k])
        out.append(sorted(picks))
    return out
