"""Bearer token: required everywhere but / and /health; non-loopback binds refused without one."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

from gantt.model import GanttError
from gantt.service.schemas import Unauthorized
from gantt.service.server import is_loopback
from tests.service.conftest import TOKEN
from tests.service.server import ServerProcess


@pytest.mark.parametrize(("method", "path"), [("GET", "/v1/hosts"), ("GET", "/metrics"), ("GET", "/openapi.json"),
                                              ("POST", "/v1/select_destinations"), ("DELETE", "/v1/hosts/x"),
                                              ("GET", "/v1/no-such-path")])
def test_missing_or_wrong_token_is_401(secured: ServerProcess, method: str, path: str) -> None:
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": TOKEN},
                    {"authorization": f"Bearer {TOKEN}x"}):
        response = httpx.request(method, secured.url + path, headers=headers, json={})
        assert response.status_code == 401, headers
        assert response.headers["content-type"] == "application/problem+json"
        assert response.headers["www-authenticate"] == "Bearer"


def test_health_is_open_and_the_token_works(secured: ServerProcess) -> None:
    assert httpx.get(f"{secured.url}/health").status_code == 200
    with secured.client() as client:
        assert client.hosts() is not None
    with secured.client(token="nope") as client, pytest.raises(Unauthorized):
        client.hosts()


def test_the_version_document_is_open_and_names_v1(secured: ServerProcess) -> None:
    """Issue 17: OpenStack's version discovery at ``/``, answered without a token (it tells nothing else)."""
    from gantt import __version__
    answer = httpx.get(f"{secured.url}/")
    assert answer.status_code == 200
    assert answer.json() == {"versions": [{"id": "v1", "status": "CURRENT", "links": [{"rel": "self",
                                                                                        "href": "/v1/"}]}],
                             "release": __version__}


def test_non_loopback_bind_needs_a_token(tmp_path: object) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("GANTT_TOKEN", "GANTT_CONFIG")}
    result = subprocess.run([sys.executable, "-m", "gantt", "serve", "--store", "memory://", "--host", "0.0.0.0",
                             "--port", "0"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "refusing to bind 0.0.0.0" in result.stderr and "[gantt] token" in result.stderr  # not eaten as markup


def test_loopback_detection() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1") and not is_loopback("example.org")


def test_unauthorized_maps_to_a_gantt_error(secured: ServerProcess) -> None:
    with secured.client(token="") as client:
        client_error: GanttError | None = None
        try:
            client.allocations()
        except GanttError as exc:
            client_error = exc
        assert isinstance(client_error, Unauthorized) and client_error.status == 401


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
def test_the_bearer_scheme_is_case_insensitive(secured: ServerProcess, scheme: str) -> None:
    response = httpx.get(f"{secured.url}/v1/hosts", headers={"authorization": f"{scheme} {TOKEN}"})
    assert response.status_code == 200


def test_health_without_a_token_tells_only_the_status(secured: ServerProcess) -> None:
    anonymous = httpx.get(f"{secured.url}/health")
    assert anonymous.status_code == 200 and anonymous.json() == {"status": "ok"}
    known = httpx.get(f"{secured.url}/health", headers={"authorization": f"Bearer {TOKEN}"}).json()
    assert known["status"] == "ok" and "store" in known and "pid" in known


def test_a_compressed_body_is_a_415(secured: ServerProcess) -> None:
    import gzip
    import json

    body = gzip.compress(json.dumps({"flavor": {"vcpus": 1, "memory_mb": 64}}).encode())
    response = httpx.post(f"{secured.url}/v1/select_destinations", content=body,
                          headers={"authorization": f"Bearer {TOKEN}", "content-type": "application/json",
                                   "content-encoding": "gzip"})
    assert response.status_code == 415 and response.json()["field"] == "content-encoding"


def test_a_trailing_slash_is_not_redirected_to_the_callers_host(secured: ServerProcess) -> None:
    response = httpx.get(f"{secured.url}/v1/hosts/", headers={"authorization": f"Bearer {TOKEN}",
                                                              "host": "evil.example"})
    assert response.status_code == 404 and "location" not in response.headers
