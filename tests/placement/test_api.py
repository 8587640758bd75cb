"""The Placement face against a real server: versions, errors, providers, inventories, classes, traits,
aggregates, and that a provider is a node of Gantt's one model."""

from __future__ import annotations

import uuid

import httpx

from tests.service.server import ServerProcess


def new_uuid() -> str:
    return str(uuid.uuid4())


def create(http: httpx.Client, name: str | None = None, parent: str | None = None) -> dict:
    body: dict = {"name": name or f"rp-{new_uuid()}", "uuid": new_uuid()}
    if parent:
        body["parent_provider_uuid"] = parent
    answer = http.post("/resource_providers", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()


def put_inventory(http: httpx.Client, rp: str, generation: int, **classes: int) -> httpx.Response:
    return http.put(f"/resource_providers/{rp}/inventories",
                    json={"resource_provider_generation": generation,
                          "inventories": {rc: {"total": total} for rc, total in classes.items()}})


# ------------------------------------------------------------------------------------- versions, errors


def test_version_document_and_negotiation(http: httpx.Client) -> None:
    home = http.get("/", headers={"openstack-api-version": "placement 1.15"})
    assert home.status_code == 200
    [version] = home.json()["versions"]
    assert (version["min_version"], version["max_version"], version["status"]) == ("1.0", "1.39", "CURRENT")
    assert home.headers["openstack-api-version"] == "placement 1.15"
    assert home.headers["cache-control"] == "no-cache" and "last-modified" in home.headers
    old = http.get("/", headers={"openstack-api-version": "placement 1.14"})
    assert "last-modified" not in old.headers
    assert http.get("/", headers={"openstack-api-version": "placement latest"}).headers[
        "openstack-api-version"] == "placement 1.39"
    too_new = http.get("/", headers={"openstack-api-version": "placement 1.40"})
    assert too_new.status_code == 406
    assert too_new.json()["errors"][0]["max_version"] == "1.39"
    assert http.get("/", headers={"openstack-api-version": "placement 1.x"}).status_code == 400


def test_error_body_names_the_request_and_code_from_1_23(http: httpx.Client) -> None:
    missing = http.get(f"/resource_providers/{new_uuid()}")
    assert missing.status_code == 404
    [error] = missing.json()["errors"]
    assert error["request_id"] == missing.headers["x-openstack-request-id"]
    assert error["title"] == "Not Found" and error["code"] == "placement.undefined_code"
    old = http.get(f"/resource_providers/{new_uuid()}", headers={"openstack-api-version": "placement 1.22"})
    assert "code" not in old.json()["errors"][0]
    wrong = http.delete("/resource_providers")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "GET, POST"


def test_a_token_is_required_but_the_version_document_is_open(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url + "/placement") as anonymous:
        assert anonymous.get("/").status_code == 200
        denied = anonymous.get("/resource_providers")
        assert denied.status_code == 401 and denied.json()["errors"][0]["status"] == 401


def test_gantt_token_is_placement_admin(tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    with ServerProcess("memory://", token="s3cret", workdir=tmp_path_factory.mktemp("tok")) as secured, \
            httpx.Client(base_url=secured.url + "/placement") as http:
        assert http.get("/resource_providers", headers={"x-auth-token": "s3cret"}).status_code == 200
        assert http.get("/resource_providers", headers={"x-auth-token": "guess"}).status_code == 401
        assert http.get("/").status_code == 200


# ------------------------------------------------------------------------------------------ providers


def test_provider_lifecycle(http: httpx.Client) -> None:
    rp = create(http, "compute-a")
    assert rp["generation"] == 0 and rp["root_provider_uuid"] == rp["uuid"] and rp["parent_provider_uuid"] is None
    shown = http.get(f"/resource_providers/{rp['uuid']}").json()
    assert shown["name"] == "compute-a"
    dup = http.post("/resource_providers", json={"name": "compute-a"})
    assert dup.status_code == 409 and dup.json()["errors"][0]["code"] == "placement.duplicate_name"
    renamed = http.put(f"/resource_providers/{rp['uuid']}", json={"name": "compute-b"})
    assert renamed.status_code == 200 and renamed.json()["name"] == "compute-b"
    assert renamed.json()["generation"] == 0  # a rename is not a change Placement counts
    assert http.delete(f"/resource_providers/{rp['uuid']}").status_code == 204
    assert http.get(f"/resource_providers/{rp['uuid']}").status_code == 404


def test_old_microversion_answers_201_without_body(http: httpx.Client) -> None:
    answer = http.post("/resource_providers", json={"name": f"rp-{new_uuid()}"},
                       headers={"openstack-api-version": "placement 1.19"})
    assert answer.status_code == 201 and answer.content == b""
    assert "/placement/resource_providers/" in answer.headers["location"]


def test_trees_parents_and_in_tree(http: httpx.Client) -> None:
    root = create(http)
    numa = create(http, parent=root["uuid"])
    pf = create(http, parent=numa["uuid"])
    assert pf["root_provider_uuid"] == root["uuid"] and pf["parent_provider_uuid"] == numa["uuid"]
    tree = http.get("/resource_providers", params={"in_tree": pf["uuid"]}).json()["resource_providers"]
    assert {p["uuid"] for p in tree} == {root["uuid"], numa["uuid"], pf["uuid"]}
    parent_gone = http.delete(f"/resource_providers/{root['uuid']}")
    assert parent_gone.status_code == 409
    assert parent_gone.json()["errors"][0]["code"] == "placement.resource_provider.cannot_delete_parent"
    loop = http.put(f"/resource_providers/{root['uuid']}", json={"name": root["name"],
                                                                 "parent_provider_uuid": pf["uuid"]})
    assert loop.status_code == 400
    other = create(http)
    # before 1.37 a child keeps its parent; from 1.37 it moves, and its descendants' root with it
    old = http.put(f"/resource_providers/{numa['uuid']}", json={"name": numa["name"], "parent_provider_uuid":
                                                                 other["uuid"]},
                   headers={"openstack-api-version": "placement 1.36"})
    assert old.status_code == 400
    moved = http.put(f"/resource_providers/{numa['uuid']}", json={"name": numa["name"], "parent_provider_uuid":
                                                                   other["uuid"]})
    assert moved.status_code == 200 and moved.json()["root_provider_uuid"] == other["uuid"]
    assert http.get(f"/resource_providers/{pf['uuid']}").json()["root_provider_uuid"] == other["uuid"]


def test_list_filters(http: httpx.Client) -> None:
    a, b = create(http), create(http)
    assert put_inventory(http, a["uuid"], 0, VCPU=8, MEMORY_MB=4096).status_code == 200
    assert put_inventory(http, b["uuid"], 0, VCPU=2).status_code == 200
    by_name = http.get("/resource_providers", params={"name": a["name"]}).json()["resource_providers"]
    assert [p["uuid"] for p in by_name] == [a["uuid"]]
    fits = http.get("/resource_providers", params={"resources": "VCPU:4,MEMORY_MB:1024"}).json()
    assert a["uuid"] in {p["uuid"] for p in fits["resource_providers"]}
    assert b["uuid"] not in {p["uuid"] for p in fits["resource_providers"]}
    bad = http.get("/resource_providers", params={"resources": "CUSTOM_NOPE:1"})
    assert bad.status_code == 400
    unknown = http.get("/resource_providers", params={"colour": "blue"})
    assert unknown.status_code == 400 and "colour" in unknown.json()["errors"][0]["detail"]
    too_old = http.get("/resource_providers", params={"in_tree": a["uuid"]},
                       headers={"openstack-api-version": "placement 1.13"})
    assert too_old.status_code == 400


# ---------------------------------------------------------------------------------------- inventories


def test_inventories_and_generations(http: httpx.Client) -> None:
    rp = create(http)["uuid"]
    put = put_inventory(http, rp, 0, VCPU=16, DISK_GB=100)
    assert put.status_code == 200 and put.json()["resource_provider_generation"] == 1
    stale = put_inventory(http, rp, 0, VCPU=1)
    assert stale.status_code == 409 and stale.json()["errors"][0]["code"] == "placement.concurrent_update"
    one = http.get(f"/resource_providers/{rp}/inventories/VCPU").json()
    assert one["total"] == 16 and one["max_unit"] == 2**31 - 1 and one["resource_provider_generation"] == 1
    changed = http.put(f"/resource_providers/{rp}/inventories/VCPU",
                       json={"resource_provider_generation": 1, "total": 32, "reserved": 2})
    assert changed.status_code == 200 and changed.json()["total"] == 32
    posted = http.post(f"/resource_providers/{rp}/inventories", json={"resource_class": "MEMORY_MB", "total": 64})
    assert posted.status_code == 201 and posted.json()["resource_provider_generation"] == 3
    assert http.delete(f"/resource_providers/{rp}/inventories/DISK_GB").status_code == 204
    listed = http.get(f"/resource_providers/{rp}/inventories").json()
    assert set(listed["inventories"]) == {"VCPU", "MEMORY_MB"} and listed["resource_provider_generation"] == 4
    assert http.delete(f"/resource_providers/{rp}/inventories").status_code == 204
    assert http.get(f"/resource_providers/{rp}/inventories").json()["inventories"] == {}


def test_inventory_validation_changes_nothing(http: httpx.Client) -> None:
    rp = create(http)["uuid"]
    cases = [
        {"total": 0},  # below the minimum
        {"total": 10, "reserved": 10},  # no capacity before 1.26 (here: latest allows equal, so 11)
        {"total": 10, "reserved": 11},
        {"total": 10, "min_unit": 5, "max_unit": 4},
        {"total": 10, "colour": "red"},
    ]
    for inventory in cases:
        answer = http.put(f"/resource_providers/{rp}/inventories",
                          json={"resource_provider_generation": 0, "inventories": {"VCPU": inventory}},
                          headers={"openstack-api-version": "placement 1.25"})
        assert answer.status_code == 400, (inventory, answer.text)
    unknown = put_inventory(http, rp, 0, CUSTOM_NEVER_MADE=1)
    assert unknown.status_code == 400
    listed = http.get(f"/resource_providers/{rp}/inventories").json()
    assert listed == {"resource_provider_generation": 0, "inventories": {}}


# ------------------------------------------------------------------------------- classes and traits


def test_custom_resource_classes(http: httpx.Client) -> None:
    name = f"CUSTOM_GPU_{uuid.uuid4().hex[:8].upper()}"
    assert http.post("/resource_classes", json={"name": name}).status_code == 201
    assert http.post("/resource_classes", json={"name": name}).status_code == 409
    assert http.put(f"/resource_classes/{name}").status_code == 204
    assert http.post("/resource_classes", json={"name": "GPU"}).status_code == 400
    names = [c["name"] for c in http.get("/resource_classes").json()["resource_classes"]]
    assert "VCPU" in names and name in names
    rp = create(http)["uuid"]
    assert put_inventory(http, rp, 0, **{name: 2}).status_code == 200
    assert http.delete(f"/resource_classes/{name}").status_code == 409  # in use by an inventory
    assert http.delete("/resource_classes/VCPU").status_code == 400
    assert http.delete(f"/resource_providers/{rp}/inventories").status_code == 204
    assert http.delete(f"/resource_classes/{name}").status_code == 204
    assert http.get(f"/resource_classes/{name}").status_code == 404


def test_traits_and_provider_traits(http: httpx.Client) -> None:
    trait = f"CUSTOM_FAST_{uuid.uuid4().hex[:8].upper()}"
    assert http.put(f"/traits/{trait}").status_code == 201
    assert http.put(f"/traits/{trait}").status_code == 204
    assert http.get(f"/traits/{trait}").status_code == 204
    assert http.put("/traits/NOT_CUSTOM").status_code == 400
    assert trait in http.get("/traits", params={"name": "startswith:CUSTOM_FAST"}).json()["traits"]
    rp = create(http)["uuid"]
    set_ = http.put(f"/resource_providers/{rp}/traits",
                    json={"resource_provider_generation": 0, "traits": [trait, "HW_CPU_X86_AVX2"]})
    assert set_.status_code == 200 and set_.json()["resource_provider_generation"] == 1
    assert http.put(f"/resource_providers/{rp}/traits",
                    json={"resource_provider_generation": 1, "traits": ["CUSTOM_NEVER_MADE"]}).status_code == 400
    found = http.get("/resource_providers", params={"required": f"{trait},!HW_CPU_X86_SSE"}).json()
    assert [p["uuid"] for p in found["resource_providers"]] == [rp]
    assert trait in http.get("/traits", params={"associated": "true"}).json()["traits"]
    assert http.delete(f"/traits/{trait}").status_code == 409  # a provider has it
    assert http.delete(f"/resource_providers/{rp}/traits").status_code == 204
    assert http.delete(f"/traits/{trait}").status_code == 204


# --------------------------------------------------------------------------------- aggregates, one model


def test_provider_aggregates_are_gantt_aggregates(http: httpx.Client, v1: httpx.Client) -> None:
    rp = create(http)["uuid"]
    agg = new_uuid()
    put = http.put(f"/resource_providers/{rp}/aggregates",
                   json={"resource_provider_generation": 0, "aggregates": [agg]})
    assert put.status_code == 200 and put.json() == {"aggregates": [agg], "resource_provider_generation": 1}
    gantt = v1.get(f"/v1/aggregates/{agg}").json()
    assert gantt["uuid"] == agg and gantt["hosts"] == [rp]
    member = http.get("/resource_providers", params={"member_of": agg}).json()["resource_providers"]
    assert [p["uuid"] for p in member] == [rp]
    # before 1.19 the list is the whole body and the generation stays
    old = http.put(f"/resource_providers/{rp}/aggregates", json=[],
                   headers={"openstack-api-version": "placement 1.18"})
    assert old.status_code == 200 and old.json() == {"aggregates": []}
    assert http.get(f"/resource_providers/{rp}").json()["generation"] == 1
    assert v1.get(f"/v1/aggregates/{agg}").json().get("hosts", []) == []  # the aggregate stays, empty


def test_a_reported_host_is_a_root_provider(http: httpx.Client, v1: httpx.Client) -> None:
    node_uuid = new_uuid()
    host = f"cmp-{node_uuid[:8]}"
    assert v1.post("/v1/resource-stats", json={"name": host, "stats": {
        "uuid": node_uuid, "vcpus": 8, "memory_mb": 2048, "local_gb": 10, "hypervisor_hostname": host}}
    ).status_code == 200
    shown = http.get(f"/resource_providers/{node_uuid}").json()
    assert shown["name"] == host and shown["root_provider_uuid"] == node_uuid and shown["generation"] == 0
    inventories = http.get(f"/resource_providers/{node_uuid}/inventories").json()["inventories"]
    assert inventories["VCPU"]["total"] == 8 and inventories["MEMORY_MB"]["total"] == 2048
    # a Placement write on it is a write of the same node: /v1 sees it
    assert put_inventory(http, node_uuid, 0, VCPU=4, CUSTOM_X=1).status_code == 400  # CUSTOM_X unknown
    assert put_inventory(http, node_uuid, 0, VCPU=4).status_code == 200
    seen = v1.get(f"/v1/hosts/{host}").json()
    assert set(seen["inventories"]) == {"VCPU"} and seen["inventories"]["VCPU"]["total"] == 4


def test_a_placement_provider_is_a_gantt_node(http: httpx.Client, v1: httpx.Client) -> None:
    rp = create(http, "placement-made")
    hosts = {h["uuid"]: h for h in v1.get("/v1/hosts").json()["hosts"]}
    assert hosts[rp["uuid"]]["hypervisor_hostname"] == "placement-made"


def test_a_child_is_never_a_candidate_but_lends_its_root_a_class_only_it_holds(http: httpx.Client,
                                                                             v1: httpx.Client) -> None:
    """As Placement's unnumbered group: a class only a child provider holds is taken whole from that child, under
    the root that is the candidate; a class the root holds is read at the root."""
    root = create(http)
    numa = create(http, parent=root["uuid"])
    assert put_inventory(http, numa["uuid"], 0, CUSTOM_TREE_ONLY=1).status_code == 400
    assert http.put("/resource_classes/CUSTOM_TREE_ONLY").status_code in (201, 204)
    assert put_inventory(http, numa["uuid"], 0, CUSTOM_TREE_ONLY=64).status_code == 200
    spec = {"resources": {"CUSTOM_TREE_ONLY": 1}}
    lent = v1.post("/v1/select_destinations", json=spec)
    assert lent.status_code == 200, lent.text
    chosen = lent.json()["selections"][0][0]
    assert chosen["uuid"] == root["uuid"]
    assert chosen["providers"] == {numa["uuid"]: {"CUSTOM_TREE_ONLY": 1}}
    assert put_inventory(http, root["uuid"], 0, CUSTOM_TREE_ONLY=1).status_code == 200
    placed = v1.post("/v1/select_destinations", json=spec)
    assert placed.status_code == 200, placed.text
    assert placed.json()["selections"][0][0]["uuid"] == root["uuid"]
    assert not placed.json()["selections"][0][0].get("providers")
