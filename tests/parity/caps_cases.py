"""ComputeCapabilitiesFilter over every HostState attribute Nova exposes (issue 31 item 6): extra specs naming each
attribute, scoped and unscoped, and what lies below it, on the Nova parity suite's generated clouds. Requirements
on objects (whose text in Nova is a Python repr) ask what can be asked of them: present or not, a key's text."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from gantt.compute.filters import FILTERS
from gantt.compute.request import RequestContext
from gantt.model import RequestSpec, decode
from tests.parity import cases

PRESENT = "s!= x"  # passes wherever the attribute has a value
ATTRS: list[tuple[str, list[str]]] = [
    ("capabilities:service", ["<in> 'disabled': True", "<in> 'disabled': False", "<in> 'forced_down': True",
                              PRESENT, "s== x"]),
    ("service", ["<in> 'disabled': True", PRESENT]),
    ("capabilities:service:disabled", ["False", "True", PRESENT]),
    ("capabilities:limits", ["{}", "s!= {}"]),
    ("capabilities:limits:numa_topology", [PRESENT]),
    ("capabilities:aggregates", [PRESENT, "s== []"]),
    ("capabilities:instances", [PRESENT, "s== {}"]),
    ("capabilities:metrics", [PRESENT]),
    ("capabilities:metrics:objects", [PRESENT]),
    ("capabilities:metrics:cpu.percent", [PRESENT]),
    ("capabilities:pci_stats", [PRESENT]),
    ("capabilities:pci_stats:pools", [PRESENT]),
    ("capabilities:numa_topology", [PRESENT]),
    ("numa_topology", [PRESENT]),
    ("capabilities:allocation_candidates", [PRESENT]),
    ("capabilities:updated", [PRESENT, "<in> +00:00", "s== x"]),
    ("updated", [PRESENT]),
    ("capabilities:cell_uuid", ["cell1", PRESENT]),
    ("capabilities:host_ip", [PRESENT, "<in> 10.0.1."]),
    ("capabilities:host", ["n1", "<in> n"]),
    ("capabilities:nodename", ["n2"]),
    ("capabilities:uuid", [PRESENT]),
    ("capabilities:hypervisor_hostname", ["n3"]),
    ("capabilities:hypervisor_type", ["QEMU", "ironic"]),
    ("capabilities:hypervisor_version", [">= 8002000"]),
    ("capabilities:cpu_info", ["<in> Intel"]),
    ("capabilities:cpu_info:vendor", ["Intel", "AMD"]),
    ("capabilities:supported_instances", ["<in> hvm"]),
    ("capabilities:stats", ["<in> a100"]),
    ("capabilities:rack", ["r1"]),
    ("rack", ["r2"]),
    ("capabilities:gpu", ["a100"]),
    ("capabilities:free_ram_mb", [">= 4096"]),
    ("capabilities:free_disk_mb", [">= 100000"]),
    ("capabilities:total_usable_ram_mb", [">= 65536"]),
    ("capabilities:total_usable_disk_gb", [">= 1000"]),
    ("capabilities:disk_mb_used", [">= 100000"]),
    ("capabilities:vcpus_total", [">= 16"]),
    ("capabilities:vcpus_used", ["<= 8"]),
    ("capabilities:num_instances", ["<= 20"]),
    ("capabilities:num_io_ops", [">= 5"]),
    ("capabilities:failed_builds", ["0"]),
    ("capabilities:cpu_allocation_ratio", ["4.0", ">= 2"]),
    ("capabilities:ram_allocation_ratio", ["1.5"]),
    ("capabilities:disk_allocation_ratio", ["2.0"]),
]
# Deliberate difference (README "Nova parity"): Gantt has no cells, so HostState.cell_uuid is not a capability;
# a key naming it falls back to the node's stats (which do not have it), and no node passes.
NO_CELLS = "capabilities:cell_uuid"


def doc(seed: int, count: int) -> dict[str, Any]:
    c = cases.cloud(seed, 0)
    rng = random.Random(seed)
    listed = [(h["host"], vm) for h in c["hosts"] for vm in h["stats"]["instances"]]
    specs: list[dict[str, str]] = []
    for _ in range(count):
        if listed and rng.random() < 0.2:
            host, vm = rng.choice(listed)
            below = rng.choice(["", ":host", ":uuid"])
            value = rng.choice([PRESENT, host]) if below == ":host" else PRESENT
            specs.append({f"capabilities:instances:{vm}{below}": value})
            continue
        key, values = rng.choice(ATTRS)
        specs.append({key: rng.choice(values)})
    return {"hosts": c["hosts"], "aggregates": c["aggregates"], "options": c["options"], "extra_specs": specs,
            "cloud": c}


def gantt_answers(d: dict[str, Any]) -> list[list[str]]:
    sched = cases._scheduler(d["cloud"], [])
    table, config = sched.table, sched.config
    filt = FILTERS["ComputeCapabilitiesFilter"](config)
    out = []
    for extra in d["extra_specs"]:
        spec = decode({"flavor": {"vcpus": 1, "extra_specs": extra}}, RequestSpec)
        mask = filt.mask(table, RequestContext.build(spec, config, cases.NOW))
        rows = range(table.n) if mask is None else np.flatnonzero(mask[:table.n]).tolist()
        out.append(sorted(table.node_names[r] for r in rows))
    return out
