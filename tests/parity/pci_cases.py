"""PCI parts of the generated clouds: ``[pci] alias`` options, hosts' ``pci_stats`` and flavors' PCI requests.

Drawn from their own random stream (so the rest of a cloud is what it was without them), small on purpose: few
vendors and products, counts of 0-3, so that requests land on both sides of "just enough" and several requests
of one flavor compete for the same pools (Nova takes them greedily, in its pool order).
"""

from __future__ import annotations

import json
import random
from typing import Any

DEVICES = [("8086", "1520"), ("8086", "1521"), ("10de", "1db4"), ("15b3", "101e")]
DEV_TYPES = ["type-PCI", "type-PF", "type-VF", "vdpa"]
ALIAS_DEV_TYPES = ["type-PCI", "type-PF", "type-VF"]


def _hex(rng: random.Random, value: str) -> str:
    return value.upper() if rng.random() < 0.2 else value  # Nova compares ids without regard to case


def aliases(rng: random.Random) -> list[str]:
    """``[pci] alias`` entries: some names defined twice (ORed specs: both give the same device_type)."""
    out = []
    for k in range(rng.randrange(2, 5)):
        name = f"a{k}"
        dev_type = rng.choice([None, None, *ALIAS_DEV_TYPES])
        policy = rng.choice([None, "legacy", "preferred", "required", "socket"])
        repeats = rng.choice([1, 1, 2]) if dev_type else 1
        for vendor, product in rng.sample(DEVICES, repeats):
            entry: dict[str, Any] = {"name": name, "vendor_id": _hex(rng, vendor), "product_id": _hex(rng, product)}
            if dev_type:
                entry["device_type"] = dev_type
            if policy:
                entry["numa_policy"] = policy
            if rng.random() < 0.1:
                entry["live_migratable"] = rng.choice(["true", "no", "Yes"])
            if rng.random() < 0.05:
                entry["capability_type"] = "pci"
            out.append(json.dumps(entry))
    return out


def _pool(rng: random.Random) -> dict[str, Any]:
    vendor, product = rng.choice(DEVICES)
    pool: dict[str, Any] = {"vendor_id": _hex(rng, vendor), "product_id": _hex(rng, product),
                            "numa_node": rng.choice([None, 0, 1]), "count": rng.choice([0, 1, 1, 2, 3])}
    if rng.random() < 0.9:
        pool["dev_type"] = rng.choice([*DEV_TYPES, "type-VF", "type-PCI"])
    if rng.random() < 0.4:
        pool["physical_network"] = rng.choice(["physnet1", "physnet2"])
    if rng.random() < 0.3:
        pool["trusted"] = rng.choice(["true", "false"])
    if rng.random() < 0.2:
        pool["remote_managed"] = rng.choice(["true", "false", "false", "True", "1", None])
    if rng.random() < 0.2:
        pool["live_migratable"] = rng.choice(["true", "false"])
    return pool


def _primitive(pools: list[dict[str, Any]]) -> dict[str, Any]:
    """The pools as Nova stores them in compute_nodes.pci_stats (PciDevicePoolList.obj_to_primitive())."""
    fields = ("vendor_id", "product_id", "numa_node", "count")
    objects = [{"nova_object.name": "PciDevicePool", "nova_object.namespace": "nova", "nova_object.version": "1.1",
                "nova_object.data": {**{k: p[k] for k in fields},
                                     "tags": {k: v for k, v in p.items() if k not in fields}}}
               for p in pools]
    return {"nova_object.name": "PciDevicePoolList", "nova_object.namespace": "nova", "nova_object.version": "1.1",
            "nova_object.data": {"objects": objects}, "nova_object.changes": ["objects"]}


def pci_stats(rng: random.Random) -> Any:
    """A host's pools, in one of the two shapes a report may use; None for a host without any."""
    if rng.random() < 0.25:
        return None
    pools = [_pool(rng) for _ in range(rng.randrange(0, 7))]
    return _primitive(pools) if rng.random() < 0.5 else pools


def alias_request(rng: random.Random, entries: list[str]) -> str | None:
    """A flavor's ``pci_passthrough:alias`` naming defined aliases, or None."""
    if rng.random() < 0.4:
        return None
    names = sorted({json.loads(e)["name"] for e in entries})
    parts = [f"{rng.choice(names)}:{rng.choice([0, 1, 1, 1, 2, 3])}" for _ in range(rng.choice([1, 1, 1, 2, 3]))]
    return rng.choice([",", ", "]).join(parts)


PORT_DEV_TYPES = ["type-VF", "type-PF", "vdpa"]  # nova.pci.request.DEVICE_TYPE_FOR_VNIC_TYPE's values


def port_requests(rng: random.Random) -> list[dict[str, Any]] | None:
    """A RequestSpec's ``pci_requests``: SR-IOV ports' requests as Nova's neutron API makes them (one device, a
    spec by physical network, remote-managed or not, maybe a device type and trust), or None. Some specs leave
    out ``remote_managed`` or carry no physical network (None), so that pools without those tags match too."""
    if rng.random() < 0.6:
        return None
    out = []
    for _ in range(rng.choice([1, 1, 2])):
        spec: dict[str, Any] = {"physical_network": rng.choice(["physnet1", "physnet2", "PHYSNET1", None])}
        if rng.random() < 0.6:
            spec["remote_managed"] = rng.choice(["False", "False", "True"])
        if rng.random() < 0.6:
            spec["dev_type"] = rng.choice(PORT_DEV_TYPES)
        if rng.random() < 0.3:
            spec["trusted"] = rng.choice(["True", "False"])
        request: dict[str, Any] = {"spec": [spec]}
        if rng.random() < 0.3:
            request["numa_policy"] = rng.choice(["legacy", "preferred", "required", "socket"])
        out.append(request)
    return out


def decorate(seed: int, hosts: list[dict[str, Any]], options: dict[str, Any], requests: list[dict[str, Any]]) -> None:
    """Add PCI to a generated cloud, in place (ports' requests from a stream of their own, so that the flavors'
    aliases stay what they were without them)."""
    rng = random.Random(f"pci-{seed}")
    options["pci"] = {"alias": aliases(rng)}
    for host in hosts:
        stats = pci_stats(rng)
        if stats is not None:
            host["stats"]["pci_stats"] = stats
    for case in requests:
        value = alias_request(rng, options["pci"]["alias"])
        if value is not None:
            case["spec"]["flavor"]["extra_specs"]["pci_passthrough:alias"] = value
    ports = random.Random(f"pci-ports-{seed}")
    for case in requests:
        value = port_requests(ports)
        if value is not None:
            case["spec"]["pci_requests"] = value
