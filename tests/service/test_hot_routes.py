"""The hot routes (host reports, placements, releases) skip Starlette's middleware and router, and answer exactly
as the Starlette path does: the same requests, good and bad, sent to an app with the hot lane and to one without,
get the same statuses, media types and bodies (the problem+json refusals byte for byte).

In process (httpx's ASGI transport), each app over its own Replica on a real SQLite file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from gantt.config import Config
from gantt.model import HostReport
from gantt.replication.replica import Replica
from gantt.service.app import create_app
from tests.conftest import host_stats

FLAVOR = {"name": "m1.small", "vcpus": 1, "memory_mb": 512, "root_gb": 1}
JSON = {"Content-Type": "application/json"}

# (method, path, body, headers): the hot routes' answers, then a few that must still reach Starlette
REQUESTS: list[tuple[str, str, Any, dict[str, str]]] = [
    ("POST", "/v1/resource-stats", {"name": "h1", "stats": host_stats()}, JSON),
    ("POST", "/v1/resource-stats", {"name": ["h2", "h2-node"], "stats": host_stats(vcpus=4)}, JSON),
    ("POST", "/v1/resource-stats", {"name": "h1", "stats": {"vcpus_used": "many"}}, JSON),
    ("POST", "/v1/resource-stats", {"name": ["a", "b", "c"], "stats": {}}, JSON),
    ("POST", "/v1/resource-stats", {"name": "h1", "stats": {}, "extra": 1}, JSON),
    ("POST", "/v1/resource-stats", b"{not json", JSON),
    ("POST", "/v1/resource-stats", b'{"name": "h1", "stats": {}}', {"Content-Type": "text/plain"}),
    ("POST", "/v1/resource-stats", {"name": "h1", "stats": {"x": "y" * 70_000}}, JSON),
    ("POST", "/v1/resource-stats", {"name": "h1", "stats": {"vcpus": 10 ** 20}}, JSON),
    ("POST", "/v1/resource-stats?node=h1", {"name": "h1", "stats": {}}, JSON),
    ("POST", "/v1/resource-stats", {"name": "h1", "stats": {}}, {**JSON, "Content-Encoding": " GZip"}),
    ("POST", "/v1/resource-stats", {"name": "h3", "stats": {}}, {"Content-Type": "Application/Vnd.X+JSON; q=1"}),
    ("POST", "/v1/resource-stats", {"name": "h1", "stats": {}}, {**JSON, "Content-Length": "99999999"}),
    ("GET", "/v1/resource-stats", None, {}),
    ("POST", "/v1/select_destinations", {"flavor": FLAVOR, "instance_uuids": ["i-1"]}, JSON),
    ("POST", "/v1/select_destinations", {"flavor": {**FLAVOR, "vcpus": -1}}, JSON),
    ("POST", "/v1/select_destinations", {"flavor": {**FLAVOR, "vcpus": 1000}}, JSON),
    ("POST", "/v1/select_destinations", {"flavour": FLAVOR}, JSON),
    ("GET", "/v1/select_destinations", None, {}),
    ("GET", "/v1/allocations/i-1", None, {}),
    ("DELETE", "/v1/allocations/i-1", None, {}),
    ("DELETE", "/v1/allocations/i-1", None, {}),
    ("DELETE", "/v1/allocations/" + "x" * 300, None, {}),
    ("DELETE", "/v1/allocations/i-1?force=1", None, {}),
    ("PUT", "/v1/allocations/i-1", None, {}),
]


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[tuple[Replica, Replica]]:
    config = Config.from_dict({"gantt": {"max_body_bytes": 64 * 1024, "seed": 3}})
    pair = (Replica.open(f"sqlite:///{tmp_path}/hot.sqlite", config),
            Replica.open(f"sqlite:///{tmp_path}/starlette.sqlite", config))
    yield pair
    for replica in pair:
        replica.close()


def _answers(app: Any) -> list[tuple[int, str, bytes]]:
    async def run() -> list[tuple[int, str, bytes]]:
        out = []
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gantt") as http:
            for method, path, body, headers in REQUESTS:
                content = body if isinstance(body, bytes) or body is None else httpx.Request(
                    "POST", "/", json=body).content
                answer = await http.request(method, path, content=content, headers=headers)
                out.append((answer.status_code, answer.headers.get("content-type", ""),
                            _without_ids(answer.content), answer.headers.get("allow", "")))
        return out

    return anyio.run(run)


def _without_ids(body: bytes) -> bytes:
    # A placement names a consumer and a time of its own; everything else must match byte for byte.
    return re.sub(rb'"(consumer_uuid|created_at)":"[^"]*"', rb'"\1":"-"', body)


def test_hot_routes_answer_as_the_starlette_path_does(replicas: tuple[Replica, Replica]) -> None:
    hot, plain = replicas
    lane = _answers(create_app(hot))
    router = _answers(create_app(plain, hot_routes=False))
    assert [a[0] for a in lane] == [200, 200, 400, 400, 400, 400, 415, 413, 400, 400, 415, 200, 413, 405, 200,
                                    400, 409, 400, 405, 200, 204, 404, 400, 400, 405]
    for request, mine, theirs in zip(REQUESTS, lane, router, strict=True):
        assert mine == theirs, request[:2]


def test_hot_routes_do_not_reach_starlette(replicas: tuple[Replica, Replica]) -> None:
    app = create_app(replicas[0])
    dispatch = app.app  # type: ignore[attr-defined]
    starlette = dispatch.gantt
    reached: list[str] = []

    async def counting(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            reached.append(f"{scope['method']} {scope['path']}")
        await starlette(scope, receive, send)

    dispatch.gantt = counting
    _answers(app)
    assert reached == ["GET /v1/resource-stats", "GET /v1/select_destinations", "GET /v1/allocations/i-1",
                       "PUT /v1/allocations/i-1"]


def test_a_release_answers_the_revision_its_write_brought_without_reading_the_head(
        replicas: tuple[Replica, Replica]) -> None:
    """DELETE /v1/allocations/{c} on SQLite: the write's own catch-up has applied the release, so the answer's
    revision is the replica's, with no read of the store's head (``barrier``) per release."""
    replica = replicas[0]
    replica.report_many([HostReport.of("h1", host_stats())])
    [[placed]] = replica.select_destinations({"flavor": FLAVOR})
    barriers: list[int] = []
    barrier = replica.store.barrier

    def counted() -> int:
        barriers.append(1)
        return barrier()

    replica.store.barrier = counted  # type: ignore[method-assign]

    async def run() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(replica)),
                                     base_url="http://gantt") as http:
            return await http.delete(f"/v1/allocations/{placed.consumer_uuid}")

    answer = anyio.run(run)
    assert answer.status_code == 204
    assert barriers == []
    assert int(answer.headers["gantt-revision"]) == replica.revision == replica.store.barrier()
    assert replica.table.allocation(placed.consumer_uuid) is None
