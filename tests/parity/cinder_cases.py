"""Generated clouds of Cinder backends and volume requests, for the Cinder parity suite (seeded, JSON-able).

A cloud: scheduler options, backends (Cinder's update_service_capabilities, pools and all), volumes already on
the pools (consumed, counted, the targets of affinity hints), and requests. The generator aims at the edges of
Cinder's rules: thin and thick pools and volume types, 'infinite' / 'unknown' capacities, reserved percentages,
over-subscription ratios below 1 and 'auto', every extra-spec operator (scoped and nested keys, list
capabilities), filter and goodness functions (including ones that fail), zones, same/different backend hints
(well-formed and not), instance locality, JSON queries.
"""

from __future__ import annotations

import json
import math
import random
import uuid
from typing import Any

import msgspec
import numpy as np

from gantt.config import VolumeOptions
from gantt.config.volume import FILTER_NAMES, WEIGHER_NAMES
from gantt.model import InvalidRequest
from gantt.volume import BackendReport, PoolTable, VolumeRequest, VolumeScheduler, capacity
from gantt.volume.filters import Request
from gantt.volume.model import SchedulerHints, VolumeProperties, VolumeType

ZONES = ("nova", "az1", "az2")
PROTOCOLS = ("iSCSI", "FC", "NFS", "ceph", "NVMe-oF", "iscsi")
VENDORS = ("Open Source", "Acme", "Pure")
TIERS = ("gold", "silver", "bronze")
FILTER_FUNCTIONS = (
    "volume.size < {n}", "stats.free_capacity_gb > volume.size * 2", "capabilities.iops >= {n}",
    "stats.storage_protocol == 'iSCSI'", "extra.tier == 'gold'", "stats.total_capacity_gb",
    "max(volume.size, 10) < 20", "qos.maxIOPS > 100", "1 / 0", "volume.size < 50 and stats.reserved_percentage < 20",
    "stats.vendor_name == 'Acme' or volume.size > {n}", "not capabilities.compression",
    "volume.size >= 5 AND stats.allocated_capacity_gb <> 3", "capabilities.tier == extra.tier",
    "stats.x and stats.y", "volume.size + 1 < capabilities.iops / 10", "-volume.size * 2 < -{n}",
    "stats.free_capacity_gb - volume.size > {n} ? 1 : 0",
)
GOODNESS_FUNCTIONS = (
    "100 - stats.allocated_capacity_gb / stats.total_capacity_gb * 100", "capabilities.iops / 100",
    "volume.size > 10 ? 80 : 20", "stats.free_capacity_gb > 500", "min(100, capabilities.iops)",
    "{n}", "200", "-5", "stats.host", "abs(-{n}) + 0.5", "2 ^ 3 ^ 2 / 10", "capabilities.tier == 'gold'",
    "stats.storage_protocol == 'iscsi' ? 90 : 10", "1 / 0",
)
QUERIES = (
    '[">=", "$free_capacity_gb", {n}]', '["and", ["<", "$total_capacity_gb", 5000], ["=", "$vendor_name", "Acme"]]',
    '["in", "$pool_name", "pool0", "pool1"]', '["not", ["=", "$thin_provisioning_support", true]]',
    '["=", "$capabilities.tier", "gold"]', '["<", "$free_capacity_gb", 300]',
    '["or", [">", "$reserved_percentage", 5]]',
    '[]', '["=", "$service.availability_zone", "az1"]', '[">", "$allocated_capacity_gb", {n}, 10]',
)


def _capacity(rng: random.Random, total: float | str) -> tuple[Any, Any]:
    if rng.random() < 0.12:
        special = rng.choice(["infinite", "unknown"])
        return special, rng.choice([special, "infinite", "unknown"])
    total = rng.choice([rng.randint(0, 5000), round(rng.uniform(1, 5000), 2), rng.randint(1, 100)])
    free = rng.choice([round(rng.uniform(0, total), 2), rng.randint(0, int(total)), total,
                       # a third decimal of 5: where Python's round and numpy's part ways
                       int(rng.uniform(0, total)) + rng.choice([0.005, 0.015, 0.125, 0.345, 0.675])])
    if rng.random() < 0.08:
        free = rng.choice(["infinite", "unknown"])
    return total, free


