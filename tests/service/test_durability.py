"""kill -9 in the middle of a burst of claims: every acknowledged claim survives, nothing is overcommitted."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

from gantt.client import SchedulerClient
from gantt.model import GanttError, NoValidHost
from gantt.replication.audit import audit
from gantt.store.sqlite import SQLiteStore
from tests.conftest import host_stats, request
from tests.service.server import ServerProcess

CONFIG: dict[str, Any] = {
    "filter_scheduler": {"enabled_filters": ["ComputeFilter"]},
    "DEFAULT": {"service_down_time": 86400},
}
HOSTS, VCPUS = 40, 16


def test_kill_9_mid_burst_loses_no_acknowledged_claim(tmp_path: Path) -> None:
    db = tmp_path / "gantt.sqlite"
    with ServerProcess(f"sqlite:///{db}", config=CONFIG, workdir=tmp_path) as server:
        with server.client() as client:
            client.update_resource_stats_many([(f"h{i}", host_stats(vcpus=VCPUS)) for i in range(HOSTS)])

        acked: dict[str, str] = {}  # consumer -> host, for every 200 answer received
        sent: set[str] = set()  # every consumer asked for (a request may have been cut off with its answer)
        lock = threading.Lock()
        stop = threading.Event()

        def burst() -> None:
            # short timeout: after the kill, the parent still holds the listening socket and a new request would wait
            # in its backlog until the client gives up
            with SchedulerClient(server.url, timeout=1.5) as c:
                while not stop.is_set():
                    consumer = str(uuid.uuid4())
                    with lock:
                        sent.add(consumer)
                    try:
                        [[sel, *_]] = c.select_destinations(request(vcpus=1, instance_uuids=[consumer]))
                    except NoValidHost:
                        continue
                    except GanttError:  # the server died under us: this answer is lost
                        return
                    with lock:
                        acked[consumer] = sel.host

        threads = [threading.Thread(target=burst) for _ in range(8)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 20
        while len(acked) < 120 and time.monotonic() < deadline:  # well into the burst, capacity left over
            time.sleep(0.005)
        server.kill()  # SIGKILL: no shutdown code, whatever was in flight is cut off
        stop.set()
        for t in threads:
            t.join(timeout=30)
        assert len(acked) >= 120
        acked_at_kill = dict(acked)

        server.start()
        with server.client() as client:
            # A request that was still in the listening socket's backlog at the kill (its client gave up) is
            # served by the new process; read until the served state and the file agree.
            deadline = time.monotonic() + 10
            while True:
                served = {a.consumer_uuid for a in client.allocations()}
                with SQLiteStore(f"sqlite:///{db}") as store:
                    snap = store.snapshot()
                stored = {a.consumer_uuid: a.host for a in snap.allocations}
                if served == set(stored) or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert served == set(stored)  # the restarted replica rebuilt exactly what the file holds
            assert audit(snap) == []
            missing = [c for c in acked_at_kill if c not in stored]
            assert missing == [], f"{len(missing)} acknowledged claims lost"
            assert all(stored[c] == h for c, h in acked_at_kill.items())
            assert set(stored) <= sent  # nothing booked that nobody asked for
            assert len(stored) <= HOSTS * VCPUS

            [[sel, *_]] = client.select_destinations(request(vcpus=1, instance_uuids=["after-restart"]))
            assert client.allocation("after-restart").host == sel.host
            assert client.health().status == "ok"
