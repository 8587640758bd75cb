"""Placement's allocations and usages on a real server (memory, SQLite, etcd): one consumer across providers, the
microversion forms, capacity and generation refusals, usages, and /v1 claims seeing Placement allocations."""

from __future__ import annotations

import httpx

from tests.placement.test_api import create, new_uuid, put_inventory

PROJECT, USER = "proj-a", "user-a"


def v(version: str) -> dict[str, str]:
    return {"openstack-api-version": f"placement {version}"}


def provider(http: httpx.Client, **classes: int) -> str:
    rp = create(http)["uuid"]
    assert put_inventory(http, rp, 0, **classes).status_code == 200
    return rp


def put(http: httpx.Client, consumer: str, allocations: dict, generation: int | None = None,
        **extra: object) -> httpx.Response:
    body = {"allocations": {rp: {"resources": r} for rp, r in allocations.items()}, "project_id": PROJECT,
            "user_id": USER, "consumer_generation": generation, "consumer_type": "INSTANCE", **extra}
    return http.put(f"/allocations/{consumer}", json=body)


def test_a_consumer_spans_two_providers_and_round_trips(http: httpx.Client) -> None:
    compute = provider(http, VCPU=8, MEMORY_MB=4096)
    pool = provider(http, DISK_GB=500)
    consumer = new_uuid()
    answer = put(http, consumer, {compute: {"VCPU": 2, "MEMORY_MB": 1024}, pool: {"DISK_GB": 100}})
    assert answer.status_code == 204, answer.text
    shown = http.get(f"/allocations/{consumer}").json()
    assert shown["allocations"] == {compute: {"generation": 2, "resources": {"VCPU": 2, "MEMORY_MB": 1024}},
                                    pool: {"generation": 2, "resources": {"DISK_GB": 100}}}
    assert (shown["project_id"], shown["user_id"], shown["consumer_generation"], shown["consumer_type"]) == \
        (PROJECT, USER, 1, "INSTANCE")
    on_pool = http.get(f"/resource_providers/{pool}/allocations").json()
    assert on_pool == {"resource_provider_generation": 2,
                       "allocations": {consumer: {"resources": {"DISK_GB": 100}, "consumer_generation": 1}}}
    assert http.get(f"/resource_providers/{pool}/usages").json() == {"resource_provider_generation": 2,
                                                                     "usages": {"DISK_GB": 100}}
    # replaced with the generation it has: the pool's part goes, the compute node's changes
    assert put(http, consumer, {compute: {"VCPU": 4}}, generation=1).status_code == 204
    assert http.get(f"/resource_providers/{pool}/usages").json()["usages"] == {"DISK_GB": 0}
    assert http.get(f"/resource_providers/{compute}/usages").json()["usages"] == {"VCPU": 4, "MEMORY_MB": 0}
    # a provider with allocations cannot go; once they are deleted it can
    refused = http.delete(f"/resource_providers/{compute}")
    assert refused.status_code == 409 and refused.json()["errors"][0]["code"] == \
        "placement.resource_provider.inuse"
    assert http.delete(f"/allocations/{consumer}").status_code == 204
    assert http.get(f"/allocations/{consumer}").json() == {"allocations": {}}
    assert http.delete(f"/allocations/{consumer}").status_code == 404
    assert http.delete(f"/resource_providers/{compute}").status_code == 204


