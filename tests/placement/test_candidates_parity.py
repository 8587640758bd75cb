"""GET /allocation_candidates, Gantt against Placement 16.0.0 itself. Generated provider worlds (trees, sharing
providers, aggregates, traits, inventories with reserved/min/max/step/ratio, allocations using part of them, some
of which do not fit and must be refused by both alike) are written to both over HTTP with the same calls; then
generated queries (numbered and unnumbered groups, required/forbidden traits, member_of, in_tree, group_policy,
root_required, same_subtree, old microversions) must get the same answer from both: the same status, the same set
of allocation requests and mappings, the same provider summaries (capacity and usage).

``GANTT_PARITY_SEED`` picks the seed; a mismatch prints the world and the query that tell them apart.
"""

from __future__ import annotations

import json
import os
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.placement.real_placement import RealPlacement
from tests.service.server import ServerProcess

SEED = int(os.environ.get("GANTT_PARITY_SEED", "20261124"))
WORLDS = int(os.environ.get("GANTT_PARITY_WORLDS", "24"))
QUERIES = 16
TRAITS = ["CUSTOM_A", "CUSTOM_B", "CUSTOM_C", "HW_CPU_X86_AVX2"]
CLASSES = ["VCPU", "MEMORY_MB", "DISK_GB", "SRIOV_NET_VF", "CUSTOM_GPU"]
SHARING = "MISC_SHARES_VIA_AGGREGATE"
VERSIONS = ["1.10", "1.12", "1.17", "1.21", "1.25", "1.28", "1.29", "1.31", "1.33", "1.35", "1.36", "1.39"]


@dataclass
class Consumer:
    uuid: str
    allocations: dict[str, dict[str, int]]  # provider uuid -> class -> amount


@dataclass
class Provider:
    uuid: str
    name: str
    parent: str | None
    inventories: dict[str, dict[str, Any]] = field(default_factory=dict)
    traits: list[str] = field(default_factory=list)
    aggregates: list[str] = field(default_factory=list)


def make_world(rng: random.Random) -> list[Provider]:
    out: list[Provider] = []

    def provider(parent: str | None) -> Provider:
        found = Provider(str(uuid.UUID(int=rng.getrandbits(128))), f"rp-{len(out)}-{rng.getrandbits(32)}", parent)
        for rc in CLASSES:
            if rng.random() < 0.45:
                total = rng.randint(1, 12)
                max_unit = rng.choice([total, rng.randint(1, total)])
                found.inventories[rc] = {"total": total, "reserved": rng.choice([0, 0, 1]) if total > 1 else 0,
                                         "min_unit": rng.choice([1, 1, 2]) if max_unit > 1 else 1,
                                         "max_unit": max_unit, "step_size": rng.choice([1, 1, 2]),
                                         "allocation_ratio": rng.choice([1.0, 1.0, 1.5, 2.0])}
        found.traits = sorted(t for t in TRAITS if rng.random() < 0.3)
        out.append(found)
        return found

    aggregates = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(3)]
    for _ in range(rng.randint(1, 4)):
        root = provider(None)
        root.aggregates = sorted(a for a in aggregates if rng.random() < 0.4)
        for _ in range(rng.choice([0, 0, 1, 2, 3])):
            child = provider(root.uuid)
            for _ in range(rng.choice([0, 0, 1, 2])):
                provider(child.uuid)
    for _ in range(rng.choice([0, 1, 1, 2])):
        shared = provider(None)
        shared.traits = sorted({*shared.traits, SHARING})
        shared.aggregates = sorted(a for a in aggregates if rng.random() < 0.6)
        if not shared.inventories:
            shared.inventories["DISK_GB"] = {"total": rng.randint(4, 40)}
    return out


def make_consumers(rng: random.Random, world: list[Provider]) -> list[Consumer]:
    """Allocations that use up part of the world (some will not fit: both must refuse those alike)."""
    out = []
    holders = [p for p in world if p.inventories]
    for _ in range(rng.randint(0, 2 * len(holders))):
        parts: dict[str, dict[str, int]] = {}
        for p in rng.sample(holders, rng.randint(1, min(2, len(holders)))):
            rc = rng.choice(sorted(p.inventories))
            inv = p.inventories[rc]
            step = inv.get("step_size", 1)
            parts[p.uuid] = {rc: max(inv.get("min_unit", 1), step * rng.randint(1, 3))}
        out.append(Consumer(str(uuid.UUID(int=rng.getrandbits(128))), parts))
    return out