def _pool(rng: random.Random, name: str) -> dict[str, Any]:
    total, free = _capacity(rng, 0)
    pool: dict[str, Any] = {"pool_name": name, "total_capacity_gb": total, "free_capacity_gb": free}
    if rng.random() < 0.8:
        pool["allocated_capacity_gb"] = rng.randint(0, 3000)
    if rng.random() < 0.6:
        pool["provisioned_capacity_gb"] = rng.choice([rng.randint(0, 9000), round(rng.uniform(0, 9000), 2)])
    if rng.random() < 0.8:
        pool["reserved_percentage"] = rng.choice([0, 0, 5, 10, 25, 50, 99])
    if rng.random() < 0.7:
        pool["thin_provisioning_support"] = rng.random() < 0.6
    if rng.random() < 0.6:
        pool["thick_provisioning_support"] = rng.random() < 0.6
    if rng.random() < 0.7:
        pool["max_over_subscription_ratio"] = rng.choice([1.0, 1.5, 2.0, 20.0, 0.8, "auto", "3.5", 10])
    for key, values in (("multiattach", (True, False)), ("QoS_support", (True, False, "False")),
                        ("tier", TIERS), ("iops", (100, 500, 1000, 5000, "2000")), ("compression", (True, False)),
                        ("raid", ("raid5", "raid6", "raid10")), ("features", (["a", "b"], ["c"], [])),
                        ("nested", ({"k": "v"}, {"k": "w"}, "flat"))):
        if rng.random() < 0.5:
            pool[key] = rng.choice(values)
    if rng.random() < 0.25:
        pool["filter_function"] = rng.choice(FILTER_FUNCTIONS).format(n=rng.randint(1, 200))
    if rng.random() < 0.3:
        pool["goodness_function"] = rng.choice(GOODNESS_FUNCTIONS).format(n=rng.randint(0, 120))
    if rng.random() < 0.1:
        pool["storage_protocol"] = rng.choice(PROTOCOLS)
    return pool


def _extra_specs(rng: random.Random, names: list[str]) -> dict[str, str]:
    choices: list[tuple[str, str]] = [
        ("provisioning:type", rng.choice(["thick", "thin"])),
        ("volume_backend_name", rng.choice(names)),
        ("volume_backend_name", f"<or> {rng.choice(names)} <or> {rng.choice(names)}"),
        ("capabilities:thin_provisioning_support", "<is> True"),
        ("thick_provisioning_support", rng.choice(["<is> True", "<is> False", "True"])),
        ("multiattach", "<is> True"),
        ("tier", rng.choice(TIERS)), ("tier", "<in> gol"), ("tier", "s== silver"), ("tier", "s>= bronze"),
        ("iops", rng.choice([">=", "=", "<=", "==", "!="]) + f" {rng.choice([100, 500, 1000, 5000])}"),
        ("iops", "<in> 00"),
        ("storage_protocol", rng.choice(["iSCSI", "<in> FC", "<or> NFS <or> ceph", "s!= FC"])),
        ("capabilities:nested:k", rng.choice(["v", "w"])), ("vendor:foo", "bar"),
        ("QoS_support", rng.choice(["<is> False", "<is> True"])), ("raid", "<or> raid5 <or> raid6"),
        ("capabilities:features", rng.choice(["a", "c", "<in> b"])), ("compression", "<is> yes"),
        ("vendor_name", rng.choice(["<in> Ac", "s< P", "Open Source"])), ("driver_version", ">= 2.0"),
        ("missing_cap", "x"), ("capabilities:iops", "<or>"),
    ]
    return dict(rng.sample(choices, rng.randint(0, 4)))


