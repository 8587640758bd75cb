"""Removing an inventory that allocations use: Gantt's Placement face answers as Placement 16 does, to the letter of
the error's ``detail`` (webob's explanation of a 409 first), since Nova's report client puts that text in what it
logs and raises (``InventoryInUse``), and Nova's functional tests match it
(test_pci_in_placement.PlacementPCIInventoryReportingTests.test_device_reconfiguration_with_allocations_config_change_stop).
The same three calls go to a real Placement 16.0.0 (tests/placement/real_placement.py) and to ``gantt serve``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.placement.conftest import CONFIG
from tests.placement.real_placement import RealPlacement
from tests.service.server import ServerProcess

HEADERS = {"openstack-api-version": "placement 1.39", "x-auth-token": "admin", "x-roles": "admin"}


@pytest.fixture(scope="module")
def gantt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("in-use")
    with ServerProcess(f"sqlite:///{workdir}/gantt.sqlite", config=CONFIG, workdir=workdir) as process:
        yield process.url + "/placement"


@pytest.fixture(scope="module")
def real() -> Iterator[str]:
    with RealPlacement(policy="legacy") as placement:
        yield placement.url


def _refusals(url: str) -> list[tuple[int, str, str]]:
    """(status, code, detail with the provider's uuid replaced) of each way of removing an inventory in use."""
    out = []
    with httpx.Client(base_url=url, headers=HEADERS, timeout=10.0) as http:
        rp = str(uuid.uuid4())
        assert http.put("/resource_classes/CUSTOM_X").status_code in (201, 204)
        assert http.post("/resource_providers", json={"name": f"rp-{rp}", "uuid": rp}).status_code == 200
        assert http.put(f"/resource_providers/{rp}/inventories", json={
            "resource_provider_generation": 0,
            "inventories": {"CUSTOM_X": {"total": 1}, "VCPU": {"total": 8}}}).status_code == 200
        assert http.put(f"/allocations/{uuid.uuid4()}", json={
            "allocations": {rp: {"resources": {"CUSTOM_X": 1}}}, "project_id": "p", "user_id": "u",
            "consumer_generation": None, "consumer_type": "INSTANCE"}).status_code == 204
        generation = http.get(f"/resource_providers/{rp}").json()["generation"]
        answers: list[httpx.Response] = [
            http.put(f"/resource_providers/{rp}/inventories", json={
                "resource_provider_generation": generation, "inventories": {"VCPU": {"total": 8}}}),
            http.delete(f"/resource_providers/{rp}/inventories/CUSTOM_X"),
            http.delete(f"/resource_providers/{rp}/inventories"),
        ]
        for answer in answers:
            error: dict[str, Any] = answer.json()["errors"][0]
            out.append((answer.status_code, error["code"], error["detail"].replace(rp, "<rp>")))
    return out


def test_removing_an_inventory_in_use_is_refused_in_placements_words(gantt: str, real: str) -> None:
    theirs = _refusals(real)
    assert [status for status, _, _ in theirs] == [409, 409, 409]
    assert _refusals(gantt) == theirs
