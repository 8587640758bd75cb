"""``POST /v1/resource-stats`` with a report that repeats the node's record: answered at once, written with the
others within ``LIVENESS_DELAY`` (the service's timer), and written when the service closes; through a real
``gantt serve --workers 2``, both workers then show the node's new report time (each on its own clock)."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from gantt.config import Config
from gantt.replication.replica import LIVENESS_DELAY, Replica
from gantt.service import runtime
from gantt.service.app import create_app
from gantt.store.sqlite import SQLiteStore
from tests.conftest import host_stats
from tests.service.server import ServerProcess

CONFIG = Config.from_dict({"DEFAULT": {"service_down_time": 60.0}})
STATS = host_stats(uuid="uuid-h1", vcpus_used=2)


def _held_time(url: str) -> float:
    with SQLiteStore(url) as store:
        [held] = store.snapshot().hosts
        assert held.reported_at is not None
        return held.reported_at


def _replica(url: str, now: list[float]) -> Replica:
    return Replica(SQLiteStore(url), CONFIG, clock=lambda: now[0]).start_owning(follow=False)


async def _post_twice(app: Any, now: list[float]) -> Any:
    """Register h1, then send the same report 30 s later (past the interval within which a repeat writes
    nothing at all): the second is taken as a repeat."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gantt") as client:
        for _ in range(2):
            now[0] += 30.0
            response = await client.post("/v1/resource-stats", json={"name": "h1", "stats": STATS})
            assert response.status_code == 200, response.text
    return response.json()


def test_a_repeat_is_written_by_the_timer_within_the_delay(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/gantt.sqlite"
    now = [1_000_000.0]
    replica = _replica(url, now)
    try:
        app = create_app(replica)

        async def scenario() -> float:
            await _post_twice(app, now)
            first = _held_time(url)
            assert replica.liveness_pending() == 1  # answered, not written yet
            timer = app.service._liveness_timer
            assert timer is not None and timer.when() - asyncio.get_running_loop().time() <= LIVENESS_DELAY
            deadline = time.monotonic() + 30  # bounded: the timer fires after LIVENESS_DELAY
            while replica.liveness_pending() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.05)
            return first

        first = asyncio.run(scenario())
        assert replica.liveness_pending() == 0
        assert _held_time(url) == first + 30.0 and replica.touches == 1
        row = replica.table.row("h1", "h1")
        assert float(replica.table.col("updated_at")[row]) == _held_time(url)
    finally:
        replica.close()


def test_closing_the_service_writes_what_it_answered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "LIVENESS_DELAY", 3600.0)  # the timer never fires here: only close writes
    url = f"sqlite:///{tmp_path}/gantt.sqlite"
    now = [1_000_000.0]
    replica = _replica(url, now)
    try:
        app = create_app(replica)
        asyncio.run(_post_twice(app, now))
        first = _held_time(url)
        assert replica.liveness_pending() == 1
        app.service.close()  # what the lifespan does as the worker stops
        assert replica.liveness_pending() == 0 and _held_time(url) == first + 30.0
    finally:
        replica.close()


def test_two_workers_show_the_same_report_time_after_a_repeat(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/w.sqlite"
    # A repeat within a sixth of service_down_time of the held time writes nothing (replica.TOUCH_FRACTION): 0.6 s
    # here, so that a report 0.2 s after the first is written.
    with ServerProcess(url, config={"DEFAULT": {"service_down_time": 0.6}}, workers=2, workdir=tmp_path) as server:
        with server.client() as client:
            client.update_resource_stats("h1", STATS)
            first = _held_time(url)
            time.sleep(0.2)
            client.update_resource_stats("h1", STATS)  # a repeat: answered at once, written within the delay
        deadline = time.monotonic() + 30
        while _held_time(url) == first and time.monotonic() < deadline:
            time.sleep(0.05)
        held = _held_time(url)
        assert held > first
        # Each worker shows when it took the touch (its own clock; issue 30): after the repeat was stamped, at
        # most a moment later. Before it, a worker would show the first report, 0.2 s earlier.
        seen: set[float] = set()
        pids: set[int] = set()

        def took_the_touch() -> bool:
            return all(held - 0.05 <= shown <= held + 5.0 for shown in seen)

        deadline = time.monotonic() + 30
        while (len(pids) < 2 or not took_the_touch()) and time.monotonic() < deadline:  # new connections: either
            pids.add(httpx.get(f"{server.url}/health").json()["pid"])
            seen = {datetime.fromisoformat(httpx.get(f"{server.url}/v1/hosts/h1").json()["updated_at"]).timestamp()
                    for _ in range(10)}
        assert len(pids) == 2 and took_the_touch(), (held, seen)
        with SQLiteStore(url) as store:
            assert [c.kind for c in store.changes(0)][-1] == "touch"
        assert server.stop() == 0