def test_microversion_forms(http: httpx.Client) -> None:
    rp = provider(http, VCPU=8)
    consumer = new_uuid()
    old = {"allocations": [{"resource_provider": {"uuid": rp}, "resources": {"VCPU": 1}}]}
    assert http.put(f"/allocations/{consumer}", json=old, headers=v("1.0")).status_code == 204
    held = http.get(f"/allocations/{consumer}", headers=v("1.0")).json()
    assert held == {"allocations": {rp: {"generation": 2, "resources": {"VCPU": 1}}}}  # no project before 1.12
    assert http.get(f"/allocations/{consumer}", headers=v("1.12")).json()["project_id"] == \
        "00000000-0000-0000-0000-000000000000"
    # 1.8 requires project and user; 1.12 takes the dict form only
    refused = http.put(f"/allocations/{consumer}", json=old, headers=v("1.8"))
    assert refused.status_code == 400 and "'project_id' is a required property" in refused.text
    listed = {**old, "project_id": PROJECT, "user_id": USER}
    assert http.put(f"/allocations/{consumer}", json=listed, headers=v("1.8")).status_code == 204
    assert http.put(f"/allocations/{consumer}", json=listed, headers=v("1.12")).status_code == 400
    as_dict = {"allocations": {rp: {"resources": {"VCPU": 2}}}, "project_id": PROJECT, "user_id": USER}
    assert http.put(f"/allocations/{consumer}", json=as_dict, headers=v("1.12")).status_code == 204
    assert http.get(f"/allocations/{consumer}").json()["consumer_type"] == "unknown"  # written without one
    # 1.28 requires the consumer generation; 1.38 the consumer type
    refused = http.put(f"/allocations/{consumer}", json=as_dict, headers=v("1.28"))
    assert refused.status_code == 400 and "'consumer_generation' is a required property" in refused.text
    generation = http.get(f"/allocations/{consumer}", headers=v("1.28")).json()["consumer_generation"]
    assert http.put(f"/allocations/{consumer}", json={**as_dict, "consumer_generation": generation},
                    headers=v("1.28")).status_code == 204
    assert http.put(f"/allocations/{consumer}", json={**as_dict, "consumer_generation": generation + 1},
                    headers=v("1.38")).status_code == 400  # no consumer_type
    # an empty dict drops them all from 1.28, and is refused before
    assert http.put(f"/allocations/{consumer}", json={**as_dict, "allocations": {}},
                    headers=v("1.12")).status_code == 400
    assert http.put(f"/allocations/{consumer}", json={**as_dict, "allocations": {},
                                                      "consumer_generation": generation + 1},
                    headers=v("1.28")).status_code == 204
    assert http.get(f"/allocations/{consumer}").json() == {"allocations": {}}
    assert http.put("/allocations/not-a-uuid", json=as_dict, headers=v("1.12")).status_code == 400


def test_consumer_generation_conflicts(http: httpx.Client) -> None:
    rp = provider(http, VCPU=8)
    consumer = new_uuid()
    assert put(http, consumer, {rp: {"VCPU": 1}}).status_code == 204
    for stale, said in ((None, "expected 1 but got null"), (0, "expected 1 but got 0")):
        refused = put(http, consumer, {rp: {"VCPU": 2}}, generation=stale)
        assert refused.status_code == 409, refused.text
        error = refused.json()["errors"][0]
        assert error["code"] == "placement.concurrent_update" and said in error["detail"]
    fresh = put(http, new_uuid(), {rp: {"VCPU": 1}}, generation=3)
    assert fresh.status_code == 409 and "expected null but got 3" in fresh.text
    assert http.get(f"/allocations/{consumer}").json()["allocations"][rp]["resources"] == {"VCPU": 1}


def test_capacity_and_unit_refusals(http: httpx.Client) -> None:
    rp = create(http)["uuid"]
    body = {"resource_provider_generation": 0,
            "inventories": {"VCPU": {"total": 4, "reserved": 1, "allocation_ratio": 2.0, "max_unit": 4},
                            "DISK_GB": {"total": 100, "step_size": 10}}}
    assert http.put(f"/resource_providers/{rp}/inventories", json=body).status_code == 200
    assert put(http, new_uuid(), {rp: {"VCPU": 4}}).status_code == 204
    over = put(http, new_uuid(), {rp: {"VCPU": 3}})  # (4 - 1) * 2 = 6 < 4 + 3
    assert over.status_code == 409 and "would exceed the capacity" in over.text
    unit = put(http, new_uuid(), {rp: {"DISK_GB": 15}})
    assert unit.status_code == 409 and "would violate inventory constraints" in unit.text
    missing = put(http, new_uuid(), {rp: {"MEMORY_MB": 1}})
    assert missing.status_code == 409 and f"Inventory for 'MEMORY_MB' on resource provider '{rp}' invalid" \
        in missing.text
    unknown = put(http, new_uuid(), {rp: {"CUSTOM_NOPE": 1}})
    assert unknown.status_code == 400 and "No such resource class CUSTOM_NOPE" in unknown.text
    nowhere = put(http, new_uuid(), {new_uuid(): {"VCPU": 1}})
    assert nowhere.status_code == 400 and "that does not exist" in nowhere.text
    assert http.get(f"/resource_providers/{rp}/usages").json()["usages"] == {"VCPU": 4, "DISK_GB": 0}