def make_query(rng: random.Random, world: list[Provider]) -> tuple[str, list[tuple[str, str]]]:
    version = rng.choice(VERSIONS)
    minor = int(version.split(".")[1])
    params: list[tuple[str, str]] = []
    aggregates = sorted({a for p in world for a in p.aggregates}) or [str(uuid.uuid4())]

    def resources(n: int) -> str:
        return ",".join(f"{rc}:{rng.randint(1, 4)}" for rc in rng.sample(CLASSES, n))

    def required() -> str:
        names = rng.sample(TRAITS, rng.randint(1, 2))
        if minor >= 22 and rng.random() < 0.4:
            names[0] = "!" + names[0]
        if minor >= 39 and rng.random() < 0.3:
            return "in:" + ",".join(n.lstrip("!") for n in names)
        return ",".join(names)

    def member_of() -> str:
        picked = rng.sample(aggregates, rng.randint(1, min(2, len(aggregates))))
        if len(picked) > 1:
            return "in:" + ",".join(picked)
        return ("!" if minor >= 32 and rng.random() < 0.3 else "") + picked[0]

    params.append(("resources", resources(rng.randint(1, 3))))
    if minor >= 17 and rng.random() < 0.35:
        params.append(("required", required()))
    if minor >= 21 and rng.random() < 0.3:
        params.append(("member_of", member_of()))
    if minor >= 31 and rng.random() < 0.2:
        params.append(("in_tree", rng.choice(world).uuid))
    suffixes: list[str] = []
    if minor >= 25:
        for i in range(rng.choice([0, 0, 1, 2])):
            suffix = (rng.choice(["_NET", "_ACCEL", "x"]) + str(i)) if minor >= 33 else str(i + 1)
            suffixes.append(suffix)
            resourceless = minor >= 36 and rng.random() < 0.15  # must then be named in same_subtree
            if not resourceless:
                params.append((f"resources{suffix}", resources(rng.choice([1, 1, 2]))))
            if resourceless or rng.random() < 0.3:
                params.append((f"required{suffix}", required()))
            if rng.random() < 0.2:
                params.append((f"member_of{suffix}", member_of()))
            if minor >= 31 and rng.random() < 0.15:
                params.append((f"in_tree{suffix}", rng.choice(world).uuid))
        classes = [rc.split(":")[0] for k, v in params if k.startswith("resources") for rc in v.split(",")]
        if len(classes) != len(set(classes)):
            # Placement 16 adds up one class asked by several groups in place, in objects its candidates share,
            # unless group_policy=none: amounts then grow from one candidate to the next (2, 6, 10, 14 ...).
            # Only the policy that does not corrupt its answer can be compared.
            params.append(("group_policy", "none"))
        elif len(suffixes) > 1 or (suffixes and rng.random() < 0.5):
            params.append(("group_policy", rng.choice(["none", "isolate"])))
        if minor >= 35 and rng.random() < 0.25:
            params.append(("root_required", rng.choice(TRAITS) if rng.random() < 0.6 else "!" + rng.choice(TRAITS)))
        if minor >= 36 and len(suffixes) > 1 and rng.random() < 0.5:
            params.append(("same_subtree", ",".join(suffixes)))
    if rng.random() < 0.1:
        params.append(("resources", "VCPU:0"))  # refused by both
    return version, params


