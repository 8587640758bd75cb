"""Request groups on a node's provider tree, Gantt's scheduler against Placement 16.0.0 itself: does this compute node
have an allocation candidate for this flavor, and is the one Gantt claims among Placement's?

Generated worlds of compute nodes (the root provider with VCPU/MEMORY_MB/DISK_GB, with or without the groups'
classes itself; 1-4 child providers, some with a child of their own; inventories with total, reserved, min/max
unit, step and allocation ratio; traits; allocations using part of them) are written to Placement (its own venv,
its own SQLite database: tests/placement/real_placement.py) and to Gantt's Placement face. Generated flavors (the
unnumbered group, perhaps with a class only children hold and required/forbidden traits; 1-3 numbered groups
``resources{S}``/``trait{S}`` with ``group_policy`` isolate or none; ``same_subtree`` as a port's request-level
params give it) are asked of Placement as Nova 34 asks (``GET /allocation_candidates`` at 1.36, the flavor's
VCPU/MEMORY_MB/DISK_GB dropped where a group names the class), and of Gantt's scheduler as the Nova seam asks it.
Per node: Gantt's candidates are exactly the roots of Placement's allocation requests; the allocation Gantt claims
(node, child providers, group mappings) is one of Placement's allocation requests.

Known differences kept (not generated): a class of the unnumbered group that some root provider holds is read at
the root only (Gantt does not mix a root and a child for one class of that group, docs/nova.md). Nothing else is
left out: a class a numbered group names is not the unnumbered group's (Nova drops the flavor's figure of it), so
Placement 16's in-place sums of a class two groups share on one provider (which corrupt its answers unless
``group_policy=none``: tests/placement/test_candidates_parity.py) arise only between numbered groups under ``none``,
where it copies first.

``GANTT_PARITY_SEED`` picks the seed, ``GANTT_PARITY_WORLDS`` the number of worlds; a mismatch prints the world
and the flavor that tell them apart.
"""

from __future__ import annotations

import json
import os
import random
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gantt.config import Config
from gantt.model import Inventory, NoValidHost
from gantt.placement.facade import Placement
from gantt.replication.replica import Replica
from gantt.resources.providers import ConsumerWrite
from tests.placement.real_placement import RealPlacement
from tests.placement.test_candidates_parity import Consumer, Provider, allocate, canonical, clear_world, write_world

SEED = int(os.environ.get("GANTT_PARITY_SEED", "20261128"))
WORLDS = int(os.environ.get("GANTT_PARITY_WORLDS", "24"))
FLAVORS = 16
GROUP_CLASSES = ["VGPU", "SRIOV_NET_VF", "CUSTOM_X"]
CHILD_ONLY = "CUSTOM_MAGIC"  # only child providers hold it: the unnumbered group takes it from one of them
TRAITS = ["CUSTOM_T1", "CUSTOM_T2", "CUSTOM_T3"]
ROOT_CLASSES = ["VCPU", "MEMORY_MB", "DISK_GB"]
VERSION = "1.36"  # what Nova 34's scheduler asks (SAME_SUBTREE_VERSION)


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _inventory(rng: random.Random, total: int) -> dict[str, Any]:
    max_unit = rng.choice([total, rng.randint(1, total)])
    return {"total": total, "reserved": rng.choice([0, 0, 1]) if total > 1 else 0,
            "min_unit": rng.choice([1, 1, 2]) if max_unit > 1 else 1, "max_unit": max_unit,
            "step_size": rng.choice([1, 1, 1, 2]), "allocation_ratio": rng.choice([1.0, 1.0, 1.5, 2.0])}


def make_world(rng: random.Random) -> list[Provider]:
    out: list[Provider] = []

    def provider(parent: str | None, classes: list[str]) -> Provider:
        found = Provider(_uuid(rng), f"rp-{len(out)}-{rng.getrandbits(32)}", parent)
        for rc in classes:
            found.inventories[rc] = _inventory(rng, rng.randint(1, 8))
        found.traits = sorted(t for t in TRAITS if rng.random() < 0.35)
        out.append(found)
        return found

    for _ in range(rng.randint(1, 4)):
        root = provider(None, [c for c in GROUP_CLASSES if rng.random() < 0.25])
        root.inventories.update({"VCPU": {"total": rng.randint(2, 16), "allocation_ratio": rng.choice([1.0, 4.0])},
                                 "MEMORY_MB": {"total": rng.choice([1024, 4096, 8192]), "step_size": 256,
                                               "reserved": rng.choice([0, 512])},
                                 "DISK_GB": {"total": rng.randint(4, 100)}})
        for _ in range(rng.randint(1, 4)):
            classes = [c for c in GROUP_CLASSES if rng.random() < 0.5] + ([CHILD_ONLY] if rng.random() < 0.25 else [])
            child = provider(root.uuid, classes or [rng.choice(GROUP_CLASSES)])
            if rng.random() < 0.2:
                provider(child.uuid, [rng.choice(GROUP_CLASSES)])
    return out


