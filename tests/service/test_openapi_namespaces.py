"""/openapi.json describes the namespaced paths the service serves: a compute namespace's (the default's /v1 routes
under /v1/namespaces/{namespace}) and a volume namespace's (gantt.service.volume.ROUTES), with the volume kind's
bodies and answers, whose examples decode as the volume routes decode them."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from gantt.model import decode
from gantt.service.openapi.document import openapi
from gantt.service.routes import ROUTES
from gantt.service.volume import ROUTES as VOLUME_ROUTES
from gantt.service.volume import VolumePoolList, VolumeSelections
from gantt.volume import BackendReport, VolumeRequest

PREFIX = "/v1/namespaces/{namespace}"


def _served(routes: list[Any]) -> set[tuple[str, str]]:
    # The volume routes name the consumer of an allocation {volume}; the document keeps the default's {consumer}.
    return {(PREFIX + route.path[3:].replace("{volume}", "{consumer}"), method.lower())
            for route in routes for method in route.methods or () if method != "HEAD" and route.path.startswith("/v1/")}


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return openapi()


def test_every_namespaced_route_is_documented_and_nothing_else(doc: dict[str, Any]) -> None:
    documented = {(path, method) for path, item in doc["paths"].items() if path.startswith(PREFIX)
                  for method in item if method != "parameters"}
    compute, volume = _served(ROUTES), _served(VOLUME_ROUTES)
    assert documented == compute | volume
    for path, method in documented:
        op = doc["paths"][path][method]
        assert doc["paths"][path]["parameters"][0]["name"] == "namespace"
        assert "404" in op["responses"] and "namespace" in op["responses"]["404"]["description"]
        assert op["summary"].startswith("Compute namespaces:") == ((path, method) not in volume), (path, method)


def _schemas(media: dict[str, Any]) -> set[str]:
    schema = media["schema"]
    return {ref["$ref"].rsplit("/", 1)[1] for ref in schema.get("anyOf", [schema])}


@pytest.mark.parametrize(("path", "body", "answer"), [
    ("/resource-stats", BackendReport, None),
    ("/select_destinations", VolumeRequest, VolumeSelections),
    ("/hosts", None, VolumePoolList),
])
def test_volume_bodies_and_answers_are_documented_with_examples_that_decode(
        doc: dict[str, Any], path: str, body: type | None, answer: type | None) -> None:
    item = doc["paths"][PREFIX + path]
    [op] = [op for method, op in item.items() if method != "parameters"]
    if body is not None:
        media = op["requestBody"]["content"]["application/json"]
        assert body.__name__ in _schemas(media) and body.__name__ in doc["components"]["schemas"]
        decode(msgspec.json.encode(media["examples"]["volume"]["value"]), body)
    if answer is not None:
        media = op["responses"]["200"]["content"]["application/json"]
        assert answer.__name__ in _schemas(media)
        msgspec.convert(media["examples"]["volume"]["value"], answer)
    for name in ("VolumeRequest", "VolumeProperties", "SchedulerHints", "BackendReport", "VolumeSelection"):
        assert all(spec.get("description") for spec in doc["components"]["schemas"][name]["properties"].values())


def test_a_volume_namespace_takes_pool_on_backend_delete(doc: dict[str, Any]) -> None:
    op = doc["paths"][PREFIX + "/hosts/{host}"]["delete"]
    assert "pool" in {p["name"] for p in op["parameters"]}


def test_a_volume_namespace_answers_as_the_document_says(doc: dict[str, Any]) -> None:
    """The documented volume examples, sent to a real volume namespace, are accepted; every answer validates
    against the schema the document gives for it."""
    import httpx
    import jsonschema_rs  # schemathesis's validator (a test dependency through it)

    from gantt.cli.server_process import ServerProcess

    config = {"DEFAULT": {"service_down_time": 86400}, "namespace.vol": {"kind": "volume"}}

    def check(path: str, method: str, answer: httpx.Response) -> None:
        op = doc["paths"][PREFIX + path][method]
        assert str(answer.status_code) in op["responses"], (path, answer.text)
        content = op["responses"][str(answer.status_code)].get("content")
        if content:
            schema = {**content["application/json"]["schema"], "components": doc["components"]}
            jsonschema_rs.validator_for(schema).validate(answer.json())

    def body(path: str) -> Any:
        return doc["paths"][PREFIX + path]["post"]["requestBody"]["content"]["application/json"]["examples"][
            "volume"]["value"]

    with ServerProcess("memory://", config=config) as server, httpx.Client(base_url=server.url + "/v1/namespaces/vol",
                                                                          timeout=30) as http:
        check("/resource-stats", "post", http.post("/resource-stats", json=body("/resource-stats")))
        check("/hosts", "get", http.get("/hosts"))
        check("/select_destinations", "post", http.post("/select_destinations", json=body("/select_destinations")))
        check("/allocations", "get", http.get("/allocations"))
        check("/allocations/{consumer}", "get", http.get("/allocations/vol-1"))
        check("/allocations/{consumer}", "delete", http.delete("/allocations/vol-1"))
        check("/hosts/{host}", "delete", http.delete("/hosts/node1@lvm", params={"pool": "fast"}))
        assert http.get("/hosts").json()["pools"] == []
