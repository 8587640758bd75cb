"""/health reports the store's last write error: a full disk makes it 503 "degraded" until a write succeeds.

The app runs in process (httpx's ASGI transport) over a real Replica on a real SQLite file, whose disk is made
full with ``PRAGMA max_page_count`` (tests/store/full_disk.py): the connection that has to be capped lives in
the process that writes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import anyio
import httpx
import pytest

from gantt.config import Config
from gantt.replication.replica import Replica
from gantt.service.app import create_app
from tests.conftest import host_stats
from tests.store.full_disk import FullDiskSQLiteStore

TOKEN = "health-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FullDiskSQLiteStore]:
    with FullDiskSQLiteStore(f"sqlite:///{tmp_path}/gantt.sqlite") as s:
        yield s


@pytest.fixture
def replica(store: FullDiskSQLiteStore) -> Iterator[Replica]:
    replica = Replica(store, Config()).start()
    yield replica
    replica.stop()


async def _report(http: httpx.AsyncClient, host: str, blob: int = 0) -> httpx.Response:
    stats = host_stats(stats={"blob": "x" * blob}) if blob else host_stats()
    return await http.post("/v1/resource-stats", json={"name": host, "stats": stats}, headers=AUTH)


def test_health_is_degraded_after_a_failed_write_and_ok_after_the_next_good_one(
        store: FullDiskSQLiteStore, replica: Replica) -> None:
    transport = httpx.ASGITransport(app=create_app(replica, token=TOKEN))

    async def scenario() -> None:
        async with httpx.AsyncClient(transport=transport, base_url="http://gantt") as http:
            assert (await _report(http, "h1")).status_code == 200
            health = await http.get("/health", headers=AUTH)
            assert health.status_code == 200 and health.json()["last_write_error"] is None

            store.fill()
            before = time.time()
            refused = await _report(http, "h2", blob=50_000)  # needs pages the full disk does not have
            assert refused.status_code == 503
            assert refused.headers["content-type"] == "application/problem+json"
            assert "database or disk is full" in refused.json()["detail"]

            health = await http.get("/health", headers=AUTH)
            assert health.status_code == 503
            body = health.json()
            assert body["status"] == "degraded"
            assert "database or disk is full" in body["last_write_error"]["message"]
            # ISO 8601 in UTC, as every time the API shows
            assert before <= datetime.fromisoformat(body["last_write_error"]["at"]).timestamp() <= time.time()
            metrics = (await http.get("/metrics", headers=AUTH)).text
            assert [line.split()[-1] for line in metrics.splitlines()
                    if line.startswith("gantt_store_write_failures_total{")] == ["1"]
            # Without the token: the status alone, as for a load balancer.
            anonymous = await http.get("/health")
            assert anonymous.status_code == 503 and anonymous.json() == {"status": "degraded"}
            # Reads still answer, and the host that could not be written is not there.
            hosts = (await http.get("/v1/hosts", headers=AUTH)).json()["hosts"]
            assert [h["host"] for h in hosts] == ["h1"]

            store.free()
            assert (await _report(http, "h2", blob=50_000)).status_code == 200
            health = await http.get("/health", headers=AUTH)
            assert health.status_code == 200
            assert health.json()["status"] == "ok" and health.json()["last_write_error"] is None
            assert (await http.get("/health")).json() == {"status": "ok"}

    anyio.run(scenario)
