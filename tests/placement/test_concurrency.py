"""Two ``gantt serve`` processes on one store (a SQLite file, or etcd): a provider generation is a compare-and-set in
the store, so of two writes that read the same generation exactly one lands, whichever process each goes through;
capacity is checked in the store's commit, so racing claims through either face never overcommit (``gantt audit``
says so at the end)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from gantt.store.urls import open_store
from tests.placement.conftest import CONFIG, LATEST, store_url
from tests.service.server import ServerProcess


@pytest.fixture(params=["sqlite", "etcd"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty store both processes share."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    return store_url(request.param, tmp_path, request)


def gantt_audit(store: str) -> None:
    """``gantt audit`` on the shared store, as an operator runs it: it must find nothing over capacity."""
    done = subprocess.run([sys.executable, "-m", "gantt", "audit", "--store", store], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and "audit ok" in done.stdout, done.stdout + done.stderr


def test_one_of_two_writers_with_the_same_generation_wins(tmp_path: Path, store: str) -> None:
    with ServerProcess(store, config=CONFIG, workdir=tmp_path / "a") as a, \
            ServerProcess(store, config=CONFIG, workdir=tmp_path / "b") as b, \
            httpx.Client(base_url=a.url + "/placement", headers=LATEST, timeout=10) as http_a, \
            httpx.Client(base_url=b.url + "/placement", headers=LATEST, timeout=10) as http_b:
        for round_ in range(20):
            rp = str(uuid.uuid4())
            assert http_a.post("/resource_providers", json={"name": f"rp-{round_}", "uuid": rp}).status_code == 200
            statuses = _race(rp, [(http_a, 8), (http_b, 16)])
            assert sorted(statuses) == [200, 409], statuses
            # both processes agree on the winner and on generation 1
            seen = [h.get(f"/resource_providers/{rp}/inventories").json() for h in (http_a, http_b)]
            for view in seen:
                assert view["resource_provider_generation"] == 1
            totals = {view["inventories"]["VCPU"]["total"] for view in seen}
            assert len(totals) == 1


def _race(rp: str, writers: list[tuple[httpx.Client, int]]) -> list[int]:
    """Each writer sets the provider's VCPU total from generation 0, all at once; their statuses."""
    statuses: list[int] = []
    start = threading.Barrier(len(writers))

    def write(http: httpx.Client, total: int) -> None:
        start.wait()
        answer = http.put(f"/resource_providers/{rp}/inventories",
                          json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": total}}})
        statuses.append(answer.status_code)

    threads = [threading.Thread(target=write, args=writer) for writer in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses


def test_a_provider_made_on_one_process_is_seen_and_named_uniquely_on_the_other(tmp_path: Path, store: str) -> None:
    with ServerProcess(store, config=CONFIG, workdir=tmp_path / "a") as a, \
            ServerProcess(store, config=CONFIG, workdir=tmp_path / "b") as b, \
            httpx.Client(base_url=a.url + "/placement", headers=LATEST, timeout=10) as http_a, \
            httpx.Client(base_url=b.url + "/placement", headers=LATEST, timeout=10) as http_b:
        made = http_a.post("/resource_providers", json={"name": "only-one"}).json()
        assert http_b.post("/resource_providers", json={"name": "only-one"}).status_code == 409
        assert http_b.put("/traits/CUSTOM_SHARED").status_code == 201
        assert http_a.put("/traits/CUSTOM_SHARED").status_code == 204
        assert http_b.get(f"/resource_providers/{made['uuid']}").status_code == 200


def test_racing_allocations_on_two_processes_never_overcommit(tmp_path: Path, store: str) -> None:
    """PUT /allocations through two processes at once, on one provider with room for 10 of 24 asked: the
    capacity check is in the store's commit, so exactly 10 land, whichever process each went through, and both
    processes then count the same usage."""
    with ServerProcess(store, config=CONFIG, workdir=tmp_path / "a") as a, \
            ServerProcess(store, config=CONFIG, workdir=tmp_path / "b") as b, \
            httpx.Client(base_url=a.url + "/placement", headers=LATEST, timeout=30) as http_a, \
            httpx.Client(base_url=b.url + "/placement", headers=LATEST, timeout=30) as http_b:
        rp = str(uuid.uuid4())
        assert http_a.post("/resource_providers", json={"name": "contended", "uuid": rp}).status_code == 200
        assert http_a.put(f"/resource_providers/{rp}/inventories", json={
            "resource_provider_generation": 0, "inventories": {"VCPU": {"total": 10}}}).status_code == 200
        statuses: list[int] = []
        start = threading.Barrier(4)

        def claim(http: httpx.Client) -> None:
            start.wait()
            for _ in range(6):
                answer = http.put(f"/allocations/{uuid.uuid4()}", json={
                    "allocations": {rp: {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u",
                    "consumer_generation": None, "consumer_type": "INSTANCE"})
                statuses.append(answer.status_code)

        threads = [threading.Thread(target=claim, args=(h,)) for h in (http_a, http_b, http_a, http_b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(set(statuses)) == [204, 409] and statuses.count(204) == 10, statuses
        for http in (http_a, http_b):
            http.get("/allocations/" + str(uuid.uuid4()))  # a miss makes the process catch up with the store
            usage = http.get(f"/resource_providers/{rp}/usages").json()
            assert usage["usages"] == {"VCPU": 10}
            assert len(http.get(f"/resource_providers/{rp}/allocations").json()["allocations"]) == 10
    gantt_audit(store)


def test_v1_claims_and_placement_allocations_on_two_processes_never_overcommit(tmp_path: Path, store: str) -> None:
    """One host, room for 10 VCPU: /v1 select_destinations through one process and PUT /allocations through the
    other, at once. Whatever lands, the store never holds more than the host has (audit), and every answer that
    said yes is an allocation the store holds."""
    node = str(uuid.uuid4())
    with ServerProcess(store, config=CONFIG, workdir=tmp_path / "a") as a, \
            ServerProcess(store, config=CONFIG, workdir=tmp_path / "b") as b, \
            httpx.Client(base_url=a.url, timeout=30) as v1, \
            httpx.Client(base_url=b.url + "/placement", headers=LATEST, timeout=30) as placement:
        assert v1.post("/v1/resource-stats", json={"name": "shared-host", "stats": {
            "uuid": node, "vcpus": 10, "memory_mb": 100_000, "local_gb": 1000, "cpu_allocation_ratio": 1.0}}
        ).status_code == 200
        placement.get(f"/allocations/{uuid.uuid4()}")  # a miss: b catches up with the host a wrote
        granted: list[str] = []
        start = threading.Barrier(4)

        def claim_v1() -> None:
            start.wait()
            for _ in range(6):
                consumer = str(uuid.uuid4())
                answer = v1.post("/v1/select_destinations", json={
                    "resources": {"VCPU": 1}, "instance_uuids": [consumer], "project_id": "p", "user_id": "u"})
                if answer.status_code == 200:
                    granted.append(consumer)

        def claim_placement() -> None:
            start.wait()
            for _ in range(6):
                consumer = str(uuid.uuid4())
                answer = placement.put(f"/allocations/{consumer}", json={
                    "allocations": {node: {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u",
                    "consumer_generation": None, "consumer_type": "INSTANCE"})
                if answer.status_code == 204:
                    granted.append(consumer)

        threads = [threading.Thread(target=f) for f in (claim_v1, claim_v1, claim_placement, claim_placement)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    gantt_audit(store)
    with open_store(store, create=False) as shared:
        snapshot = shared.snapshot()
    held = {a.consumer_uuid for a in snapshot.allocations}
    assert held == set(granted) and 0 < len(held) <= 10


def test_a_write_on_one_process_is_current_for_the_next_write_on_the_other(tmp_path: Path, store: str) -> None:
    """A client that read a provider's generation from one process (which wrote it) and writes through the other
    an instant later: the other may not have the write from its feed yet, so it must catch up before judging the
    generation stale, or before saying the provider does not exist (inventories, and the reshaper's)."""
    service = {**LATEST, "x-roles": "admin,service"}
    with ServerProcess(store, config=CONFIG, workdir=tmp_path / "a") as a, \
            ServerProcess(store, config=CONFIG, workdir=tmp_path / "b") as b, \
            httpx.Client(base_url=a.url + "/placement", headers=service, timeout=10) as http_a, \
            httpx.Client(base_url=b.url + "/placement", headers=service, timeout=10) as http_b:
        for round_ in range(10):
            rp = str(uuid.uuid4())
            assert http_a.post("/resource_providers", json={"name": f"rp-{round_}", "uuid": rp}).status_code == 200
            answer = http_b.put(f"/resource_providers/{rp}/inventories", json={
                "resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}})
            assert answer.status_code == 200, answer.text
            answer = http_a.post("/reshaper", json={"inventories": {rp: {
                "resource_provider_generation": answer.json()["resource_provider_generation"],
                "inventories": {"VCPU": {"total": 8}}}}, "allocations": {}})
            assert answer.status_code == 204, answer.text


def test_concurrent_joins_of_one_aggregate_all_land(http: httpx.Client, server: ServerProcess) -> None:
    """Every compute node of a sharing pool joins the pool's aggregate, many at once (nova-compute services
    starting together): each join rewrites the aggregate, and none may run out of attempts against the others."""
    aggregate = str(uuid.uuid4())
    rps = [str(uuid.uuid4()) for _ in range(48)]
    for i, rp in enumerate(rps):
        assert http.post("/resource_providers", json={"name": f"join-{aggregate[:8]}-{i}", "uuid": rp}).status_code \
            == 200
    statuses: list[int] = []
    start = threading.Barrier(len(rps))

    def join(rp: str) -> None:
        with httpx.Client(base_url=server.url + "/placement", headers=LATEST, timeout=30) as own:
            start.wait()
            answer = own.put(f"/resource_providers/{rp}/aggregates",
                             json={"resource_provider_generation": 0, "aggregates": [aggregate]})
            statuses.append(answer.status_code)

    threads = [threading.Thread(target=join, args=(rp,)) for rp in rps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [200] * len(rps)
    members = http.get("/resource_providers", params={"member_of": aggregate}).json()["resource_providers"]
    assert sorted(p["uuid"] for p in members) == sorted(rps)


def test_concurrent_joins_of_one_aggregate_through_two_processes_all_land(tmp_path: Path, store: str) -> None:
    """The same joins, half through each of two processes on one store: no process-local lock spans both, so the
    store itself must add each member to what it holds (a join that rewrote the aggregate from a stale replica
    would drop a member another process had just added, or run out of attempts against it)."""
    aggregate = str(uuid.uuid4())
    rps = [str(uuid.uuid4()) for _ in range(48)]
    with ServerProcess(store, config=CONFIG, workdir=tmp_path / "a") as a, \
            ServerProcess(store, config=CONFIG, workdir=tmp_path / "b") as b, \
            httpx.Client(base_url=a.url + "/placement", headers=LATEST, timeout=30) as http_a, \
            httpx.Client(base_url=b.url + "/placement", headers=LATEST, timeout=30) as http_b:
        for i, rp in enumerate(rps):
            made = http_a.post("/resource_providers", json={"name": f"join2-{i}", "uuid": rp})
            assert made.status_code == 200, made.text
        statuses: list[int] = []
        start = threading.Barrier(len(rps))

        def join(i: int, rp: str) -> None:
            url = (a if i % 2 else b).url + "/placement"
            with httpx.Client(base_url=url, headers=LATEST, timeout=30) as own:
                start.wait()
                answer = own.put(f"/resource_providers/{rp}/aggregates",
                                 json={"resource_provider_generation": 0, "aggregates": [aggregate]})
                statuses.append(answer.status_code)

        threads = [threading.Thread(target=join, args=(i, rp)) for i, rp in enumerate(rps)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(statuses) == [200] * len(rps), statuses
        for http in (http_a, http_b):
            # A read is not a barrier: on etcd the other process's last join reaches this replica through the feed
            # a moment later. A lost join never arrives, so waiting for it still fails.
            deadline = time.monotonic() + 10
            while True:
                members = http.get("/resource_providers", params={"member_of": aggregate}).json()["resource_providers"]
                if sorted(p["uuid"] for p in members) == sorted(rps) or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert sorted(p["uuid"] for p in members) == sorted(rps)