def make_consumers(rng: random.Random, world: list[Provider]) -> list[Consumer]:
    """Allocations that use part of the world: one class of one provider each, a valid amount that may not fit."""
    out = []
    for p in world:
        for rc, inv in p.inventories.items():
            if rc in ROOT_CLASSES or rng.random() > 0.4:
                continue
            step = inv.get("step_size", 1)
            amount = max(inv.get("min_unit", 1), step * rng.randint(1, 2))
            amount += -amount % step
            if amount <= inv.get("max_unit", inv["total"]):
                out.append(Consumer(_uuid(rng), {p.uuid: {rc: amount}}))
    return out


def make_flavor(rng: random.Random, world: list[Provider]) -> dict[str, Any]:
    """A flavor (Gantt's request, as the Nova seam translates it) and the Placement query Nova makes of it."""
    extra: dict[str, str] = {}
    groups: dict[str, dict[str, int]] = {}
    suffixes = rng.choice([["1", "2", "3"], ["_A", "_B", "_C"]])[:rng.choice([1, 1, 1, 2, 2, 3])]
    for suffix in suffixes:
        classes = rng.sample(GROUP_CLASSES, rng.choice([1, 1, 1, 2]))
        if rng.random() < 0.1:
            classes.append(rng.choice(ROOT_CLASSES))
        groups[suffix] = {rc: rng.choice([1, 1, 2]) if rc != "MEMORY_MB" else 256 for rc in classes}
        for rc, n in groups[suffix].items():
            extra[f"resources{suffix}:{rc}"] = str(n)
        for trait in rng.sample(TRAITS, rng.choice([0, 0, 0, 1, 2])):
            extra[f"trait{suffix}:{trait}"] = rng.choice(["required", "required", "forbidden"])
    same_subtree = sorted(rng.sample(suffixes, 2)) if len(suffixes) > 1 and rng.random() < 0.35 else None
    if same_subtree and rng.random() < 0.3:  # a group of traits alone: named by same_subtree (Placement 1.36)
        bare = same_subtree[0]
        for rc in groups.pop(bare):
            del extra[f"resources{bare}:{rc}"]
        if not any(k.startswith(f"trait{bare}:") for k in extra):
            extra[f"trait{bare}:{rng.choice(TRAITS)}"] = "required"
    flavor = {"vcpus": rng.randint(1, 2), "memory_mb": rng.choice([256, 512]), "root_gb": rng.randint(0, 2)}
    named = {rc for g in groups.values() for rc in g}
    unnumbered = {rc: n for rc, n in (("VCPU", flavor["vcpus"]), ("MEMORY_MB", flavor["memory_mb"]),
                                      ("DISK_GB", flavor["root_gb"])) if rc not in named and n}
    if rng.random() < 0.2:
        extra[f"resources:{CHILD_ONLY}"] = "1"
        unnumbered[CHILD_ONLY] = 1
    root_traits: dict[str, str] = {}
    for trait in rng.sample(TRAITS, rng.choice([0, 0, 1])):
        root_traits[trait] = rng.choice(["required", "forbidden"])
        extra[f"trait:{trait}"] = root_traits[trait]
    if len(suffixes) > 1 or rng.random() < 0.5:  # Placement refuses several numbered groups without a policy
        extra["group_policy"] = rng.choice(["none", "isolate"])
    params = [("resources", ",".join(f"{rc}:{n}" for rc, n in sorted(unnumbered.items())))]
    if root_traits:
        params.append(("required", ",".join(("!" if v == "forbidden" else "") + t
                                             for t, v in sorted(root_traits.items()))))
    for suffix in suffixes:
        if suffix in groups:
            params.append((f"resources{suffix}", ",".join(f"{rc}:{n}" for rc, n in sorted(groups[suffix].items()))))
        traits = [("!" if extra[k] == "forbidden" else "") + k.partition(":")[2]
                  for k in sorted(extra) if k.startswith(f"trait{suffix}:")]
        if traits:
            params.append((f"required{suffix}", ",".join(traits)))
    if "group_policy" in extra:
        params.append(("group_policy", extra["group_policy"]))
    spec: dict[str, Any] = {"flavor": {**flavor, "extra_specs": extra}}
    if same_subtree:
        params.append(("same_subtree", ",".join(same_subtree)))
        spec["same_subtree"] = [same_subtree]
    return {"spec": spec, "params": params}