def cloud(seed: int, requests: int) -> dict[str, Any]:
    rng = random.Random(seed)
    options: dict[str, Any] = {
        "scheduler_default_filters": list(FILTER_NAMES), "scheduler_default_weighers": list(WEIGHER_NAMES),
        "capacity_weight_multiplier": rng.choice([1.0, -1.0, 2.5]),
        "allocated_capacity_weight_multiplier": rng.choice([-1.0, 1.0]),
        "volume_number_multiplier": rng.choice([-1.0, 1.0, 0.5]),
        "max_over_subscription_ratio": rng.choice([20.0, 1.5, "auto"]),
    }
    backends = []
    names = []
    for b in range(rng.randint(3, 7)):
        host = f"node{b % 3}@be{b}"
        name = f"be{b}"
        names.append(name)
        caps: dict[str, Any] = {"volume_backend_name": name, "vendor_name": rng.choice(VENDORS),
                                "driver_version": rng.choice(["1.0", "2.1", "3.0.0"]),
                                "storage_protocol": rng.choice(PROTOCOLS)}
        if rng.random() < 0.2:
            caps["filter_function"] = rng.choice(FILTER_FUNCTIONS).format(n=rng.randint(1, 200))
        if rng.random() < 0.2:
            caps["goodness_function"] = rng.choice(GOODNESS_FUNCTIONS).format(n=rng.randint(0, 120))
        legacy = rng.random() < 0.15
        report: dict[str, Any] = {"host": host, "capabilities": caps,
                                  "service": {"availability_zone": rng.choice(ZONES)}}
        if legacy:
            caps.update({k: v for k, v in _pool(rng, name).items() if k != "pool_name"})
        else:
            report["pools"] = [_pool(rng, f"pool{p}") for p in range(rng.randint(1, 3))]
        backends.append(report)
    table, _ = build(options, backends, [])
    volumes = []
    for row in range(table.n):
        report = table.report(row)
        if table.free_kind[row] == 3:  # a null free capacity: Cinder cannot consume from it
            continue
        for _ in range(rng.choice([0, 0, 1, 2, 3])):
            volumes.append({"id": str(uuid.UUID(int=rng.getrandbits(128))), "host": report.host,
                            "pool": report.pool_name, "size": rng.randint(1, 60)})
    instances = {str(uuid.UUID(int=rng.getrandbits(128))): f"node{i}" for i in range(3)}
    reqs = [_request(rng, names, volumes, instances) for _ in range(requests)]
    table, _ = build(options, backends, volumes)
    for spec in reqs:
        if rng.random() < 0.4:  # exactly what a pool has left: the edge of CapacityFilter's ">="
            rooms = [_room(table, row, spec) for row in range(table.n)]
            whole = [r for r in rooms if r == int(r) and r >= 1]
            spec["volume_properties"]["size"] = int(rng.choice(whole or rooms))
    return {"seed": seed, "options": options, "backends": backends, "volumes": volumes, "requests": reqs}


def _room(table: PoolTable, row: int, spec: dict[str, Any]) -> float:
    thin = spec["volume_type"]["extra_specs"].get("provisioning:type") != "thick"
    virtual_free, _ = capacity.factors(table, thin)
    value = float(virtual_free[row])
    return value if math.isfinite(value) and 1 <= value < 2**31 else 1.0


