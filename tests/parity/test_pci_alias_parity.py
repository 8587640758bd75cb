"""``[pci] alias`` with ``resource_class`` and ``traits`` (Nova 34's PCI in Placement) against Nova's own code
(tests/parity/pci_alias_driver.py, in the reference virtualenv), on generated cases:

- the aliases Nova's ``get_alias_from_config`` accepts, and what it makes of them, Gantt's ``[pci]`` section
  accepts and makes the same (``parse_aliases``, then ``check_aliases`` against ``pci_in_placement``); what Nova
  refuses, Gantt refuses;
- each device a flavor asks for is, with ``pci_in_placement``, a request group of Nova's resource class and
  required traits (``RequestSpec.generate_request_groups_from_pci_requests``): Gantt's ``placement_class`` and
  ``placement_traits`` give the same;
- whether a host's pools and its devices' providers serve a flavor's requests: Nova's PciPassthroughFilter keeps the
  host when some allocation candidate (enumerated in the driver) lets ``PciDeviceStats.support_requests`` follow
  its mappings; Gantt's ``supports`` with the providers' ``Room`` must say the same.

``GANTT_PCI_ALIAS_PARITY_CASES`` (default 1500 alias cases, half as many host cases).
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gantt.compute.pci import Room, freeze_pools, placement_class, placement_traits, requests_from_extra_specs, supports
from gantt.config.pci import PciSection, check_aliases, parse_aliases
from gantt.model import InvalidRequest
from tests.parity import reference
from tests.venvs import run_json

CASES = int(os.environ.get("GANTT_PCI_ALIAS_PARITY_CASES", "1500"))
DRIVER = Path(__file__).with_name("pci_alias_driver.py")

DEVICES = [("8086", "1520"), ("8086", "1521"), ("10de", "1db4")]
# as operators write them: Nova upper-cases, keeps standard and CUSTOM_ classes, makes the rest CUSTOM_
RC_NAMES = ["gpu", "GPU", "CUSTOM_GPU", "my-vf", "MY_VF", "PGPU", "pgpu", "VGPU", "custom_gpu",
            "CUSTOM_PCI_8086_1520"]
TRAIT_STRINGS = ["purple", "Purple,round", "HW_GPU_API_VULKAN", "hw_gpu_api_vulkan", "purple, round",
                 "HW_GPU_API_VULKAN,purple", "CUSTOM_ROUND", "", "round,round", "COMPUTE_MANAGED_PCI_DEVICE"]
CLASSES = ["CUSTOM_GPU", "CUSTOM_MY_VF", "PGPU", "CUSTOM_PCI_8086_1520", "CUSTOM_PCI_10DE_1DB4",
           "CUSTOM_PCI_8086_1521"]
TRAITS = ["CUSTOM_PURPLE", "CUSTOM_ROUND", "HW_GPU_API_VULKAN", "COMPUTE_MANAGED_PCI_DEVICE", "CUSTOM__ROUND"]
PROVIDERS = ["p1", "p2", "p3"]


def _entry(rng: random.Random, name: str, dev_type: str | None, policy: str | None,
           placement_only: bool = False) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name}
    ids = rng.random() < (0.4 if placement_only else 0.6)
    if ids:
        vendor, product = rng.choice(DEVICES)
        entry["vendor_id"], entry["product_id"] = vendor, product
        if rng.random() < 0.05:  # sometimes only one of them
            entry.pop(rng.choice(["vendor_id", "product_id"]))
    if rng.random() < (0.9 if placement_only and not ids else 0.6):
        entry["resource_class"] = rng.choice(RC_NAMES)
    if rng.random() < 0.5:
        entry["traits"] = rng.choice(TRAIT_STRINGS)
    if dev_type:
        entry["device_type"] = dev_type
    if policy:
        entry["numa_policy"] = policy
    if rng.random() < 0.1:
        entry["live_migratable"] = rng.choice(["true", "no", "Yes", "maybe"])
    if rng.random() < 0.03:
        entry["vendor_id"] = "80861"
    return entry


def _entries(rng: random.Random, placement_only: bool = False) -> list[str]:
    out = []
    for k in range(rng.randrange(1, 4)):
        dev_type = rng.choice([None, None, "type-PCI", "type-PF", "type-VF"])
        policy = rng.choice([None, None, "legacy", "preferred", "required"])
        for _ in range(rng.choice([1, 1, 1, 2]) if not placement_only else 1):
            out.append(json.dumps(_entry(rng, f"a{k}", dev_type, policy, placement_only)))
    return out


def _flavor_alias(rng: random.Random, entries: list[str], most: int) -> str:
    names = sorted({json.loads(e)["name"] for e in entries})
    parts, total = [], 0
    for _ in range(rng.choice([1, 1, 2])):
        count = rng.randint(0, max(0, most - total))
        total += count
        parts.append(f"{rng.choice(names)}:{count}")
    return ",".join(parts)


def _alias_cases(seed: int, n: int) -> list[dict[str, Any]]:
    rng = random.Random(f"pci-alias-{seed}")
    out = []
    for _ in range(n):
        entries = _entries(rng)
        out.append({"entries": entries, "in_placement": rng.random() < 0.7,
                    "flavor_alias": _flavor_alias(rng, entries, 3)})
    return out


def _pools(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    providers = list(PROVIDERS)
    rng.shuffle(providers)
    for i in range(rng.randrange(1, 4)):
        vendor, product = rng.choice(DEVICES)
        pool: dict[str, Any] = {"vendor_id": vendor, "product_id": product, "numa_node": rng.choice([None, 0, 1]),
                                "count": rng.choice([0, 1, 2, 2, 3]),
                                "dev_type": rng.choice(["type-PCI", "type-PCI", "type-VF", "type-PF"])}
        roll = rng.random()
        if roll < 0.1:
            pass  # not in Placement (a device with a physical network)
        elif roll < 0.17 and out and "rp_uuid" in out[0]:
            pool["rp_uuid"] = out[0]["rp_uuid"]  # two pools of one provider: Nova refuses to follow a mapping
        else:
            pool["rp_uuid"] = providers[i]
        if rng.random() < 0.1:
            pool["live_migratable"] = rng.choice(["true", "false"])
        out.append(pool)
    return out


def _providers(rng: random.Random, asked: list[str]) -> dict[str, dict[str, Any]]:
    """The devices' providers: mostly of a class the aliases ask for (``asked``), so that hosts land on both
    sides."""
    out = {}
    for rp in PROVIDERS:
        if rng.random() < 0.1:
            continue  # a provider the scheduler does not know
        classes = {rng.choice(asked) if asked and rng.random() < 0.8 else rng.choice(CLASSES)
                   for _ in range(rng.choice([1, 1, 2]))}
        free = {rc: rng.choice([0, 1, 1, 2, 2]) for rc in classes}
        out[rp] = {"free": free, "traits": sorted(t for t in TRAITS if rng.random() < 0.6)}
    return out


def _support_cases(seed: int, n: int) -> list[dict[str, Any]]:
    rng = random.Random(f"pci-alias-hosts-{seed}")
    out: list[dict[str, Any]] = []
    while len(out) < n:
        entries = _entries(rng, placement_only=True)
        if _ours_aliases(entries, True).get("refused"):
            continue  # Nova's API would refuse the boot before any host is looked at
        asked = sorted({placement_class(r) for r in requests_from_extra_specs(
            {"pci_passthrough:alias": ",".join(f"{n}:1" for n in parse_aliases(entries))}, PciSection(alias=entries),
            None, True)})
        case = {"entries": entries, "flavor_alias": _flavor_alias(rng, entries, 3), "pools": _pools(rng),
                "providers": _providers(rng, asked)}
        # the flavor's group_policy (a stream of its own: the cases are otherwise those drawn without it)
        if policy := random.Random(f"pci-alias-policy-{seed}-{len(out)}").choice([None, "none", "isolate"]):
            case["group_policy"] = policy
        out.append(case)
    return out


def _ours_aliases(entries: list[str], in_placement: bool) -> dict[str, Any]:
    try:
        aliases = parse_aliases(entries)
        check_aliases(aliases, in_placement)
    except ValueError:
        return {"refused": True}
    return {"aliases": {name: [a.numa_policy, list(a.specs)] for name, a in aliases.items()}}


def _ours_groups(entries: list[str], flavor_alias: str) -> list[list[list[Any]]]:
    requests = requests_from_extra_specs({"pci_passthrough:alias": flavor_alias}, PciSection(alias=entries), None,
                                         True)
    return [[[placement_class(r), sorted(placement_traits(r))]] * r.count for r in requests]


def _ours_supports(case: dict[str, Any]) -> bool:
    requests = requests_from_extra_specs({"pci_passthrough:alias": case["flavor_alias"]},
                                         PciSection(alias=case["entries"]), None, True)
    if case.get("group_policy") == "isolate":  # as RequestContext.build reads the flavor's
        requests = tuple(replace(r, isolate=True) for r in requests)
    rooms = {rp: Room(p["free"], frozenset(p["traits"])) for rp, p in case["providers"].items()}
    return supports(freeze_pools(case["pools"]), requests, rooms=rooms)


@pytest.fixture(scope="module")
def outcome() -> dict[str, Any]:
    aliases, hosts = _alias_cases(0, CASES), _support_cases(0, max(CASES // 2, 1))
    nova = run_json(reference.python(), DRIVER, {"aliases": aliases, "supports": hosts}, timeout=900)
    return {"aliases": aliases, "hosts": hosts, "nova": nova}


def test_aliases_are_read_as_nova_reads_them(outcome: dict[str, Any]) -> None:
    disagreements, refused = [], 0
    for case, nova in zip(outcome["aliases"], outcome["nova"]["aliases"], strict=True):
        ours = _ours_aliases(case["entries"], case["in_placement"])
        refused += "refused" in nova
        if ("refused" in ours) != ("refused" in nova) or ours.get("aliases") != nova.get("aliases"):
            disagreements.append(f"{case}: Gantt {ours}, Nova {nova}")
            continue
        if "groups" in nova:
            try:
                groups = _ours_groups(case["entries"], case["flavor_alias"])
            except InvalidRequest as exc:
                groups = [[[f"refused: {exc}"]]]
            theirs = [[[resources[0][0], traits] for resources, traits in request] for request in nova["groups"]]
            if groups != theirs:
                disagreements.append(f"{case}: Gantt's groups {groups}, Nova's {theirs}")
    assert not disagreements, f"{len(disagreements)} of {len(outcome['aliases'])}:\n" + "\n".join(disagreements[:10])
    # the cases cover both sides
    assert 0.1 * len(outcome["aliases"]) < refused < 0.9 * len(outcome["aliases"])
    assert sum(1 for n in outcome["nova"]["aliases"] if n.get("groups")) > 0.2 * len(outcome["aliases"])


def test_hosts_are_kept_as_novas_filter_over_placements_candidates_keeps_them(outcome: dict[str, Any]) -> None:
    """Where the only candidates Nova's filter accepts leave a device unserved by the pools ("short": a group on a
    provider whose pool the request's spec excludes, which Nova's count does not see), Gantt refuses the host:
    Nova's compute would claim fewer devices than asked."""
    disagreements, short = [], 0
    for case, nova in zip(outcome["hosts"], outcome["nova"]["supports"], strict=True):
        ours = _ours_supports(case)
        short += nova == "short"
        if ours != (nova is True):
            disagreements.append(f"{case}: Gantt {ours}, Nova {nova}")
    assert not disagreements, f"{len(disagreements)} of {len(outcome['hosts'])}:\n" + "\n".join(disagreements[:10])
    kept = sum(1 for n in outcome["nova"]["supports"] if n is True)
    assert 0.1 * len(outcome["hosts"]) < kept < 0.9 * len(outcome["hosts"])
    assert short < 0.1 * len(outcome["hosts"])
    # group_policy=isolate decided some hosts (each device on a provider of its own: rare on these hosts, which
    # seldom offer a request several devices on one provider only; 1 in 120 at seed 0)
    assert outcome["nova"]["isolate_differs"] > 0
