"""Hostile input to the Placement face of a real ``gantt serve`` (issue 30, items 6, 7, 13 and 14), beside the
real Placement 16 where the behaviour is Placement's:

- bad JSON (nesting past any recursion limit, bytes that are not UTF-8) is a 400 in Placement's error body, never
  a 500 (Placement 16 itself answers the deep nesting with a 500: there Gantt is stricter);
- a refusal quotes at most a short prefix of the value it refuses (a 10 MB name was echoed in a 10 MB 400);
- providers are listed in creation order, whatever changed since (Placement's order: its ids);
- a tokenless request is a 401 whatever its path, method or version (Placement's auth runs before its router);
- an over-long request line under the mount is refused in Placement's error body.

The fuzzing of the face (``/v1``'s is tests/service/test_fuzz_openapi.py, driven by its OpenAPI document, which
Placement has none of in Gantt) is tests/placement/test_fuzz_hostile.py.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.placement.real_placement import RealPlacement
from tests.service.server import ServerProcess

LATEST = {"x-auth-token": "admin", "openstack-api-version": "placement latest"}
JSON = {**LATEST, "content-type": "application/json", "x-roles": "admin,service"}  # a service may reshape
CONFIG: dict[str, Any] = {"DEFAULT": {"service_down_time": 86400}}


@pytest.fixture(scope="module")
def gantt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("hostile-placement")
    with ServerProcess(f"sqlite:///{workdir}/gantt.sqlite", workdir=workdir, config=CONFIG) as server:
        yield server


@pytest.fixture(scope="module")
def real() -> Iterator[RealPlacement]:
    with RealPlacement() as placement:
        yield placement


def _client(url: str, headers: dict[str, str] | None = None) -> httpx.Client:
    return httpx.Client(base_url=url, headers=LATEST if headers is None else headers, timeout=30)


def _errors(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.headers["content-type"].startswith("application/json"), response.headers
    errors: list[dict[str, Any]] = response.json()["errors"]
    assert errors and errors[0]["status"] == response.status_code, response.text
    return errors


# ------------------------------------------------------------------------------------------------ bad JSON


BAD_JSON = {"deep": b"[" * 100_000 + b"]" * 100_000, "deep object": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
            "not UTF-8": b'{"name": "\xff\xfe"}', "not UTF-8 in a key": b'{"\xc3\x28": 1}'}


@pytest.mark.parametrize("kind", sorted(BAD_JSON))
@pytest.mark.parametrize(("method", "path"), [("POST", "/resource_providers"),
                                              ("PUT", "/allocations/0b1c62b4-8d2c-4b8a-9d15-3e0ad4f1f0a1"),
                                              ("POST", "/allocations"), ("POST", "/reshaper"),
                                              ("POST", "/resource_classes"),
                                              ("PUT", "/resource_providers/0b1c62b4-8d2c-4b8a-9d15-3e0ad4f1f0a2")])
def test_bad_json_is_a_400_in_placements_body(gantt: ServerProcess, method: str, path: str, kind: str) -> None:
    with _client(gantt.url + "/placement", JSON) as http:
        if path.startswith("/resource_providers/"):  # PUT on a provider reads its body once the provider exists
            http.post("/resource_providers", json={"name": "bad-json-target", "uuid": path.rsplit("/", 1)[1]})
        response = http.request(method, path, content=BAD_JSON[kind])
    assert response.status_code == 400, response.text[:500]
    assert "Malformed JSON" in _errors(response)[0]["detail"]


# --------------------------------------------------------------------------------------------- quoting


@pytest.mark.parametrize(("method", "path", "body"), [
    ("POST", "/resource_providers", {"name": "n" * 1_000_000}),
    ("POST", "/resource_providers", {"name": "ok", "uuid": "u" * 1_000_000}),
    ("POST", "/resource_providers", {"name": "ok", "x" * 1_000_000: 1}),
    ("POST", "/resource_classes", {"name": "CUSTOM_" + "A" * 1_000_000}),
    ("PUT", "/allocations/0b1c62b4-8d2c-4b8a-9d15-3e0ad4f1f0a3",
     {"allocations": {}, "project_id": "p" * 1_000_000, "user_id": "u", "consumer_generation": None}),
    ("PUT", "/allocations/0b1c62b4-8d2c-4b8a-9d15-3e0ad4f1f0a3",
     {"allocations": {}, "project_id": "p", "user_id": "u", "consumer_generation": None,
      "consumer_type": "t" * 1_000_000}),
])
def test_a_refusal_quotes_a_short_prefix_of_a_long_value(gantt: ServerProcess, method: str, path: str,
                                                          body: dict[str, Any]) -> None:
    with _client(gantt.url + "/placement", JSON) as http:
        response = http.request(method, path, content=json.dumps(body))
    assert response.status_code == 400, response.text[:500]
    detail = _errors(response)[0]["detail"]
    assert len(response.content) < 4096 and len(detail) <= 1024, len(response.content)


def test_v1_refusals_quote_a_short_prefix_too(gantt: ServerProcess) -> None:
    with _client(gantt.url, {}) as http:
        for method, path, body in [("PUT", "/v1/aggregates/1", {"id": 1, "name": "a", "hosts": ["h" * 1_000_000]}),
                                   ("POST", "/v1/resource-stats", {"name": "n" * 1_000_000, "stats": {}}),
                                   ("POST", "/v1/select_destinations", {"x" * 1_000_000: 1})]:
            response = http.request(method, path, json=body)
            assert response.status_code == 400, response.text[:500]
            assert len(response.content) < 4096, (path, len(response.content))


# ------------------------------------------------------------------------------------------ listing order


def _names(http: httpx.Client, query: str = "") -> list[str]:
    return [p["name"] for p in http.get(f"/resource_providers{query}").json()["resource_providers"]]


def _tree_steps(http: httpx.Client) -> list[list[str]]:
    """A root and its child, then the root renamed and given an inventory (each a change Placement's listing
    order must not follow): the listing and the tree's listing after each step."""
    root, child, other = (str(uuid.uuid4()) for _ in range(3))
    seen = []
    http.post("/resource_providers", json={"name": "order-root", "uuid": root}).raise_for_status()
    http.post("/resource_providers", json={"name": "order-child", "uuid": child,
                                           "parent_provider_uuid": root}).raise_for_status()
    http.post("/resource_providers", json={"name": "order-other", "uuid": other}).raise_for_status()
    seen += [_names(http), _names(http, f"?in_tree={child}")]
    http.put(f"/resource_providers/{root}", json={"name": "order-root-2"}).raise_for_status()
    seen += [_names(http), _names(http, f"?in_tree={child}")]
    generation = http.get(f"/resource_providers/{root}").json()["generation"]
    http.put(f"/resource_providers/{root}/inventories", json={
        "resource_provider_generation": generation, "inventories": {"VCPU": {"total": 8}}}).raise_for_status()
    seen += [_names(http), _names(http, f"?in_tree={root}"), _names(http, "?resources=VCPU:1")]
    return seen