def gantt_world(world: list[Provider], consumers: list[Consumer], placed: list[int]) -> tuple[Replica, Placement]:
    replica = Replica.open("memory://", Config.from_dict({"gantt": {"seed": 1},
                                                          "DEFAULT": {"service_down_time": 86400}}))
    face = Placement(replica)
    for name in [*TRAITS, *(c for c in [*GROUP_CLASSES, CHILD_ONLY] if c.startswith("CUSTOM_"))]:
        face.put_record("trait" if name in TRAITS else "resource_class", name)
    for p in world:
        face.create_provider(p.name, p.uuid, parent=p.parent)
        inventories = {rc: Inventory(**inv) for rc, inv in p.inventories.items()}
        face.set_inventories(p.uuid, face.provider(p.uuid).generation, inventories, reserved_may_equal_total=True)
        face.set_provider_traits(p.uuid, face.provider(p.uuid).generation, list(p.traits))
    for consumer, status in zip(consumers, placed, strict=True):
        if status == 204:
            face.consumers.write_allocations([ConsumerWrite(consumer.uuid, consumer.allocations, "p", "u")])
    return replica, face


def roots_of(world: list[Provider]) -> dict[str, str]:
    parent = {p.uuid: p.parent for p in world}

    def root(u: str) -> str:
        while parent[u] is not None:
            u = parent[u]  # type: ignore[assignment]  # the loop stops at a root, whose parent is None
        return u

    return {p.uuid: root(p.uuid) for p in world}


def claimed_request(chosen: Any) -> str:
    """The Selection Gantt answers as the allocation request Nova's conductor reads (gantt.nova.translate)."""
    allocations = {chosen.uuid: {"resources": dict(chosen.allocation)}}
    allocations.update({u: {"resources": dict(r)} for u, r in chosen.providers.items()})
    mappings = {k: sorted(v) for k, v in chosen.mappings.items()}
    mappings[""] = sorted({chosen.uuid, *mappings.get("", [])})
    return json.dumps({"a": allocations, "m": mappings}, sort_keys=True)


@pytest.fixture(scope="module")
def placement() -> Iterator[httpx.Client]:
    headers = {"x-auth-token": "admin", "openstack-api-version": "placement latest"}
    with RealPlacement() as real, httpx.Client(base_url=real.url, headers=headers, timeout=30) as http:
        for name in [*TRAITS, *(c for c in [*GROUP_CLASSES, CHILD_ONLY] if c.startswith("CUSTOM_"))]:
            kind = "traits" if name in TRAITS else "resource_classes"
            assert http.put(f"/{kind}/{name}").status_code in (201, 204)
        yield http


def test_request_groups_agree_with_placement_per_node(placement: httpx.Client) -> None:
    rng = random.Random(SEED)
    compared = nodes = agreed_some = claimed = refused = 0
    for w in range(WORLDS):
        world = make_world(rng)
        consumers = make_consumers(rng, world)
        write_world(placement, world)
        placed = allocate(placement, consumers)
        replica, _ = gantt_world(world, consumers, placed)
        root = roots_of(world)
        try:
            for f in range(FLAVORS):
                case = make_flavor(rng, world)
                where = (f"seed {SEED} world {w} flavor {f}: {json.dumps(case)}\n"
                         f"world: {json.dumps([p.__dict__ for p in world])}\nallocations: "
                         f"{json.dumps([c.__dict__ for c, s in zip(consumers, placed, strict=True) if s == 204])}")
                answer = placement.get("/allocation_candidates", params=case["params"],
                                       headers={"openstack-api-version": f"placement {VERSION}"})
                assert answer.status_code == 200, f"{where}\n{answer.text}"
                theirs = canonical(answer.json())[0]
                want = {root[next(iter(json.loads(r)["a"]))] for r in theirs}
                have = {c.uuid for c in replica.candidates(case["spec"])}
                assert have == want, f"{where}\nPlacement's nodes {sorted(want)}, Gantt's {sorted(have)}"
                compared += 1
                nodes += len(have)
                agreed_some += bool(have)
                consumer = _uuid(rng)
                try:
                    [[chosen, *_]] = replica.select_destinations({**case["spec"], "instance_uuids": [consumer]})
                except NoValidHost:
                    assert not want, where
                    refused += 1
                    continue
                assert claimed_request(chosen) in theirs, f"{where}\nGantt claimed {claimed_request(chosen)}\n" \
                    f"Placement's candidates: {theirs}"
                claimed += 1
                replica.release(consumer)
        finally:
            replica.close()
            clear_world(placement, world, [c for c, s in zip(consumers, placed, strict=True) if s == 204])
    assert compared == WORLDS * FLAVORS
    assert agreed_some > compared // 4 and refused > compared // 10, (agreed_some, refused, compared)
    assert claimed == agreed_some and nodes > agreed_some, (claimed, nodes)
