"""Fuzzing the Placement face, as tests/service/test_fuzz_openapi.py fuzzes ``/v1`` (Placement has no OpenAPI
document in Gantt; its routes are ``gantt.placement.api.app.ROUTES``): generated requests for every route and method,
with path parameters, query strings, headers and bodies drawn from both valid and hostile values (a known
provider or consumer, a uuid nobody holds, text of any kind and length; JSON shaped like each route's body with
fields mutated, arbitrary JSON, and bytes that are no JSON: nesting past any recursion limit, invalid UTF-8),
sent to a real ``gantt serve`` on a SQLite file seeded with a small tree of providers, inventories, traits and
an allocation. For every answer:

- never a 5xx;
- a 4xx is Placement's JSON error body (``{"errors": [{"status": ...}]}``, the answer's status), and short: a
  refusal quotes at most a prefix of what it refuses;
- a refused request changed nothing: the store's revision (read from its file) is what it was before it.

Besides the generated cases, every route that takes a body gets each fixed hostile body. Sized for CI (well under
a minute on this project's 2-core machine): ``GANTT_PLACEMENT_FUZZ_EXAMPLES`` generated requests (default 400),
derandomized so that a CI run is repeatable; raise it for a long run.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gantt.placement.api.app import ROUTES
from gantt.store.sqlite_file import path_of
from tests.service.server import ServerProcess

# Hypothesis warns of the long reprs of the bodies it makes (megabytes, on purpose).
pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")
EXAMPLES = int(os.environ.get("GANTT_PLACEMENT_FUZZ_EXAMPLES", "400"))
ADMIN = {"x-auth-token": "admin", "x-roles": "admin,service"}  # every rule allows it: the handlers are reached
ROOT, CHILD, SHARED = "7d5a6a5e-1f55-4c1e-9d3b-0f3a2c1b0a01", "7d5a6a5e-1f55-4c1e-9d3b-0f3a2c1b0a02", \
    "7d5a6a5e-1f55-4c1e-9d3b-0f3a2c1b0a03"
CONSUMER = "9a1f6c1e-3b1d-4a5e-8c2f-1d2e3f4a5b01"
AGGREGATE = "5c8e7d6f-2a3b-4c5d-9e8f-0a1b2c3d4e01"
MAX_REFUSAL = 8192  # bytes of a refusal's body, at most

# Bodies no route should take, and none should fail on.
HOSTILE_BODIES: dict[str, bytes] = {
    "deep array": b"[" * 100_000 + b"]" * 100_000,
    "deep object": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    "not UTF-8": b'{"name": "\xff\xfe\xfd"}',
    "not UTF-8 key": b'{"\xc3\x28": {"\xa0\xa1": 1}}',
    "huge string": json.dumps({"name": "n" * 2_000_000, "uuid": "u" * 100_000}).encode(),
    "huge key": json.dumps({"k" * 1_000_000: 1}).encode(),
    "big number": b'{"total": 1' + b"0" * 5000 + b"}",
    "not JSON": b"\x00\x01\x02 not json {",
    "empty": b"",
    "nul in string": b'{"name": "a\\u0000b"}',
    "lone surrogate": b'{"name": "\\ud800"}',
}
TAKEN_MAYBE = {"nul in string", "lone surrogate"}  # valid JSON: a name may hold them, as in Placement


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("placement-fuzz")
    config = {"DEFAULT": {"service_down_time": 10**7}, "gantt": {"claim_timeout": 10**7, "seed": 7,
                                                                 "max_body_bytes": 4 * 1024 * 1024}}
    with ServerProcess(f"sqlite:///{workdir}/gantt.sqlite", workdir=workdir, config=config) as process:
        _seed(process.url + "/placement")
        yield process


def _seed(url: str) -> None:
    latest = {**ADMIN, "openstack-api-version": "placement latest"}
    with httpx.Client(base_url=url, headers=latest, timeout=30) as http:
        for name, rp, parent in (("fuzz-root", ROOT, None), ("fuzz-child", CHILD, ROOT), ("fuzz-shared", SHARED, None)):
            if http.get(f"/resource_providers/{rp}").status_code == 404:
                body: dict[str, Any] = {"name": name, "uuid": rp}
                if parent:
                    body["parent_provider_uuid"] = parent
                http.post("/resource_providers", json=body).raise_for_status()
        http.put("/resource_classes/CUSTOM_FUZZ").raise_for_status()
        http.put("/traits/CUSTOM_FUZZ_TRAIT").raise_for_status()
        for rp, inventories in ((ROOT, {"VCPU": {"total": 32}, "MEMORY_MB": {"total": 65536}}),
                                (CHILD, {"CUSTOM_FUZZ": {"total": 4}}), (SHARED, {"DISK_GB": {"total": 1000}})):
            generation = http.get(f"/resource_providers/{rp}").json()["generation"]
            http.put(f"/resource_providers/{rp}/inventories", json={
                "resource_provider_generation": generation, "inventories": inventories}).raise_for_status()
        generation = http.get(f"/resource_providers/{ROOT}").json()["generation"]
        http.put(f"/resource_providers/{ROOT}/traits", json={
            "resource_provider_generation": generation, "traits": ["CUSTOM_FUZZ_TRAIT"]}).raise_for_status()
        generation = http.get(f"/resource_providers/{SHARED}").json()["generation"]
        http.put(f"/resource_providers/{SHARED}/aggregates", json={
            "resource_provider_generation": generation, "aggregates": [AGGREGATE]}).raise_for_status()
        if not http.get(f"/allocations/{CONSUMER}").json()["allocations"]:
            http.put(f"/allocations/{CONSUMER}", json={
                "allocations": {ROOT: {"resources": {"VCPU": 2}}, CHILD: {"resources": {"CUSTOM_FUZZ": 1}}},
                "project_id": "p", "user_id": "u", "consumer_generation": None,
                "consumer_type": "INSTANCE"}).raise_for_status()


class Revision:
    """The store's revision, read from its file: every write moves it."""

    def __init__(self, server: ServerProcess) -> None:
        self.db = sqlite3.connect(f"file:{path_of(server.store)}?mode=ro", uri=True, isolation_level=None)

    def __call__(self) -> int:
        return int(self.db.execute("SELECT value FROM meta WHERE key = 'revision'").fetchone()[0])


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    """One client for every request (a client per request cost ~0.2 s each: its TLS context, made anew)."""
    with httpx.Client(base_url=server.url + "/placement", timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def revision(server: ServerProcess) -> Iterator[Revision]:
    watched = Revision(server)
    with contextlib.closing(watched.db):
        yield watched


def check(response: httpx.Response, before: int, revision: Revision, what: str) -> None:
    status = response.status_code
    assert status < 500, f"{what}: {status} {response.text[:500]}"
    if status < 400:
        return
    assert len(response.content) <= MAX_REFUSAL, f"{what}: a {len(response.content)}-byte refusal"
    media = response.headers.get("content-type", "")
    if not media.startswith("text/html"):  # asked for by an Accept that takes HTML and no JSON, as webob does
        assert media.startswith("application/json"), f"{what}: {status} as {media!r}"
        errors = response.json()["errors"]
        assert errors[0]["status"] == status and errors[0]["detail"], f"{what}: {response.text[:500]}"
    assert revision() == before, f"{what}: refused with {status}, yet the store moved"


# ------------------------------------------------------------------------------------------ strategies

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
LONG = st.integers(300, 20_000).map(lambda n: "x" * n)
HEADER_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=40).map(str.strip)
UUIDS = st.sampled_from([ROOT, CHILD, SHARED, CONSUMER, AGGREGATE]) | st.uuids().map(str)
PARAMETERS = {
    "uuid": UUIDS | TEXT | LONG | st.uuids().map(lambda u: u.hex),
    "consumer_uuid": UUIDS | TEXT | LONG,
    "resource_class": st.sampled_from(["VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_FUZZ", "CUSTOM_NEW", "vcpu"])
    | TEXT | LONG,
    "name": st.sampled_from(["CUSTOM_FUZZ", "CUSTOM_FUZZ_TRAIT", "CUSTOM_X", "HW_CPU_X86_AVX2", "VCPU"]) | TEXT
    | LONG,
}
QUERY_NAMES = ["resources", "required", "member_of", "in_tree", "limit", "group_policy", "name", "uuid",
               "project_id", "user_id", "consumer_type", "root_required", "same_subtree", "resources1",
               "required1", "member_of1", "in_tree1", "associated", "resources_x"]
