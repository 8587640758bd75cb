"""The Placement face's policy on a real server: Placement 16's default rules with its credentials (noauth2's
roles from headers without a configured token, the service's own roles with it), scope, and the legacy mode.
(Placement's own *-rbac gabbi files check every route: tests/placement/test_gabbi_conformance.py.)"""

from __future__ import annotations

import httpx
import pytest

from gantt.placement.api.app import ROUTES, RULE_OF
from gantt.placement.api.policy import RULES
from tests.service.server import ServerProcess

V = {"openstack-api-version": "placement latest"}


def test_every_route_names_a_rule_placement_has() -> None:
    assert {(path, method) for path, methods in ROUTES for method in methods if path != "/"} == set(RULE_OF)
    assert set(RULE_OF.values()) <= set(RULES)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with ServerProcess("memory://", workdir=tmp_path_factory.mktemp("new")) as new, \
            ServerProcess("memory://", workdir=tmp_path_factory.mktemp("old"),
                          config={"oslo_policy": {"enforce_new_defaults": False}}) as legacy, \
            ServerProcess("memory://", workdir=tmp_path_factory.mktemp("tok"), token="s3cret") as tokened:
        yield new, legacy, tokened


def status(server: ServerProcess, method: str, path: str, **headers: str) -> int:
    with httpx.Client(base_url=server.url + "/placement", headers=V) as http:
        return http.request(method, path, headers=headers).status_code


def test_roles_decide_under_the_new_defaults(servers) -> None:  # type: ignore[no-untyped-def]
    new, legacy, _ = servers
    assert status(new, "GET", "/resource_providers", **{"x-auth-token": "admin"}) == 200  # noauth2: admin
    assert status(new, "GET", "/resource_providers", **{"x-auth-token": "user"}) == 403  # no role
    assert status(new, "GET", "/resource_providers", **{"x-auth-token": "user", "x-roles": "service"}) == 200
    assert status(new, "GET", "/resource_providers", **{"x-auth-token": "user", "x-roles": "member,reader"}) == 403
    system = {"x-auth-token": "user", "x-roles": "admin", "openstack-system-scope": "all"}
    assert status(new, "GET", "/resource_providers", **system) == 403  # every rule is project-scoped
    # usages: a reader of the project asked about, and no other
    reader = {"x-auth-token": "user", "x-roles": "reader", "x-project-id": "p1"}
    assert status(new, "GET", "/usages?project_id=p1", **reader) == 200
    assert status(new, "GET", "/usages?project_id=p2", **reader) == 403
    # only a service reshapes under the new defaults; the deprecated rule lets an admin do it in legacy mode
    body_status = {"x-auth-token": "admin", "content-type": "application/json"}
    with httpx.Client(base_url=new.url + "/placement", headers=V) as http:
        refused = http.post("/reshaper", json={}, headers=body_status)
        assert refused.status_code == 403 and "placement:reshaper:reshape" in refused.json()["errors"][0]["detail"]
        assert http.post("/reshaper", json={}, headers={**body_status, "x-roles": "service"}).status_code == 400
    with httpx.Client(base_url=legacy.url + "/placement", headers=V) as http:
        assert http.post("/reshaper", json={}, headers=body_status).status_code == 400
    assert status(legacy, "GET", "/resource_providers", **{"x-auth-token": "user", "x-roles": "member"}) == 403


def test_gantts_token_is_the_services_credential(servers) -> None:  # type: ignore[no-untyped-def]
    _, _, tokened = servers
    assert status(tokened, "GET", "/resource_providers", **{"x-auth-token": "guess"}) == 401
    assert status(tokened, "GET", "/resource_providers", **{"x-auth-token": "s3cret"}) == 200
    # roles in headers do not lower nor raise what the configured token may do
    assert status(tokened, "GET", "/resource_providers", **{"x-auth-token": "s3cret", "x-roles": "reader"}) == 200
    with httpx.Client(base_url=tokened.url + "/placement", headers={**V, "x-auth-token": "s3cret"}) as http:
        assert http.post("/reshaper", json={}).status_code == 400  # past the policy: the body is refused