def canonical(body: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    requests = []
    for request in body["allocation_requests"]:
        allocations = request["allocations"]
        if isinstance(allocations, list):
            allocations = {a["resource_provider"]["uuid"]: {"resources": a["resources"]} for a in allocations}
        mappings = {k: sorted(v) for k, v in request.get("mappings", {}).items()}
        requests.append(json.dumps({"a": allocations, "m": mappings}, sort_keys=True))
    summaries = {u: {**s, "traits": sorted(s["traits"])} if "traits" in s else s
                 for u, s in body["provider_summaries"].items()}
    return sorted(requests), summaries


def check_known_divergence(want: tuple[list[str], dict[str, Any]], have: tuple[list[str], dict[str, Any]],
                           sharing: set[str], where: str) -> None:
    """Placement 16 keeps one anchor per identical set of parts in the unnumbered group's tree search (its
    AllocationRequest equality ignores the anchor), so where a sharing provider could serve that group for
    several trees and other groups follow, it drops valid candidates at random. Gantt keeps them: its answer holds
    every one of Placement's, and each extra one takes the unnumbered group from sharing providers only."""
    assert set(want[0]) <= set(have[0]), f"{where}\nPlacement has candidates Gantt lacks:\n" \
        f"{sorted(set(want[0]) - set(have[0]))}"
    for extra in set(have[0]) - set(want[0]):
        mappings = json.loads(extra)["m"]
        if mappings:
            assert set(mappings.get("", ())) <= sharing, f"{where}\nan extra candidate not explained: {extra}"
    for uuid_, summary in want[1].items():
        assert have[1].get(uuid_) == summary, f"{where}\nsummary of {uuid_} differs"


def write_world(http: httpx.Client, world: list[Provider]) -> None:
    for rc in CLASSES:
        if rc.startswith("CUSTOM_"):
            assert http.put(f"/resource_classes/{rc}").status_code in (201, 204)
    for trait in TRAITS:
        if trait.startswith("CUSTOM_"):
            assert http.put(f"/traits/{trait}").status_code in (201, 204)
    for p in world:
        body: dict[str, Any] = {"uuid": p.uuid, "name": p.name}
        if p.parent:
            body["parent_provider_uuid"] = p.parent
        answer = http.post("/resource_providers", json=body)
        assert answer.status_code == 200, answer.text
        generation = answer.json()["generation"]
        base = f"/resource_providers/{p.uuid}"
        for path, payload in (("/inventories", {"inventories": p.inventories}), ("/traits", {"traits": p.traits}),
                              ("/aggregates", {"aggregates": p.aggregates})):
            answer = http.put(base + path, json={"resource_provider_generation": generation, **payload})
            assert answer.status_code == 200, (path, answer.text)
            generation = answer.json()["resource_provider_generation"]


def allocate(http: httpx.Client, consumers: list[Consumer]) -> list[int]:
    statuses = []
    for c in consumers:
        body = {"allocations": {rp: {"resources": r} for rp, r in c.allocations.items()},
                "project_id": "p", "user_id": "u", "consumer_generation": None, "consumer_type": "INSTANCE"}
        statuses.append(http.put(f"/allocations/{c.uuid}", json=body).status_code)
    return statuses


def clear_world(http: httpx.Client, world: list[Provider], consumers: list[Consumer]) -> None:
    for c in consumers:
        assert http.delete(f"/allocations/{c.uuid}").status_code in (204, 404)
    for p in reversed(world):  # children were created after their parents
        answer = http.delete(f"/resource_providers/{p.uuid}")
        assert answer.status_code == 204, answer.text


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    headers = {"x-auth-token": "admin", "openstack-api-version": "placement latest"}
    with RealPlacement() as real, ServerProcess("memory://", config={"DEFAULT": {"service_down_time": 86400}},
                                                workdir=tmp_path_factory.mktemp("ac")) as gantt, \
            httpx.Client(base_url=real.url, headers=headers, timeout=30) as theirs, \
            httpx.Client(base_url=gantt.url + "/placement", headers=headers, timeout=30) as ours:
        yield theirs, ours


def test_allocation_candidates_agree_with_placement(both: tuple[httpx.Client, httpx.Client]) -> None:
    theirs, ours = both
    rng = random.Random(SEED)
    compared = answered = landed = refused = 0
    for w in range(WORLDS):
        world = make_world(rng)
        consumers = make_consumers(rng, world)
        write_world(theirs, world)
        write_world(ours, world)
        placed = allocate(theirs, consumers)
        assert allocate(ours, consumers) == placed, f"seed {SEED} world {w}: allocations landed differently"
        landed += placed.count(204)
        refused += sum(1 for status in placed if status != 204)
        try:
            for _ in range(QUERIES):
                version, params = make_query(rng, world)
                headers = {"openstack-api-version": f"placement {version}"}
                expected = theirs.get("/allocation_candidates", params=params, headers=headers)
                got = ours.get("/allocation_candidates", params=params, headers=headers)
                where = (f"seed {SEED} world {w}, placement {version}, query {params}\n"
                         f"world: {json.dumps([p.__dict__ for p in world])}")
                assert got.status_code == expected.status_code, f"{where}\n{expected.text}\n{got.text}"
                compared += 1
                if expected.status_code == 200:
                    want, have = canonical(expected.json()), canonical(got.json())
                    sharing = {p.uuid for p in world if SHARING in p.traits}
                    if sharing and sum(1 for k, _ in params if k.startswith("resources")) > 1:
                        check_known_divergence(want, have, sharing, where)
                    else:
                        assert have[0] == want[0], f"{where}\nallocation requests differ:\n{want[0]}\n{have[0]}"
                        assert have[1] == want[1], f"{where}\nprovider summaries differ:\n{want[1]}\n{have[1]}"
                    answered += bool(want[0])
        finally:
            clear_world(theirs, world, consumers)
            clear_world(ours, world, consumers)
    assert compared == WORLDS * QUERIES
    assert answered > compared // 5, "too few queries had candidates to compare: widen the generator"
    assert landed > WORLDS and refused > 0, (landed, refused)  # usage mattered, and refusals were compared
