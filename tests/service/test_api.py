"""Every endpoint over real HTTP against a real ``gantt serve``, through the public client."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest

from gantt.client import AsyncSchedulerClient, SchedulerClient
from gantt.model import Aggregate, InvalidRequest, NotFound, NoValidHost
from gantt.service.routes import ROUTES
from tests.conftest import host_stats, request
from tests.service.conftest import MAX_BODY
from tests.service.server import ServerProcess


@pytest.fixture
def tag() -> str:
    """A prefix so tests sharing the session's server never see each other's hosts."""
    return uuid.uuid4().hex[:8]


def _flavor(vcpus: int = 1, **fields: object) -> dict[str, object]:
    return request(vcpus=vcpus, **fields)


def test_health_and_openapi(client: SchedulerClient) -> None:
    health = client.health()
    assert health.status == "ok" and health.pid > 0
    doc = client.openapi()
    assert doc["openapi"] == "3.1.0"
    documented = {(path, method.upper()) for path, ops in doc["paths"].items() for method in ops
                  if method != "parameters"}
    served = {(route.path, method) for route in ROUTES for method in route.methods or () if method != "HEAD"}
    # a compute namespace serves the default's /v1 routes under its prefix (tests/service/test_openapi_namespaces.py)
    served |= {(f"/v1/namespaces/{{namespace}}{path[3:]}", method) for path, method in served
               if path.startswith("/v1/")}
    assert served == documented
    assert "Problem" in doc["components"]["schemas"] and "RequestSpec" in doc["components"]["schemas"]
    conflict = doc["paths"]["/v1/select_destinations"]["post"]["responses"]["409"]
    assert "explanation" in conflict["description"]


def test_report_show_list_delete_host(client: SchedulerClient, tag: str) -> None:
    before = client.health().revision
    revision = client.update_resource_stats(f"{tag}-a", host_stats(vcpus=8))
    assert revision > before
    client.update_resource_stats([f"{tag}-bm", "node-1"], host_stats(vcpus=4))
    client.update_resource_stats([f"{tag}-bm", "node-2"], host_stats(vcpus=4))
    host = client.host(f"{tag}-a")
    assert host.inventories["VCPU"].total == 8 and host.up
    assert client.host(f"{tag}-bm", "node-2").nodename == "node-2"
    with pytest.raises(InvalidRequest) as err:
        client.host(f"{tag}-bm")  # two nodes: which one?
    assert err.value.field == "node"
    names = {(h.host, h.nodename) for h in client.hosts()}
    assert {(f"{tag}-a", f"{tag}-a"), (f"{tag}-bm", "node-1"), (f"{tag}-bm", "node-2")} <= names
    client.delete_host(f"{tag}-bm", "node-1")
    assert client.host(f"{tag}-bm").nodename == "node-2"
    client.delete_host(f"{tag}-a")
    with pytest.raises(NotFound):
        client.host(f"{tag}-a")
    with pytest.raises(NotFound):
        client.delete_host(f"{tag}-a")


def test_batched_reports_are_atomic(client: SchedulerClient, tag: str) -> None:
    count_before = len(client.hosts())
    client.update_resource_stats_many([(f"{tag}-{i}", host_stats()) for i in range(5)])
    assert len(client.hosts()) == count_before + 5
    with pytest.raises(InvalidRequest) as err:
        client.update_resource_stats_many([(f"{tag}-x", host_stats()), (f"{tag}-y", host_stats(vcpus=-1))])
    assert err.value.field == "$.reports[1].stats.vcpus"
    assert len(client.hosts()) == count_before + 5  # the good one was not applied either


def test_aggregates(client: SchedulerClient, tag: str) -> None:
    client.update_resource_stats(f"{tag}-h", host_stats())
    client.update_aggregate({"id": f"{tag}-agg", "name": "zone", "hosts": [f"{tag}-h"],
                             "metadata": {"availability_zone": f"{tag}-az"}})
    found = [a for a in client.aggregates() if a.key == f"{tag}-agg"]
    assert found and found[0].metadata == {"availability_zone": f"{tag}-az"}
    assert isinstance(found[0], Aggregate)
    assert client.host(f"{tag}-h").availability_zone == f"{tag}-az"
    [[chosen, *_]] = client.select_destinations(_flavor(availability_zone=f"{tag}-az"))
    assert chosen.host == f"{tag}-h" and chosen.availability_zone == f"{tag}-az"
    client.delete_aggregate(f"{tag}-agg")
    assert all(a.key != f"{tag}-agg" for a in client.aggregates())
    with pytest.raises(NotFound):
        client.delete_aggregate(f"{tag}-agg")
    with pytest.raises(NotFound):
        client.aggregate(f"{tag}-agg")


def test_aggregate_id_must_match_path(server: ServerProcess, tag: str) -> None:
    response = httpx.put(f"{server.url}/v1/aggregates/{tag}-1", json={"id": f"{tag}-2"})
    assert response.status_code == 400 and response.json()["field"] == "$.id"


def test_bad_request_groups_are_a_400_naming_the_field_and_claim_nothing(server: ServerProcess, tag: str) -> None:
    """Request groups (Nova's requested_resources) that cannot be read: the problem names the field, nothing is
    booked (tests/test_request_groups.py places good ones)."""
    httpx.post(f"{server.url}/v1/resource-stats", json={"name": f"{tag}-g", "stats": host_stats()})
    group = {"id": "g", "resources": {"FPGA": 1}}
    for groups, field in (([{**group, "required_traits": ["not a trait"]}], "$.request_groups[0].required_traits"),
                          ([group, group], "$.request_groups[1].id"),
                          ([{**group, "resources": {"FPGA": 0}}], "$.request_groups[0].resources"),
                          ([{**group, "resources": {"fpga": 1}}], "$.request_groups[0].resources"),
                          ([{"resources": {"FPGA": 1}}], "$.request_groups[0]")):
        response = httpx.post(f"{server.url}/v1/select_destinations",
                              json={**_flavor(), "instance_uuids": [f"{tag}-vm"], "request_groups": groups})
        assert response.status_code == 400, (groups, response.text)
        assert response.json()["field"].startswith(field), (groups, response.json())
    assert httpx.get(f"{server.url}/v1/allocations/{tag}-vm").status_code == 404


def test_select_release_and_allocations(client: SchedulerClient, tag: str) -> None:
    client.update_resource_stats(f"{tag}-h", host_stats(vcpus=4))
    consumer = f"{tag}-vm"
    spec = _flavor(vcpus=3, instance_uuids=[consumer], force_hosts=[f"{tag}-h"])
    [[first, *_]] = client.select_destinations(spec)
    [[again, *_]] = client.select_destinations(spec)  # idempotent per consumer
    assert (first.host, first.consumer_uuid) == (again.host, again.consumer_uuid) == (f"{tag}-h", consumer)
    allocation = client.allocation(consumer)
    assert allocation.host == f"{tag}-h" and allocation.resources["VCPU"] == 3
    assert [a.consumer_uuid for a in client.allocations()].count(consumer) == 1
    assert client.host(f"{tag}-h").inventories["VCPU"].in_flight == 3
    client.release(consumer)
    with pytest.raises(NotFound):
        client.allocation(consumer)
    with pytest.raises(NotFound):
        client.release(consumer)
    assert client.host(f"{tag}-h").inventories["VCPU"].in_flight == 0


def test_moves_confirm_and_revert(server: ServerProcess, client: SchedulerClient, tag: str) -> None:
    client.update_resource_stats_many([(f"{tag}-{i}", host_stats(vcpus=4)) for i in range(2)])
    hosts = [f"{tag}-0", f"{tag}-1"]
    vm, mig = f"{tag}-vm", f"{tag}-mig"
    client.select_destinations(_flavor(vcpus=2, instance_uuids=[vm], force_hosts=[hosts[0]]))
    move = _flavor(vcpus=3, instance_uuids=[vm], migration_uuid=mig, force_hosts=hosts)
    [[dest, *_]] = client.select_destinations(move)
    assert (dest.host, dest.allocation["VCPU"]) == (hosts[1], 3)
    assert client.allocation(mig).instance_uuid == vm and client.allocation(mig).host == hosts[0]
    restored = client.revert_move(mig)
    assert (restored.consumer_uuid, restored.host, restored.resources["VCPU"]) == (vm, hosts[0], 2)
    response = httpx.post(f"{server.url}/v1/migrations/{mig}/confirm")
    assert response.status_code == 404 and response.headers["content-type"] == "application/problem+json"
    client.select_destinations({**move, "migration_uuid": f"{mig}-2"})
    dropped = client.confirm_move(f"{mig}-2")
    assert (dropped.host, dropped.resources["VCPU"], dropped.instance_uuid) == (hosts[0], 2, vm)
    assert client.allocation(vm).host == hosts[1]
    assert {a.consumer_uuid for a in client.allocations()} & {vm, mig, f"{mig}-2"} == {vm}
    response = httpx.post(f"{server.url}/v1/migrations/{vm}/revert")  # an instance, not a migration
    assert response.status_code == 409 and response.json()["field"] == "migration_uuid"
    response = httpx.post(f"{server.url}/v1/migrations/{vm}/confirm")
    assert response.status_code == 409 and response.json()["field"] == "migration_uuid"
    response = httpx.post(f"{server.url}/v1/select_destinations",
                          json=_flavor(vcpus=3, instance_uuids=[vm], ignore_hosts=[hosts[1]]))
    assert response.status_code == 409 and "migration_uuid" in response.json()["detail"]


def test_no_valid_host_is_409_with_the_explanation(server: ServerProcess, client: SchedulerClient,
                                                   tag: str) -> None:
    client.update_resource_stats(f"{tag}-h", host_stats(vcpus=4))
    spec = _flavor(vcpus=64, force_hosts=[f"{tag}-h"])
    response = httpx.post(f"{server.url}/v1/select_destinations", json=spec)
    assert response.status_code == 409
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["title"] == "No valid host"
    steps = {step["name"]: step for step in body["explanation"]["steps"]}
    assert steps["ResourceFilter"]["removed"] == 1
    assert body["explanation"]["nearest_miss"][0]["resource_class"] == "VCPU"
    with pytest.raises(NoValidHost) as err:
        client.select_destinations(spec)
    assert err.value.explanation is not None and err.value.explanation.reason == "ResourceFilter"
    assert "ResourceFilter" in str(err.value)


def test_candidates_dry_run_claims_nothing(client: SchedulerClient, tag: str) -> None:
    for i, vcpus in enumerate((8, 16)):
        client.update_resource_stats(f"{tag}-{i}", host_stats(vcpus=vcpus))
    spec = _flavor(vcpus=2, force_hosts=[f"{tag}-0", f"{tag}-1"])
    allocations = len(client.allocations())
    result = client.candidates(spec, limit=5)
    assert [c.host for c in result.candidates] == [f"{tag}-1", f"{tag}-0"]  # more free vCPU weighs more
    assert "CPUWeigher" in result.candidates[0].weights
    assert result.explanation.steps
    assert len(client.allocations()) == allocations
    assert len(client.candidates(spec, limit=1).candidates) == 1


def test_instance_info(client: SchedulerClient, tag: str) -> None:
    host = f"{tag}-h"
    client.update_resource_stats(host, host_stats())
    client.sync_instance_info(host, ["i-1", "i-2"])
    client.update_instance_info(host, ["i-3"])
    assert set(client.host(host).instances) >= {"i-1", "i-2", "i-3"}
    client.delete_instance_info(host, "i-2")
    assert "i-2" not in client.host(host).instances
    with pytest.raises(NotFound):
        client.delete_instance_info(host, "i-2")
    with pytest.raises(NotFound):
        client.sync_instance_info(f"{tag}-nowhere", ["i-1"])


def test_http_errors_are_problems(server: ServerProcess) -> None:
    url = server.url
    cases = [
        (httpx.patch(f"{url}/v1/hosts"), 405),
        (httpx.get(f"{url}/v1/no-such-thing"), 404),
        (httpx.get(f"{url}/v1/allocations/nobody"), 404),
        (httpx.get(f"{url}/v1/hosts/nobody"), 404),
        (httpx.delete(f"{url}/v1/instances/nobody/i-1"), 404),
        (httpx.post(f"{url}/v1/select_destinations", content=b"{}", headers={"content-type": "text/plain"}), 415),
        (httpx.post(f"{url}/v1/select_destinations", content=b"{}"), 415),  # no content type at all
        (httpx.post(f"{url}/v1/resource-stats", content=b"x" * (MAX_BODY + 1),
                    headers={"content-type": "application/json"}), 413),
        (httpx.post(f"{url}/v1/candidates?limit=zero", json=request()), 400),
    ]
    for response, status in cases:
        assert response.status_code == status, (response.request.url, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["status"] == status


def test_405_allows_every_method_the_path_serves(server: ServerProcess) -> None:
    # Found by the OpenAPI fuzzer: paths served by two routes named only the first route's methods in Allow.
    for path, methods in [("/v1/hosts/somehost", {"GET", "HEAD", "PATCH", "DELETE"}),
                          ("/v1/aggregates/1", {"GET", "HEAD", "PUT", "DELETE"}),
                          ("/v1/allocations/someone", {"GET", "HEAD", "DELETE"}),
                          ("/v1/instances/somehost", {"POST", "PUT"})]:
        response = httpx.request("POST" if path.startswith("/v1/hosts/") else "PATCH", f"{server.url}{path}")
        assert response.status_code == 405
        assert response.headers["content-type"] == "application/problem+json"
        assert set(response.headers["allow"].split(", ")) == methods, path


def test_unknown_or_repeated_query_parameters_are_refused(client: SchedulerClient, server: ServerProcess,
                                                          tag: str) -> None:
    # Found by the OpenAPI fuzzer: unknown query parameters were ignored, so a mistyped ?nod= on a DELETE
    # removed every node of the host instead of the one meant.
    host = f"{tag}-bm"
    for node in ("n1", "n2"):
        client.update_resource_stats([host, node], host_stats())
    for query in ("?nod=n1", "?node=n1&node=n2", "?node=n1&limit=3"):
        response = httpx.delete(f"{server.url}/v1/hosts/{host}{query}")
        assert response.status_code == 400, (query, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["field"] in ("nod", "node", "limit")
    assert {h.nodename for h in client.hosts() if h.host == host} == {"n1", "n2"}
    assert httpx.get(f"{server.url}/v1/hosts?verbose=1").status_code == 400
    assert httpx.post(f"{server.url}/v1/candidates?limit=2", json=request()).status_code == 200
    client.delete_host(host, "n1")
    assert {h.nodename for h in client.hosts() if h.host == host} == {"n2"}


def test_every_operation_documents_its_400_and_401(client: SchedulerClient) -> None:
    # Found by the OpenAPI fuzzer: GET /openapi.json needs the token but documented only 200, and calls
    # without a body did not document the 400 an unknown query parameter gets.
    doc = client.openapi()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            if method != "parameters":
                assert "400" in op["responses"], (method, path)
                assert "401" in op["responses"] or op.get("security") == [], (method, path)


def test_the_document_allows_the_short_health_answer(client: SchedulerClient) -> None:
    # Found by the OpenAPI fuzzer: /health without a token answers {"status": ...} alone, which the
    # document's Health schema (every field required) did not allow.
    answers = client.openapi()["paths"]["/health"]["get"]["responses"]
    for status in ("200", "503"):
        shapes = answers[status]["content"]["application/json"]["schema"]["anyOf"]
        assert {"$ref": "#/components/schemas/Health"} in shapes
        assert any(shape.get("required") == ["status"] for shape in shapes)


def test_chunked_oversized_body_is_413(server: ServerProcess) -> None:
    def chunks() -> object:
        for _ in range(MAX_BODY // 1024 + 2):
            yield b" " * 1024

    response = httpx.post(f"{server.url}/v1/resource-stats", content=chunks(),  # type: ignore[arg-type]
                          headers={"content-type": "application/json"})
    assert response.status_code == 413


def test_metrics(client: SchedulerClient, tag: str) -> None:
    client.update_resource_stats(f"{tag}-h", host_stats(vcpus=1))
    client.select_destinations(_flavor(force_hosts=[f"{tag}-h"]))
    with pytest.raises(NoValidHost):
        client.select_destinations(_flavor(vcpus=99, force_hosts=[f"{tag}-h"]))
    text = client.metrics()
    for name in ("gantt_decisions_total", "gantt_placements_total", "gantt_claim_conflicts_total",
                 'gantt_no_valid_host_total{', "gantt_decision_seconds_bucket", 'gantt_hosts{',
                 "gantt_replica_revision", "gantt_replica_revisions_behind", "gantt_http_responses_total"):
        assert name in text, name
    assert 'reason="ResourceFilter"' in text


def test_async_client(server: ServerProcess, tag: str) -> None:
    async def scenario() -> None:
        async with AsyncSchedulerClient(server.url) as client:
            await client.update_resource_stats_many([(f"{tag}-{i}", host_stats(vcpus=4)) for i in range(3)])
            hosts = [f"{tag}-{i}" for i in range(3)]
            answers = await asyncio.gather(*(client.select_destinations(
                _flavor(vcpus=4, force_hosts=hosts, instance_uuids=[f"{tag}-vm{i}"])) for i in range(3)))
            assert sorted(a[0][0].host for a in answers) == hosts  # each took a whole host: no double booking
            with pytest.raises(NoValidHost):
                await client.select_destinations(_flavor(vcpus=4, force_hosts=hosts))
            assert (await client.allocation(f"{tag}-vm0")).resources["VCPU"] == 4
            await client.release(f"{tag}-vm0")
            assert (await client.host(answers[0][0][0].host)).inventories["VCPU"].in_flight == 0
            assert (await client.health()).status == "ok"
            await client.update_aggregate({"id": f"{tag}-a", "hosts": hosts})
            assert any(a.key == f"{tag}-a" for a in await client.aggregates())
            await client.delete_aggregate(f"{tag}-a")
            await client.delete_host(hosts[2], force=True)  # it holds an allocation: refused without force
            assert all(h.host != hosts[2] for h in await client.hosts())

    asyncio.run(scenario())


def test_every_answer_names_its_request(server: ServerProcess, secured: ServerProcess, tag: str) -> None:
    """Issue 17: ``x-openstack-request-id`` on every answer (success, refusal, 404, 401), a new one each time."""
    import re

    answers = [httpx.get(f"{server.url}/health"), httpx.get(f"{server.url}/v1/hosts"),
               httpx.get(f"{server.url}/v1/hosts/{tag}-missing"),
               httpx.put(f"{server.url}/v1/aggregates/{tag}-1", json={"id": f"{tag}-2"}),
               httpx.get(f"{secured.url}/v1/hosts")]
    assert [a.status_code for a in answers] == [200, 200, 404, 400, 401]
    ids = [a.headers["x-openstack-request-id"] for a in answers]
    assert all(re.fullmatch(r"req-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", i) for i in ids)
    assert len(set(ids)) == len(ids)
