"""``[cors]`` on the Placement face, side by side with Placement 16.0.0 behind oslo.middleware's CORS filter
configured alike: the same preflights and requests, the same status and CORS headers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gantt.config import load_config
from tests.placement.real_placement import RealPlacement
from tests.service.server import ServerProcess

VALID, OTHER = "http://valid.example.com", "http://other.example.com"
CONFIGS: dict[str, dict[str, Any]] = {
    "origins": {"allowed_origin": [VALID, OTHER], "allow_headers": ["openstack-api-version", "X-Auth-Token"],
                "expose_headers": ["openstack-api-version", "x-openstack-request-id"], "max_age": 60,
                "allow_methods": ["GET", "POST", "OPTIONS"]},
    "wildcard": {"allowed_origin": ["*"], "allow_credentials": False, "max_age": 0},  # and Placement's defaults
}
TOKEN = {"x-auth-token": "admin"}
# (method, path, headers): preflights allowed and refused for each reason, simple requests, no origin at all.
REQUESTS: list[tuple[str, str, dict[str, str]]] = [
    ("OPTIONS", "/", {"origin": VALID, "access-control-request-method": "GET",
                      "access-control-request-headers": "openstack-api-version"}),
    ("OPTIONS", "/resource_providers", {"origin": OTHER, "access-control-request-method": "POST",
                                        "access-control-request-headers": "x-auth-token, Content-Type"}),
    ("OPTIONS", "/resource_providers", {"origin": VALID, "access-control-request-method": "DELETE"}),
    ("OPTIONS", "/resource_providers", {"origin": VALID, "access-control-request-method": "GET",
                                        "access-control-request-headers": "x-unknown"}),
    ("OPTIONS", "/", {"origin": "http://invalid.example.com", "access-control-request-method": "GET"}),
    ("OPTIONS", "/", {"origin": VALID}),
    ("OPTIONS", "/", {}),
    ("OPTIONS", "/no/such/path", {"origin": VALID, "access-control-request-method": "GET"}),
    ("GET", "/", {"origin": VALID}),
    ("GET", "/", {"origin": "http://invalid.example.com"}),
    ("GET", "/", {}),
    ("GET", "/resource_providers", {"origin": OTHER, **TOKEN}),
    ("GET", "/resource_providers", {"origin": VALID}),  # refused (no token): the refusal is decorated too
]


def _seen(answer: httpx.Response) -> dict[str, Any]:
    headers = {k: v for k, v in answer.headers.items() if k.startswith("access-control-")}
    return {"status": answer.status_code, **headers, "varies by origin": "Origin" in answer.headers.get("vary", ""),
            "empty": answer.content == b""}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def both(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    cors = CONFIGS[request.param]
    with RealPlacement(policy="legacy", cors=cors) as real, \
            ServerProcess("memory://", config={"cors": cors, "gantt": {"placement_mount": "/"}},
                          workdir=tmp_path_factory.mktemp("cors")) as gantt:
        yield real.url, gantt.url


@pytest.mark.parametrize("index", range(len(REQUESTS)))
def test_cors_answers_as_placement_behind_oslo_middleware(both: tuple[str, str], index: int) -> None:
    method, path, headers = REQUESTS[index]
    seen = []
    for url in both:
        with httpx.Client(base_url=url) as http:
            seen.append(_seen(http.request(method, path, headers=headers)))
    placement, gantt = seen
    if method != "OPTIONS" or placement["status"] != 200 or not placement["empty"]:
        # Placement's own answer passed through: its body is its own business (tested elsewhere)
        placement.pop("empty"), gantt.pop("empty")
    assert gantt == placement


def test_without_allowed_origin_there_is_no_cors(tmp_path_factory: pytest.TempPathFactory) -> None:
    with ServerProcess("memory://", workdir=tmp_path_factory.mktemp("nocors")) as gantt, \
            httpx.Client(base_url=gantt.url + "/placement") as http:
        preflight = http.options("/", headers={"origin": VALID, "access-control-request-method": "GET"})
        assert preflight.status_code == 405 and "access-control-allow-origin" not in preflight.headers
        assert "access-control-allow-origin" not in http.get("/", headers={"origin": VALID}).headers


def test_placement_conf_style_options_read_as_oslo_config_reads_them(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text('"placement:traits:list": "@"\n')
    (tmp_path / "placement.conf").write_text(
        "[cors]\nallowed_origin = http://a.example, http://b.example\nallow_credentials = false\nmax_age = 10\n"
        "allow_methods = GET,POST\n[oslo_policy]\npolicy_file = policy.yaml\n")
    config = load_config(tmp_path / "placement.conf")
    assert config.cors.allowed_origin == ["http://a.example", "http://b.example"]
    assert (config.cors.allow_credentials, config.cors.max_age, config.cors.allow_methods) == \
        (False, 10, ["GET", "POST"])
    assert "OpenStack-API-Version" in config.cors.allow_headers  # Placement's default kept
    assert config.oslo_policy.policy_file == str(tmp_path / "policy.yaml")  # beside the file that names it