QUERY_VALUES = st.sampled_from(["VCPU:1", "VCPU:1,MEMORY_MB:512", "CUSTOM_FUZZ:1", "VCPU:0", "VCPU:-1", "VCPU",
                                "CUSTOM_FUZZ_TRAIT", "!CUSTOM_FUZZ_TRAIT", "in:CUSTOM_FUZZ_TRAIT,HW_CPU_X86_AVX2",
                                f"in:{AGGREGATE}", f"!{AGGREGATE}", ROOT, "1", "0", "isolate", "none", "_a,_b",
                                "", "p"]) | TEXT | LONG
VERSIONS = st.sampled_from(["placement latest", "placement 1.0", "placement 1.14", "placement 1.20",
                            "placement 1.28", "placement 1.33", "placement 1.36", "placement 1.38",
                            "placement 1.39", "placement 1.40", "placement 2.0", "placement 1.x", "compute 2.1",
                            "placement 1.01", ""]) | HEADER_TEXT
CONTENT_TYPES = st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain",
                                 "application/xml", "", None]) | HEADER_TEXT
ACCEPTS = st.sampled_from([None, "application/json", "*/*", "text/html", "application/xml", "application/json;q=0"])
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                           max_leaves=12)


def _shaped(template: str) -> dict[str, Any]:
    """A body of the shape the route takes (valid at the latest version, most of the time)."""
    inventory = {"total": 8, "reserved": 0, "min_unit": 1, "max_unit": 8, "step_size": 1, "allocation_ratio": 1.0}
    allocation = {"allocations": {ROOT: {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u",
                  "consumer_generation": None, "consumer_type": "INSTANCE"}
    if template.endswith("/inventories"):
        return {"resource_provider_generation": 1, "inventories": {"VCPU": inventory}}
    if template.endswith("/inventories/{resource_class}"):
        return {"resource_provider_generation": 1, **inventory}
    if template.endswith("/traits"):
        return {"resource_provider_generation": 1, "traits": ["CUSTOM_FUZZ_TRAIT"]}
    if template.endswith("/aggregates"):
        return {"resource_provider_generation": 1, "aggregates": [AGGREGATE]}
    if template == "/resource_classes":
        return {"name": "CUSTOM_FUZZ_NEW"}
    if template == "/allocations":
        return {str(uuid.UUID(int=7)): allocation}
    if template.startswith("/allocations/"):
        return allocation
    if template == "/reshaper":
        return {"inventories": {ROOT: {"resource_provider_generation": 1, "inventories": {"VCPU": inventory}}},
                "allocations": {CONSUMER: allocation}}
    return {"name": "fuzz-new", "parent_provider_uuid": ROOT}


@st.composite
def _mutated(draw: st.DrawFn, template: str) -> Any:
    """The route's body with one field (at any depth) replaced, removed or added."""
    body = _shaped(template)
    node: Any = body
    while isinstance(node, dict) and node and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(node)))
        if not isinstance(node[key], dict):
            break
        node = node[key]
    if isinstance(node, dict) and node:
        key = draw(st.sampled_from(sorted(node)))
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        if action == "replace":
            node[key] = draw(JSON_VALUES | LONG | st.integers(-2**70, 2**70))
        elif action == "remove":
            del node[key]
        else:
            node[draw(TEXT | LONG)] = draw(JSON_VALUES)
    return body


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, dict[str, str], bytes | None, str]:
    template, methods = draw(st.sampled_from(ROUTES))
    method = draw(st.sampled_from(sorted(methods)) | st.sampled_from(["GET", "PUT", "POST", "DELETE", "PATCH"]))
    path = template
    for name, values in PARAMETERS.items():
        if "{" + name + "}" in path:
            path = path.replace("{" + name + "}", quote(draw(values), safe=""))
    query = draw(st.dictionaries(st.sampled_from(QUERY_NAMES) | TEXT, QUERY_VALUES, max_size=3)) \
        if draw(st.integers(0, 3)) == 0 else {}
    if query:
        path += "?" + urlencode(query)
    headers = dict(ADMIN)
    version = draw(VERSIONS)
    if version:
        headers["openstack-api-version"] = version
    media = draw(CONTENT_TYPES)
    if media is not None:
        headers["content-type"] = media
    accept = draw(ACCEPTS)
    if accept is not None:
        headers["accept"] = accept
    if method in ("GET", "DELETE") and draw(st.integers(0, 4)):
        return method, path, headers, None, template
    kind = draw(st.sampled_from(["shaped", "mutated", "mutated", "json", "hostile"]))
    if kind == "shaped":
        body = json.dumps(_shaped(template)).encode()
    elif kind == "mutated":
        body = json.dumps(draw(_mutated(template))).encode()
    elif kind == "json":
        body = json.dumps(draw(JSON_VALUES)).encode()
    else:
        body = HOSTILE_BODIES[draw(st.sampled_from(sorted(HOSTILE_BODIES)))]
    return method, path, headers, body, template


