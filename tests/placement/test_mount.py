"""``[gantt] placement_mount``: the Placement face under another prefix, or at the server's root beside Gantt's own
paths (which keep theirs, and their bearer token)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from gantt.config import GANTT_PATHS, Config
from gantt.model import InvalidRequest
from gantt.service.routes import PAGES, ROUTES
from tests.service.server import ServerProcess

PLACEMENT = {"x-auth-token": "s3cret", "openstack-api-version": "placement latest"}


def test_gantt_paths_are_the_services_own_routes() -> None:
    assert {route.path.split("/")[1] for route in [*ROUTES, *PAGES]} - {""} == GANTT_PATHS


@pytest.mark.parametrize("mount", ["placement", "/placement/", "/v1", "/v1/placement", "/health", "/ui/x",
                                   "/a//b", "/a b", "/a?b", ""])
def test_a_mount_that_cannot_be_served_is_refused(mount: str) -> None:
    with pytest.raises(InvalidRequest, match="placement_mount"):
        Config.from_dict({"gantt": {"placement_mount": mount}})


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess("memory://", config={"gantt": {"placement_mount": "/"}}, token="s3cret",
                       workdir=tmp_path_factory.mktemp("root")) as server:
        yield server


def test_at_the_root_placement_answers_everything_but_gantts_own_paths(root: ServerProcess) -> None:
    with httpx.Client(base_url=root.url, headers=PLACEMENT) as http:
        document = http.get("/").json()
        assert document["versions"][0]["min_version"] == "1.0"  # Placement's version document, not Gantt's
        rp = http.post("/resource_providers", json={"name": "cn1", "uuid": str(uuid.uuid4())}).json()
        assert {link["href"] for link in rp["links"]} >= {f"/resource_providers/{rp['uuid']}"}
        old = http.post("/resource_providers", json={"name": "cn2"}, headers={"openstack-api-version":
                                                                              "placement 1.19"})
        assert old.status_code == 201 and httpx.URL(old.headers["location"]).path.startswith("/resource_providers/")
        gone = http.get("/placement/resource_providers")
        assert gone.status_code == 404 and "errors" in gone.json()  # Placement's 404: nothing lives there now
        assert http.get("/resource_providers").status_code == 200
    with httpx.Client(base_url=root.url) as http:
        assert http.get("/health").json()["status"] == "ok"
        refused = http.get("/v1/hosts", headers={"x-auth-token": "s3cret"})  # Gantt's own: its bearer token
        assert refused.status_code == 401 and refused.headers["content-type"] == "application/problem+json"
        hosts = http.get("/v1/hosts", headers={"authorization": "Bearer s3cret"})
        assert hosts.status_code == 200
        assert http.get("/resource_providers").status_code == 401  # Placement's: its X-Auth-Token


def test_under_another_prefix(tmp_path_factory: pytest.TempPathFactory) -> None:
    with ServerProcess("memory://", config={"gantt": {"placement_mount": "/infra/placement"}},
                       workdir=tmp_path_factory.mktemp("prefix")) as server, \
            httpx.Client(base_url=server.url, headers={**PLACEMENT, "x-auth-token": "admin"}) as http:
        assert http.get("/infra/placement").json()["versions"][0]["id"] == "v1.0"
        rp = http.post("/infra/placement/resource_providers", json={"name": "cn1"}).json()
        assert f"/infra/placement/resource_providers/{rp['uuid']}" in {link["href"] for link in rp["links"]}
        assert http.get("/placement/resource_providers").status_code == 404
        assert "versions" in http.get("/").json()  # Gantt's own version document stays at the root