def test_providers_are_listed_in_creation_order_as_placement_lists_them(gantt: ServerProcess,
                                                                        real: RealPlacement) -> None:
    with _client(gantt.url + "/placement") as ours, _client(real.url) as theirs:
        for listing in (ours, theirs):  # each from an empty face: only these providers
            for found in listing.get("/resource_providers").json()["resource_providers"]:
                listing.delete(f"/resource_providers/{found['uuid']}")
        assert _tree_steps(ours) == _tree_steps(theirs)
        listed = _names(ours)
    gantt.restart()  # loaded from the store, whose keys are the providers' uuids: still in creation order
    with _client(gantt.url + "/placement") as ours:
        assert _names(ours) == listed


# -------------------------------------------------------------------------------------- auth before routes


TOKENLESS = [("GET", "/nosuch", {}), ("DELETE", "/traits", {}), ("GET", "/resource_providers", {}),
             ("POST", "/nosuch/deeper", {}), ("PATCH", "/resource_providers", {}),
             ("GET", "/reshaper", {"openstack-api-version": "placement 1.1"}),
             ("GET", "/nosuch", {"openstack-api-version": "placement 9.99"}),
             ("GET", "/traits", {"openstack-api-version": "placement 1.x"}),
             ("GET", "/", {})]


def test_a_tokenless_request_is_a_401_whatever_it_asks_for(gantt: ServerProcess, real: RealPlacement) -> None:
    with _client(gantt.url + "/placement", {}) as ours, _client(real.url, {}) as theirs:
        for method, path, headers in TOKENLESS:
            expected = theirs.request(method, path, headers=headers).status_code
            got = ours.request(method, path, headers=headers)
            assert got.status_code == expected, (method, path, headers, got.text)
            if expected == 401:
                _errors(got)


def test_an_over_long_request_line_is_refused_in_placements_body(gantt: ServerProcess) -> None:
    address = urlsplit(gantt.url)
    with socket.create_connection((address.hostname, address.port), timeout=20) as sock:
        sock.sendall(b"GET /placement/resource_providers/" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431"), head
    assert b"content-type: application/json" in head.lower()
    assert json.loads(body)["errors"][0]["status"] == 431


def test_the_log_has_no_traceback(gantt: ServerProcess) -> None:
    log = Path(gantt.log_path).read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]
