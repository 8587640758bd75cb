"""Issue 30 item 10: ``gantt audit`` reported overcommits the service had accepted. It counted a claim its node's
reports had settled on top of them forever (the service counts it once, past ``claim_timeout``); it took an
inventory reserving more than its total and then audited it as "used 0 > capacity -6"; it flagged what Placement
16 allows (a Placement write on a node whose own report counts usage, an inventory or a reshape lowered under
what is allocated, then a write that leaves it less over). Now the audit builds its table as a replica does and
judges capacity by the service's own write rules, and what it would flag as a bad inventory is refused on write.

Real servers (``gantt serve`` on SQLite, the reference Placement 16.0.0 beside it) and ``gantt audit`` run as an
operator runs it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gantt.compute.scheduler import describe
from gantt.config import Config
from gantt.model import Allocation, HostReport, HostStats, Inventory, Provider
from gantt.replication.audit import audit, audit_table
from gantt.store.base import Batch, Capacity, Generation
from gantt.store.urls import open_store
from tests.placement.real_placement import RealPlacement
from tests.placement.test_api import new_uuid
from tests.service.server import ServerProcess

LATEST = {"x-auth-token": "admin", "openstack-api-version": "placement latest"}
TIMEOUT = 2.0
CONFIG: dict[str, Any] = {"DEFAULT": {"service_down_time": 86400},
                          "filter_scheduler": {"enabled_filters": ["ComputeFilter"]},
                          "gantt": {"seed": 7, "claim_timeout": TIMEOUT}}


def gantt_audit(store: str, config: Path | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "gantt", "audit", "--store", store]
    if config is not None:
        argv += ["--config", str(config)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def assert_audit_ok(store: str, config: Path | None = None) -> None:
    done = gantt_audit(store, config)
    assert done.returncode == 0 and "audit ok" in done.stdout, done.stdout + done.stderr


@pytest.fixture(scope="module")
def gantt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("audit")
    with ServerProcess(f"sqlite:///{workdir}/gantt.sqlite", config=CONFIG, workdir=workdir) as process:
        yield process


@pytest.fixture(scope="module")
def real() -> Iterator[RealPlacement]:
    with RealPlacement(policy="legacy") as placement:
        yield placement


def config_file(server: ServerProcess) -> Path:
    """The server's own config file (the audit must count with its claim_timeout)."""
    assert server.config_path is not None
    return server.config_path


def _steps(http: httpx.Client) -> list[tuple[str, int]]:
    """Placement calls that leave providers over capacity the ways Placement allows, with each answer's status."""
    out: list[tuple[str, int]] = []

    def call(what: str, method: str, path: str, body: Any = None) -> httpx.Response:
        # a service may reshape (Placement's default policy); the reference runs its legacy rules (admin may)
        answer = http.request(method, path, json=body, headers={"x-roles": "admin,service"})
        out.append((what, answer.status_code))
        return answer

    def generation(rp: str) -> int:
        return int(http.get(f"/resource_providers/{rp}").json()["generation"])

    def alloc(rp: str, vcpus: int, generation: int | None) -> dict[str, Any]:
        return {"allocations": {rp: {"resources": {"VCPU": vcpus}}}, "project_id": "p", "user_id": "u",
                "consumer_generation": generation, "consumer_type": "INSTANCE"}

    shrunk, reshaped = new_uuid(), new_uuid()
    c1, c2 = new_uuid(), new_uuid()
    for rp in (shrunk, reshaped):
        call("create", "POST", "/resource_providers", {"name": f"rp-{rp}", "uuid": rp})
        call("inventory 8", "PUT", f"/resource_providers/{rp}/inventories",
             {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}})
    call("allocate 6", "PUT", f"/allocations/{c1}", alloc(shrunk, 6, None))
    call("inventory lowered to 4", "PUT", f"/resource_providers/{shrunk}/inventories",
         {"resource_provider_generation": generation(shrunk), "inventories": {"VCPU": {"total": 4}}})
    call("further over", "PUT", f"/allocations/{c1}", alloc(shrunk, 7, 1))
    call("less over", "PUT", f"/allocations/{c1}", alloc(shrunk, 5, 1))
    call("one more", "PUT", f"/allocations/{new_uuid()}", alloc(shrunk, 1, None))
    call("allocate 6", "PUT", f"/allocations/{c2}", alloc(reshaped, 6, None))
    call("reshape to 4", "POST", "/reshaper", {
        "inventories": {reshaped: {"resource_provider_generation": generation(reshaped),
                                   "inventories": {"VCPU": {"total": 4}}}},
        "allocations": {c2: alloc(reshaped, 6, 1)}})
    call("reshape to 3, less", "POST", "/reshaper", {
        "inventories": {reshaped: {"resource_provider_generation": generation(reshaped),
                                   "inventories": {"VCPU": {"total": 3}}}},
        "allocations": {}})
    # Placement's own refusal of a bad inventory (reserved above total), and what it takes (reserved = total)
    bad = new_uuid()
    call("create", "POST", "/resource_providers", {"name": f"rp-{bad}", "uuid": bad})
    call("reserved > total", "PUT", f"/resource_providers/{bad}/inventories",
         {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4, "reserved": 10}}})
    call("reserved = total", "PUT", f"/resource_providers/{bad}/inventories",
         {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4, "reserved": 4}}})
    return out


