"""Runs under the reference virtualenv (openstack-placement), never imports gantt: sets up the data one of
Placement's gabbi fixtures would, over HTTP against a live server, and prints the environment it exports.

argv: the server's Placement URL, then fixture class names (``APIFixture``, ``AllocationFixture``,
``SharedStorageFixture`` ...). Placement's own fixture classes are run as they are (their ``start_fixture``),
with the helpers they build providers, inventories, traits, aggregates and allocations through
(``placement.tests.functional.db.test_base``) swapped for calls to the server's REST API. Printed: one JSON object,
the environment variables the fixtures set (``RP_UUID``, ``CN1_UUID`` ...).
"""

from __future__ import annotations

import json
import os
import sys
import types
import urllib.error
import urllib.request
import uuid as uuidlib
from typing import Any

import os_traits
from oslo_utils.fixture import uuidsentinel
from placement.tests.functional.fixtures import gabbits

URL = ""
HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement latest", "content-type": "application/json",
           "accept": "application/json"}
STANDARD_TRAITS = set(os_traits.get_traits())


def call(method: str, path: str, body: Any = None, version: str = "latest") -> Any:
    data = json.dumps(body).encode() if body is not None else None
    headers = {**HEADERS, "openstack-api-version": f"placement {version}"}
    request = urllib.request.Request(URL + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            raw = answer.read()
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"{method} {path}: {exc.code} {exc.read().decode(errors='replace')}") from None
    return json.loads(raw) if raw else None


def generation(uuid: str) -> int:
    return int(call("GET", f"/resource_providers/{uuid}")["generation"])


class RemoteProvider:
    """What ``tb.create_provider`` returns, backed by the server: the attributes and methods fixtures use."""

    def __init__(self, uuid: str, name: str, parent: str | None) -> None:
        self.uuid, self.name, self.parent_provider_uuid = uuid, name, parent

    @property
    def generation(self) -> int:
        return generation(self.uuid)

    def set_aggregates(self, aggregates: list[str], increment_generation: bool = False) -> None:
        call("PUT", f"/resource_providers/{self.uuid}/aggregates",
             {"aggregates": list(aggregates), "resource_provider_generation": self.generation})


def create_provider(context: Any, name: str, *aggs: str, **kwargs: Any) -> RemoteProvider:
    uuid = kwargs.get("uuid", getattr(uuidsentinel, name))
    body = {"name": name, "uuid": uuid}
    if kwargs.get("parent"):
        body["parent_provider_uuid"] = kwargs["parent"]
    call("POST", "/resource_providers", body)
    provider = RemoteProvider(uuid, name, kwargs.get("parent"))
    if aggs:
        provider.set_aggregates(list(aggs))
    return provider


def ensure_rc(name: str) -> None:
    if name.startswith("CUSTOM_"):
        call("PUT", f"/resource_classes/{name}")


def add_inventory(rp: RemoteProvider, rc: str, total: int, **kwargs: Any) -> None:
    ensure_rc(rc)
    kwargs.setdefault("max_unit", total)
    call("POST", f"/resource_providers/{rp.uuid}/inventories",
         {"resource_class": rc, "total": total, "resource_provider_generation": rp.generation, **kwargs})


def set_traits(rp: RemoteProvider, *traits: str) -> None:
    for name in traits:
        if name not in STANDARD_TRAITS:
            call("PUT", f"/traits/{name}")
    call("PUT", f"/resource_providers/{rp.uuid}/traits",
         {"traits": list(traits), "resource_provider_generation": rp.generation})


def ensure_consumer(ctx: Any, user: Any, project: Any, consumer_id: str | None = None) -> Any:
    return types.SimpleNamespace(uuid=consumer_id or str(uuidlib.uuid4()), user=user, project=project)


def set_allocation(ctx: Any, rp: RemoteProvider, consumer: Any, rc_used_dict: dict[str, int]) -> None:
    # At 1.37: the fixture's consumers have no type (Placement shows them as 'unknown'), as in-process ones
    held = call("GET", f"/allocations/{consumer.uuid}", version="1.37")
    call("PUT", f"/allocations/{consumer.uuid}", {
        "allocations": {rp.uuid: {"resources": dict(rc_used_dict)}},
        "project_id": consumer.project.external_id, "user_id": consumer.user.external_id,
        "consumer_generation": held.get("consumer_generation")}, version="1.37")


def create_user_and_project(ctx: Any, prefix: str = "fake") -> tuple[Any, Any]:
    return (types.SimpleNamespace(external_id=f"{prefix}-user"),
            types.SimpleNamespace(external_id=f"{prefix}-project"))


class RemoteResourceClass:
    def __init__(self, context: Any = None, name: str = "") -> None:
        self.name = name

    def create(self) -> None:
        call("PUT", f"/resource_classes/{self.name}")


def main() -> None:
    global URL
    URL = sys.argv[1].rstrip("/")
    # Only the fixture module's names are swapped: Placement's own database fixture keeps the real ones.
    gabbits.tb = types.SimpleNamespace(  # type: ignore[attr-defined]
        create_provider=create_provider, add_inventory=add_inventory, set_traits=set_traits,
        ensure_consumer=ensure_consumer, set_allocation=set_allocation,
        create_user_and_project=create_user_and_project)
    gabbits.rc_obj = types.SimpleNamespace(ResourceClass=RemoteResourceClass)  # type: ignore[attr-defined]
    before = dict(os.environ)
    for fixture_name in sys.argv[2:]:
        getattr(gabbits, fixture_name)().start_fixture()
    exported = {k: v for k, v in os.environ.items() if before.get(k) != v}
    print(json.dumps(exported))


if __name__ == "__main__":
    main()
