"""Issue 17, item 5: the API's conventions, over real HTTP against a real ``gantt serve`` on a SQLite file.

Paging (``limit``/``marker`` with ``*_links``), 204 No Content on every DELETE with the revision in a header, ISO
8601 times, an operator's change to a host (disable with a reason) that is not a report, and an OpenAPI document
with an id, a tag and an example per operation and a description per property.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from gantt.client import SchedulerClient
from gantt.model import InvalidRequest, NotFound, NoValidHost
from tests.conftest import host_stats
from tests.service.server import ServerProcess

CONFIG: dict[str, Any] = {"filter_scheduler": {"enabled_filters": ["ComputeFilter"]},
                          "DEFAULT": {"service_down_time": 86400}}
NODES = [("p-a", "p-a"), ("p-b", "n1"), ("p-b", "n2"), ("p-c", "p-c"), ("p-d", "p-d")]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    store = f"sqlite:///{tmp_path_factory.mktemp('conventions')}/gantt.sqlite"
    with ServerProcess(store, config=CONFIG, workdir=tmp_path_factory.mktemp("conventions-server")) as process:
        with process.client() as client:
            client.update_resource_stats_many([((host, node) if node != host else host, host_stats(vcpus=8))
                                               for host, node in NODES])
            for i in range(5):
                client.select_destinations({"flavor": {"vcpus": 1, "memory_mb": 64, "root_gb": 1},
                                            "instance_uuids": [f"vm-{i}"]})
        yield process


@pytest.fixture
def client(server: ServerProcess) -> Iterator[SchedulerClient]:
    with server.client() as c:
        yield c


def _pages(url: str, path: str, items: str, limit: int) -> list[list[dict[str, Any]]]:
    pages = []
    next_path: str | None = f"{path}?limit={limit}"
    while next_path is not None:
        body = httpx.get(url + next_path).raise_for_status().json()
        pages.append(body[items])
        links = {link["rel"]: link["href"] for link in body[f"{items}_links"]}
        next_path = links.get("next")
    return pages


def test_hosts_page_by_limit_and_marker_in_a_stable_order(server: ServerProcess) -> None:
    whole = httpx.get(f"{server.url}/v1/hosts").raise_for_status().json()
    assert whole["hosts_links"] == []
    names = [(h["host"], h["nodename"]) for h in whole["hosts"]]
    assert sorted(names) == sorted(NODES) and len(names) == 5
    pages = _pages(server.url, "/v1/hosts", "hosts", 2)
    assert [len(p) for p in pages] == [2, 2, 1]  # no next link after the last page
    assert [(h["host"], h["nodename"]) for p in pages for h in p] == names
    # The marker names a node as its host, or "host/node" for a node named otherwise.
    after = httpx.get(f"{server.url}/v1/hosts", params={"marker": "p-b/n1"}).raise_for_status().json()
    assert [(h["host"], h["nodename"]) for h in after["hosts"]] == names[names.index(("p-b", "n1")) + 1:]
    with server.client() as client:
        assert [(h.host, h.nodename) for h in client.hosts(limit=2, marker="p-a")] == names[1:3]


@pytest.mark.parametrize("query, field", [({"marker": "p-zz"}, "marker"), ({"marker": "p-b"}, "marker"),
                                          ({"limit": "0"}, "limit"), ({"limit": "1001"}, "limit"),
                                          ({"limit": "two"}, "limit"), ({"limit": "2", "sort": "host"}, "sort")])
def test_bad_paging_is_a_400_naming_the_parameter(server: ServerProcess, query: dict[str, str],
                                                  field: str) -> None:
    for path in ("/v1/hosts", "/v1/allocations"):
        response = httpx.get(f"{server.url}{path}", params=query)
        assert response.status_code == 400 and response.json()["field"] == field, (path, response.text)
        if field == "marker":
            assert repr(query["marker"]) in response.json()["detail"]


def test_allocations_page_in_consumer_order(server: ServerProcess, client: SchedulerClient) -> None:
    pages = _pages(server.url, "/v1/allocations", "allocations", 3)
    assert [[a["consumer_uuid"] for a in p] for p in pages] == [["vm-0", "vm-1", "vm-2"], ["vm-3", "vm-4"]]
    assert [a.consumer_uuid for a in client.allocations(limit=2, marker="vm-2")] == ["vm-3", "vm-4"]


def test_times_are_iso_8601_in_utc(server: ServerProcess, client: SchedulerClient) -> None:
    host = httpx.get(f"{server.url}/v1/hosts/p-a").raise_for_status().json()
    reported = datetime.fromisoformat(host["updated_at"])
    assert reported.utcoffset() is not None and reported.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    allocation = httpx.get(f"{server.url}/v1/allocations/vm-0").raise_for_status().json()
    created = datetime.fromisoformat(allocation["created_at"])
    assert created.tzinfo is not None and abs((created - reported).total_seconds()) < 3600
    # The library keeps its model: epoch seconds on the Allocation it returns.
    assert client.allocation("vm-0").created_at == pytest.approx(created.timestamp())
    assert client.host("p-a").updated_at == reported.astimezone(UTC)


def test_every_delete_answers_204_with_the_revision_in_a_header(server: ServerProcess,
                                                                client: SchedulerClient) -> None:
    client.update_resource_stats("p-gone", host_stats())
    client.update_aggregate({"id": "agg-gone", "hosts": ["p-gone"]})
    client.sync_instance_info("p-gone", ["i-1"])
    client.select_destinations({"flavor": {"vcpus": 1, "memory_mb": 64, "root_gb": 1},
                                "instance_uuids": ["vm-gone"], "force_hosts": ["p-gone"]})
    revisions = []
    for path in ("/v1/instances/p-gone/i-1", "/v1/allocations/vm-gone", "/v1/aggregates/agg-gone",
                 "/v1/hosts/p-gone"):
        response = httpx.delete(server.url + path)
        assert response.status_code == 204 and response.content == b"", (path, response.text)
        revisions.append(int(response.headers["gantt-revision"]))
    assert revisions == sorted(revisions) and len(set(revisions)) == 4
    # The library reads the header: release() still answers the revision that holds the release.
    client.select_destinations({"flavor": {"vcpus": 1, "memory_mb": 64, "root_gb": 1},
                                "instance_uuids": ["vm-again"]})
    assert client.release("vm-again") > revisions[-1]


def test_disable_with_a_reason_keeps_the_stats_and_the_last_report(server: ServerProcess,
                                                                    client: SchedulerClient) -> None:
    client.update_resource_stats("p-off", host_stats(vcpus=16))
    before = client.host("p-off")
    # requested_destination, not force_hosts: forced hosts skip the filters, as in Nova
    flavor = {"flavor": {"vcpus": 1, "memory_mb": 64, "root_gb": 1}, "requested_destination": {"host": "p-off"}}
    client.update_host("p-off", {"service": {"disabled": True, "disabled_reason": "disk swap"}})
    after = client.host("p-off")
    assert after.disabled and after.disabled_reason == "disk swap"
    assert after.inventories["VCPU"].total == 16  # merged, as a report is: nothing else is erased
    assert after.updated_at == before.updated_at  # not a report: a quiet host must not look alive
    with pytest.raises(NoValidHost) as refused:
        client.select_destinations(flavor)
    assert any(s.name == "ComputeFilter" and s.removed == 1 for s in refused.value.explanation.steps)
    client.update_host("p-off", {"service": {"disabled": False}})
    enabled = client.host("p-off")
    assert not enabled.disabled and enabled.disabled_reason is None
    [[chosen]] = client.select_destinations(flavor)
    assert chosen.host == "p-off"
    client.release(chosen.consumer_uuid or "")
    with pytest.raises(NotFound):
        client.update_host("p-nobody", {"service": {"disabled": True}})
    with pytest.raises(InvalidRequest) as bad:
        client.update_host("p-off", {"service": {"disabled": "yes"}})
    assert bad.value.field is not None and "disabled" in bad.value.field
    client.delete_host("p-off")


def test_openapi_names_tags_and_shows_every_operation_and_describes_every_property(
        client: SchedulerClient) -> None:
    doc = client.openapi()
    ids = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method == "parameters":
                continue
            where = f"{method.upper()} {path}"
            ids.append(op["operationId"])
            assert op["tags"] and set(op["tags"]) <= {t["name"] for t in doc["tags"]}, where
            # "examples": a namespaced operation both kinds serve shows the compute and the volume body
            bodies = [m for m in op.get("requestBody", {}).get("content", {}).values()
                      if "example" in m or "examples" in m]
            answers = [r for code, r in op["responses"].items() if code.startswith("2")
                       and (any("example" in m or "examples" in m for m in r.get("content", {}).values())
                            or any("example" in h for h in r.get("headers", {}).values()))]
            assert answers, f"{where}: no example of its answer"
            if "requestBody" in op:
                assert bodies, f"{where}: no example of its body"
    assert len(ids) == len(set(ids))
    undescribed = [f"{name}.{prop}" for name, schema in doc["components"]["schemas"].items()
                   for prop, spec in schema.get("properties", {}).items() if not spec.get("description")]
    assert undescribed == []
    health = doc["paths"]["/health"]["get"]["responses"]
    assert "503" in health and "degraded" in health["503"]["description"]
    deleted = doc["paths"]["/v1/allocations/{consumer}"]["delete"]["responses"]
    assert "204" in deleted and "200" not in deleted and "Gantt-Revision" in deleted["204"]["headers"]