def test_post_writes_several_consumers_at_once(http: httpx.Client) -> None:
    rp = provider(http, VCPU=4)
    first, second = new_uuid(), new_uuid()
    one = {"allocations": {rp: {"resources": {"VCPU": 2}}}, "project_id": PROJECT, "user_id": USER,
           "consumer_generation": None, "consumer_type": "INSTANCE"}
    too_much = {first: one, second: {**one, "allocations": {rp: {"resources": {"VCPU": 3}}}}}
    refused = http.post("/allocations", json=too_much)
    assert refused.status_code == 409
    assert http.get(f"/allocations/{first}").json() == {"allocations": {}}  # all or nothing
    assert http.post("/allocations", json={first: one, second: one}).status_code == 204
    assert http.get(f"/resource_providers/{rp}/usages").json()["usages"] == {"VCPU": 4}
    # a move as Nova makes one: the instance's allocation handed to a migration consumer, in one request
    migration = new_uuid()
    moved = {first: {**one, "allocations": {}, "consumer_generation": 1},
             migration: {**one, "consumer_type": "MIGRATION"}}
    assert http.post("/allocations", json=moved).status_code == 204
    assert http.get(f"/allocations/{migration}").json()["consumer_type"] == "MIGRATION"
    assert http.post("/allocations", json={first: one}, headers=v("1.12")).status_code == 404


def test_usages_per_project_user_and_consumer_type(http: httpx.Client) -> None:
    rp = provider(http, VCPU=64, DISK_GB=1000)
    project = f"p-{new_uuid()}"
    for user, kind, vcpu in (("u1", "INSTANCE", 1), ("u1", "MIGRATION", 2), ("u2", "INSTANCE", 4)):
        body = {"allocations": {rp: {"resources": {"VCPU": vcpu, "DISK_GB": 10}}}, "project_id": project,
                "user_id": user, "consumer_generation": None, "consumer_type": kind}
        assert http.put(f"/allocations/{new_uuid()}", json=body).status_code == 204
    assert http.get(f"/usages?project_id={project}", headers=v("1.9")).json() == \
        {"usages": {"VCPU": 7, "DISK_GB": 30}}
    assert http.get(f"/usages?project_id={project}&user_id=u1", headers=v("1.9")).json() == \
        {"usages": {"VCPU": 3, "DISK_GB": 20}}
    grouped = http.get(f"/usages?project_id={project}").json()["usages"]
    assert grouped == {"INSTANCE": {"VCPU": 5, "DISK_GB": 20, "consumer_count": 2},
                       "MIGRATION": {"VCPU": 2, "DISK_GB": 10, "consumer_count": 1}}
    assert http.get(f"/usages?project_id={project}&consumer_type=all").json()["usages"] == \
        {"all": {"VCPU": 7, "DISK_GB": 30, "consumer_count": 3}}
    assert http.get("/usages").status_code == 400
    assert http.get(f"/usages?project_id={project}", headers=v("1.8")).status_code == 404