def _request(rng: random.Random, names: list[str], volumes: list[dict[str, Any]],
             instances: dict[str, str]) -> dict[str, Any]:
    size = rng.choice([0, 1, 5, 10, 50, 100, 500, 2000, rng.randint(1, 300)])
    props: dict[str, Any] = {"size": size, "project_id": "p1", "user_id": "u1", "attach_status": "detached"}
    if rng.random() < 0.3:
        props["availability_zone"] = rng.choice(ZONES)
    if rng.random() < 0.2:
        props["qos_specs"] = {"maxIOPS": rng.choice([50, 500])}
    spec: dict[str, Any] = {"volume_properties": props,
                            "volume_type": {"name": "t", "extra_specs": _extra_specs(rng, names)}}
    if rng.random() < 0.1:
        spec["availability_zones"] = rng.sample(ZONES, 2)
    if rng.random() < 0.1:
        spec["operation"] = "extend_volume"
        spec["new_size"] = size + rng.randint(0, 100)
        props["attach_status"] = rng.choice(["attached", "detached"])
    hints: dict[str, Any] = {}
    ids = [v["id"] for v in volumes]
    for hint in ("same_host", "different_host"):
        if rng.random() < 0.2 and ids:
            hints[hint] = rng.choice([rng.choice(ids), rng.sample(ids, min(2, len(ids))), "not-a-uuid",
                                      [rng.choice(ids), "nope"], [], str(uuid.UUID(int=rng.getrandbits(128)))])
    if rng.random() < 0.15:
        hints["local_to_instance"] = rng.choice(list(instances))
        spec["instance_hosts"] = instances
    if rng.random() < 0.2:
        hints["query"] = rng.choice(QUERIES).format(n=rng.randint(0, 800))
    spec["scheduler_hints"] = hints
    # Cinder's volume_properties is the whole volume: every field, as Gantt's VolumeProperties fills them
    spec["volume_properties"] = msgspec.to_builtins(msgspec.structs.asdict(VolumeProperties(**props)))
    return spec


def build(options: dict[str, Any], backends: list[dict[str, Any]],
          volumes: list[dict[str, Any]]) -> tuple[PoolTable, VolumeScheduler]:
    opts = VolumeOptions(**options)
    table = PoolTable(opts.max_over_subscription_ratio)
    for backend in backends:
        for pool in BackendReport(**{**backend, "service": _service(backend)}).pool_reports():
            table.apply(pool)
    for volume in volumes:
        row = table.row(volume["host"], volume["pool"])
        assert row is not None
        table.claim(row, volume["id"], volume["size"])
    return table, VolumeScheduler(opts)


def _service(backend: dict[str, Any]) -> Any:
    from gantt.volume import PoolService

    return PoolService(**backend.get("service", {}))


def _pool_ids(table: PoolTable) -> list[str]:
    return [table.report(row).pool_host for row in range(table.n)]


def gantt_answers(c: dict[str, Any]) -> list[dict[str, Any]]:
    """Per request: each filter's verdict per pool (or "invalid" for a refused request), and per weigher (and all
    together) the weight of each candidate, a candidate being a pool that passes the default filters."""
    table, scheduler = build(c["options"], c["backends"], c["volumes"])
    pools = _pool_ids(table)
    out = []
    for raw in c["requests"]:
        answer: dict[str, Any] = {"filters": {}, "weights": {}}
        spec = VolumeRequest(**_decode(raw))
        req = Request(spec)
        for f in scheduler.filters:
            try:
                mask = f.mask(table, req)
            except InvalidRequest:
                answer["filters"][f.name] = "invalid"
                continue
            mask = np.ones(table.n, dtype=np.bool_) if mask is None else mask
            answer["filters"][f.name] = {p: bool(mask[i]) for i, p in enumerate(pools)}
        default = VolumeScheduler(VolumeOptions(scheduler_default_weighers=[]))
        rows = np.flatnonzero(default.passes(table, req))
        for w in scheduler.weighers:
            values = w.multiplier * w.normalized(table, req, rows)
            answer["weights"][w.name] = {pools[r]: float(v) for r, v in zip(rows, values, strict=True)}
        total, _ = scheduler.weigh(table, req, rows)
        answer["weights"]["all"] = {pools[r]: float(v) for r, v in zip(rows, total, strict=True)}
        out.append(answer)
    return out


def _decode(raw: dict[str, Any]) -> dict[str, Any]:
    spec = dict(raw)
    spec["volume_properties"] = msgspec.convert(raw["volume_properties"], VolumeProperties)
    spec["volume_type"] = msgspec.convert(raw["volume_type"], VolumeType)
    spec["scheduler_hints"] = msgspec.convert(raw.get("scheduler_hints", {}), SchedulerHints)
    return spec


if __name__ == "__main__":
    print(json.dumps(cloud(0, 3), indent=1)[:3000])