# ---------------------------------------------------------------------------------------------- tests


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(request=requests())
def test_generated_requests(server: ServerProcess, http: httpx.Client, revision: Revision,
                            request: tuple[str, str, dict[str, str], bytes | None, str]) -> None:
    method, path, headers, body, _ = request
    before = revision()
    response = http.request(method, path, headers=headers, content=body)
    check(response, before, revision, f"{method} {path[:200]}")
    if response.status_code < 300 and method == "DELETE":
        _seed(server.url + "/placement")  # what the generated requests name keeps existing


BODY_ROUTES = [(template, method) for template, methods in ROUTES for method in sorted(methods)
               if method in ("PUT", "POST")]


@pytest.mark.parametrize(("template", "method"), BODY_ROUTES)
def test_every_body_route_refuses_hostile_bodies(server: ServerProcess, http: httpx.Client, revision: Revision,
                                                 template: str, method: str) -> None:
    path = (template.replace("{uuid}", ROOT).replace("{consumer_uuid}", str(uuid.UUID(int=9)))
            .replace("{resource_class}", "VCPU").replace("{name}", "CUSTOM_FUZZ_HOSTILE"))
    headers = {**ADMIN, "openstack-api-version": "placement latest", "content-type": "application/json"}
    for kind, body in HOSTILE_BODIES.items():
        before = revision()
        response = http.request(method, path, headers=headers, content=body)
        check(response, before, revision, f"{method} {path} with {kind}")
        # A bodiless PUT of a trait or a resource class may take the body's absence or ignore it; every other
        # route must refuse all of these.
        if template not in ("/traits/{name}", "/resource_classes/{name}") and kind not in TAKEN_MAYBE:
            assert response.status_code >= 400, f"{method} {path} took {kind}: {response.text[:300]}"
        if response.status_code < 300:
            _seed(server.url + "/placement")