def test_what_placement_allows_is_not_an_overcommit(gantt: ServerProcess, real: RealPlacement) -> None:
    with httpx.Client(base_url=real.url, headers=LATEST, timeout=30.0) as http:
        theirs = _steps(http)
    with httpx.Client(base_url=gantt.url + "/placement", headers=LATEST, timeout=30.0) as http:
        ours = _steps(http)
    assert ours == theirs
    assert ("inventory lowered to 4", 200) in ours and ("less over", 204) in ours  # the states to audit exist
    assert_audit_ok(gantt.store, config_file(gantt))


def test_a_placement_write_on_a_node_that_reports_usage_is_not_an_overcommit(gantt: ServerProcess) -> None:
    """Placement counts allocations alone; the node's own report says 6 of 8 used (no instance list): Placement's
    write of 4 lands, as it would on Placement, and the audit must not call it an overcommit."""
    node = new_uuid()
    with httpx.Client(base_url=gantt.url, headers=LATEST, timeout=30.0) as http:
        assert http.post("/v1/resource-stats", json={"name": f"cmp-{node[:8]}", "stats": {
            "uuid": node, "vcpus": 8, "vcpus_used": 6, "memory_mb": 1024, "local_gb": 10,
            "cpu_allocation_ratio": 1.0}}).status_code == 200
        put = http.put(f"/placement/allocations/{new_uuid()}", json={
            "allocations": {node: {"resources": {"VCPU": 4}}}, "project_id": "p", "user_id": "u",
            "consumer_generation": None, "consumer_type": "INSTANCE"})
        assert put.status_code == 204, put.text
    assert_audit_ok(gantt.store, config_file(gantt))