def test_a_v1_claim_and_a_placement_allocation_see_each_other(http: httpx.Client, v1: httpx.Client) -> None:
    node_uuid = new_uuid()
    host = f"cmp-{node_uuid[:8]}"
    assert v1.post("/v1/resource-stats", json={"name": host, "stats": {
        "uuid": node_uuid, "vcpus": 4, "memory_mb": 4096, "local_gb": 100, "cpu_allocation_ratio": 1.0,
        "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0}}).status_code == 200
    spec = {"resources": {"VCPU": 3}, "force_hosts": [host], "instance_uuids": [new_uuid()]}
    claimed = v1.post("/v1/select_destinations", json=spec)
    assert claimed.status_code == 200, claimed.text
    refused = put(http, new_uuid(), {node_uuid: {"VCPU": 2}})  # 3 of 4 held by the /v1 claim
    assert refused.status_code == 409 and "would exceed the capacity" in refused.text
    assert put(http, new_uuid(), {node_uuid: {"VCPU": 1}}).status_code == 204
    again = v1.post("/v1/select_destinations", json={**spec, "resources": {"VCPU": 1},
                                                     "instance_uuids": [new_uuid()]})
    assert again.status_code == 409, again.text  # the Placement allocation counts on /v1's side too


def test_inventory_under_allocations(http: httpx.Client) -> None:
    """As Placement: capacity may shrink below what is allocated (Placement logs the provider over capacity);
    then nothing more fits, but a write that leaves it less over does; a class in use cannot be removed."""
    rp = provider(http, VCPU=8)
    consumer = new_uuid()
    assert put(http, consumer, {rp: {"VCPU": 6}}).status_code == 204
    generation = http.get(f"/resource_providers/{rp}").json()["generation"]
    shrunk = http.put(f"/resource_providers/{rp}/inventories", json={
        "resource_provider_generation": generation, "inventories": {"VCPU": {"total": 4}}})
    assert shrunk.status_code == 200, shrunk.text
    assert put(http, new_uuid(), {rp: {"VCPU": 1}}).status_code == 409
    assert put(http, consumer, {rp: {"VCPU": 7}}, generation=1).status_code == 409  # further over: refused
    assert put(http, consumer, {rp: {"VCPU": 5}}, generation=1).status_code == 204  # less over: lands
    refused = http.delete(f"/resource_providers/{rp}/inventories/VCPU")
    # Placement 16 calls one class's removal a concurrent update (tests/placement/test_inventory_in_use.py)
    assert refused.status_code == 409 and refused.json()["errors"][0]["code"] == "placement.concurrent_update"
    assert http.get(f"/resource_providers/{rp}/usages").json()["usages"] == {"VCPU": 5}


def test_a_v1_claim_reads_as_a_consumer_placement_created(http: httpx.Client, v1: httpx.Client) -> None:
    """A scheduler claim (one store commit, never written through this face) is a consumer Placement's PUT with
    consumer_generation null would have left at generation 1: Nova reads it and writes it back with 1 (a move's
    swap, a resize's claim); 0 and null are Placement's concurrent-update conflict, and nothing changes."""
    node_uuid = new_uuid()
    host = f"cmp-{node_uuid[:8]}"
    assert v1.post("/v1/resource-stats", json={"name": host, "stats": {
        "uuid": node_uuid, "vcpus": 4, "memory_mb": 4096, "local_gb": 100, "cpu_allocation_ratio": 1.0,
        "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0}}).status_code == 200
    instance = new_uuid()
    claimed = v1.post("/v1/select_destinations", json={"resources": {"VCPU": 2}, "force_hosts": [host],
                                                       "instance_uuids": [instance]})
    assert claimed.status_code == 200, claimed.text
    assert http.get(f"/allocations/{instance}").json()["consumer_generation"] == 1
    on_node = http.get(f"/resource_providers/{node_uuid}/allocations").json()["allocations"]
    assert on_node[instance]["consumer_generation"] == 1
    for stale in (0, None):
        refused = put(http, instance, {node_uuid: {"VCPU": 3}}, generation=stale)
        assert refused.status_code == 409, refused.text
        assert refused.json()["errors"][0]["code"] == "placement.concurrent_update"
    assert http.get(f"/allocations/{instance}").json()["allocations"][node_uuid]["resources"] == {"VCPU": 2}
    assert put(http, instance, {node_uuid: {"VCPU": 3}}, generation=1).status_code == 204
    shown = http.get(f"/allocations/{instance}").json()
    assert shown["consumer_generation"] == 2 and shown["allocations"][node_uuid]["resources"] == {"VCPU": 3}