def test_the_audit_counts_claims_as_the_service_does(gantt: ServerProcess) -> None:
    """A node that never lists instances: its report counts a claim once ``claim_timeout`` has passed (settled).
    The audit's table is the service's, figure for figure."""
    host = f"quiet-{new_uuid()[:8]}"
    stats = {"vcpus": 4, "memory_mb": 4096, "local_gb": 100, "cpu_allocation_ratio": 1.0,
             "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0}
    with httpx.Client(base_url=gantt.url, timeout=30.0) as v1:
        assert v1.post("/v1/resource-stats", json={"name": host, "stats": stats}).status_code == 200
        claimed = v1.post("/v1/select_destinations", json={"resources": {"VCPU": 3}, "force_hosts": [host],
                                                           "instance_uuids": [new_uuid()]})
        assert claimed.status_code == 200, claimed.text
        time.sleep(TIMEOUT + 0.5)
        # built: the node's usage now includes it
        assert v1.post("/v1/resource-stats", json={"name": host, "stats": {**stats, "vcpus_used": 3}}) \
            .status_code == 200
        served = v1.get(f"/v1/hosts/{host}").json()["inventories"]["VCPU"]
    assert served["free"] == 1  # counted once, by the report
    with open_store(gantt.store, create=False) as store:
        snapshot = store.snapshot()
    table = audit_table(snapshot, Config.from_dict(CONFIG))
    audited = describe(table, table.row(host))["inventories"]["VCPU"]
    assert audited["free"] == served["free"]
    assert_audit_ok(gantt.store, config_file(gantt))


@pytest.mark.parametrize("inventories", [{"VCPU": {"total": 4, "reserved": 10}},
                                         {"VCPU": {"total": 4}, "CUSTOM_X": {"total": 0, "reserved": 1}}])
def test_an_inventory_reserving_more_than_its_total_is_refused_on_write(gantt: ServerProcess,
                                                                         inventories: dict[str, Any]) -> None:
    host = f"bad-{new_uuid()[:8]}"
    rc = "VCPU" if inventories["VCPU"].get("reserved") else "CUSTOM_X"
    with httpx.Client(base_url=gantt.url, timeout=30.0) as v1:
        one = v1.post("/v1/resource-stats", json={"name": host, "stats": {"inventories": inventories}})
        assert one.status_code == 400 and one.json()["field"] == f"$.stats.inventories.{rc}.reserved", one.text
        many = v1.post("/v1/resource-stats/batch", json={"reports": [
            {"name": f"{host}-ok", "stats": {"vcpus": 2}}, {"name": host, "stats": {"inventories": inventories}}]})
        assert many.status_code == 400, many.text
        assert many.json()["field"] == f"$.reports[1].stats.inventories.{rc}.reserved"
        assert v1.get(f"/v1/hosts/{host}-ok").status_code == 404  # all or nothing
        assert v1.post("/v1/resource-stats", json={"name": host, "stats": {"vcpus": 2}}).status_code == 200
        patched = v1.patch(f"/v1/hosts/{host}", json={"inventories": inventories})
        assert patched.status_code == 400 and patched.json()["field"] == f"$.inventories.{rc}.reserved"
        # reserved = total is a node with nothing to give, as Placement takes it from 1.26
        full = v1.post("/v1/resource-stats", json={"name": host, "stats": {"inventories": {
            "VCPU": {"total": 4, "reserved": 4}}}})
        assert full.status_code == 200, full.text
        assert v1.get(f"/v1/hosts/{host}").json()["inventories"]["VCPU"]["capacity"] == 0


def test_the_audit_still_finds_what_no_write_rule_lets_in(tmp_path: Path) -> None:
    """What the audit is for: allocations beyond the capacity and beyond what a lowered inventory left held, and
    a bad inventory a store holds from before the write check. Written to the store directly, as a bug would."""
    url = f"sqlite:///{tmp_path}/gantt.sqlite"

    def record(generation: int, total: int, reserved: int = 0) -> HostReport:
        return HostReport(host="rp", node="rp", stats=HostStats(uuid="rp", inventories={
            "VCPU": Inventory(total=total, reserved=reserved)}), provider=Provider(uuid="rp", name="rp",
                                                                                  generation=generation))

    checked = Capacity(default_ratios={})
    with open_store(url) as store:
        store.commit(Batch(providers=[record(0, 8)], generations=[Generation("rp", "rp", None)]))
        store.commit(Batch(allocations=[Allocation("c1", "rp", "rp", {"VCPU": 6})], capacity=checked))
        store.commit(Batch(providers=[record(1, 4)], generations=[Generation("rp", "rp", 0)]))
        [held] = [h for h in store.snapshot().hosts if h.host == "rp"]
        assert held.held_over == {"VCPU": 6}
        assert audit(store.snapshot()) == []  # lowered under what was held: allowed
        store.commit(Batch(allocations=[Allocation("c2", "rp", "rp", {"VCPU": 1})]))  # no capacity check
        assert audit(store.snapshot()) == ["rp/rp VCPU: used 7 > capacity 4 (7 allocated)"]
        store.commit(Batch(releases=["c1", "c2"]))
        store.commit(Batch(providers=[record(2, 4, reserved=10)], generations=[Generation("rp", "rp", 1)]))
        [held] = [h for h in store.snapshot().hosts if h.host == "rp"]
        assert held.held_over is None  # within capacity again (nothing held)
        assert audit(store.snapshot()) == ["rp/rp VCPU: reserved 10 > total 4"]
    done = gantt_audit(url)
    assert done.returncode == 1 and "reserved 10 > total 4" in done.stdout, done.stdout + done.stderr


def test_a_report_lowering_capacity_of_a_node_with_an_empty_class(gantt: ServerProcess) -> None:
    """A node with ``local_gb: 0`` (no disk to offer): a report that lowers its VCPU is written (the store's
    check of what its allocations held built an inventory of total 0 and answered 500), and the Placement face
    shows the classes it offers."""
    node = new_uuid()
    stats = {"uuid": node, "vcpus": 4, "memory_mb": 1024, "local_gb": 0}
    with httpx.Client(base_url=gantt.url, headers=LATEST, timeout=30.0) as http:
        assert http.post("/v1/resource-stats", json={"name": f"nodisk-{node[:8]}", "stats": stats}).status_code == 200
        lowered = http.post("/v1/resource-stats", json={"name": f"nodisk-{node[:8]}", "stats": {**stats, "vcpus": 2}})
        assert lowered.status_code == 200, lowered.text
        shown = http.get(f"/placement/resource_providers/{node}/inventories")
        assert shown.status_code == 200, shown.text
        assert sorted(shown.json()["inventories"]) == ["MEMORY_MB", "VCPU"]
